"""Where each top-level block of a session file is in its source text.

mistune tokens carry no source positions, so a small ``BlockParser`` subclass records the
``[start, end)`` span of every top-level token; the parser (:mod:`gitmem.format.parse`) then
cuts message and summary text verbatim out of those spans and names the line of every
problem. Kept apart from the parser because it is mistune plumbing, not the file format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mistune.block_parser import BlockParser
from mistune.core import BlockState
from mistune.util import expand_leading_tab

Token = dict[str, Any]


class SpanState(BlockState):
    """A ``BlockState`` whose top-level paragraphs record their source span in ``_span``."""

    def add_paragraph(self, text: str) -> None:
        if self.parent is not None:
            super().add_paragraph(text)
            return
        last, start = self.last_token(), self.cursor
        super().add_paragraph(text)
        token = self.tokens[-1]
        if token is last and "_span" in token:
            token["_span"][1] = start + len(text)
        else:
            token["_span"] = [start, start + len(text)]

    def append_paragraph(self) -> int | None:
        end = super().append_paragraph()
        if end is not None and self.parent is None and "_span" in self.tokens[-1]:
            self.tokens[-1]["_span"][1] = end
        return end


class SpanParser(BlockParser):
    """mistune's block parser, recording the ``[start, end)`` source span of top-level tokens.

    Every rule goes through ``parse_method`` with the cursor at its first line and returns the
    end cursor. A rule may call ``parse_method`` again for the line that ended it (a quote or a
    list ends where a blank line or heading starts); that inner token gets its span first, and
    the outer one ends where it begins. Block quotes are not parsed inside: their text is cut
    from the source, so parsing it would only cost time.
    """

    state_cls = SpanState

    def __init__(self) -> None:
        super().__init__()
        self._quote_code = self.compile_sc(["blank_line", "indent_code", "fenced_code"])
        rules = ["blank_line", "thematic_break", "fenced_code", "list", "block_html"]
        self._quote_break = self.compile_sc(rules)

    def parse_method(self, m: re.Match[str], state: BlockState) -> int | None:
        if state.parent is not None:
            return super().parse_method(m, state)
        start, count = state.cursor, len(state.tokens)
        end = super().parse_method(m, state)
        tokens = state.tokens
        if not end:
            return end
        if len(tokens) == count + 1:
            tokens[-1].setdefault("_span", [start, end])
        elif len(tokens) > count:
            bound = end
            for token in reversed(tokens[count:]):
                bound = token.setdefault("_span", [start, bound])[0]
        elif count and m.lastgroup == "setex_heading":
            tokens[-1]["_span"][1] = end  # the paragraph above became a heading
        return end

    def parse_block_quote(self, m: re.Match[str], state: BlockState) -> int:
        # Appended before its end is known (mistune prepends it afterwards): the block that ends
        # the quote then cannot append its line to a paragraph above the quote, and cannot put
        # its own tokens before it (a list running into a heading adds two).
        state.append_token({"type": "block_quote", "children": []})
        return self._quote_end(state) or state.cursor

    def _parse_indent_code_fast(self, state: BlockState) -> int | None:
        # mistune tries this before every block; most lines cannot be indented code.
        if state.src[state.cursor : state.cursor + 1] not in (" ", "\t"):
            return None
        return super()._parse_indent_code_fast(state)

    def _quote_end(self, state: BlockState) -> int | None:
        """Where a block quote ends: mistune's ``extract_block_quote`` without building the text.

        Same rules: every following ``>`` line belongs to the quote; if the first line opens
        code or is blank, the quote ends at the first line without ``>``; otherwise a line
        without ``>`` is a lazy continuation unless it follows an empty quote line or starts a
        blank line, break, fence, list or HTML block. Returns that block's end if it was parsed.
        """
        src = state.src
        first = src[state.cursor : state.find_line_end()].lstrip(" ")[1:]
        if "\t" in first:
            first = expand_leading_tab(first, 3)
        require_marker = bool(self._quote_code.match(first.removeprefix(" ")))
        pos, last_quote = state.find_line_end(), -1
        while pos < state.cursor_max:
            line_end = state.find_line_end_at(pos)
            if src.startswith(">", pos) or src[pos : pos + 4].lstrip(" ").startswith(">"):
                last_quote, pos = pos, line_end
                continue
            if require_marker or (
                last_quote >= 0 and not src[src.index(">", last_quote) + 1 : pos].strip()
            ):
                break
            state.cursor = pos
            m = self._quote_break.match(src, pos)
            end = self.parse_method(m, state) if m else None
            if end:
                return end
            pos, last_quote = line_end, -1  # a lazy continuation line
        state.cursor = pos
        return None


_PARSER = SpanParser()


@dataclass(slots=True)
class Block:
    """One top-level block of a session file and where it is in the source."""

    kind: str  # mistune token type, "heading1".."heading6", or "stray" for unclaimed source
    token: Token
    start: int
    end: int
    line: int


def top_level_blocks(src: str) -> list[Block]:
    """The top-level tokens of ``src`` (LF line endings, ending with one) in source order,
    each with its span and first line; gaps between them become "stray" blocks."""
    state = SpanState()
    state.process(src)
    _PARSER.parse(state)
    tokens, out = state.tokens, []
    pos, line = 0, 1
    for index, token in enumerate(tokens):
        span = token.get("_span")
        if span is None:
            # mistune's fast path for indented code appends without parse_method; it starts
            # where the previous token ended and ends where the next one starts.
            following = (t["_span"][0] for t in tokens[index + 1 :] if "_span" in t)
            span = [pos, next(following, len(src))]
        start, end = span
        if start < pos or end < start:
            raise AssertionError(f"token spans out of order at offset {start}")
        if start > pos:  # link reference definitions leave no token
            out.append(Block("stray", {}, pos, start, line))
            line += src.count("\n", pos, start)
        kind = token["type"]
        if kind == "heading":
            kind = f"heading{token['attrs']['level']}"
        out.append(Block(kind, token, start, end, line))
        line += src.count("\n", start, end)
        pos = end
    if pos < len(src):
        out.append(Block("stray", {}, pos, len(src), line))
    return out
