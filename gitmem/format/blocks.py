"""Markdown notes split into entries (OpenClaw's daily logs), through the mistune AST.

Other tools keep memory as free Markdown that an agent appends to: OpenClaw's
``memory/YYYY-MM-DD.md`` holds a day's notes, usually one heading per entry, sometimes
only a list. An importer needs those entries one by one, each with its text verbatim and
its line for diagnostics. Headings are found by mistune's block parser (with the source
spans :mod:`gitmem.format.spans` records), never by a pattern over lines, so a ``## ...``
inside a code fence stays text. This lives in ``format/`` because mistune may only be
imported here.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitmem.format.spans import top_level_blocks


@dataclass(frozen=True)
class Entry:
    """One entry of a note file.

    Attributes:
        heading: the heading's text (``None`` for the text before the first heading, and
            for every entry of a file without headings).
        text: the entry's source, verbatim (heading line included), without the blank
            lines around it.
        line: the 1-based line where it starts.
    """

    heading: str | None
    text: str
    line: int


def split_entries(text: str) -> list[Entry]:
    """``text`` cut into entries: at each heading of the highest level it uses (a ``#``
    title above ``##`` entries makes the title one entry and each ``##`` section one), or,
    in a file without headings, one entry per top-level block (paragraph, list, code...).
    Blank entries are dropped. CRLF endings are read as LF.
    """
    src = text.replace("\r\n", "\n")
    if not src.endswith("\n"):
        src += "\n"
    blocks = [b for b in top_level_blocks(src) if b.kind != "blank_line"]
    levels = [int(b.kind[7:]) for b in blocks if b.kind.startswith("heading")]
    cuts: list[tuple[int, int, str | None]]
    if not levels:
        cuts = [(b.start, b.line, None) for b in blocks]
    else:
        top = _entry_level(levels)
        cuts = []
        for block in blocks:
            if block.kind == f"heading{top}":
                cuts.append((block.start, block.line, str(block.token.get("text", "")).strip()))
            elif not cuts:
                cuts.append((block.start, block.line, None))
    out: list[Entry] = []
    for at, (start, line, heading) in enumerate(cuts):
        end = cuts[at + 1][0] if at + 1 < len(cuts) else len(src)
        chunk = src[start:end]
        body = chunk.strip("\n")
        if not body.strip():
            continue
        line += len(chunk) - len(chunk.lstrip("\n"))  # blank lines before it
        out.append(Entry(heading, body.rstrip(), line))
    return out


def _entry_level(levels: list[int]) -> int:
    """The heading level that starts entries: the highest one, unless it is used once, as
    a title, above deeper headings (``# 2026-04-28`` over ``## 09:12 ...``)."""
    top = min(levels)
    deeper = [level for level in levels if level > top]
    if levels.count(top) == 1 and levels[0] == top and deeper:
        return min(deeper)
    return top
