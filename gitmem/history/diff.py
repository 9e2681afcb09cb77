"""What changed between two versions of a session: part by part, and as unified text.

A session is compared part by part: interactions by id, the summary, and each metadata key;
``undo`` works on the same parts to revert a change semantically. The curated memory file
is compared fact by fact (:func:`diff_facts`). Pure functions over the models; no git, no
files.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import Literal

from gitmem.errors import ParseError
from gitmem.format.facts import MemoryFile, parse_facts
from gitmem.format.paths import id_from_path, own_facts_path
from gitmem.models import FactDiff, FieldChange, MetadataValue, Session, SessionDiff
from gitmem.store.gitlog import FileChange

_SCALARS = ("created", "project", "language")

_SETS = ("tags", "links", "participants")

# every field of a Session: an undo rebuilds the session from them
_FIELDS = (
    "id",
    "created",
    "last_active",
    "participants",
    "tags",
    "project",
    "links",
    "extra",
    "interactions",
    "summary",
    "language",
)


def metadata_values(session: Session) -> dict[str, MetadataValue]:
    """Every metadata key of a session with a JSON-friendly value."""
    values: dict[str, MetadataValue] = {
        "created": session.created.isoformat(),
        "last_active": session.last_active.isoformat(),
        "participants": list(session.participants),
        "tags": list(session.tags),
        "project": session.project,
        "links": list(session.links),
        "language": session.language,
    }
    for key, value in session.extra.items():
        values[f"extra:{key}"] = value
    return values


def status_of(old: object, new: object) -> Literal["added", "removed", "modified"]:
    """How a file changed, from its old and new version (None: absent)."""
    return "added" if old is None else "removed" if new is None else "modified"


def diff_sessions(
    old: Session | None, new: Session | None, session_id: str, path: str
) -> SessionDiff:
    """The structured difference between two versions of one session (None: absent)."""
    before = {i.id: i for i in old.interactions} if old else {}
    after = {i.id: i for i in new.interactions} if new else {}
    # a session that appears or disappears lists only the metadata it has
    old_meta = {k: v for k, v in metadata_values(old).items() if v or new} if old else {}
    new_meta = {k: v for k, v in metadata_values(new).items() if v or old} if new else {}
    old_summary = old.summary if old else None
    new_summary = new.summary if new else None
    return SessionDiff(
        session_id=session_id,
        path=path,
        status=status_of(old, new),
        interactions_added=[i for i in after if i not in before],
        interactions_removed=[i for i in before if i not in after],
        interactions_changed=[  # unchanged turns are mostly the same object (parse cache)
            i
            for i, turn in after.items()
            if i in before and before[i] is not turn and before[i] != turn
        ],
        metadata={
            key: FieldChange(old=old_meta.get(key), new=new_meta.get(key))
            for key in [*old_meta, *(k for k in new_meta if k not in old_meta)]
            if old_meta.get(key) != new_meta.get(key)
        },
        summary=None
        if old_summary == new_summary
        else FieldChange(
            old=old_summary.text if old_summary else None,
            new=new_summary.text if new_summary else None,
        ),
    )


def diff_facts(old: MemoryFile | None, new: MemoryFile | None, path: str) -> FactDiff:
    """The facts added, removed and changed (by id) between two versions of a memory file."""
    before = {f.id: f for f in old.facts} if old else {}
    after = {f.id: f for f in new.facts} if new else {}
    return FactDiff(
        path=path,
        status=status_of(old, new),
        added=[i for i in after if i not in before],
        removed=[i for i in before if i not in after],
        changed=[i for i, fact in after.items() if i in before and before[i] != fact],
    )


def by_session(
    changes: Iterable[tuple[str, str | None, str | None]], namespace: str | None
) -> dict[str, tuple[str, str | None, str | None]]:
    """Session id -> (path, old blob, new blob) of changed session files."""
    found: dict[str, tuple[str, str | None, str | None]] = {}
    for path, old, new in changes:
        sid = id_from_path(path, namespace)
        if sid is not None:
            found[sid] = (path, old, new)
    return found


def changed_facts(
    changes: Iterable[FileChange], namespace: str | None, read: Callable[[str], bytes], text: bool
) -> list[FactDiff]:
    """The fact diffs of the memory files of ``namespace`` among ``changes`` (``read``
    turns a blob id into its bytes)."""

    def get(blob: str | None) -> bytes | None:
        return None if blob is None else read(blob)

    return [
        diff_facts_files(c.path, get(c.old), get(c.new), text)
        for c in changes
        if own_facts_path(c.path, namespace) and c.old != c.new
    ]


def diff_facts_files(path: str, old: bytes | None, new: bytes | None, text: bool) -> FactDiff:
    """:func:`diff_facts` of two versions of a memory file's bytes (None: absent), with a
    unified diff if ``text``; a version that does not parse is named in ``problems``."""
    problems: list[str] = []
    versions: list[MemoryFile | None] = []
    for data, where in ((old, "old"), (new, "new")):
        try:
            versions.append(None if data is None else parse_facts(data, path))
        except ParseError as exc:
            problems.append(f"{where} version does not parse: {exc.diagnostics[0]}")
    if problems:
        result = FactDiff(path=path, status=status_of(old, new), problems=problems)
    else:
        result = diff_facts(versions[0], versions[1], path)
    if not text:
        return result
    shown = [None if d is None else d.decode("utf-8", "replace") for d in (old, new)]
    return result.model_copy(update={"unified": unified_diff(shown[0], shown[1], path)})


def _lines(text: str) -> list[str]:
    # split on "\n" only: the file format treats other line breaks as content
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _range(start: int, length: int) -> str:
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"


def unified_diff(old: str | None, new: str | None, path: str, context: int = 3) -> str:
    """A ``git diff``-style unified diff of one file (None: the file is absent).

    The common head and tail are cut off before difflib runs, so appending a turn to a
    long session costs about as much as diffing the new turn.
    """
    if old == new:
        return ""
    a = _lines(old or "")
    b = _lines(new or "")
    head = 0
    limit = min(len(a), len(b))
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    lo = max(0, head - context)
    a_hi, b_hi = len(a) - max(0, tail - context), len(b) - max(0, tail - context)
    matcher = difflib.SequenceMatcher(None, a[lo:a_hi], b[lo:b_hi])
    out = [
        f"diff --git a/{path} b/{path}\n",
        "--- /dev/null\n" if old is None else f"--- a/{path}\n",
        "+++ /dev/null\n" if new is None else f"+++ b/{path}\n",
    ]
    for group in matcher.get_grouped_opcodes(context):
        i1, i2 = group[0][1] + lo, group[-1][2] + lo
        j1, j2 = group[0][3] + lo, group[-1][4] + lo
        out.append(f"@@ -{_range(i1, i2 - i1)} +{_range(j1, j2 - j1)} @@\n")
        for tag, x1, x2, y1, y2 in group:
            if tag == "equal":
                out += [_mark(" ", line) for line in a[lo + x1 : lo + x2]]
                continue
            out += [_mark("-", line) for line in a[lo + x1 : lo + x2]]
            out += [_mark("+", line) for line in b[lo + y1 : lo + y2]]
    return "".join(out)


def _mark(sign: str, line: str) -> str:
    if line.endswith("\n"):
        return sign + line
    return sign + line + "\n\\ No newline at end of file\n"
