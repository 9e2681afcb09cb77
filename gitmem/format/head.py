"""A session file's head (title, metadata) and summary read without mistune.

Once :mod:`gitmem.format.turns` has replaced the turns by one placeholder, what is left of a
file gitmem wrote is short and fixed: the title, the ``- **Key**: value`` list, the
conversation heading and the summary section. :func:`read_head` reads it with string
operations into a ``Session``, then checks it the only way that is exact: it renders that
session's head and summary again (``render.head``/``render.tail``) and requires the same text.
``parse(render(s)) == s`` holds for every valid session (tests/test_format_roundtrip.py), and
the placeholder parses as the turns it stands for, so the full parse of such a file gives this
very session with no diagnostic. Anything else (a hand edit, another order, a label in the
other language, a value the models normalise) returns None and mistune reads the file as before.
"""

from __future__ import annotations

from typing import Any

from gitmem.errors import EscapeError
from gitmem.format.labels import ESCAPED, LABELS, fromisoformat, unescape
from gitmem.format.render import head, tail
from gitmem.format.turns import PLACEHOLDER
from gitmem.models import (
    Interaction,
    Language,
    ModelValidationError,
    Session,
    Summary,
    read_session,
)

_TITLES = [(f"# {lab['title']}: ", lang) for lang, lab in LABELS.items()]
_META = ("session_id", "created", "last_active", "participants", "tags", "project", "links")
_KEYS = {lang: {lab[name]: name for name in _META} for lang, lab in LABELS.items()}


def read_head(text: str, runs: list[list[Interaction]]) -> Session | None:
    """The session of a skeleton text (``turns.skeleton``) whose turns are one run, or None
    where the text is not exactly in render's form."""
    if len(runs) != 1:
        return None
    lang = next((lang for prefix, lang in _TITLES if text.startswith(prefix)), None)
    if lang is None:
        return None
    lab = LABELS[lang]
    middle = f"## {lab['conversation']}\n\n### {PLACEHOLDER}0\n\n"
    cut = text.find("\n\n" + middle)
    if cut < 0:
        return None
    rest = text[cut + 2 + len(middle) :]
    try:
        session = _session(text[:cut].split("\n"), rest, lang, runs[0])
    except (ValueError, IndexError, EscapeError, ModelValidationError):
        return None
    opening = cut + 2 + len(f"## {lab['conversation']}\n\n")  # the text head() writes
    if session is None or head(session) != text[:opening] or tail(session) != rest:
        return None
    return session


def _session(
    lines: list[str], rest: str, lang: Language, turns: list[Interaction]
) -> Session | None:
    lab = LABELS[lang]
    if len(lines) < 3 or lines[1] or lines[2] != f"## {lab['metadata']}":
        return None
    keys = _KEYS[lang]
    fields: dict[str, Any] = {}
    extra: dict[str, str] = {}
    for line in lines[3:]:
        close = line.find("**", 4)
        if not line.startswith("- **") or close < 0:
            return None
        key, value = line[4:close], line[close + 2 :]
        if value[:2] != ": " and value != ":":
            return None
        value = value[2:]
        name = keys.get(key)
        if name is None:
            extra[key] = value
        elif name in ("participants", "tags"):
            fields[name] = value.split(", ")
        elif name == "links":
            fields[name] = [part[2:-2] for part in value.split(", ")]
        elif name == "project" or name == "session_id":
            fields[name] = value
        else:
            fields[name] = fromisoformat(value)
    sid = fields.pop("session_id", None)
    if sid is None or "created" not in fields or "last_active" not in fields:
        return None
    summary = _summary(rest, lang) if rest else None
    if rest and summary is None:
        return None
    return read_session(
        {"id": sid, "extra": extra, "interactions": turns, "summary": summary, "language": lang}
        | fields
    )


def _summary(rest: str, lang: Language) -> Summary | None:
    lab = LABELS[lang]
    lines = rest.split("\n")
    if lines[0] != f"## {lab['summary']}" or lines[-1]:
        return None
    fields: dict[str, Any] = {}
    at = 1
    escaped = False
    for name in ("generated", "model", "covers"):
        label = f"**{lab[name]}**"
        row = lines[at]
        if not row.startswith(label):
            continue
        row = row[len(label) :]
        if name == "generated" and row.startswith(ESCAPED):
            escaped, row = True, row[len(ESCAPED) :]
        if not row.startswith(": "):
            return None
        value = row[2:]
        if name == "generated":
            fields[name] = fromisoformat(value)
        else:
            fields[name] = value.split(", ") if name == "covers" else value
        at += 1
    if "generated" not in fields or lines[at]:
        return None
    blocks = "\n".join(lines[at + 1 : -1]).split("\n\n")
    fields["text"] = _quoted(blocks[0], escaped)
    for block in blocks[1:]:
        label, _, body = block.partition("\n")
        for name in ("facts", "keywords"):
            if label in (f"**{lab[name]}**:", f"**{lab[name]}**{ESCAPED}:"):
                fields[name] = _quoted(body, label.endswith(ESCAPED + ":")).split("\n")
                break
        else:
            return None
    return Summary(**fields)


def _quoted(block: str, escaped: bool) -> str:
    text = "\n".join(line[2:] if line[:2] == "> " else line[1:] for line in block.split("\n"))
    return unescape(text) if escaped else text
