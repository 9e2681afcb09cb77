"""The session file's labels in English and Chinese, the escape rule that keeps text from
reading as structure, and the small readers of a label line (``**Key**: value``, timestamps)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from gitmem.errors import EscapeError
from gitmem.models import Language

_LABEL_NAMES = (
    "title",
    "conversation",
    "metadata",
    "summary",
    "session_id",
    "created",
    "last_active",
    "participants",
    "tags",
    "project",
    "links",
    "generated",
    "model",
    "covers",
    "facts",
    "keywords",
)


_LABEL_TEXT: dict[Language, str] = {
    "en": "Session|Conversation|Metadata|Summary|Session ID|Created|Last active|Participants"
    "|Tags|Project|Links|Generated|Model|Covers|Key facts|Keywords",
    "zh": "会话|对话记录|元数据|关键信息摘要|会话ID|创建时间|最后活跃|参与角色|标签|项目|链接"
    "|创建于|模型|覆盖|关键事实|关键词",
}

LABELS = {k: dict(zip(_LABEL_NAMES, v.split("|"), strict=True)) for k, v in _LABEL_TEXT.items()}

ESCAPED = " (escaped)"

COLONS = (":", "：")  # hand-written Chinese files use the full-width one


def _lookup(*names: str) -> dict[str, tuple[str, Language]]:
    """Casefolded label in either language -> (label name, language)."""
    return {lab[n].casefold(): (n, lang) for lang, lab in LABELS.items() for n in names}


TITLES = _lookup("title")

SECTIONS = _lookup("metadata", "conversation", "summary")

META_KEYS = _lookup(*_LABEL_NAMES[4:11])

SUMMARY_KEYS = _lookup("generated", "model", "covers")

# one-line items quoted below a label after the summary text: ``**Key facts**:`` / ``> ...``
SUMMARY_LISTS = _lookup("facts", "keywords")

# Characters a content line may not hold literally: they would be lost or altered by line-ending
# normalisation, UTF-8 encoding, editors or git (NUL makes git treat the file as binary).
_UNSAFE = frozenset(
    [chr(c) for c in range(0x20) if chr(c) not in "\t\n"]
    + [chr(c) for c in range(0x7F, 0xA0)]
    + [chr(c) for c in range(0xD800, 0xE000)]
    + ["\u2028", "\u2029", "\ufeff"]
)


def _maybe_escape(text: str) -> tuple[str, str]:
    """(label flag, text to write): text is escaped only if it has to be."""
    # every unsafe character is unprintable: a printable text (tabs and line breaks aside,
    # both safe) is checked by one fast scan rather than a set lookup per character
    if text.isprintable() or text.replace("\n", " ").replace("\t", " ").isprintable():
        return "", text
    if _UNSAFE.isdisjoint(text):
        return "", text
    return ESCAPED, "".join(
        "\\\\" if ch == "\\" else f"\\u{{{ord(ch):04X}}}" if ch in _UNSAFE else ch for ch in text
    )


def unescape(text: str) -> str:
    """Invert ``_maybe_escape``; raises ``EscapeError`` naming the bad sequence and its line."""
    parts: list[str] = []
    pos = 0
    while (hit := text.find("\\", pos)) >= 0:
        parts.append(text[pos:hit])
        if text.startswith("\\\\", hit):
            parts.append("\\")
            pos = hit + 2
            continue
        close = text.find("}", hit)
        digits = text[hit + 3 : close] if text.startswith("\\u{", hit) and close > 0 else ""
        valid = 0 < len(digits) <= 6 and all(c in "0123456789abcdefABCDEF" for c in digits)
        if not valid or int(digits, 16) > 0x10FFFF:
            shown = text[hit : close + 1] if valid else text[hit : hit + 2]
            problem = (
                f"bad escape '{shown}' in escaped text (only \\\\ and \\u{{XXXX}} are allowed)"
            )
            raise EscapeError(problem, text.count("\n", 0, hit))
        parts.append(chr(int(digits, 16)))
        pos = close + 1
    parts.append(text[pos:])
    return "".join(parts)


def fromisoformat(value: str) -> datetime:
    """``datetime.fromisoformat``, but keeping an offset of a few microseconds.

    CPython 3.11 reads ``+00:00:00.000001`` as UTC; ``isoformat`` writes such offsets.
    """
    stamp = datetime.fromisoformat(value)
    sign = max(value.rfind("+"), value.rfind("-"))
    tail = value[sign + 1 :].split(":")
    if stamp.tzinfo is None or len(tail) != 3 or "." not in tail[2]:
        return stamp
    seconds, _, fraction = tail[2].partition(".")
    hours, minutes, micro = int(tail[0]), int(tail[1]), int(fraction.ljust(6, "0")[:6])
    offset = timedelta(hours=hours, minutes=minutes, seconds=int(seconds), microseconds=micro)
    return stamp.replace(tzinfo=timezone(-offset if value[sign] == "-" else offset))


def split_colon(text: str) -> tuple[str, str, str]:
    """Split at the first ASCII or full-width colon."""
    cut = min((i for i in map(text.find, COLONS) if i >= 0), default=-1)
    return (text, "", "") if cut < 0 else (text[:cut], text[cut], text[cut + 1 :])


def bold_key(text: str) -> tuple[str | None, str]:
    """``**Key**rest`` -> (``Key``, ``rest``); (None, text) if the text does not start bold."""
    close = text.find("**", 2)
    if not text.startswith("**") or close <= 2:
        return None, text
    return text[2:close], text[close + 2 :]
