"""Rendering a ``Session`` as its Markdown file (the inverse of ``format.parse``)."""

from __future__ import annotations

from gitmem.format.labels import LABELS, _maybe_escape
from gitmem.models import Session


def render(session: Session) -> str:
    """Render a session as Markdown, deterministically.

    Args:
        session: The session to write; labels follow ``session.language``.

    Returns:
        The file text (LF line endings, ending in one newline). ``parse`` of it gives back an
        equal ``Session``, and the same session always renders to the same text.
    """
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
    for turn in session.interactions:
        out.append(f"### {turn.timestamp.isoformat()} {{#{turn.id}}}")
        for msg in turn.messages:
            flag, text = _maybe_escape(msg.content)
            out.append(f"**{msg.speaker}**{flag}:")
            out += [f"> {line}" if line else ">" for line in text.split("\n")]
            out.append("")
        if not turn.messages:
            out.append("")
    summary = session.summary
    if summary is not None:
        flag, text = _maybe_escape(summary.text)
        out += [
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
    while out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n"
