"""Where ``remember`` puts a new fact in a large memory file without a pass over every
fact: the shape of one version of the file, carried to the next."""

from __future__ import annotations

from operator import attrgetter

from gitmem.format.facts import Fact, MemoryFile

_ID, _TEXT = attrgetter("id"), attrgetter("text")


class FactShape:
    """What ``remember`` asks of one version of the file, kept so that adding a fact to a
    large file does not scan every fact: the texts, the ids taken, and where each section's
    facts end (the file's facts are grouped by section in the order of its sections, as
    ``MemoryFile.with_facts`` keeps them; ``ends`` is None for a file that is not)."""

    def __init__(self, texts: set[str], ids: set[str], ends: dict[str, int] | None) -> None:
        self.texts = texts
        self.ids = ids
        self.ends = ends

    @classmethod
    def of(cls, memory: MemoryFile) -> FactShape:
        """The shape of ``memory`` (one pass over its facts)."""
        ends: dict[str, int] = {}
        rank = {name: at for at, name in enumerate(memory.sections)}
        last, grouped = -1, True
        for at, fact in enumerate(memory.facts):
            place = rank.get(fact.section, -1)
            if place < last or place < 0:
                grouped = False  # not as with_facts groups them: with_facts places a fact
                break
            ends[fact.section], last = at + 1, place
        texts, ids = set(map(_TEXT, memory.facts)), set(map(_ID, memory.facts))
        return cls(texts, ids, ends if grouped else None)

    def place(self, memory: MemoryFile, fact: Fact) -> tuple[MemoryFile, int] | None:
        """``memory.with_facts([*memory.facts, fact])`` and where the fact went, without a
        pass over the facts; None if the file is not grouped. The shape becomes the new
        file's (the caller moves it there)."""
        facts, sections = memory.facts, memory.sections
        at = None if self.ends is None else self.ends.get(fact.section)
        if self.ends is None or (at is None and fact.section in sections):
            return None  # (a section without facts yet: with_facts knows its place)
        if at is None:  # a new section, after the others
            at = len(facts)
            sections = (*sections, fact.section)
        else:
            self.ends = {name: end + (end >= at) for name, end in self.ends.items()}
        self.ends[fact.section] = at + 1
        self.texts.add(fact.text)
        self.ids.add(fact.id)
        after = memory.model_copy(
            update={"facts": (*facts[:at], fact, *facts[at:]), "sections": sections}
        )
        return after, at
