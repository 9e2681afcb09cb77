"""What changed between two versions of a session, and how to undo such a change.

A session is compared part by part: interactions by id, the summary, and each metadata key.
Undoing a change works on the same parts ("semantic revert"): reverting the commit that wrote
a bad summary restores the old summary and leaves turns saved afterwards alone. Pure
functions over ``Session`` models; no git, no files.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Literal

from gitmem.models import FieldChange, MetadataValue, Session, SessionDiff

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
        interactions_changed=[i for i in after if i in before and before[i] != after[i]],
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


# --- unified text diff ------------------------------------------------------------------


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


# --- undoing a change -------------------------------------------------------------------


@dataclass
class Undo:
    """The result of undoing one change on the current version of a session."""

    session: Session | None
    conflicts: list[str] = field(default_factory=list)


def _blank(like: Session) -> Session:
    return Session(
        id=like.id, created=like.created, last_active=like.created, language=like.language
    )


def undo(before: Session | None, after: Session | None, current: Session | None) -> Undo:
    """Undo the change ``before`` -> ``after`` on ``current``, part by part.

    A part (an interaction, the summary, a metadata key) the change touched goes back to its
    ``before`` value if it still has its ``after`` value; if a later change gave it yet
    another value, that part is a conflict. Parts the change did not touch stay as they
    are now. Tags, links and participants are undone element by element.
    """
    if before is None and after is None:
        return Undo(current)
    if current is None:
        if after is None:
            return Undo(before)  # the change deleted the session: bring it back
        if before is None:
            return Undo(None)  # created by the change, deleted since: nothing left to undo
        return Undo(None, ["the session was deleted by a later commit"])
    # a session that did not exist counts as one without interactions, summary or metadata
    if before is not None:
        base = before
        target = after if after is not None else _blank(before)
    else:
        assert after is not None
        base, target = _blank(after), after
    conflicts: list[str] = []
    values: dict[str, Any] = {name: getattr(current, name) for name in _FIELDS}
    values["interactions"] = _undo_interactions(base, target, current, conflicts)
    if base.summary != target.summary:
        if current.summary == target.summary:
            values["summary"] = base.summary
        elif current.summary != base.summary:
            conflicts.append("the summary was changed again by a later commit")
    for name in _SCALARS:
        old, new, now = getattr(base, name), getattr(target, name), getattr(current, name)
        if old != new:
            if now == new:
                values[name] = old
            elif now != old:
                conflicts.append(f"metadata {name!r} was changed again by a later commit")
    extra = dict(current.extra)
    for key in dict.fromkeys([*base.extra, *target.extra]):
        old, new, now = base.extra.get(key), target.extra.get(key), current.extra.get(key)
        if old == new:
            continue
        if now == new:
            if old is None:
                extra.pop(key, None)
            else:
                extra[key] = old
        elif now != old:
            conflicts.append(f"metadata {key!r} was changed again by a later commit")
    values["extra"] = extra
    if current.last_active == target.last_active and before is not None:
        values["last_active"] = before.last_active
    speakers = {m.speaker for i in values["interactions"] for m in i.messages}
    for name in _SETS:
        old_set, new_list = set(getattr(base, name)), getattr(target, name)
        added = {x for x in new_list if x not in old_set}
        if name == "participants":
            added -= speakers
        removed = [x for x in getattr(base, name) if x not in set(new_list)]
        kept = [x for x in getattr(current, name) if x not in added]
        values[name] = kept + [x for x in removed if x not in kept]
    if conflicts:
        return Undo(current, conflicts)
    if before is None and not values["interactions"] and values["summary"] is None:
        return Undo(None)  # undoing the creation left nothing behind
    return Undo(Session(**values))


def _undo_interactions(
    before: Session, after: Session, current: Session, conflicts: list[str]
) -> list[Any]:
    old = {i.id: i for i in before.interactions}
    new = {i.id: i for i in after.interactions}
    result = list(current.interactions)
    now = {i.id: i for i in result}
    for iid, item in new.items():
        if iid not in old:
            if iid in now and now[iid] != item:
                conflicts.append(f"interaction {iid!r} was changed by a later commit")
            elif iid in now:
                result = [i for i in result if i.id != iid]
        elif old[iid] != item:
            if iid not in now:
                conflicts.append(f"interaction {iid!r} was deleted by a later commit")
            elif now[iid] == item:
                result = [old[iid] if i.id == iid else i for i in result]
            elif now[iid] != old[iid]:
                conflicts.append(f"interaction {iid!r} was changed again by a later commit")
    order = [i.id for i in before.interactions]
    for at, iid in enumerate(order):
        if iid in new:
            continue
        if iid in now:
            if now[iid] != old[iid]:
                conflicts.append(f"interaction {iid!r} was added again with other content")
            continue
        # put it back after the nearest earlier interaction that is still there
        ids = [i.id for i in result]
        place = 0
        for earlier in reversed(order[:at]):
            if earlier in ids:
                place = ids.index(earlier) + 1
                break
        result.insert(place, old[iid])
    return result
