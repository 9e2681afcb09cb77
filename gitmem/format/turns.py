"""Incremental parsing of long sessions: turns in gitmem's own form are read once per text.

A 10,000-turn session file is ~1.9 MB, and mistune needs over a second for it, while a save
changes one turn and a neighbouring revision differs in a few. So the parser
(:mod:`gitmem.format.parse`) first asks :func:`skeleton` to cut the conversation into turn
blocks at the lines that start with ``#``. A block in exactly the form ``render`` writes
(``### <time> {#id}``, then ``**Speaker**:`` lines each followed by ``>`` lines and one blank
line) is read without mistune, by :func:`read_turn`, which does what the parser's
conversation code does with such a block; its ``Interaction`` is cached under the block's text
(an LRU bounded by characters), so the same turn in the next revision, in ``at()`` of an older
commit, in a diff or in a merge costs one dictionary look-up. Each run of such blocks is
replaced by one placeholder heading; what is left (title, metadata, summary, any turn a
person wrote differently) is read by :mod:`gitmem.format.head` when it is exactly in render's
form, else by mistune.

Why this is exactly a full parse: a placeholder stands where a turn heading stood, at the
start of a line after a blank line, so everything around it parses the same; the only blocks
that could have swallowed the turn there (an unclosed fence or HTML block, a heading or quote
out of place) are themselves reported as problems. Whenever the result has a diagnostic, or
a turn id repeats across blocks, the parser throws it away and parses the whole file again
(``tests/test_format_turns.py`` compares both on random edits).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from itertools import pairwise

from gitmem.errors import EscapeError
from gitmem.format.labels import COLONS, ESCAPED, SECTIONS, bold_key, fromisoformat, unescape
from gitmem.models import Interaction, Message, built, check_label, read_interaction

# Private-use: a file holding it is parsed in full, so a placeholder is never ambiguous.
PLACEHOLDER = "\ue000"

# A line that may start a section: "#" or "##" and a space, tab or the line's end (the
# newline before it is matched: a literal prefix is searched far faster than "^" is).
_SECTION = re.compile(r"\n#{1,2}(?=[ \t\n])")
# A turn exactly as render writes it ("### ...", each message's speaker line, quote and
# blank line), as split at "\n#": without the first "#" and the last newline.
_MESSAGE = r"\*\*[^\n]*\*\*(?: \(escaped\))?:\n(?:>[^\n]*\n)+"
_PIECE = re.compile(rf"## [^\s{{}}#]+ \{{#[^\s{{}}]+\}}\n(?:(?:{_MESSAGE}\n)*{_MESSAGE})?")

_SPEAKERS: dict[str, str] = {}  # checked once, shared by every file


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


def read_turn(text: str) -> Interaction | None:
    """The interaction of one turn block in render's form (``"#" + piece + "\\n"`` for a
    ``_PIECE``), as the parser's conversation code reads it; None where that code would report
    a problem (the full parse then reports it)."""
    rows = text.split("\n")
    stamp, _, ident = rows[0][4:-1].rpartition("{#")
    try:
        when = fromisoformat(stamp.strip())
    except ValueError:
        return None
    messages: list[Message] = []
    at = 1
    while rows[at]:  # a speaker line, its quote, a blank line
        key, tail = bold_key(rows[at].strip())
        tail = tail.strip()
        if key is None or tail not in (*COLONS, ESCAPED.strip() + ":"):
            return None
        end = rows.index("", at)
        content = "\n".join(r[2:] if r[:2] == "> " else r[1:] for r in rows[at + 1 : end])
        try:
            if tail not in COLONS:
                content = unescape(content)
            speaker = _SPEAKERS.get(key)
            if speaker is None:
                speaker = check_label(key, "speaker")
                if len(_SPEAKERS) > 1000:
                    _SPEAKERS.clear()
                _SPEAKERS[key] = speaker
            # any str is valid content: each speaker is checked once, then only shared
            messages.append(built(Message, {"speaker": speaker, "content": content}))
        except (EscapeError, ValueError):
            return None
        at = end + 1
    return read_interaction(ident, when, messages)


def skeleton(src: str, *, remember: bool = True) -> tuple[str, list[list[Interaction]]] | None:
    """``src`` with each run of turn blocks in render's form replaced by a placeholder
    heading ``### <PLACEHOLDER><n>``, and the interactions of run ``n``.

    ``remember=False`` looks turns up in the cache but adds none (a reader of every file
    once, such as an index rebuild, would only churn it).

    Returns None where nothing would be saved, or the file cannot take the shortcut: it
    holds the placeholder character or a lone carriage return, or a block has a problem
    (the caller then parses it in full, which reports it).
    """
    if PLACEHOLDER in src or "\r" in src:
        return None
    # conversation sections: from their "## " heading to the next "# " or "## " heading
    # (turns elsewhere are the parser's to report)
    heads = [m.start() + 1 for m in _SECTION.finditer(src)] + [len(src)]
    out: list[str] = []
    runs: list[list[Interaction]] = []
    fresh: list[tuple[str, Interaction]] = []
    done = 0
    for start, end in pairwise(heads):
        title = src[start + 3 : src.index("\n", start)]
        section = SECTIONS.get(title.casefold(), (None, None))[0]
        if src[start : start + 3] != "## " or section != "conversation" or title != title.strip():
            continue
        # "\n#" starts every line that can start a block here: piece n > 0 is the text
        # "#" + piece + "\n" (a turn block in render's form is one piece)
        pieces = src[start : end - 1].split("\n#")
        keys = [
            piece
            if piece[-1:] == "\n"
            else piece + "\n"
            if at == len(pieces) - 1 and end == len(src)
            else ""  # a turn ends in a blank line, but at the file's end
            for at, piece in enumerate(pieces)
        ]
        found = CACHE.get_many(keys)
        kept = [pieces[0]]
        last = False  # whether the piece before is in the current run
        for at in range(1, len(pieces)):
            key, turn = keys[at], found[at]
            # a turn block must follow a blank line: the piece before ends in "\n"
            if turn is None and key and pieces[at - 1][-1:] == "\n" and _PIECE.fullmatch(key):
                turn = read_turn("#" + key + "\n")
                if turn is None:
                    return None
                fresh.append((key, turn))
            elif turn is not None and pieces[at - 1][-1:] != "\n":
                turn = None
            if turn is None:
                kept.append(pieces[at])
            elif last:
                runs[-1].append(turn)
            else:
                kept.append(f"## {PLACEHOLDER}{len(runs)}\n")
                runs.append([turn])
            last = turn is not None
        out += [src[done:start], "\n#".join(kept), "\n"]
        done = end
    if fresh and remember:
        CACHE.put_many(fresh)
    if not runs:
        return None
    out.append(src[done:])
    return "".join(out), runs
