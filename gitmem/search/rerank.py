"""The optional LLM reranker / condenser of ``retrieve_context(rerank=True)``.

The lexical ranking proposes the top N candidates; the configured chat model (asked through
``Summaries.ask_json``) chooses the ones that matter
for the query, in its own order, and condenses each to what matters. The memories keep their
source (session, turn, date), so citations survive; a condensed text is never longer than
the memory it replaces, and the budget assembly (:mod:`gitmem.search.context`) still has the
last word on tokens.

The model is an optional helper, never a point of failure: no LLM configured, an HTTP error
or timeout, an answer that is not JSON or not the expected shape, ids that name no candidate
(dropped, listed) with nothing valid left, or an empty choice, all give back the lexical
memories unchanged, with the reason in the explanation. An empty choice counts as a failure
on purpose: it cannot be told apart from a model that did not follow the format, and
dropping every memory on one model's word loses more than a few weak memories cost.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gitmem.errors import GitmemError
from gitmem.search.context import Memory

# the hook that asks the model: (system, user) -> (content, model), None when offline
AskJson = Callable[[str, str], tuple[str, str] | None]

# each candidate's text is cut to this in the prompt, the query to QUERY_CHARS, and the
# whole prompt stays under PROMPT_CHARS (the candidates that would pass it are not asked)
CANDIDATE_CHARS = 700
QUERY_CHARS = 1000
PROMPT_CHARS = 16000
# seconds the model gets, with no retry: context assembly is interactive, and the summaries'
# budget (60 s, three tries) would hold an agent's turn for minutes
TIMEOUT = 20.0
# a reason longer than this is cut in the explanation
WHY_CHARS = 200

SYSTEM = """\
You select memories for an assistant. Given a query and numbered candidate memories from \
past conversations, choose the candidates that help answer or continue the query, most \
useful first, and condense each to only what matters for the query (keep names, dates, \
numbers and the speaker's words; never add facts). Leave out candidates that do not help.
Answer with one JSON object and nothing else:
{"chosen": [{"id": "<candidate id exactly as given>", "text": "<condensed memory>", \
"why": "<short reason>"}]}"""


@dataclass
class Reranked:
    """What the reranker did, for ``--explain``: the memories to use, and why."""

    memories: list[Memory]
    model: str | None = None
    asked: list[str] = field(default_factory=list)
    chosen: list[dict[str, Any]] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    fallback: str | None = None

    def explanation(self) -> dict[str, Any]:
        """A JSON-ready account: model, candidate ids asked, the choice, the rest."""
        return {
            "model": self.model,
            "asked": self.asked,
            "chosen": self.chosen,
            "invalid": self.invalid,
            "fallback": self.fallback,
        }


def reference(memory: Memory, taken: set[str]) -> str:
    """The short stable id a candidate goes by in the prompt: its interaction id
    (``summary:<session>`` for a summary), ``<session>#<turn>`` when that id is taken."""
    short = memory.interaction_id or f"summary:{memory.session_id}"
    return short if short not in taken else f"{memory.session_id}#{short}"


def prompt(query: str, refs: Sequence[tuple[str, Memory]]) -> tuple[str, list[str]]:
    """The user message (query, then each candidate under its id) and the ids it holds:
    each text cut to ``CANDIDATE_CHARS``, the whole under ``PROMPT_CHARS``."""
    query = " ".join(query.split())
    if len(query) > QUERY_CHARS:
        query = query[:QUERY_CHARS] + "…"
    out = f"Query: {query}\n\nCandidates:\n"
    asked: list[str] = []
    for ref, memory in refs:
        text = " ".join(memory.text.split())
        if len(text) > CANDIDATE_CHARS:
            text = text[:CANDIDATE_CHARS] + "…"
        when = f", {memory.timestamp.date().isoformat()}" if memory.timestamp else ""
        block = f"\n[{ref}] (session {memory.session_id}{when})\n{text}\n"
        if len(out) + len(block) > PROMPT_CHARS:
            break
        out += block
        asked.append(ref)
    return out, asked


def condense(original: str, condensed: Any) -> str:
    """The condensed text, never longer than ``original`` (cut to its length); an empty or
    non-text answer keeps the original."""
    if not isinstance(condensed, str) or not condensed.strip():
        return original
    text = " ".join(condensed.split())
    return text if len(text) <= len(original) else text[: max(len(original) - 1, 0)] + "…"


def rerank(
    ask: AskJson, query: str, lexical: Sequence[Memory], candidates: Sequence[Memory], k: int
) -> Reranked:
    """At most ``k`` memories that the model chose from ``candidates`` (condensed, in its
    order), or ``lexical`` unchanged with ``fallback`` saying why (module docs)."""
    result = Reranked(list(lexical))
    refs: list[tuple[str, Memory]] = []
    taken: set[str] = set()
    for memory in candidates:
        ref = reference(memory, taken)
        taken.add(ref)
        refs.append((ref, memory))
    if not refs:
        result.fallback = "no candidates to rerank"
        return result
    user, result.asked = prompt(query, refs)
    asked = set(result.asked)
    by_ref = {ref: memory for ref, memory in refs if ref in asked}
    # the model may cite a turn as ``session#turn`` (how citations read) instead
    by_ref.update({memory.ref: memory for memory in list(by_ref.values())})
    try:
        answer = ask(SYSTEM, user)
    except GitmemError as exc:
        result.fallback = f"the model failed: {exc}"
        return result
    if answer is None:
        result.fallback = "no LLM configured (GITMEM_LLM_BASE_URL / _MODEL, or OPENAI_*)"
        return result
    content, result.model = answer
    rows = _rows(content)
    if isinstance(rows, str):
        result.fallback = rows
        return result
    chosen: list[Memory] = []
    seen: set[str] = set()
    for row in rows:
        ref = str(row.get("id", "")).strip()
        found = by_ref.get(ref)
        if found is None:
            result.invalid.append(ref[:80])
            continue
        memory = found
        if memory.ref in seen or len(chosen) >= k:
            continue
        seen.add(memory.ref)
        text = condense(memory.text, row.get("text"))
        chosen.append(replace(memory, text=text))
        why = " ".join(str(row.get("why") or "").split())
        result.chosen.append(
            {
                "id": ref,
                "ref": memory.ref,
                "why": why[:WHY_CHARS],
                "chars": len(text),
                "original_chars": len(memory.text),
            }
        )
    if not chosen:
        result.chosen = []
        result.fallback = (
            "the model cited no candidate it was given"
            if result.invalid
            else "the model chose no candidate"
        )
        return result
    result.memories = chosen
    return result


def _rows(content: str) -> list[dict[str, Any]] | str:
    """The ``chosen`` rows of the answer, or why the answer has none (a fallback reason)."""
    try:
        data = json.loads(content)
    except ValueError:
        return f"the answer is not JSON: {' '.join(content.split())[:80]!r}"
    rows = data.get("chosen") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return 'the answer is not {"chosen": [{"id", "text", "why"}, ...]}'
    if not rows:
        return "the model chose no candidate"
    return rows
