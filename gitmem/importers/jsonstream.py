"""Reading a big JSON file value by value, so memory holds one element, not the file.

A ChatGPT export (``conversations.json``) is one JSON array that can pass a gigabyte, often
on a single line; ``json.load`` would hold all of it, twice. :class:`JsonStream` reads the
file in chunks through an incremental UTF-8 decoder and decodes one value at a time with
``json.JSONDecoder.raw_decode`` on a buffer that holds the current value plus one chunk.
:func:`top_level` yields the file's top-level values, and the elements of a top-level array
one by one (so a file of several values, e.g. JSONL of arrays, reads the same way). Every
value comes with the line it starts on; a malformed one raises
:class:`~gitmem.importers.engine.ImportFormatError` naming ``file:line``.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any, Literal

from gitmem.importers.engine import ImportFormatError, Meter

# bytes read at a time (256 KiB); the buffer holds one value plus about this much
CHUNK = 1 << 18

# an error this far (characters) before the end of the buffer cannot be a value cut short
# by the chunk boundary (a literal, number or escape is shorter), so it is reported at once
_MARGIN = 4096

_WHITESPACE = " \t\r\n\ufeff"

_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class Event:
    """One step through the file: an ``item`` of a top-level array, a top-level ``value``
    that is not an array, or the ``start``/``end`` of a top-level array."""

    kind: Literal["start", "item", "end", "value"]
    line: int
    value: Any = None


class JsonStream:
    """A cursor over the JSON text of a binary file handle, reading it in chunks."""

    def __init__(
        self, path: str, handle: IO[bytes], meter: Meter | None = None, chunk: int | None = None
    ) -> None:
        self.path = path
        self.handle = handle
        self.meter = meter
        self.chunk = chunk or CHUNK
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.buf = ""
        self.pos = 0
        self.line = 1  # the line of ``pos``
        self.eof = False

    def where(self, at: int | None = None) -> str:
        """``file:line`` of buffer position ``at`` (default: the cursor)."""
        line = self.line if at is None else self.line + self.buf.count("\n", self.pos, at)
        return f"{self.path}:{line}"

    def _fill(self, want: int = 0) -> bool:
        """Read at least one more chunk (or ``want`` more bytes); False at the end."""
        if self.eof:
            return False
        raw = self.handle.read(max(self.chunk, want))
        if self.meter is not None:
            self.meter.done += len(raw)
        try:
            text = self.decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            raise ImportFormatError(
                self.where(len(self.buf)), f"not UTF-8 ({exc.reason})"
            ) from None
        self.buf = self.buf[self.pos :] + text
        self.pos = 0
        self.eof = not raw
        return True

    def _advance(self, to: int) -> None:
        self.line += self.buf.count("\n", self.pos, to)
        self.pos = to

    def peek(self) -> str | None:
        """The next character that is not whitespace (the cursor moves to it), or None
        at the end of the file."""
        while True:
            at = self.pos
            end = len(self.buf)
            while at < end and self.buf[at] in _WHITESPACE:
                at += 1
            self._advance(at)
            if at < end:
                return self.buf[at]
            if not self._fill():
                return None

    def take(self, char: str) -> None:
        """Step over ``char``, which :meth:`peek` has just returned."""
        self._advance(self.pos + len(char))

    def value(self) -> tuple[int, Any]:
        """The JSON value at the cursor and the line it starts on; the cursor moves past it."""
        self.peek()
        line = self.line
        want = 0
        while True:
            try:
                found, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self._cut_short(exc):
                    # the value so far read again with twice as much: a big value is
                    # decoded O(n) times in all, and the buffer stays about its size
                    want = 2 * (len(self.buf) - self.pos)
                    self._fill(want)
                    continue
                raise ImportFormatError(self.where(exc.pos), exc.msg) from None
            except RecursionError:
                raise ImportFormatError(f"{self.path}:{line}", "JSON nested too deeply") from None
            # a number may go on in the next chunk ("12" of "123")
            if end == len(self.buf) and not self.eof and self._fill(want):
                continue
            self._advance(end)
            return line, found

    def _cut_short(self, exc: json.JSONDecodeError) -> bool:
        """Whether the error may only mean that the value goes on past the buffer."""
        if self.eof:
            return False
        if exc.msg.startswith("Unterminated string"):
            # a JSON string holds no raw newline: one after it means the quote is missing
            return "\n" not in self.buf[exc.pos :]
        return exc.pos >= len(self.buf) - _MARGIN


def top_level(stream: JsonStream) -> Iterator[Event]:
    """The file's top-level values in order; a top-level array is given element by element
    between ``start`` and ``end`` events (never held whole)."""
    while (char := stream.peek()) is not None:
        line = stream.line
        if char != "[":
            found_line, found = stream.value()
            yield Event("value", found_line, found)
            continue
        stream.take("[")
        yield Event("start", line)
        if stream.peek() == "]":
            stream.take("]")
            yield Event("end", stream.line)
            continue
        while True:
            item_line, item = stream.value()
            yield Event("item", item_line, item)
            after = stream.peek()
            if after == ",":
                stream.take(",")
                continue
            if after == "]":
                stream.take("]")
                yield Event("end", stream.line)
                break
            shown = "the end of the file" if after is None else repr(after)
            raise ImportFormatError(
                stream.where(), f"expected ',' or ']' after an array element, found {shown}"
            )
