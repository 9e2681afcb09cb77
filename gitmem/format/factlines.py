"""Memory files in gitmem's own form, merged line by line without building a ``Fact``.

A memory file as gitmem writes it is a ``# Memory`` title, plain ``## Section`` headings and
one ``- text {#id ← sources}`` line per fact. For a line in the strict form :data:`_FACT`
accepts (plain text, no attributes, sources that need no escapes), reading and writing are
inverse: the line is what :func:`gitmem.format.facts.fact_line` writes for the fact the parser
reads from it, so two such lines are equal exactly when their facts are. A merge that takes
each fact's line from one side (added, removed or changed on one side only) is then a merge
of lines, and :func:`merge_fact_lines` does it, byte for byte as the fact merge
(:mod:`gitmem.format.factmerge`) would. Whatever that merge decides field by field or notes
(a fact changed on both sides, removed on one side and changed on the other, the same text
added on both sides) and any file or line not in this form it declines: None, and the caller
runs the full parse and merge. git starts the merge driver once per merged file, and there
the models' import and a 10,000-fact parse cost far more than this merge.

The ordering rules both merges share (:func:`ordered_facts`, :func:`placed_sections`) live
here, over anything with an ``id`` and a ``section``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

TITLE = "Memory"
SEP = " · "
ARROW = "←"
BY_HAND = "by hand"

# section names the line readers take as they are: no Markdown inline syntax, no escapes
PLAIN_SECTION = re.compile(r"[^\W_][\w ,.:;'()/+?!-]*")

# a session, turn or agent name that the braces write as it is (nothing to %-escape)
_TOKEN = r"[^\s%{}#,·←]+"
_SOURCE = rf"{_TOKEN}(?:#{_TOKEN})?"
# a fact line that parses to a fact which renders back to the same line: text with no white
# space at its ends (the last character checked looking back, a third faster than a group;
# and, checked apart, printable: nothing to escape), an id of at most 64 id characters,
# "by AGENT" (or "by hand") or sources; no attributes. Groups: the line, the text, the id,
# what follows the arrow.
_PARTS = (
    rf"- (\S[^\n]*(?<=\S)) \{{#([A-Za-z0-9_.-]{{1,64}}) {ARROW} "
    rf"(by {_TOKEN}|{_SOURCE}(?:, {_SOURCE})*)\}}"
)
_FACT = re.compile(rf"^({_PARTS})$", re.MULTILINE)
# the same without the whole line (the facts are built from its parts alone)
_FACT_PARTS = re.compile(rf"^{_PARTS}$", re.MULTILINE)

# one fact line of the strict form as :data:`_FACT` cuts it: (line, text, id, sources or
# "by AGENT"); and as :data:`_FACT_PARTS` does, without the line
FactLineRow = tuple[str, str, str, str]
FactRow = tuple[str, str, str]


def section_problem(name: str) -> str | None:
    """Why ``name`` cannot be a section heading, or None."""
    if not name or name != name.strip():
        return f"section name {name!r} is empty or has white space at an end"
    if any(ch in name for ch in "\n\r") or not printable(name):
        return f"section name {name!r} holds a line break or control character"
    if name.endswith("#") or name.startswith(("#", "=", "-")):
        return f"section name {name!r} may not start with '#', '=' or '-', nor end with '#'"
    return None


def printable(text: str) -> bool:
    """Whether every character of ``text`` is printable or a tab."""
    return text.isprintable() or all(ch.isprintable() or ch == "\t" for ch in text)


class Placed(Protocol):
    """A fact as the ordering rules see it."""

    @property
    def id(self) -> str: ...

    @property
    def section(self) -> str: ...


P = TypeVar("P", bound=Placed)


class FactLine(NamedTuple):
    """One fact of a file in the strict form: its id, section and text, and its line."""

    id: str
    section: str
    text: str
    line: str


@dataclass(frozen=True)
class FactLines:
    """A memory file in the strict form: its sections in order and its facts."""

    sections: tuple[str, ...] = ()
    facts: tuple[FactLine, ...] = ()


class KnownLines:
    """The facts of the sections read so far, by their text: the versions of a file being
    merged share most sections, and each is read once."""

    def __init__(self) -> None:
        self.bodies: dict[tuple[str, str], list[FactLine]] = {}

    def body(self, section: str, body: str) -> list[FactLine] | None:
        """The facts of a section's text after its heading (None: not in the strict form)."""
        found = self.bodies.get((section, body))
        if found is not None:
            return found
        rows: list[FactLineRow] | None = fact_rows(body, _FACT)
        if rows is None:
            return None
        found = [FactLine(fid, section, text, line) for line, text, fid, _ in rows]
        self.bodies[(section, body)] = found
        return found


def fact_rows(body: str, pattern: re.Pattern[str] = _FACT_PARTS) -> list[Any] | None:
    """The fact lines of a section's text after its heading as ``pattern`` cuts them
    (None: not in the strict form)."""
    if not body:
        return []  # a section without facts
    lines = pattern.findall(body)
    # one blank line, then every line a fact (each match is one whole line), nothing
    # to escape, no text starting "{#" (the Markdown parser's to read)
    if (
        not lines
        or body[0] != "\n"
        or body[-1] != "\n"
        or len(lines) != body.count("\n") - 1
        or not body.replace("\n", "").isprintable()
        or "\n- {#" in body
    ):
        return None
    return lines


def read_fact_lines(data: bytes, known: KnownLines | None = None) -> FactLines | None:
    """:func:`read_fact_text` of a file's bytes (None if they are not UTF-8)."""
    try:
        src = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return read_fact_text(src, known)


def read_fact_text(src: str, known: KnownLines | None = None) -> FactLines | None:
    """The sections and fact lines of a file exactly as ``render_facts`` writes it with
    every line in the strict form; None for anything else (then the parser decides, and
    may report a problem). ``known``: what other versions of the file read."""
    parts = _section_parts(src)
    if parts is None:
        return None
    known = KnownLines() if known is None else known
    sections: list[str] = []
    facts: list[FactLine] = []
    for section, body in parts:
        found = known.body(section, body)
        if found is None:
            return None
        sections.append(section)
        facts += found
    if len({f.id for f in facts}) != len(facts) or len(set(sections)) != len(sections):
        return None  # an id or a section twice: the parser reports it
    return FactLines(tuple(sections), tuple(facts))


def read_fact_rows(src: str) -> list[tuple[str, list[FactRow]]] | None:
    """Each section of a file in the strict form (as :func:`read_fact_text` takes it) with
    its fact lines cut into their parts, for a reader that builds the facts; else None."""
    parts = _section_parts(src)
    if parts is None:
        return None
    out = []
    ids = 0
    for section, body in parts:
        rows = fact_rows(body)
        if rows is None:
            return None
        out.append((section, rows))
        ids += len(rows)
    if len({row[1] for _, rows in out for row in rows}) != ids or len(
        {section for section, _ in out}
    ) != len(out):
        return None  # an id or a section twice: the parser reports it
    return out


def _section_parts(src: str) -> list[tuple[str, str]] | None:
    """(heading, text after it) of each section of a file with gitmem's title and plain
    section names; None for anything else."""
    parts = src.split("\n## ")
    if parts[0] != f"# {TITLE}\n":
        return None
    out = []
    for part in parts[1:]:
        section, _, body = part.partition("\n")
        if not PLAIN_SECTION.fullmatch(section) or section_problem(section):
            return None
        out.append((section, body))
    return out


def merge_fact_lines(base: bytes | None, ours: bytes, theirs: bytes) -> bytes | None:
    """The merged file (what the fact merge renders) when each version is in the strict
    form and no fact needs more than one side's line; else None."""
    known = KnownLines()
    old = FactLines() if base is None else read_fact_lines(base, known)
    mine = read_fact_lines(ours, known)
    other = read_fact_lines(theirs, known)
    if old is None or mine is None or other is None:
        return None
    b = {f.id: f for f in old.facts}
    o = {f.id: f for f in mine.facts}
    t = {f.id: f for f in other.facts}
    if _same_new_text(b, mine, other):
        return None  # one fact from both sides' sources: a note
    chosen: dict[str, FactLine] = {}
    for fid in dict.fromkeys([*o, *t]):
        a, c, was = o.get(fid), t.get(fid), b.get(fid)
        if a is not None and c is not None:
            if a == c or c == was:  # (the line holds the id and the text: equal lines,
                chosen[fid] = a  # equal facts)
            elif a == was:
                chosen[fid] = c
            else:
                return None  # changed on both sides: merged field by field
        elif was is None:
            chosen[fid] = a or c  # type: ignore[assignment]  # added on one side
        elif (a or c) != was:
            return None  # removed on one side, changed on the other: a note
    facts = ordered_facts(mine.facts, other.facts, chosen, {})
    used = {f.section for f in facts}
    gone = (set(old.sections) - set(mine.sections)) | (set(old.sections) - set(other.sections))
    order = placed_sections(
        list(mine.sections),
        list(other.sections),
        [s for s in dict.fromkeys([*mine.sections, *other.sections]) if s not in gone or s in used],
    )
    return _render(order, facts).encode("utf-8")


def _same_new_text(b: dict[str, FactLine], ours: FactLines, theirs: FactLines) -> bool:
    """Whether both sides added a fact with the same section and text under different ids."""
    t_ids = {f.id for f in theirs.facts}
    o_ids = {f.id for f in ours.facts}
    ours_new = {(f.section, f.text) for f in ours.facts if f.id not in b and f.id not in t_ids}
    return any(
        (f.section, f.text) in ours_new for f in theirs.facts if f.id not in b and f.id not in o_ids
    )


def _render(order: list[str], facts: list[FactLine]) -> str:
    """The file's text as ``render_facts`` writes these sections and facts."""
    by_section: dict[str, list[str]] = {}
    for fact in facts:
        by_section.setdefault(fact.section, []).append(fact.line)
    out = [f"# {TITLE}\n"]
    for section in dict.fromkeys([*order, *by_section]):
        out.append(f"\n## {section}\n")
        lines = by_section.get(section)
        if lines:
            out.append("\n" + "".join(line + "\n" for line in lines))
    return "".join(out)


# --- the order of a merged file (shared with the fact merge) --------------------------------


def ordered_facts(
    ours: Sequence[P], theirs: Sequence[P], chosen: dict[str, P], copies: dict[str, P]
) -> list[P]:
    """Ours' order (each copy right after its fact), then theirs' other facts each right
    after the fact before it on their side in the same section (or first in that section):
    a fact a revert brings back returns to its old place."""
    out: list[P] = []
    for fact in ours:
        if fact.id in chosen:
            out.append(chosen[fact.id])
            if fact.id in copies:
                out.append(copies[fact.id])
    placed = {f.id for f in out}
    skip = {f.id for f in copies.values()}
    for at, fact in enumerate(theirs):
        if fact.id not in chosen or fact.id in placed:
            continue
        new = chosen[fact.id]
        where = _insert_at(out, theirs[:at], new.section, placed, skip)
        out.insert(where, new)
        placed.add(new.id)
    return out


def _insert_at(
    out: Sequence[Placed], before: Sequence[Placed], section: str, placed: set[str], skip: set[str]
) -> int:
    ids = [f.id for f in out]
    for earlier in reversed(before):
        if earlier.id in placed and out[ids.index(earlier.id)].section == section:
            at = ids.index(earlier.id) + 1
            while at < len(out) and out[at].id in skip and out[at].section == section:
                at += 1  # a conflicted fact's copy stays right after it
            return at
    return next((n for n, f in enumerate(out) if f.section == section), len(out))


def placed_sections(ours: list[str], theirs: list[str], keep: list[str]) -> list[str]:
    """Section order: ours', then each section only theirs has after its predecessor there."""
    out = [s for s in ours if s in keep]
    for at, name in enumerate(theirs):
        if name in out or name not in keep:
            continue
        prev = next((s for s in reversed(theirs[:at]) if s in out), None)
        out.insert(0 if prev is None else out.index(prev) + 1, name)
    return out
