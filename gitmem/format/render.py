"""Rendering a ``Session`` as its Markdown file (the inverse of ``format.parse``).

Each turn's text is kept (by the turn object, which is frozen) for the next render, and so is
the whole conversation text of the last few sessions rendered: a save appends one turn to a
session whose other turns are the same objects, so rendering a 10,000-turn session costs
formatting one turn and copying the text before it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from operator import is_

from gitmem.format.labels import LABELS, _maybe_escape
from gitmem.models import Interaction, Session

_TURN_LIMIT = 16_000_000  # characters of turn text kept
_turns: OrderedDict[int, tuple[Interaction, str]] = OrderedDict()  # id(turn) -> turn, text
_turns_size = 0
_lock = threading.Lock()
# id(first turn) -> the turns and their text, for the last few conversations rendered
_bodies: OrderedDict[int, tuple[list[Interaction], str]] = OrderedDict()


def render(session: Session, *, remember: bool = True) -> str:
    """Render a session as Markdown, deterministically.

    Args:
        session: The session to write; labels follow ``session.language``.
        remember: keep the turns' text for the next render (False for a session that is
            rendered once, e.g. by an import: the cache would only hold memory).

    Returns:
        The file text (LF line endings, ending in one newline). ``parse`` of it gives back an
        equal ``Session``, and the same session always renders to the same text.
    """
    turns = session.interactions
    body = _conversation(turns) if remember else "".join(map(_turn_text, turns))
    parts = [head(session), body, tail(session)]
    parts = [part for part in parts if part]
    last = parts[-1]
    while last.endswith("\n\n"):  # no blank lines at the end (every part has a text line)
        last = last[:-1]
    parts[-1] = last
    return "".join(parts)


def head(session: Session) -> str:
    """The file's text before the first turn: title, metadata and the conversation heading."""
    lab = LABELS[session.language]
    out = [f"# {lab['title']}: {session.id}", "", f"## {lab['metadata']}"]
    items = [
        (lab["session_id"], session.id),
        (lab["created"], session.created.isoformat()),
        (lab["last_active"], session.last_active.isoformat()),
        (lab["participants"], ", ".join(session.participants)),
        (lab["tags"], ", ".join(session.tags)),
        (lab["project"], session.project or ""),
        (lab["links"], ", ".join(f"[[{link}]]" for link in session.links)),
    ]
    out += [f"- **{key}**: {value}" for key, value in items if value]
    out += [f"- **{k}**: {v}" if v else f"- **{k}**:" for k, v in session.extra.items()]
    out += ["", f"## {lab['conversation']}", ""]
    return "\n".join(out) + "\n"


def tail(session: Session) -> str:
    """The summary section after the turns ("" without a summary)."""
    summary = session.summary
    if summary is None:
        return ""
    lab = LABELS[session.language]
    flag, text = _maybe_escape(summary.text)
    out = [
        f"## {lab['summary']}",
        f"**{lab['generated']}**{flag}: {summary.generated.isoformat()}",
    ]
    if summary.model is not None:
        out.append(f"**{lab['model']}**: {summary.model}")
    if summary.covers:
        out.append(f"**{lab['covers']}**: {', '.join(summary.covers)}")
    out.append("")
    out += [f"> {line}" if line else ">" for line in text.split("\n")]
    for label, entries in ((lab["facts"], summary.facts), (lab["keywords"], summary.keywords)):
        if entries:
            flag, body = _maybe_escape("\n".join(entries))
            out += ["", f"**{label}**{flag}:"]
            out += [f"> {line}" if line else ">" for line in body.split("\n")]
    return "\n".join(out) + "\n"


def clear_cache() -> None:
    """Forget every turn's text (benchmarks use it to time a render from scratch)."""
    global _turns_size
    with _lock:
        _turns.clear()
        _bodies.clear()
        _turns_size = 0


def _turn_text(turn: Interaction) -> str:
    out = [f"### {turn.timestamp.isoformat()} {{#{turn.id}}}"]
    for msg in turn.messages:
        flag, text = _maybe_escape(msg.content)
        out.append(f"**{msg.speaker}**{flag}:")
        out += [f"> {line}" if line else ">" for line in text.split("\n")]
        out.append("")
    if not turn.messages:
        out.append("")
    return "\n".join(out) + "\n"


def _conversation(turns: list[Interaction]) -> str:
    """The text of all turns, continuing the text rendered before for the same first turns."""
    if not turns:
        return ""
    with _lock:
        hit = _bodies.get(id(turns[0]))
    done, before = 0, ""
    if hit is not None and len(hit[0]) <= len(turns) and all(map(is_, hit[0], turns)):
        done, before = len(hit[0]), hit[1]
    text = before + "".join(_turn_texts(turns[done:]))
    with _lock:
        _bodies[id(turns[0])] = (list(turns), text)
        _bodies.move_to_end(id(turns[0]))
        while len(_bodies) > 16:
            _bodies.popitem(last=False)
    return text


def _turn_texts(turns: list[Interaction]) -> list[str]:
    """The text of each turn, from the cache where the same turn object was rendered."""
    global _turns_size
    with _lock:
        found = [_turns.get(id(turn)) for turn in turns]
    texts: list[str] = []
    fresh: list[tuple[Interaction, str]] = []
    for turn, hit in zip(turns, found, strict=True):
        if hit is not None and hit[0] is turn:
            texts.append(hit[1])
        else:
            texts.append(_turn_text(turn))
            fresh.append((turn, texts[-1]))
    with _lock:
        for turn, text in fresh:
            old = _turns.pop(id(turn), None)
            _turns_size += len(text) - (len(old[1]) if old else 0)
            _turns[id(turn)] = (turn, text)
        for turn, hit in zip(turns, found, strict=True):
            if hit is not None and hit[0] is turn and id(turn) in _turns:  # not evicted since
                _turns.move_to_end(id(turn))
        while _turns_size > _TURN_LIMIT and _turns:
            _turns_size -= len(_turns.popitem(last=False)[1][1])
    return texts
