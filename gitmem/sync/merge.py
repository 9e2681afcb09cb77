"""Three-way semantic merge of a session file: what two writers did, combined without loss.

Used by the git merge driver (``gitmem merge-file``) and by ``MemoryManager.sync``. Pure
functions: no files, no git. The rules (what a person reading the README is told):

* **Turns** are matched by interaction id. Turns added on either side are all kept; where the
  two sides diverge they are interleaved by (timestamp, id), otherwise each side's order is
  kept. A turn deleted on one side and untouched on the other is deleted; deleted on one side
  and edited on the other, it is kept. A turn edited differently on both sides keeps the
  version with the later timestamp (then the larger text) and records the other.
* **Lists** (participants, tags, links): three-way union; an item one side removed and the
  other left alone stays removed.
* **Times**: the earliest ``created``, the latest ``last active``.
* **Scalars** (project, language, custom keys): a value changed on one side wins; changed
  differently on both, the value of the more recently active side (then a set value over a
  removed one, then the larger string) is kept and the other is recorded as a conflict.
* **Summary**: changed on one side, that side's; rewritten on both, the newer (by generated
  time) is kept and the other is recorded in full so that it can be restored.

The curated memory file (``memory/*.md``, per namespace too) is merged by fact id instead
(:func:`gitmem.format.factmerge.merge_memory`); its notes name the file and the fact.

The outcome never depends on which side is "ours" except for the order of turns that one
side moved; conflict markers are never written into a memory file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import is_
from typing import TYPE_CHECKING, Any, TypeVar

from gitmem.errors import ConflictError
from gitmem.format.parse import parse_bytes
from gitmem.format.render import render
from gitmem.format.sessionlines import turn_order
from gitmem.models import Interaction, Session, Summary

if TYPE_CHECKING:
    from gitmem.format.factmerge import FactNote

T = TypeVar("T")

# notes a person should look at: a value dropped, or two versions of a fact kept
CONFLICT_KINDS = ("conflict", "summary", "copied")


@dataclass(frozen=True)
class MergeNote:
    """Something the merge decided that a person may want to know (and maybe undo).

    Attributes:
        session_id: the session the note is about.
        kind: ``"conflict"`` (a scalar or a turn changed differently on both sides),
            ``"summary"`` (both rewrote the summary) or ``"kept"`` (a deletion lost to an edit);
            for a memory file also ``"copied"`` (a fact's text changed on both sides: both
            kept) and ``"same"`` (one fact added on both sides).
        key: the metadata key, ``"summary"`` or ``"interaction <id>"`` (``"fact <id>"``).
        kept: the value kept in the file (text).
        dropped: the value that was not kept (text, in full, so it can be restored).
        dropped_side: ``"ours"`` or ``"theirs"``: which version holds the dropped value.
        detail: the whole description, for a memory file's note (``session_id`` is then
            the file's path).
    """

    session_id: str
    kind: str
    key: str
    kept: str
    dropped: str
    dropped_side: str = ""
    detail: str = ""

    def describe(self) -> str:
        """One readable line (the dropped text is shown shortened)."""
        if self.detail:
            return self.detail
        # imported here: git starts the merge driver once per file, and compiling the text
        # analyser's patterns would add ~8 ms to every start for this one message
        from gitmem.text import one_line

        short = one_line(self.dropped, 80)
        if self.kind == "summary":
            return (
                f"{self.session_id}: both sides rewrote the summary; kept the newer, "
                f"the other was: {short!r}"
            )
        if self.kind == "kept":
            return (
                f"{self.session_id}: {self.key} was deleted on one side and edited on the "
                "other; kept the edit"
            )
        return (
            f"{self.session_id}: {self.key} changed on both sides; kept {self.kept!r}, "
            f"dropped {short!r}"
        )


@dataclass
class MergeResult:
    """The merged session and the notes about decisions taken on the way."""

    session: Session
    notes: list[MergeNote] = field(default_factory=list)

    @property
    def conflicts(self) -> list[MergeNote]:
        """Notes where both sides changed the same value differently."""
        return [n for n in self.notes if n.kind in CONFLICT_KINDS]


def merge_sessions(base: Session | None, ours: Session, theirs: Session) -> MergeResult:
    """Merge two versions of a session against their common ancestor.

    Args:
        base: the version both sides started from, or None if both created the session.
        ours: one side (the current branch).
        theirs: the other side (the branch being merged in).

    Returns:
        The merged session and notes (conflicts resolved deterministically, dropped values).

    Raises:
        ConflictError: the two sides are different sessions (their ids differ).
    """
    if ours.id != theirs.id or (base is not None and base.id != ours.id):
        raise ConflictError(
            f"cannot merge session {ours.id!r} with {theirs.id!r}: the ids differ; resolve by hand"
        )
    notes: list[MergeNote] = []
    sid = ours.id
    # which side was active more recently; a tie is broken by the values themselves
    ours_key, theirs_key = (ours.last_active, ours.created), (theirs.last_active, theirs.created)
    ours_newer = ours_key > theirs_key
    theirs_newer = theirs_key > ours_key

    def scalar(key: str, get: Callable[[Session], T | None]) -> T | None:
        old = get(base) if base else None
        return _scalar(key, old, get(ours), get(theirs), (ours_newer, theirs_newer), sid, notes)

    extra: dict[str, str] = {}
    keys = list(dict.fromkeys([*ours.extra, *theirs.extra, *(base.extra if base else {})]))
    for key in keys:
        value = scalar(key, lambda s, k=key: s.extra.get(k))  # type: ignore[misc]
        if value is not None:
            extra[key] = value
    fields: dict[str, Any] = {
        "id": sid,
        "created": min(ours.created, theirs.created),
        "last_active": max(ours.last_active, theirs.last_active),
        "participants": _merge_list(
            base.participants if base else [], ours.participants, theirs.participants
        ),
        "tags": _merge_list(base.tags if base else [], ours.tags, theirs.tags),
        "links": _merge_list(base.links if base else [], ours.links, theirs.links),
        "project": scalar("Project", lambda s: s.project),
        "language": scalar("language", lambda s: s.language) or ours.language,
        "extra": extra,
        "interactions": _merge_turns(base, ours, theirs, notes),
        "summary": _merge_summary(base, ours, theirs, notes),
    }
    return MergeResult(Session(**fields), notes)


def merge_texts(
    base: bytes | None, ours: bytes, theirs: bytes, path: str
) -> tuple[bytes, list[MergeNote]]:
    """Merge three versions of a session file's bytes (``base`` None or empty: no ancestor);
    a curated memory file (:func:`~gitmem.format.paths.is_facts_path`) by fact id.

    Returns:
        The rendered merged file and the merge notes.

    Raises:
        ParseError: one of the versions does not parse (a person has to decide).
        ConflictError: the versions are of different sessions.
    """
    if path.startswith("memory/") or "/memory/" in path:  # a cheap test first: the driver
        from gitmem.format.factlines import merge_fact_lines  # starts once per merged file
        from gitmem.format.paths import is_facts_path

        if is_facts_path(path):
            merged = merge_fact_lines(base, ours, theirs)
            if merged is not None:  # in gitmem's form, and each fact from one side: no notes
                return merged, []
            return merge_fact_texts(base, ours, theirs, path)
    base_session = parse_bytes(base, f"{path} (base)") if base else None
    ours_session = parse_bytes(ours, f"{path} (ours)")
    theirs_session = parse_bytes(theirs, f"{path} (theirs)")
    result = merge_sessions(base_session, ours_session, theirs_session)
    return render(result.session).encode("utf-8"), result.notes


def merge_fact_texts(
    base: bytes | None, ours: bytes, theirs: bytes, path: str
) -> tuple[bytes, list[MergeNote]]:
    """Merge three versions of a memory file's bytes by fact id, parsing them in full
    (ParseError if one is broken: a person has to decide)."""
    # imported here: a session merge (one driver start per file) has no use for them
    from gitmem.format.factmerge import merge_memory
    from gitmem.format.facts import parse_facts, render_facts

    merged, notes = merge_memory(
        parse_facts(base, f"{path} (base)") if base else None,
        parse_facts(ours, f"{path} (ours)"),
        parse_facts(theirs, f"{path} (theirs)"),
    )
    return render_facts(merged).encode("utf-8"), [fact_note(path, n) for n in notes]


def fact_note(path: str, note: FactNote) -> MergeNote:
    """A fact merge's note as the merge driver and ``sync`` report notes."""
    return MergeNote(
        session_id=path,
        kind=note.kind,
        key=note.subject,
        kept=note.kept,
        dropped=note.other,
        dropped_side=note.side,
        detail=note.describe(),
    )


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _scalar(
    key: str,
    base: T | None,
    ours: T | None,
    theirs: T | None,
    newer: tuple[bool, bool],
    sid: str,
    notes: list[MergeNote],
) -> T | None:
    if ours == theirs or theirs == base:
        return ours
    if ours == base:
        return theirs
    # both changed it, differently: a stable choice that does not depend on who merges
    candidates = [(ours, newer[0]), (theirs, newer[1])]
    candidates.sort(key=lambda c: (c[1], c[0] is not None, _text(c[0])), reverse=True)
    (kept, _), (dropped, _) = candidates
    side = "theirs" if kept is ours else "ours"
    notes.append(MergeNote(sid, "conflict", key, _text(kept), _text(dropped), side))
    return kept


def _merge_list(base: Sequence[str], ours: Sequence[str], theirs: Sequence[str]) -> list[str]:
    removed = (set(base) - set(ours)) | (set(base) - set(theirs))
    return [item for item in dict.fromkeys([*ours, *theirs]) if item not in removed]


def _merge_turns(
    base: Session | None, ours: Session, theirs: Session, notes: list[MergeNote]
) -> list[Interaction]:
    base_turns = {t.id: t for t in base.interactions} if base else {}
    our_turns = {t.id: t for t in ours.interactions}
    their_turns = {t.id: t for t in theirs.interactions}
    chosen: dict[str, Interaction] = {}
    for tid in dict.fromkeys([*our_turns, *their_turns]):
        mine, other, old = our_turns.get(tid), their_turns.get(tid), base_turns.get(tid)
        if mine is not None and other is not None:
            chosen[tid] = _pick_turn(old, mine, other, ours.id, notes)
        elif old is None:
            chosen[tid] = mine or other  # type: ignore[assignment]  # added on one side
        else:
            survivor = mine or other
            assert survivor is not None
            if survivor is not old and survivor != old:  # deleted on one side, edited on the other
                notes.append(MergeNote(ours.id, "kept", f"interaction {tid}", tid, ""))
                chosen[tid] = survivor
    left = [t for t in ours.interactions if t.id in chosen]
    right = [t for t in theirs.interactions if t.id in chosen]
    # the turns both sides still have as the same objects (the parser shares unchanged
    # turns) go first, as the order would take them: it only interleaves the rest
    same = list(map(is_, left, right))
    start = same.index(False) if False in same else len(same)
    shared = set(our_turns) & set(their_turns)
    return [chosen[tid] for tid in turn_order(left, right, shared, start)]


def _pick_turn(
    base: Interaction | None,
    ours: Interaction,
    theirs: Interaction,
    sid: str,
    notes: list[MergeNote],
) -> Interaction:
    if ours is theirs or ours == theirs or theirs == base:
        return ours
    if ours == base:
        return theirs
    ranked = sorted((ours, theirs), key=lambda t: (t.timestamp, t.text), reverse=True)
    side = "theirs" if ranked[0] is ours else "ours"
    notes.append(
        MergeNote(sid, "conflict", f"interaction {ours.id}", ranked[0].text, ranked[1].text, side)
    )
    return ranked[0]


def _merge_summary(
    base: Session | None, ours: Session, theirs: Session, notes: list[MergeNote]
) -> Summary | None:
    old = base.summary if base else None
    mine, other = ours.summary, theirs.summary
    if mine == other or other == old:
        return mine
    if mine == old:
        return other
    if mine is None or other is None:
        return mine or other  # removed on one side, rewritten on the other: keep the text
    ranked = sorted((mine, other), key=lambda s: (s.generated, s.text), reverse=True)
    dropped = ranked[1]
    side = "theirs" if ranked[0] is mine else "ours"
    notes.append(
        MergeNote(
            ours.id,
            "summary",
            f"summary generated {dropped.generated.isoformat()}",
            ranked[0].text,
            dropped.text,
            side,
        )
    )
    return ranked[0]
