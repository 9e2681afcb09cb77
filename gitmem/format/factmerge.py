"""Three-way merge of the curated memory file (``memory/MEMORY.md``) by fact id.

Pure logic over :class:`~gitmem.format.facts.MemoryFile` models, no files and no git. It sits
in ``format/`` because two feature packages use it: ``sync/`` (the merge driver and
``mm.pull``/``mm.sync``) and ``history/`` (a semantic revert is the merge of the current file
with the commit's parent, against the commit itself). The rules, so a person reading a merged
file knows what happened:

* A fact added on one side is kept; one removed on one side and unchanged on the other is
  removed; one changed on one side only takes that change.
* Changed on both sides: merged field by field (a supersede on one side, ``valid until`` and
  ``replaced by``, plus a new text on the other keep both). Sources and tags are merged as
  sets (what either side removed stays removed). A field both changed differently keeps
  ours' value, and a note records theirs'. The text is the exception, so nothing is lost in
  the file itself: ours' text stays under the id and theirs' version is kept as well, as a
  new fact right after it with an id derived from its text (note ``copied``); a person or
  the next consolidation then forgets or supersedes one of the two.
* Removed on one side but changed on the other: the changed fact is kept (note ``kept``).
* The same text added in the same section on both sides under different ids is one fact:
  ours' id, both sides' sources and tags (note ``same``); a ``replaced by`` naming theirs'
  id is pointed at ours'.
* Order: ours' order; a fact only theirs has comes after the fact that precedes it on their
  side in its section (or first in its section). Sections likewise.
* Title, intro and each section's note: ours unless only theirs changed it; changed
  differently on both, ours is kept and a note records theirs'; removed on one side and
  rewritten on the other, the rewrite is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from gitmem.format.factlines import ordered_facts, placed_sections
from gitmem.format.facts import Fact, MemoryFile, derived_id

T = TypeVar("T")

# fields merged as one value; sources and tags are merged as sets
_SCALARS = ("section", "by", "valid_from", "valid_until", "confidence", "replaced_by")


@dataclass(frozen=True)
class FactNote:
    """A decision of the fact merge that a person may want to check.

    Attributes:
        kind: ``"conflict"`` (a field, or the title/intro/a section's note, changed
            differently on both sides: ``kept`` stayed, ``other`` was dropped),
            ``"copied"`` (the text changed differently on both sides: ``other`` is kept too,
            as fact ``copy``), ``"kept"`` (removed on one side, changed on the other: the
            change was kept) or ``"same"`` (added on both sides as ``fact_id`` and ``copy``:
            one fact now, ``fact_id``).
        fact_id: the fact (empty for the title, intro and section notes).
        field: what changed: a fact's field name, ``"title"``, ``"intro"`` or
            ``"note of <section>"``.
        kept: the value kept in the file.
        other: the other value (dropped for ``conflict``; in fact ``copy`` for ``copied``).
        side: which side ``other`` came from (``"ours"`` or ``"theirs"``); for ``kept``,
            the side whose change was kept.
        copy: ``copied``: the id theirs' version got; ``same``: the id merged into ``fact_id``.
    """

    kind: str
    fact_id: str
    field: str = ""
    kept: str = ""
    other: str = ""
    side: str = "theirs"
    copy: str = ""

    @property
    def subject(self) -> str:
        """``fact ID`` (with the field when one conflicted), or the file part."""
        if not self.fact_id:
            return self.field
        return f"fact {self.fact_id}" + (f" {self.field}" if self.kind == "conflict" else "")

    def describe(self) -> str:
        """One readable line."""
        if self.kind == "copied":
            return (
                f"fact {self.fact_id} was changed differently on both sides; kept "
                f"{self.kept!r} and, as fact {self.copy}, {self.other!r} (forget one)"
            )
        if self.kind == "kept":
            return (
                f"fact {self.fact_id} was removed on one side and changed on the other; "
                "kept the change"
            )
        if self.kind == "same":
            return (
                f"fact {self.copy} and fact {self.fact_id} were added on both sides with "
                f"the same text; kept one, {self.fact_id}"
            )
        return (
            f"{self.subject} changed differently on both sides; kept {self.kept!r}, "
            f"dropped {self.other!r}"
        )


def merge_memory(
    base: MemoryFile | None, ours: MemoryFile, theirs: MemoryFile
) -> tuple[MemoryFile, list[FactNote]]:
    """Merge two versions of a memory file against their common ancestor (see the module
    docs for the rules).

    Args:
        base: the version both sides started from (None: both created the file).
        ours: the current branch's version (its order and, on a conflict, its values win).
        theirs: the version being merged in.

    Returns:
        The merged file and the notes about decisions taken (never silently losing a fact).
    """
    old = base or MemoryFile()
    notes: list[FactNote] = []
    b = {f.id: f for f in old.facts}
    o = {f.id: f for f in ours.facts}
    alias = _same_new_facts(b, ours, theirs)
    theirs_facts = [_renamed(f, alias) for f in theirs.facts]
    t = {f.id: f for f in theirs_facts}
    taken = set(b) | set(o) | set(t) | set(alias)
    chosen: dict[str, Fact] = {}
    copies: dict[str, Fact] = {}
    merged_into = {ours_id: theirs_id for theirs_id, ours_id in alias.items()}
    for fid in dict.fromkeys([*o, *t]):
        mine, other, was = o.get(fid), t.get(fid), b.get(fid)
        if mine is not None and other is not None:
            if fid in merged_into:
                chosen[fid] = _same(mine, other, merged_into[fid], notes)
                continue
            merged, copy = _merge_fact(was, mine, other, notes)
            chosen[fid] = merged
            if copy is not None:
                new_id = derived_id(copy.text, taken)
                taken.add(new_id)
                copies[fid] = copy.model_copy(update={"id": new_id})
                notes.append(
                    FactNote("copied", fid, "text", mine.text, copy.text, "theirs", new_id)
                )
        elif was is None:
            chosen[fid] = mine or other  # type: ignore[assignment]  # added on one side
        else:
            survivor = mine or other
            assert survivor is not None
            if survivor != was:  # removed on one side, changed on the other
                chosen[fid] = survivor
                notes.append(
                    FactNote(
                        "kept", fid, kept=survivor.text, side="theirs" if mine is None else "ours"
                    )
                )
    facts = ordered_facts(ours.facts, theirs_facts, chosen, copies)
    title = _scalar("title", old.title, ours.title, theirs.title, notes)
    intro = _scalar("intro", old.intro, ours.intro, theirs.intro, notes)
    old_notes, our_notes, their_notes = (dict(m.notes) for m in (old, ours, theirs))
    section_notes: dict[str, str] = {}
    for section in dict.fromkeys([*our_notes, *their_notes, *old_notes]):
        value = _scalar(
            f"note of {section}",
            old_notes.get(section),
            our_notes.get(section),
            their_notes.get(section),
            notes,
        )
        if value:
            section_notes[section] = value
    used = {f.section for f in facts} | set(section_notes)
    gone = (set(old.sections) - set(ours.sections)) | (set(old.sections) - set(theirs.sections))
    order = placed_sections(
        list(ours.sections),
        list(theirs.sections),
        [
            s
            for s in dict.fromkeys([*ours.sections, *theirs.sections])
            if s not in gone or s in used
        ],
    )
    result = MemoryFile(
        title=title or ours.title,
        intro=intro or "",
        sections=tuple(order),
        notes=tuple((s, n) for s, n in section_notes.items()),
    )
    return result.with_facts(facts), notes


def _same_new_facts(b: dict[str, Fact], ours: MemoryFile, theirs: MemoryFile) -> dict[str, str]:
    """theirs' id -> ours' id of facts both sides added, with the same section and text,
    under different ids."""
    t_ids = {f.id for f in theirs.facts}
    o_ids = {f.id for f in ours.facts}
    ours_new = {
        (f.section, f.text): f.id for f in ours.facts if f.id not in b and f.id not in t_ids
    }
    alias: dict[str, str] = {}
    for fact in theirs.facts:
        if fact.id in b or fact.id in o_ids:
            continue
        match = ours_new.pop((fact.section, fact.text), None)
        if match is not None:
            alias[fact.id] = match
    return alias


def _renamed(fact: Fact, alias: dict[str, str]) -> Fact:
    update: dict[str, Any] = {}
    if fact.id in alias:
        update["id"] = alias[fact.id]
    if fact.replaced_by in alias:
        update["replaced_by"] = alias[fact.replaced_by]
    return fact.model_copy(update=update) if update else fact


def _same(mine: Fact, other: Fact, their_id: str, notes: list[FactNote]) -> Fact:
    """One fact from the same text added on both sides: both sides' sources and tags;
    ours' other fields where it has them."""
    fields = mine.model_dump()
    for name in _SCALARS:
        if fields[name] is None:
            fields[name] = getattr(other, name)
    fields["sources"] = tuple(dict.fromkeys([*mine.sources, *other.sources]))
    fields["tags"] = tuple(dict.fromkeys([*mine.tags, *other.tags]))
    notes.append(FactNote("same", mine.id, kept=mine.text, other=other.text, copy=their_id))
    return Fact(**fields)


def _merge_fact(
    was: Fact | None, mine: Fact, other: Fact, notes: list[FactNote]
) -> tuple[Fact, Fact | None]:
    """The merged fact, and theirs' whole version when the text changed differently on
    both sides (kept as a fact of its own)."""
    if mine == other or other == was:
        return mine, None
    if mine == was:
        return other, None
    fields = mine.model_dump()
    copy = None
    old_text = was.text if was is not None else None
    if mine.text == old_text and was is not None:
        fields["text"] = other.text
    elif other.text not in (mine.text, old_text):
        copy = other  # both sides wrote a different text (or added this id with one each)
    for name in _SCALARS:
        fields[name] = _field(mine.id, name, was, mine, other, notes, copy is not None)
    for name in ("sources", "tags"):
        fields[name] = _merge_set(
            getattr(was, name) if was else (), getattr(mine, name), getattr(other, name)
        )
    return Fact(**fields), copy


def _field(
    fid: str,
    name: str,
    was: Fact | None,
    mine: Fact,
    other: Fact,
    notes: list[FactNote],
    copied: bool,
) -> Any:
    a, b = getattr(mine, name), getattr(other, name)
    old = getattr(was, name) if was is not None else None
    if a == b or b == old:
        return a
    if a == old and was is not None:
        return b
    if not copied:  # a copy keeps theirs' value in full already
        notes.append(FactNote("conflict", fid, name, _text(a), _text(b), "theirs"))
    return a


def _merge_set(base: Sequence[T], ours: Sequence[T], theirs: Sequence[T]) -> tuple[T, ...]:
    removed = (set(base) - set(ours)) | (set(base) - set(theirs))
    return tuple(x for x in dict.fromkeys([*ours, *theirs]) if x not in removed)


def _scalar(
    name: str, base: str | None, ours: str | None, theirs: str | None, notes: list[FactNote]
) -> str | None:
    if ours == theirs or theirs == base:
        return ours
    if ours == base:
        return theirs
    if not ours:
        return theirs  # removed on our side, rewritten on theirs: the text is kept
    if theirs:
        notes.append(FactNote("conflict", "", name, _text(ours), _text(theirs), "theirs"))
    return ours


def _text(value: object) -> str:
    return "" if value is None else str(value)
