"""Undoing a change semantically: a session by interaction id, summary and metadata key; the
curated memory file by fact id (:func:`undo_facts`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gitmem.errors import ParseError
from gitmem.format.factmerge import merge_memory
from gitmem.format.facts import MemoryFile, parse_facts, render_facts
from gitmem.history.diff import _FIELDS, _SCALARS, _SETS
from gitmem.models import Session


@dataclass
class Undo:
    """The result of undoing one change on the current version of a session."""

    session: Session | None
    conflicts: list[str] = field(default_factory=list)


def _blank(like: Session) -> Session:
    return Session(
        id=like.id, created=like.created, last_active=like.created, language=like.language
    )


def undo(before: Session | None, after: Session | None, current: Session | None) -> Undo:  # noqa: C901
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


def _undo_interactions(  # noqa: C901
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


def undo_facts(
    before: bytes | None, after: bytes | None, current: bytes | None, path: str
) -> tuple[bytes | None, list[str]]:
    """Undo the change ``before`` -> ``after`` of a memory file on its ``current`` version,
    fact by fact: the three-way fact merge of the current file with ``before`` against
    ``after``. Facts the change added go, facts it removed come back, facts it changed get
    their old version; facts added or changed since stay. A fact the change touched that a
    later commit changed (or removed) again is a conflict, as is the intro or a section's
    note changed on both. Returns the new content (None: no file) and the conflicts.

    Raises:
        ParseError: one of the versions does not parse (``path:line``).
    """
    if current is None:
        if before is None or after is None:
            return before if after is None else None, []
        return None, ["the memory file was deleted by a later commit"]
    versions = [
        MemoryFile() if data is None else parse_facts(data, path)
        for data in (before, after, current)
    ]
    old, new, now = versions
    merged, notes = merge_memory(new, now, old)
    conflicts = []
    for note in notes:
        if note.kind == "same":
            continue
        if not note.fact_id:
            conflicts.append(f"the {note.field} was changed again by a later commit")
        elif note.kind == "kept":
            gone = now.get(note.fact_id) is None
            conflicts.append(
                f"fact {note.fact_id!r} was {'deleted' if gone else 'changed'} by a later commit"
            )
        else:
            what = f" ({note.field})" if note.kind == "conflict" else ""
            conflicts.append(f"fact {note.fact_id!r}{what} was changed again by a later commit")
    if conflicts:
        return current, conflicts
    if before is None and not (merged.facts or merged.intro or merged.notes):
        return None, []  # undoing the file's creation left nothing in it
    return render_facts(merged).encode("utf-8"), []


def fact_ids_changed(old: bytes | None, new: bytes | None, path: str) -> list[str]:
    """Ids of the facts that differ between two versions of a memory file (added, removed
    or changed), in the new file's order, then the removed ones."""
    try:
        a, b = (MemoryFile() if d is None else parse_facts(d, path) for d in (old, new))
    except ParseError:  # a broken version names no facts
        return []
    was = {f.id: f for f in a.facts}
    now = {f.id for f in b.facts}
    return [f.id for f in b.facts if was.get(f.id) != f] + [i for i in was if i not in now]
