"""Context assembly: chat messages for the ``openai`` client, never over a token budget.

The messages come in a fixed order: what the agent knows (the curated facts, one system
message "What you know", each fact with its id), the current session's summary (a system message),
its most recent turns as they were spoken (user/assistant roles; other speakers keep
their name in front), then one system message with the memories retrieved from other
sessions, each line naming its source session, turn and date. When the budget is tight,
room is given out in priority order: summary, the newest turn, more recent turns (up to
``recent_share`` of the budget), then memories by rank; whatever does not fit is listed
as cut, with the reason, for ``--explain``. The facts come before all of that but get at
most ``facts_share`` of the budget, and only those that matter here: the pinned ones, the
query's matches best first, and those learned from this session. Any other fact stays out
however small the file, and ``--explain`` says why each fact came or stayed out.

Token counting is pluggable (:class:`TokenCounter`): a built-in estimate by default, or
``tiktoken`` when it is installed and its encoding file is already on disk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gitmem.facts.factindex import WeighedFact
from gitmem.models import Session
from gitmem.search.tokens import TokenCounter

# role, name and separators that the chat format adds to every message
MESSAGE_OVERHEAD = 4


@dataclass(frozen=True)
class Memory:
    """A retrieved memory to place in the context."""

    session_id: str
    interaction_id: str | None
    kind: str
    timestamp: datetime | None
    text: str
    score: float
    same_session: bool = False
    why: str = ""  # why it comes, for ``--explain``

    @property
    def ref(self) -> str:
        """``session#interaction`` (or ``session#summary``): names the memory in explanations."""
        return f"{self.session_id}#{self.interaction_id or self.kind}"

    def line(self) -> str:
        """The memory as one line naming its source."""
        where = [self.session_id if not self.same_session else "earlier in this session"]
        if self.interaction_id:
            where.append(f"turn {self.interaction_id}")
        elif self.kind == "summary":
            where.append("summary")
        if self.timestamp is not None:
            where.append(self.timestamp.date().isoformat())
        return f"- [{' · '.join(where)}] " + " ".join(self.text.split())


def _why(fact: WeighedFact) -> str:
    """Why a fact goes first, for ``--explain`` (:data:`NOT_RELEVANT` when it may not)."""
    reasons = ["pinned"] if fact.pinned else []
    reasons += [f"matched: {', '.join(fact.matched)}"] if fact.score > 0 else []
    reasons += ["from this session"] if fact.from_session else []
    return "; ".join(reasons) or NOT_RELEVANT


def _fact_line(fact: WeighedFact) -> str:
    """The fact as one bullet ending with its id."""
    return f"- {' '.join(fact.text.split())} [{fact.fact_id}]"


@dataclass
class Piece:
    """One candidate part of the context with its cost and fate."""

    source: str
    role: str
    content: str
    tokens: int
    ref: str = ""
    reason: str = ""  # why it was cut (for a fact: also why it came)


@dataclass
class ContextPlan:
    """The assembled messages plus what ``--explain`` shows about the budget."""

    budget: int
    counter: str
    messages: list[dict[str, str]] = field(default_factory=list)
    included: list[Piece] = field(default_factory=list)
    cut: list[Piece] = field(default_factory=list)
    used: int = 0

    def explanation(self) -> dict[str, Any]:
        """A JSON-ready account of the budget decisions."""

        def row(p: Piece) -> dict[str, Any]:
            out: dict[str, Any] = {"source": p.source, "ref": p.ref, "tokens": p.tokens}
            if p.reason:
                out["reason"] = p.reason
            return out

        return {
            "budget": self.budget,
            "used": self.used,
            "counter": self.counter,
            "included": [row(p) for p in self.included],
            "cut": [row(p) for p in self.cut],
        }


NOT_RELEVANT = "not relevant to the query (not pinned, not from this session)"
OVER_SHARE = "over the facts' share of the budget"
MEMORY_HEADER = "Relevant memories from other conversations (most relevant first):"
FACTS_HEADER = "What you know (curated facts, each with its id in brackets):"


def _speaker_content(speaker: str, role: str, content: str) -> str:
    if speaker.casefold() in (role, "user", "assistant", "system", "用户", "助手", "系统"):
        return content
    return f"{speaker}: {content}"


def truncate(text: str, tokens: int, counter: TokenCounter) -> str:
    """The longest prefix of ``text`` (plus "…") that counts at most ``tokens``."""
    if counter.count(text) <= tokens:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count(text[:mid] + "…") <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo] + "…" if lo else ""


def assemble(  # noqa: C901
    session: Session | None,
    memories: Sequence[Memory],
    max_tokens: int,
    counter: TokenCounter,
    *,
    recent_turns: int = 8,
    recent_share: float = 0.5,
    summary_share: float = 0.25,
    facts: Sequence[WeighedFact] = (),
    facts_share: float = 0.3,
) -> ContextPlan:
    """Fit the facts, the current session and the memories into ``max_tokens`` (see module
    docs); ``facts`` come in priority order, the relevant ones first."""
    plan = ContextPlan(max_tokens, counter.name)
    known = _pick_facts(plan, facts, min(int(max_tokens * facts_share), max_tokens), counter)
    left = max_tokens - (_facts_cost(known, counter) if known else 0)

    def take(piece: Piece) -> bool:
        nonlocal left
        if piece.tokens <= left:
            left -= piece.tokens
            plan.included.append(piece)
            return True
        piece.reason = "over budget"
        plan.cut.append(piece)
        return False

    summary_piece: Piece | None = None
    if session is not None and session.summary is not None and session.summary.text.strip():
        text = f"Summary of this conversation so far (session {session.id}):\n"
        text += session.summary.text.strip()
        cap = max(int(max_tokens * summary_share), 0) - MESSAGE_OVERHEAD
        if counter.count(text) > cap:
            text = truncate(text, cap, counter)
        if text:
            summary_piece = Piece(
                "summary", "system", text, counter.count(text) + MESSAGE_OVERHEAD, session.id
            )
            take(summary_piece)

    recent: list[Piece] = []
    if session is not None:
        turns = session.interactions[-recent_turns:] if recent_turns > 0 else []
        budget = max(int(max_tokens * recent_share), 0)
        spent = 0
        full = False  # once a turn does not fit, older ones stay out too: no gaps
        for rank, item in enumerate(reversed(turns)):
            parts = [
                Piece("recent", m.role, _speaker_content(m.speaker, m.role, m.content), 0, item.id)
                for m in item.messages
            ]
            for part in parts:
                part.tokens = counter.count(part.content) + MESSAGE_OVERHEAD
            cost = sum(p.tokens for p in parts)
            if rank == 0 and cost > left:  # the newest turn is cut short rather than lost
                for part in parts:
                    room = max(left // max(len(parts), 1) - MESSAGE_OVERHEAD, 0)
                    part.content = truncate(part.content, room, counter)
                    part.tokens = counter.count(part.content) + MESSAGE_OVERHEAD
                parts = [p for p in parts if p.content]
                cost = sum(p.tokens for p in parts)
            full = full or (rank > 0 and spent + cost > budget) or cost > left or not parts
            if full:
                for part in parts:
                    part.reason = "over budget"
                plan.cut.extend(parts)
                continue
            for part in parts:
                take(part)
            spent += cost
            recent[:0] = parts

    header = counter.count(MEMORY_HEADER) + MESSAGE_OVERHEAD
    chosen: list[Piece] = []
    for memory in memories:
        line = memory.line()
        piece = Piece("memory", "system", line, counter.count(line) + 1, memory.ref)
        need = piece.tokens + (header if not chosen else 0)
        if need <= left:
            piece.reason = memory.why
            left -= need
            plan.included.append(piece)
            chosen.append(piece)
        else:
            piece.reason = "over budget"
            plan.cut.append(piece)

    def render() -> list[dict[str, str]]:
        messages = []
        if known:
            body = FACTS_HEADER + "\n" + "\n".join(p.content for p in known)
            messages.append({"role": "system", "content": body})
        if summary_piece is not None and summary_piece in plan.included:
            messages.append({"role": "system", "content": summary_piece.content})
        messages.extend({"role": p.role, "content": p.content} for p in recent)
        if chosen:
            body = MEMORY_HEADER + "\n" + "\n".join(p.content for p in chosen)
            messages.append({"role": "system", "content": body})
        return messages

    def measure(messages: list[dict[str, str]]) -> int:
        return sum(counter.count(m["content"]) + MESSAGE_OVERHEAD for m in messages)

    plan.messages = render()
    plan.used = measure(plan.messages)
    # a tokenizer may count joined text differently from its parts: drop until it fits
    while plan.used > max_tokens and (chosen or known or recent):
        victim = chosen.pop() if chosen else known.pop() if known else recent.pop(0)
        plan.included.remove(victim)
        victim.reason = "over budget"
        plan.cut.append(victim)
        plan.messages = render()
        plan.used = measure(plan.messages)
    return plan


def _facts_cost(pieces: Sequence[Piece], counter: TokenCounter) -> int:
    return counter.count(FACTS_HEADER) + MESSAGE_OVERHEAD + sum(p.tokens for p in pieces)


def _pick_facts(
    plan: ContextPlan, facts: Sequence[WeighedFact], room: int, counter: TokenCounter
) -> list[Piece]:
    """The facts that go first: the relevant ones (pinned, matching the query, from this
    session), in the order given, while they fit in ``room`` tokens. Each says why it came
    or stayed out."""
    spent = _facts_cost([], counter)
    kept: list[Piece] = []
    for fact in facts:
        line = _fact_line(fact)
        piece = Piece("fact", "system", line, counter.count(line) + 1, fact.fact_id)
        why = _why(fact)
        if why == NOT_RELEVANT:
            piece.reason = NOT_RELEVANT
        elif spent + piece.tokens > room:
            piece.reason = OVER_SHARE
        else:
            spent += piece.tokens
            piece.reason = why
            kept.append(piece)
            plan.included.append(piece)
            continue
        plan.cut.append(piece)
    return kept
