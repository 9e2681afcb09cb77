"""Undoing commits on the current files, worked out before anything is written.

:func:`plan_undo` takes back a list of commits (newest first) file by file: a file nothing
touched since is put back exactly; a session file changed again later is undone part by part
(:func:`gitmem.history.undo.undo`: interactions by id, the summary, metadata keys), the
curated memory file fact by fact (:func:`gitmem.history.undo.undo_facts`), and what
cannot be undone that way is listed as a conflict. Pure logic: the caller passes the readers
(the repository's blobs, the parse cache, the files as they are now) and writes the result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from gitmem.errors import ConflictError, ParseError
from gitmem.format.parse import parse_bytes
from gitmem.format.paths import id_from_path, is_facts_path
from gitmem.format.render import render
from gitmem.history.diff import diff_facts_files, diff_sessions, status_of, unified_diff
from gitmem.history.undo import fact_ids_changed, undo, undo_facts
from gitmem.models import FactDiff, Session, SessionDiff
from gitmem.store.gitlog import LogEntry


@dataclass
class UndoPlan:
    """The files before (``original``) and after (``result``) the undo, and its conflicts."""

    original: dict[str, bytes | None] = field(default_factory=dict)
    result: dict[str, bytes | None] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)

    def changed(self) -> dict[str, bytes | None]:
        """The files the undo changes, with their new content (None: deleted)."""
        return {p: v for p, v in self.result.items() if v != self.original[p]}

    def raise_conflicts(self, what: str, where: object) -> None:
        """Raise ConflictError (naming each part) if the undo cannot be done cleanly."""
        if self.conflicts:
            listed = "\n  ".join(self.conflicts)
            facts = any(c.startswith("memory file ") for c in self.conflicts)
            raise ConflictError(
                f"cannot {what} cleanly in {where}; nothing was written:\n  {listed}\n"
                "Roll the session back to a known good version instead "
                "(`gitmem rollback SESSION --to REV`), or edit it by hand."
                + (
                    "\nA fact changed again later: change it with `gitmem facts edit ID` or "
                    "forget it (`gitmem facts forget ID`) instead."
                    if facts
                    else ""
                )
            )

    def fact_trailer(self, changes: dict[str, bytes | None]) -> dict[str, str]:
        """``fact=`` for the ``Gitmem-Fact`` trailer: the facts the undo changes (as a fact
        write names them), or nothing."""
        ids: list[str] = []
        for path, data in changes.items():
            if is_facts_path(path):
                ids += fact_ids_changed(self.original[path], data, path)
        if not ids:
            return {}
        more = f" (+{len(ids) - 20})" if len(ids) > 20 else ""
        return {"fact": ", ".join(ids[:20]) + more}

    def fact_diffs(self) -> list[FactDiff]:
        """How each memory file changes, by fact id (with its unified diff)."""
        return [
            diff_facts_files(path, self.original[path], data, True)
            for path, data in self.changed().items()
            if is_facts_path(path)
        ]

    def diffs(self, owner: Callable[[str], str | None]) -> list[SessionDiff]:
        """How each session's files change (unified and structured)."""
        found_diffs: list[SessionDiff] = []
        for path, data in self.changed().items():
            sid = owner(path)
            if sid is None:
                continue
            old = self.original[path]
            problems: list[str] = []
            try:
                parsed = [None if d is None else parse_bytes(d, path) for d in (old, data)]
                found = diff_sessions(parsed[0], parsed[1], sid, path)
            except ParseError as exc:
                found = SessionDiff(session_id=sid, path=path, status=status_of(old, data))
                problems.append(f"the current version does not parse: {exc.diagnostics[0]}")
            text = unified_diff(
                None if old is None else old.decode("utf-8", "replace"),
                None if data is None else data.decode("utf-8", "replace"),
                path,
            )
            found_diffs.append(found.model_copy(update={"unified": text, "problems": problems}))
        return found_diffs


def plan_undo(  # noqa: C901
    entries: Iterable[LogEntry],
    *,
    current: Callable[[str], bytes | None],
    blob: Callable[[str], bytes],
    parse_blob: Callable[[str, str], Session],
    owner: Callable[[str], str | None],
    namespace: str | None,
) -> UndoPlan:
    """Undo ``entries`` (newest first) on the files as ``current(path)`` reads them now.

    ``blob(id)`` reads a blob, ``parse_blob(path, id)`` parses one (cached), ``owner(path)``
    names the session a file belongs to (its own file or its archive part).
    """
    plan = UndoPlan()
    for entry in entries:
        for change in entry.files:
            path = change.path
            if path not in plan.result:
                plan.original[path] = plan.result[path] = current(path)
            now = plan.result[path]
            after = blob(change.new) if change.new else None
            before = blob(change.old) if change.old else None
            if now == after:
                plan.result[path] = before  # untouched since: the exact inverse
                continue
            if now == before:
                continue
            if is_facts_path(path):
                try:
                    plan.result[path], found = undo_facts(before, after, now, path)
                except ParseError as exc:
                    found = [str(exc.diagnostics[0])]
                plan.conflicts += [f"memory file {path} ({entry.sha[:12]}): {c}" for c in found]
                continue
            sid = owner(path)
            if sid is None:
                where = f"file {path}"
            elif id_from_path(path, namespace) is None:
                where = f"archive of session {sid!r}"
            else:
                where = f"session {sid!r}"
            if sid is None:
                plan.conflicts.append(f"{where}: changed again by a later commit")
                continue
            try:
                parts = [
                    parse_blob(path, change.old) if change.old else None,
                    parse_blob(path, change.new) if change.new else None,
                    None if now is None else parse_bytes(now, path),
                ]
            except ParseError as exc:
                plan.conflicts.append(f"{where}: {exc.diagnostics[0]}")
                continue
            undone = undo(parts[0], parts[1], parts[2])
            if undone.conflicts:
                plan.conflicts += [f"{where} ({entry.sha[:12]}): {c}" for c in undone.conflicts]
                continue
            plan.result[path] = (
                None if undone.session is None else render(undone.session).encode("utf-8")
            )
    return plan
