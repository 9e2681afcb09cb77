"""Incremental parsing of long sessions: turns in gitmem's own form are read once per text.

A 10,000-turn session file is ~1.7 MB, and mistune needs over a second for it, while a save
changes one turn and a neighbouring revision differs in a few. So the parser
(:mod:`gitmem.format.parse`) first asks :func:`skeleton` to cut the conversation into turn
blocks at the lines that start with ``#``. A block in exactly the form ``render`` writes
(``### <time> {#id}``, then ``**Speaker**:`` lines each followed by ``>`` lines and one blank
line) is read without mistune, from blocks built by a regular expression, through the
parser's own conversation code; its ``Interaction`` is cached under the block's text (an LRU
bounded by characters), so the same turn in the next revision, in ``at()`` of an older commit,
in a diff or in a merge costs one dictionary look-up. Each run of such blocks is replaced by
one placeholder heading; mistune parses what is left (title, metadata, summary, any turn a
person wrote differently).

Why this is exactly a full parse: a placeholder stands where a turn heading stood, at the
start of a line after a blank line, so everything around it parses the same; the only blocks
that could have swallowed the turn there (an unclosed fence or HTML block, a heading or quote
out of place) are themselves reported as problems. Whenever the result has a diagnostic, or
a turn id repeats across blocks, the parser throws it away and parses the whole file again
(``tests/test_incremental.py`` compares both on random edits).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from gitmem.format.labels import SECTIONS
from gitmem.format.spans import Block

if TYPE_CHECKING:
    from gitmem.models import Interaction

# Private-use: a file holding it is parsed in full, so a placeholder is never ambiguous.
PLACEHOLDER = "\ue000"

# Where a block may start: a line of 1-6 "#" and a space, tab or the line's end (the
# newline before it is matched: a literal prefix is searched far faster than "^" is).
_HEADING = re.compile(r"\n#{1,6}(?=[ \t\n])")
# A turn exactly as render writes it, ending in its blank line (at the file's end the
# caller adds the blank line that render leaves out there).
_TURN = re.compile(
    r"### [^\s{}#]+ \{#[^\s{}]+\}\n"
    r"(?:(?:\*\*[^\n]*\*\*(?: \(escaped\))?:\n(?:>[^\n]*\n)+\n)+|\n)"
)

ReadTurn = Callable[[str, list[Block]], "Interaction | None"]


class TurnCache:
    """Interactions by the text of the turn block they were read from, least recently used
    first out once the texts held pass ``limit`` characters. Thread-safe."""

    def __init__(self, limit: int = 16_000_000) -> None:
        self.limit = limit
        self._items: OrderedDict[str, Interaction] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get_many(self, texts: list[str]) -> list[Interaction | None]:
        """The cached interaction of each text (None where there is none)."""
        items = self._items
        with self._lock:
            found = [items.get(text) for text in texts]
            for text, hit in zip(texts, found, strict=True):
                if hit is not None:
                    items.move_to_end(text)
        return found

    def put_many(self, pairs: list[tuple[str, Interaction]]) -> None:
        """Remember interactions read from texts."""
        with self._lock:
            for text, turn in pairs:
                if text not in self._items:
                    self._size += len(text)
                self._items[text] = turn
            while self._size > self.limit and self._items:
                old, _ = self._items.popitem(last=False)
                self._size -= len(old)

    def clear(self) -> None:
        """Forget everything (tests use it to compare a cold and a warm parse)."""
        with self._lock:
            self._items.clear()
            self._size = 0


CACHE = TurnCache()


def turn_blocks(text: str) -> list[Block]:
    """The top-level blocks mistune would find in one turn block in render's form
    (``text`` matched ``_TURN``): the heading, each speaker line and each quote."""
    blocks: list[Block] = []
    pos = 0
    quote: tuple[int, int] | None = None  # where the current quote starts: offset, line
    for line, row in enumerate(text.split("\n")[:-1], 1):
        first = row[:1]
        if first == ">":
            quote = quote or (pos, line)
        else:
            if quote is not None:
                blocks.append(Block("block_quote", {}, quote[0], pos, quote[1]))
                quote = None
            if first == "#":
                token = {"type": "heading", "text": row[4:], "attrs": {"level": 3},
                         "style": "atx"}
                blocks.append(Block("heading3", token, pos, pos + len(row) + 1, line))
            elif first == "*":
                token = {"type": "paragraph", "text": row}
                blocks.append(Block("paragraph", token, pos, pos + len(row) + 1, line))
        pos += len(row) + 1
    if quote is not None:
        blocks.append(Block("block_quote", {}, quote[0], pos, quote[1]))
    return blocks


def skeleton(src: str, read_turn: ReadTurn) -> tuple[str, list[list[Interaction]]] | None:
    """``src`` with each run of turn blocks in render's form replaced by a placeholder
    heading ``### <PLACEHOLDER><n>``, and the interactions of run ``n``.

    ``read_turn`` reads one block's text and synthetic blocks into its interaction (None if
    it has a problem). Returns None where nothing would be saved, or the file cannot take
    the shortcut: it holds the placeholder character or a lone carriage return, or a block
    has a problem (the caller then parses it in full, which reports it).
    """
    if PLACEHOLDER in src or "\r" in src:
        return None
    heads = [(m.start() + 1, m.end() - m.start() - 1) for m in _HEADING.finditer(src)]
    ends = [start for start, _ in heads[1:]] + [len(src)] * bool(heads)
    # which blocks lie in a conversation section: after its "## " heading, before the next
    # "# " or "## " heading (turns elsewhere are the parser's to report)
    spans: list[tuple[int, int]] = []
    inside = False
    for (start, level), end in zip(heads, ends, strict=True):
        if level == 3 and src.startswith("### ", start):
            if inside:
                spans.append((start, end))
        elif level <= 2:
            line = src[start : src.index("\n", start)]
            title = line[3:]
            section = SECTIONS.get(title.casefold(), (None, None))[0]
            inside = line[:3] == "## " and section == "conversation" and title == title.strip()
    texts = [src[start:end] for start, end in spans]
    cached = CACHE.get_many(texts)
    fresh: list[tuple[str, Interaction]] = []
    runs: list[list[Interaction]] = []
    out: list[str] = []
    pos = -1
    done = 0
    for (start, end), text, turn in zip(spans, texts, cached, strict=True):
        if src[start - 2 : start] != "\n\n":
            continue  # a turn block must follow a blank line
        if turn is None:
            key = text
            if end == len(src) and not text.endswith("\n\n"):
                key = text + "\n"  # the last turn of a file without a summary
            if not _TURN.fullmatch(key):
                continue
            if key != text:
                turn = CACHE.get_many([key])[0] or read_turn(key, turn_blocks(key))
            else:
                turn = read_turn(text, turn_blocks(text))
            if turn is None:
                return None
            fresh.append((key, turn))
        if start == pos:  # continues the current run
            runs[-1].append(turn)
        else:
            out += [src[done:start], f"### {PLACEHOLDER}{len(runs)}\n\n"]
            runs.append([turn])
        pos = done = end
    if fresh:
        CACHE.put_many(fresh)
    if not runs:
        return None
    out.append(src[done:])
    return "".join(out), runs
