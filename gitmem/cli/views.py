"""Plain-text views of gitmem results for the terminal (the CLI's non-JSON output).

Pure functions from models to text, kept apart from ``cli`` so that argument parsing and
presentation can each be read on their own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from gitmem.models import Hit, Revision, Session, SessionDiff, SessionInfo, SummaryOutcome
from gitmem.sync.methods import SyncResult


def session_text(session: Session) -> str:
    """A session as plain text: header, tags, each turn, the summary."""
    lines = [
        f"{session.id}  ({len(session.interactions)} turns, "
        f"last active {session.last_active.isoformat()})"
    ]
    if session.extra.get("title"):
        lines.append("title: " + session.extra["title"])
    if session.tags:
        lines.append("tags: " + ", ".join(session.tags))
    for turn in session.interactions:
        lines.append(f"\n[{turn.id}] {turn.timestamp.isoformat()}")
        lines.extend(f"  {m.speaker}: {m.content}" for m in turn.messages)
    if session.summary:
        lines.append(f"\nSummary ({session.summary.generated.isoformat()}):")
        lines.append("  " + session.summary.text)
    return "\n".join(lines)


def session_summary(session: SessionInfo) -> dict[str, Any]:
    """The one-line facts ``gitmem list`` shows for a session."""
    return {
        "id": session.id,
        "title": session.title,
        "created": session.created.isoformat(),
        "last_active": session.last_active.isoformat(),
        "participants": list(session.participants),
        "tags": list(session.tags),
        "project": session.project,
        "interactions": session.interactions,
        "summarized": session.summary is not None,
    }


def namespace_name(name: str | None) -> str:
    """A namespace as a line shows it (None: the store's default one)."""
    return "(default)" if name is None else name


def hit_line(rank: int, hit: Hit) -> str:
    """A search hit: rank, score, where it is, then its snippet."""
    where = [hit.session_id] if hit.kind != "fact" else ["fact"]
    where.append(hit.interaction_id or "summary")
    if hit.timestamp is not None:
        where.append(hit.timestamp.date().isoformat())
    if hit.speaker:
        where.append(hit.speaker)
    # pulled in by include_links, after the ranked hits
    ways = [
        name
        for key, name in (("link_out", "linked from a hit"), ("link_in", "links to a hit"))
        if key in hit.components
    ]
    if ways:
        where.append(" & ".join(ways))
    return f"{rank:>3}  {hit.score:6.3f}  {' · '.join(where)}\n       {hit.snippet}"


COMPONENTS = (
    "keyword",
    "expansion",
    "hop",
    "speaker",
    "context",
    "answer",
    "session",
    "summary",
    "fuzzy",
    "temporal",
    "decay",
    "activation",
    "dense",
)


def explain_search(info: dict[str, Any]) -> list[str]:
    """The ``--explain`` table: terms, filters and every candidate's score components."""
    lines = [f"query: {info['query']}"]
    terms = ", ".join(f"{t} ({w})" for t, w in info["terms"].items())
    lines.append(f"terms: {terms or '(none)'}")
    if info["corrections"]:
        lines.append(
            "typo corrections: " + ", ".join(f"{a} -> {b}" for a, b in info["corrections"].items())
        )
    if info["expansion"]:
        lines.append(
            "expansion (from the best first-round turns): "
            + ", ".join(f"{t} ({w})" for t, w in info["expansion"].items())
        )
    if info.get("hop_terms"):
        lines.append(
            "second round (rarest terms of the best turns, other sessions): "
            + ", ".join(info["hop_terms"])
        )
    if info["filters"]:
        lines.append(f"filters: {json.dumps(info['filters'], ensure_ascii=False)}")
    index = info.get("index") or {}
    lines.append(
        f"index: {index.get('documents', 0)} documents at {str(index.get('commit'))[:12]}; "
        f"{info['candidates_scored']} candidates scored, {info['below_min_score']} below "
        f"min_score {info['min_score']}"
    )
    lines.append(
        "score = (keyword + expansion + hop + speaker + context + answer + session + summary"
        " + fuzzy + temporal) x decay x activation"
    )
    rows = info["candidates"]
    used = [c for c in COMPONENTS if any(c in r["components"] for r in rows)]
    if "dense" in used:  # optional embeddings: the order is fused (see search/fusion.py)
        lines.append(
            "with embeddings: score = reciprocal rank fusion of that lexical order "
            "and the dense order (dense = cosine similarity to the query)"
        )
    head = f"{'#':>3} {'score':>7}  {'status':<15}" + "".join(f"{c[:8]:>9}" for c in used)
    lines.append(head + "  session · turn")
    for r in rows:
        cells = "".join(f"{r['components'].get(c, 0.0):9.3f}" for c in used)
        lines.append(
            f"{r['rank']:>3} {r['score']:7.3f}  {r['status']:<15}{cells}  "
            f"{r['session_id']} · {r['interaction_id'] or 'summary'}"
        )
    links = info.get("links")
    if links is not None:  # search --links: every link of the hits' sessions, both ways
        lines.append(
            "links (out: a hit's session links to it; in: it links to a hit's session):"
            if links
            else "links: the hits' sessions have none"
        )
        lines.extend(
            f"  {e['direction']:<3} {e['from']} -> {e['to']}: {e['pulled']}" for e in links
        )
    lines.extend(f"note: {n}" for n in info["notes"])
    return lines


def explain_rerank(info: dict[str, Any]) -> list[str]:
    """What the LLM reranker was asked, what it chose and why, or why it fell back."""
    lines = [
        f"rerank by {info['model'] or '(no model)'}: asked {len(info['asked'])} "
        f"candidates: {', '.join(info['asked']) or '(none)'}"
    ]
    if info["fallback"]:
        lines.append(f"  fell back to the lexical order: {info['fallback']}")
    for at, row in enumerate(info["chosen"], 1):
        lines.append(
            f"{at:>3}  {row['ref']}  ({row['chars']} of {row['original_chars']} "
            f"chars)  {row['why'] or '(no reason given)'}"
        )
    if info["invalid"]:
        lines.append(
            "  ids the model cited that were not candidates (dropped): "
            + ", ".join(repr(i) for i in info["invalid"])
        )
    return lines


def sync_text(result: SyncResult, verb: str) -> str:
    """What a push, pull or sync did."""
    moved = (
        f"{(result.before or 'nothing')[:12]} -> {(result.after or 'nothing')[:12]}"
        if result.before != result.after
        else f"at {(result.after or 'nothing')[:12]}"
    )
    lines = [f"{verb} {result.remote}/{result.branch}: {result.action}, {moved}"]
    if result.files:
        lines.append(f"{len(result.files)} memory file(s) changed")
    lines.extend("note: " + note.describe() for note in result.notes)
    lines.extend(
        f"applied purge {item}: this store's commits were rebuilt on the purged history and "
        "the old objects dropped"
        for item in result.purges
    )
    lines.extend(
        f"warning: secret from the remote: {item} (see `gitmem scan`)" for item in result.secrets
    )
    if verb == "sync":
        lines.append("pushed" if result.pushed else "remote already up to date")
    return "\n".join(lines)


def rev_line(rev: Revision) -> str:
    """One audit-log line: sha, time, who (and model), op, subject."""
    who = rev.agent or rev.author
    if rev.model:
        who += f" ({rev.model})"
    return f"{rev.sha[:12]}  {rev.time.isoformat()}  {who}  {rev.op or '-'}  {rev.subject}"


def structured(diff: SessionDiff) -> list[str]:
    """A structured session diff: interactions, metadata keys and summary changed."""
    lines = [f"{diff.session_id} ({diff.status})"]
    lines += [f"  + interaction {i}" for i in diff.interactions_added]
    lines += [f"  - interaction {i}" for i in diff.interactions_removed]
    lines += [f"  ~ interaction {i}" for i in diff.interactions_changed]
    for key, change in diff.metadata.items():
        lines.append(f"  ~ {key}: {change.old!r} -> {change.new!r}")
    if diff.summary is not None:
        lines.append(f"  ~ summary\n    old: {diff.summary.old!r}\n    new: {diff.summary.new!r}")
    lines += [f"  ! {problem}" for problem in diff.problems]
    return lines


def outcome_lines(outcomes: Iterable[SummaryOutcome]) -> list[str]:
    """One human line per outcome (for the CLI)."""
    lines = []
    for item in outcomes:
        head = f"{item.session_id}: {item.status}"
        if item.commit:
            head += f" {item.commit[:12]}"
        lines.append(f"{head} ({item.trigger}{'; ' + item.error if item.error else ''})")
    return lines
