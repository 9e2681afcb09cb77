"""The curated memory file (``memory/MEMORY.md``): facts with provenance, read through the
mistune AST and written back so that ``parse_facts(render_facts(m)) == m`` for any content.

What a person sees on GitHub is a plain list under headings::

    # Memory

    ## User

    - Lives in Berlin. {#f1a2b3c ← chat-1#i3f2}
    - Likes green tea. {#f9c8d7e ← by hand · #drinks}

Each ``##`` heading is a section (any name); each item of a list under it is one fact. The
trailing ``{#id ← sources · attribute · ...}`` holds the fact's id, where it came from
(``session#interaction`` or ``session``, comma-separated; ``by AGENT`` for an agent that
named none; ``by hand`` for a person) and optional
attributes: ``from DATE``, ``until DATE``, ``confidence 0.8``, ``replaced by ID``, tags as
``#tag``, and ``escaped``. A bullet a person writes without braces is a fact by hand whose id
is derived from its text, so the same bullet gets the same id in every clone.

Rules that make the round trip hold:

* Structure (headings, lists, items) comes from mistune's block AST with source spans
  (:mod:`gitmem.format.spans`); a fact's text is cut verbatim out of its item's source.
* The braces are found from the end of the item: nothing gitmem writes inside them contains
  `` {#`` (ids, tags and session ids are percent-encoded where they hold ``%``, white space,
  braces, ``#``, ``,``, ``·`` or ``←``), so the last `` {#`` of an item is always its own.
* Text that cannot be one literal Markdown line (a line break, a control character, white
  space at either end, an empty string) is written escaped, flagged ``escaped``: ``\\``
  becomes ``\\\\`` and each such character ``\\u{XXXX}`` (as in session files).
* Lines a person wrote between a section's heading and its list (or a fact list's other
  blocks) are kept verbatim as the section's note; the text before the first section is the
  file's intro. A hand-written item on several lines is read with its lines joined by one
  space (how Markdown shows it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, date, datetime
from operator import attrgetter
from typing import Any

from pydantic import Field, field_validator, model_validator

from gitmem.errors import Diagnostic, EscapeError, ParseError
from gitmem.format.bulk import collector_paused
from gitmem.format.factlines import (
    ARROW,
    BY_HAND,
    PLAIN_SECTION,
    SEP,
    TITLE,
    FactRow,
    printable,
    read_fact_rows,
    section_problem,
)
from gitmem.format.labels import unescape
from gitmem.format.spans import Block, top_level_blocks
from gitmem.models import ModelValidationError, _Model

DEFAULT_SECTION = "Notes"
_ENCODE = frozenset("%{}#,·←") | frozenset(" \t\n\r\x0b\x0c")
_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
_BULLETS = "-*+"


class FactSource(_Model):
    """Where a fact came from: a session, and the turn in it when known."""

    session: str = Field(min_length=1)
    interaction: str | None = None

    def __str__(self) -> str:
        return self.session if self.interaction is None else f"{self.session}#{self.interaction}"


class Fact(_Model):
    """One curated fact of the memory file.

    Attributes:
        id: stable id (``f`` + hex for facts gitmem made; any ``[A-Za-z0-9_.-]`` by hand).
        text: the fact, as a person reads it.
        section: the ``##`` heading it sits under.
        sources: the sessions and turns it was learned from.
        by: without sources, the agent that wrote it; neither means a person wrote it.
        valid_from / valid_until: ISO dates (or date-times) it holds between, if known.
        confidence: 0..1, if the writer gave one.
        tags: free labels.
        replaced_by: the id of the fact that superseded this one.
    """

    id: str = Field(min_length=1, max_length=64)
    text: str = Field(min_length=1)
    section: str = DEFAULT_SECTION
    sources: tuple[FactSource, ...] = ()
    by: str | None = None
    valid_from: str | None = None
    valid_until: str | None = None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    tags: tuple[str, ...] = ()
    replaced_by: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_provenance(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("sources") and data.get("by") is not None:
            data = {**data, "by": None}  # the sources say where it came from
        return data

    @field_validator("id", "replaced_by")
    @classmethod
    def _plain_id(cls, value: str | None) -> str | None:
        if value is not None and not _ID_CHARS.issuperset(value):
            raise ValueError(f"fact id {value!r} may hold only letters, digits, '_', '-', '.'")
        return value

    @field_validator("section")
    @classmethod
    def _section_name(cls, value: str) -> str:
        problem = section_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("valid_from", "valid_until")
    @classmethod
    def _iso(cls, value: str | None) -> str | None:
        if value is not None:
            as_moment(value)
        return value

    @field_validator("confidence")
    @classmethod
    def _percent(cls, value: float | None) -> float | None:
        return None if value is None else round(value, 2)  # as the file writes it

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not tag for tag in value):
            raise ValueError("a tag is empty")
        return tuple(dict.fromkeys(value))

    @property
    def by_hand(self) -> bool:
        """True when a person wrote it: no session named as its source, no agent."""
        return not self.sources and self.by is None

    def current(self, at: datetime | None = None) -> bool:
        """True unless it was replaced or its ``valid until`` is not after ``at`` (naive
        UTC; default now): a fact valid until next month still holds today."""
        if self.replaced_by is not None:
            return False
        if self.valid_until is None:
            return True
        return as_moment(self.valid_until) > (at or datetime.now(UTC).replace(tzinfo=None))

    def to_dict(self) -> dict[str, Any]:
        out = self.model_dump(mode="json")
        out["sources"] = [str(s) for s in self.sources]
        out["by_hand"] = self.by_hand
        return out


_ID, _SECTION, _TEXT = attrgetter("id"), attrgetter("section"), attrgetter("text")


class MemoryFile(_Model):
    """The whole file: title, intro, section order with their notes, and the facts."""

    title: str = TITLE
    intro: str = ""
    sections: tuple[str, ...] = ()
    notes: tuple[tuple[str, str], ...] = ()  # (section, verbatim text) for hand-written prose
    facts: tuple[Fact, ...] = ()

    def get(self, fact_id: str) -> Fact | None:
        """The fact with this id, or None."""
        ids = list(map(_ID, self.facts))  # the scans run in C: files hold 10,000 facts
        return self.facts[ids.index(fact_id)] if fact_id in ids else None

    def with_facts(self, facts: Iterable[Fact]) -> MemoryFile:
        """This file with ``facts`` instead, grouped by section as the file shows them (new
        sections are added at the end)."""
        kept = list(facts)
        names = list(map(_SECTION, kept))
        order = list(self.sections)
        order += [s for s in dict.fromkeys(names) if s not in order]
        rank = {name: at for at, name in enumerate(order)}
        keys = list(map(rank.__getitem__, names))
        if keys != sorted(keys):  # stable: the order within a section stays
            kept = [kept[at] for at in sorted(range(len(kept)), key=keys.__getitem__)]
        return self.model_copy(update={"facts": tuple(kept), "sections": tuple(order)})


def as_moment(value: str) -> datetime:
    """An ISO date or date-time as a comparable moment, naive UTC (a date is its start)."""
    try:
        if len(value) == 10:
            return datetime.combine(date.fromisoformat(value), datetime.min.time())
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an ISO date (YYYY-MM-DD) or date-time") from None
    return (
        moment.replace(tzinfo=None)
        if moment.tzinfo is None
        else (moment.astimezone(UTC).replace(tzinfo=None))
    )  # UTC, as ``facts(as_of=)`` compares


def derived_id(text: str, taken: Iterable[str] = ()) -> str:
    """The id of a fact written without one: ``f`` + 7 hex digits of its text, bumped past
    ``taken`` ids (the same bullet gets the same id in every clone)."""
    used = taken if isinstance(taken, (set, frozenset)) else set(taken)  # read, never changed
    salt = 0
    while True:
        seed = text if salt == 0 else f"{text}\n{salt}"
        found = "f" + hashlib.sha1(seed.encode("utf-8", "surrogatepass")).hexdigest()[:7]
        if found not in used:
            return found
        salt += 1


# --- writing -------------------------------------------------------------------------------


def _encode(value: str) -> str:
    """``value`` with the characters the braces use, white space and unprintable ones as
    percent-escaped UTF-8 (lone surrogates kept through ``surrogatepass``)."""
    return "".join(
        "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
        if ch in _ENCODE or not ch.isprintable()
        else ch
        for ch in value
    )


def _decode(value: str, line: int, path: str) -> str:
    if "%" not in value:
        return value
    out, pos = bytearray(), 0
    while (hit := value.find("%", pos)) >= 0:
        out += value[pos:hit].encode("utf-8", "surrogatepass")
        code = value[hit + 1 : hit + 3]
        if len(code) != 2 or not all(c in "0123456789abcdefABCDEF" for c in code):
            raise ParseError(
                [
                    Diagnostic(
                        path, line, f"bad %-escape {value[hit : hit + 3]!r} in a fact's braces"
                    )
                ]
            )
        out.append(int(code, 16))
        pos = hit + 3
    out += value[pos:].encode("utf-8", "surrogatepass")
    try:
        return out.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise ParseError(
            [Diagnostic(path, line, f"%-escapes in {value!r} are not UTF-8")]
        ) from None


def _needs_escape(text: str) -> bool:
    return not text or text != text.strip() or "\n" in text or "\r" in text or not printable(text)


def _escaped(text: str) -> str:
    last = len(text) - 1
    return "".join(
        "\\\\"
        if ch == "\\"
        else f"\\u{{{ord(ch):04X}}}"
        if (not ch.isprintable() and ch != "\t")
        or ch in "\n\r"
        or (ch.isspace() and at in (0, last))
        else ch
        for at, ch in enumerate(text)
    )


def _agent(name: str) -> str:
    """An agent's name for ``by NAME``; one called "hand" must not read as ``by hand``."""
    return "%68and" if name == "hand" else _encode(name)


def source_token(source: FactSource) -> str:
    """A source as a fact's braces write it (``chat-1#i3f2``)."""
    turn = "" if source.interaction is None else "#" + _encode(source.interaction)
    return _encode(source.session) + turn


def line_sources(line: bytes) -> list[bytes]:
    """The source tokens in the braces of one fact's list item (none for any other line)."""
    text = line.rstrip()
    if text.lstrip()[:1] not in (b"-", b"*", b"+") or not text.endswith(b"}"):
        return []
    inner = text[text.rfind(b" {#") + 3 : -1]
    head = inner.split(SEP.encode())[0]
    arrow = f" {ARROW} ".encode()
    return head.split(arrow, 1)[1].split(b", ") if arrow in head else []


def fact_line(fact: Fact) -> str:
    """The list item of one fact, without a line end."""
    escaped = _needs_escape(fact.text)
    text = _escaped(fact.text) if escaped else fact.text
    sources = ", ".join(source_token(s) for s in fact.sources) or (
        "by " + _agent(fact.by) if fact.by else BY_HAND
    )
    parts = [f"#{fact.id} {ARROW} {sources}"]
    if fact.valid_from:
        parts.append(f"from {fact.valid_from}")
    if fact.valid_until:
        parts.append(f"until {fact.valid_until}")
    if fact.confidence is not None:
        parts.append(f"confidence {fact.confidence}")
    if fact.replaced_by:
        parts.append(f"replaced by {fact.replaced_by}")
    if fact.tags:
        parts.append(" ".join("#" + _encode(t) for t in fact.tags))
    if escaped:
        parts.append("escaped")
    return f"- {text} {{{SEP.join(parts)}}}"


def render_facts(memory: MemoryFile, line: Callable[[Fact], str] = fact_line) -> str:
    """The file's text (LF line ends, one trailing newline); ``line`` renders one fact
    (a caller may pass a cached :func:`fact_line`)."""
    out = [f"# {memory.title}\n"]
    if memory.intro:
        out.append(f"\n{memory.intro}\n")
    notes = dict(memory.notes)
    by_section: dict[str, list[Fact]] = {}
    for fact in memory.facts:
        by_section.setdefault(fact.section, []).append(fact)
    order = list(dict.fromkeys([*memory.sections, *by_section, *notes]))
    for section in order:
        out.append(f"\n## {section}\n")
        if notes.get(section):
            out.append(f"\n{notes[section]}\n")
        facts = by_section.get(section, [])
        if facts:
            out.append("\n" + "".join(line(f) + "\n" for f in facts))
    return "".join(out)


def changed_run(before: tuple[Fact, ...], after: tuple[Fact, ...]) -> tuple[int, int]:
    """How many facts the two tuples share (equal facts, mostly the same objects) at the
    start and, of the rest, at the end: what lies between is what a change replaced."""
    most = min(len(before), len(after))
    start = _shared(lambda n: before[:n] == after[:n], most)
    rest = most - start
    end = _shared(lambda n: before[len(before) - n :] == after[len(after) - n :], rest)
    return start, end


def _shared(same: Callable[[int], bool], most: int) -> int:
    """The largest ``n <= most`` with ``same(n)`` (which holds up to some n, then not): a
    binary search of slice comparisons, which tuples make element by element in C."""
    low, high = 0, most
    while low < high:
        middle = (low + high + 1) // 2
        if same(middle):
            low = middle
        else:
            high = middle - 1
    return low


def splice_facts(
    before: MemoryFile,
    data: bytes,
    after: MemoryFile,
    line: Callable[[Fact], str] = fact_line,
    run: tuple[int, int] | None = None,
) -> bytes | None:
    """``render_facts(after)`` as bytes, made by replacing the lines of the facts that
    changed in ``data`` (which must be ``render_facts(before)``): None unless the facts
    that changed are one run of one section that keeps facts before and after (the
    caller renders the whole file then). ``run``: :func:`changed_run` of the two."""
    if (after.title, after.intro, after.sections, after.notes) != (
        before.title,
        before.intro,
        before.sections,
        before.notes,
    ):
        return None
    start, end = run or changed_run(before.facts, after.facts)
    gone = before.facts[start : len(before.facts) - end]
    added = after.facts[start : len(after.facts) - end]
    sections = {f.section for f in (*gone, *added)}
    if len(sections) != 1:
        return None
    section = sections.pop()
    if section not in before.sections:
        return None
    if not added and not any(f.section == section for f in _outside(before.facts, start, end)):
        return None  # the section loses its last fact: its list goes
    if gone:  # the old lines are next to each other: no fact of the section between them
        at = _line_at(data, line(gone[0]))
    else:  # after the section's last fact before the run, or at its first one after it
        near = next((f for f in reversed(before.facts[:start]) if f.section == section), None)
        if near is not None:
            at = _line_at(data, line(near))
            at = -1 if at < 0 else data.index(b"\n", at) + 1
        else:
            near = next((f for f in before.facts[start:] if f.section == section), None)
            at = -1 if near is None else _line_at(data, line(near))
    if at < 0:
        return None
    cut = at + sum(len(line(f).encode("utf-8", "surrogatepass")) + 1 for f in gone)
    new = "".join(line(f) + "\n" for f in added).encode("utf-8", "surrogatepass")
    return data[:at] + new + data[cut:]


def _outside(facts: tuple[Fact, ...], start: int, end: int) -> Iterator[Fact]:
    """The facts before a run (nearest first), then those after it."""
    yield from reversed(facts[:start])
    yield from facts[len(facts) - end :]


def _line_at(data: bytes, text: str) -> int:
    """Where the one line ``text`` starts in ``data``, or -1 if it is not there exactly
    once."""
    wanted = b"\n" + text.encode("utf-8", "surrogatepass") + b"\n"
    found = data.find(wanted)
    if found < 0 or data.find(wanted, found + 1) >= 0:
        return -1
    return found + 1


# --- reading -------------------------------------------------------------------------------


def parse_facts(text: str | bytes, path: str = "memory/MEMORY.md") -> MemoryFile:
    """Read a memory file; raises ParseError listing every ``path:line: problem``."""
    if isinstance(text, bytes):
        data = text
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            raise ParseError([Diagnostic(path, line, "not UTF-8 text")]) from None
    with collector_paused(len(text) > _PAUSE_COLLECTOR_ABOVE):
        return _MemoryReader(path).read(text)


# a file this long (~1,000 facts) is read with the cyclic garbage collector paused
_PAUSE_COLLECTOR_ABOVE = 100_000
_PAUSE_COLLECTOR_FACTS = 1_000


class _MemoryReader:
    def __init__(self, path: str) -> None:
        self.path = path
        self.diagnostics: list[Diagnostic] = []
        self.src = ""
        self.lines: list[str] = []

    def diag(self, line: int, problem: str) -> None:
        self.diagnostics.append(Diagnostic(self.path, line, problem))

    def read(self, text: str) -> MemoryFile:  # noqa: C901
        src = _normalized(text)
        rows = read_fact_rows(src)
        if rows is not None:  # every line exactly as gitmem writes it: read by its parts
            return memory_of_rows(rows)
        self.src, self.lines = src, src.split("\n")
        title, intro_blocks = TITLE, list[str]()
        sections: list[str] = []
        notes: dict[str, list[str]] = {}
        raw: list[tuple[str, int, str]] = []  # (section, line, item text)
        section: str | None = None
        canonical = _canonical(self.lines)
        if canonical is not None:  # lines as gitmem writes them: no Markdown parser needed
            sections, raw = canonical
        for block in () if canonical is not None else top_level_blocks(src):
            if block.kind == "blank_line":
                continue
            if block.kind == "heading1" and section is None and not intro_blocks:
                title = str(block.token.get("text", "")).strip() or TITLE
                if title == TITLE and self._verbatim(block) != f"# {TITLE}":
                    title = TITLE
                continue
            if block.kind == "heading2":
                section = str(block.token.get("text", "")).strip()
                problem = section_problem(section)
                if problem:
                    self.diag(block.line, problem)
                    section = section.strip().strip("#").strip() or DEFAULT_SECTION
                if section in sections:
                    self.diag(block.line, f"section {section!r} appears twice")
                sections.append(section)
                continue
            if block.kind == "list":
                raw.extend(
                    (section or DEFAULT_SECTION, line, item) for line, item in self.items(block)
                )
                if section is None and DEFAULT_SECTION not in sections:
                    sections.append(DEFAULT_SECTION)
                continue
            if section is None:
                intro_blocks.append(self._verbatim(block))
            else:
                notes.setdefault(section, []).append(self._verbatim(block))
        facts = self.facts(raw)
        if self.diagnostics:
            raise ParseError(self.diagnostics)
        return MemoryFile(
            title=title,
            intro="\n\n".join(intro_blocks),
            sections=tuple(sections),
            notes=tuple((s, "\n\n".join(n)) for s, n in notes.items()),
            facts=tuple(facts),
        )

    def _verbatim(self, block: Block) -> str:
        return self.src[block.start : block.end].strip("\n")

    def items(self, block: Block) -> list[tuple[int, str]]:
        """(line, text) of each item of a top-level list, cut from the source."""
        count = len(block.token.get("children", []))
        first_line = block.line
        body = self.src[block.start : block.end].rstrip("\n").split("\n")
        starts = [n for n, text in enumerate(body) if _marker_width(text)]
        if len(starts) != count:
            self.diag(
                first_line,
                f"cannot tell this list's {count} items apart (put each fact on its own '- ' line)",
            )
            return []
        out = []
        for at, start in enumerate(starts):
            end = starts[at + 1] if at + 1 < len(starts) else len(body)
            lines = body[start:end]
            width = _marker_width(lines[0])
            parts = [lines[0][width:].strip()] + [ln.strip() for ln in lines[1:]]
            out.append((first_line + start, " ".join(p for p in parts if p)))
        return out

    def facts(self, raw: list[tuple[str, int, str]]) -> list[Fact]:
        parsed: list[tuple[int, dict[str, Any]]] = []
        for section, line, item in raw:
            fields = self.fact_fields(item, line)
            if fields is not None:
                fields["section"] = section
                parsed.append((line, fields))
        taken = {f["id"] for _, f in parsed if "id" in f}
        seen: dict[str, int] = {}
        out = []
        for line, fields in parsed:
            if "id" not in fields:
                fields["id"] = derived_id(fields["text"], taken)
                taken.add(fields["id"])
            if fields["id"] in seen:
                self.diag(
                    line,
                    f"fact id {fields['id']!r} is used twice (first at line {seen[fields['id']]})",
                )
                continue
            seen[fields["id"]] = line
            if _TRUSTED.issuperset(fields) and fields["text"] and len(fields["id"]) <= 64:
                # what the reader checked already is all Fact would check of these fields
                out.append(_trusted_fact(fields))
                continue
            try:
                out.append(Fact(**fields))
            except ModelValidationError as exc:
                detail = exc.errors()[0]
                self.diag(
                    line,
                    f"fact {fields['id']!r}: {detail.get('loc', ('?',))[0]}: "
                    f"{detail.get('msg', exc)}",
                )
        return out

    def fact_fields(self, item: str, line: int) -> dict[str, Any] | None:
        """The fields of one item: text, and what its braces say."""
        cut = item.rfind(" {#")
        if cut < 0 or not item.endswith("}"):
            if not item.strip():
                self.diag(line, "an empty list item (a fact needs text)")
                return None
            return {"text": item}
        text, braces = item[:cut], item[cut + 3 : -1]
        fields: dict[str, Any] = {}
        parts = braces.split(SEP)
        head, _, sources = parts[0].partition(f" {ARROW} ")
        if not head or not _ID_CHARS.issuperset(head):
            self.diag(line, f"fact braces must start with '#id': {{#{braces}}}")
            return None
        fields["id"] = head
        try:
            if sources.startswith("by ") and sources != BY_HAND:
                fields["by"] = _decode(sources[3:], line, self.path)
            elif sources and sources != BY_HAND:
                fields["sources"] = tuple(self.source(s.strip(), line) for s in sources.split(","))
            for part in parts[1:]:
                self.attribute(part.strip(), fields, line)
            if fields.pop("escaped", False):
                text = unescape(text)
        except EscapeError as exc:
            self.diag(line, str(exc.args[0]))
            return None
        except ParseError as exc:
            self.diagnostics.extend(exc.diagnostics)
            return None
        fields["text"] = text
        return fields

    def source(self, value: str, line: int) -> FactSource:
        session, _, turn = value.partition("#")
        if not session:
            raise ParseError([Diagnostic(self.path, line, f"source {value!r} names no session")])
        return FactSource.model_construct(  # a session id of one character or more
            session=_decode(session, line, self.path),
            interaction=_decode(turn, line, self.path) if turn else None,
        )

    def attribute(self, part: str, fields: dict[str, Any], line: int) -> None:
        key, _, value = part.partition(" ")
        if part == "escaped":
            fields["escaped"] = True
        elif part.startswith("#"):
            fields["tags"] = tuple(_decode(t[1:], line, self.path) for t in part.split(" ") if t)
        elif key in ("from", "until") and value:
            fields["valid_from" if key == "from" else "valid_until"] = value
        elif key == "confidence" and value:
            try:
                fields["confidence"] = float(value)
            except ValueError:
                raise ParseError(
                    [Diagnostic(self.path, line, f"confidence {value!r} is not a number")]
                ) from None
        elif part.startswith("replaced by "):
            fields["replaced_by"] = part[len("replaced by ") :].strip()
        else:
            known = "from DATE, until DATE, confidence N, replaced by ID, #tag, escaped"
            raise ParseError(
                [Diagnostic(self.path, line, f"unknown fact attribute {part!r} (known: {known})")]
            )


# the fields of a fact whose checks the reader makes itself (ids' characters, a source's
# session, section names)
_TRUSTED = frozenset({"id", "text", "section", "by", "sources"})
# every field in the model's order, the optional ones at their defaults (a trusted fact's
# values start as a copy of it, so its ``__dict__`` is ordered as the model's own)
_DEFAULTS = {
    name: None if info.is_required() else info.default for name, info in Fact.model_fields.items()
}
_new_fact = Fact.__new__
_set = object.__setattr__


def _trusted_fact(fields: dict[str, Any]) -> Fact:
    """``Fact.model_construct(set(fields), **fields)`` (every default a constant), at a
    third of its cost: the state model_construct sets, set directly (a 10,000-fact file is
    read in a new process on its first ``facts()``). tests/test_facts_format.py compares
    the two."""
    values = _DEFAULTS.copy()
    values.update(fields)
    fact = _new_fact(Fact)
    _set(fact, "__dict__", values)
    _set(fact, "__pydantic_fields_set__", set(fields))
    _set(fact, "__pydantic_extra__", None)
    _set(fact, "__pydantic_private__", None)
    return fact


def _normalized(text: str) -> str:
    """The text as the reader reads it: no byte-order mark, LF line ends, a last one."""
    src = text.removeprefix("\ufeff").replace("\r\n", "\n")
    return src if src.endswith("\n") else src + "\n"


# a file's sections, each with its fact lines as the strict pattern cuts them
StrictRows = list[tuple[str, list[FactRow]]]


def strict_rows(data: bytes) -> StrictRows | None:
    """The sections and fact lines of a memory file's bytes when every line is in the
    strict form (what :func:`memory_of_rows` builds the file from); else None (then
    :func:`parse_facts` reads it, and may report a problem)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return read_fact_rows(_normalized(text))


def memory_of_rows(rows: StrictRows) -> MemoryFile:
    """The file the reader makes of a file in the strict form (no escapes, no attributes,
    nothing %-encoded): each fact's fields as the pattern cut them out of its line, as
    ``fact_fields`` reads them."""
    sources: dict[str, tuple[FactSource, ...]] = {}  # the same few sessions, made once
    facts: list[Fact] = []
    with collector_paused(sum(len(found) for _, found in rows) > _PAUSE_COLLECTOR_FACTS):
        for section, found in rows:
            facts += [_strict_fact(row, section, sources) for row in found]
    return MemoryFile.model_construct(
        title=TITLE,
        intro="",
        sections=tuple(section for section, _ in rows),
        notes=(),
        facts=tuple(facts),
    )


# the fields a strict line gives a fact (see _trusted_fact)
_BY_FIELDS = frozenset({"id", "text", "section", "by"})
_SOURCES_FIELDS = frozenset({"id", "text", "section", "sources"})
_HAND_FIELDS = frozenset({"id", "text", "section"})


def _strict_fact(row: FactRow, section: str, known: dict[str, tuple[FactSource, ...]]) -> Fact:
    """:func:`_trusted_fact` of one strict line's fields, its values set in the model's
    field order (a 10,000-fact file builds 10,000 of them on its first read)."""
    text, fact_id, named = row
    by, fields = None, _HAND_FIELDS
    sources: tuple[FactSource, ...] = ()
    if named.startswith("by ") and named != BY_HAND:
        by, fields = named[3:], _BY_FIELDS
    elif named != BY_HAND:
        sources = known.get(named) or known.setdefault(
            named, tuple(_strict_source(token) for token in named.split(", "))
        )
        fields = _SOURCES_FIELDS
    fact = _new_fact(Fact)
    _set(
        fact,
        "__dict__",
        {
            "id": fact_id,
            "text": text,
            "section": section,
            "sources": sources,
            "by": by,
            "valid_from": None,
            "valid_until": None,
            "confidence": None,
            "tags": (),
            "replaced_by": None,
        },
    )
    _set(fact, "__pydantic_fields_set__", set(fields))
    _set(fact, "__pydantic_extra__", None)
    _set(fact, "__pydantic_private__", None)
    return fact


def _strict_source(token: str) -> FactSource:
    session, _, turn = token.partition("#")
    return FactSource.model_construct(session=session, interaction=turn or None)


def _canonical(lines: list[str]) -> tuple[list[str], list[tuple[str, int, str]]] | None:
    """The sections and (section, line, item) of each fact of a file in the form gitmem
    writes (the title, blank lines, plain ``## Section`` headings, one ``- text {#...}``
    line per fact, no prose), read line by line; None for anything else (the Markdown
    parser reads it then)."""
    if lines[0] != f"# {TITLE}":
        return None
    sections: list[str] = []
    raw: list[tuple[str, int, str]] = []
    section: str | None = None
    for number, text in enumerate(lines[1:], 2):
        if not text:
            continue
        if text.startswith("- ") and text.endswith("}") and " {#" in text and section:
            item = text[2:].strip()
            if item.startswith("{#"):
                return None
            raw.append((section, number, item))
        elif text.startswith("## "):
            section = text[3:]
            if not PLAIN_SECTION.fullmatch(section) or section_problem(section):
                return None
            if section in sections:
                return None  # the parser reports it
            sections.append(section)
        else:
            return None
    return sections, raw


def _marker_width(line: str) -> int:
    """Width of a top-level list marker at the start of ``line`` (``- ``, ``1. ``), or 0."""
    if line[:1] in _BULLETS and line[1:2] in (" ", "\t", ""):
        return 1 + (line[1:2] != "")
    digits = len(line) - len(line.lstrip("0123456789"))
    if (
        0 < digits <= 9
        and line[digits : digits + 1] in (".", ")")
        and (line[digits + 1 : digits + 2] in (" ", "\t", ""))
    ):
        return digits + 1 + (line[digits + 1 : digits + 2] != "")
    return 0
