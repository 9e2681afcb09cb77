"""The summarizers: the ``Summarizer`` protocol, the LLM one, the offline default.

:class:`LLMSummarizer` talks Chat Completions (through :mod:`gitmem.llm.chat`) to OpenAI or
any compatible server (Ollama, vLLM, llama.cpp, LM Studio) and asks for a structured answer,
degrading from JSON-schema output to JSON mode, to JSON requested in the prompt, to plain
text as servers refuse a mode. When the call fails it falls back to
:class:`ExtractiveSummarizer` (offline, deterministic) and says why in the result, which the
summary commit records. Nothing here writes to the store.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from gitmem.llm.chat import ChatClient, ChatFailure
from gitmem.llm.config import BUDGET_HINT, MODES, LLMConfig
from gitmem.models import (
    Interaction,
    ModelValidationError,
    StructuredSummary,
    Summary,
    describe_errors,
)
from gitmem.summary.extractive import (
    EXTRACTIVE_MODEL,
    SummaryExtractor,
)
from gitmem.text import json_in
from gitmem.text.voice import role_prefix, statement_problem

JSON_INSTRUCTION = """Answer with only a JSON object, no prose and no code fence, of the form \
{"summary": "<the bullet points as one string>", "key_facts": ["..."], "entities": ["..."], \
"tags": ["..."]}."""

SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "description": "bullet points, one per line"},
        "key_facts": {"type": "array", "items": {"type": "string"}},
        "entities": {"type": "array", "items": {"type": "string"}},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["summary", "key_facts", "entities", "tags"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class SummaryResult:
    """A summarizer's answer and how it was obtained.

    Attributes:
        content: summary text, key facts, entities and tags.
        model: what produced it (the LLM's model name, or ``gitmem-extractive``).
        covers: ids of the interactions the summary covers (the input may be cut to fit).
        mode: ``json_schema``, ``json_object``, ``prompt_json``, ``text`` or ``extractive``.
        fallback: why the LLM was not used (None when it was, or was never configured).
        attempts: one line per request made, for reports and debugging.
    """

    content: StructuredSummary
    model: str
    covers: tuple[str, ...]
    mode: str
    fallback: str | None = None
    attempts: tuple[str, ...] = ()


class Summarizer(Protocol):
    """Anything that turns interactions (plus the previous summary) into a summary."""

    name: str

    def summarize(
        self, turns: Sequence[Interaction], *, previous: Summary | None = None
    ) -> SummaryResult:
        """Summarize ``turns``, continuing ``previous`` (the session's current summary)."""
        ...


class ExtractiveSummarizer(SummaryExtractor):
    """The offline default: deterministic, no network (see
    :class:`~gitmem.summary.extractive.SummaryExtractor`)."""

    def summarize(
        self, turns: Sequence[Interaction], *, previous: Summary | None = None
    ) -> SummaryResult:
        """Summarize ``turns``, carrying the previous summary's facts forward."""
        return SummaryResult(
            content=self.structured(turns, previous),
            model=EXTRACTIVE_MODEL,
            covers=tuple(t.id for t in turns),
            mode="extractive",
        )


class _Unusable(Exception):
    """The answer arrived but cannot be used in this mode (not JSON, wrong shape, empty)."""


# Bounds on an LLM's answer: a summary is read on every ``context`` call, so a runaway
# answer (megabytes, tens of thousands of "facts") is refused and the offline summary used.
MAX_ANSWER_CHARS = 100_000
MAX_SUMMARY_CHARS = 20_000
MAX_KEY_FACTS = 100
MAX_ENTITIES = 100


def _usable(found: StructuredSummary) -> StructuredSummary:
    """``found`` if it is within the bounds above; raises ``_Unusable`` naming the excess."""
    if len(found.summary) > MAX_SUMMARY_CHARS:
        raise _Unusable(
            f"the summary text is too long ({len(found.summary):,} characters; at "
            f"most {MAX_SUMMARY_CHARS:,})"
        )
    for name, items, most in (
        ("key facts", found.key_facts, MAX_KEY_FACTS),
        ("entities", found.entities, MAX_ENTITIES),
    ):
        if len(items) > most:
            raise _Unusable(f"the answer has too many {name} ({len(items):,}; at most {most})")
    return found


def _written_as_notes(found: StructuredSummary, speakers: Iterable[str]) -> None:
    """Raises ``_Unusable`` when a summary is not written as notes: a line that starts with a
    role or speaker label (a transcript line), a key fact that is a question, so labelled
    or in the first person (the rules the offline summaries and facts follow)."""
    for at, line in enumerate(found.summary.splitlines(), 1):
        label = role_prefix(line, speakers)
        if label is not None:
            raise _Unusable(f"summary line {at} starts with the speaker label {label!r}")
    for at, fact in enumerate(found.key_facts, 1):
        problem = statement_problem(fact, speakers)
        if problem is not None:
            raise _Unusable(f"key fact {at} is {problem}")


def _transcript(turns: Sequence[Interaction]) -> list[str]:
    out = []
    for turn in turns:
        lines = [f"[{turn.id}] {turn.timestamp.isoformat()}"]
        lines.extend(f"{m.speaker}: {m.content}" for m in turn.messages)
        out.append("\n".join(lines))
    return out


def _json_object(text: str) -> Any:
    try:
        return json_in(text)
    except ValueError:
        raise _Unusable("the answer is not valid JSON") from None


def _from_text(text: str) -> StructuredSummary:
    """A structured summary from a plain-text answer: bullet lines become key facts."""
    facts = []
    for line in text.splitlines():
        stripped = line.strip()
        marker = re.match(r"(?:[-*•+]|\d{1,3}[.)])\s+", stripped)
        if marker and not stripped.endswith(":"):
            facts.append(stripped[marker.end() :])
    return StructuredSummary(
        summary=text, key_facts=facts, entities=SummaryExtractor().keywords(text)
    )


class LLMSummarizer:
    """Summaries from an OpenAI-compatible Chat Completions server.

    Args:
        config: server, model and prompt settings (see :meth:`LLMConfig.from_env`).
        fallback: used when the server cannot be reached or gives nothing usable; the
            result names the reason. Default: :class:`ExtractiveSummarizer`.
        client: the chat client to use instead of building one from ``config``.
    """

    def __init__(
        self,
        config: LLMConfig,
        *,
        fallback: Summarizer | None = None,
        client: ChatClient | None = None,
    ) -> None:
        self.config = config
        self.name = config.model
        self.fallback: Summarizer = fallback or ExtractiveSummarizer()
        self.client = client or ChatClient(config)
        # modes a server rejected are skipped on later calls of this summarizer
        self._first_mode = 0

    def fit(self, turns: Sequence[Interaction]) -> tuple[list[Interaction], list[str]]:
        """The oldest turns whose transcript fits ``max_input_chars`` (at least one)."""
        kept: list[Interaction] = []
        parts: list[str] = []
        used = 0
        for turn, text in zip(turns, _transcript(turns), strict=True):
            if kept and used + len(text) > self.config.max_input_chars:
                break
            if not kept and len(text) > self.config.max_input_chars:
                text = text[: self.config.max_input_chars] + "\n[... cut]"
            kept.append(turn)
            parts.append(text)
            used += len(text) + 2
        return kept, parts

    def messages(self, transcript: Sequence[str], previous: Summary | None, mode: str) -> list[Any]:
        """The chat messages sent for ``mode``."""
        if previous is None:
            before = "(none)"
        else:
            before = previous.text.strip()
            extra = [f for f in previous.facts if f not in before]
            if extra:
                before += "\nKey facts:\n" + "\n".join(f"- {f}" for f in extra)
        prompt = (
            self.config.prompt.replace("{conversation}", "\n\n".join(transcript))
            .replace("{previous}", before)
            .replace("{max_bullets}", str(self.config.max_bullets))
        )
        system = self.config.system
        if mode in ("json_object", "prompt_json"):
            system = f"{system}\n\n{JSON_INSTRUCTION}"
        elif mode == "json_schema":
            system = f"{system}\n\nAnswer in the JSON format given."
        return [{"role": "system", "content": system}, {"role": "user", "content": prompt}]

    def _ask(self, mode: str, messages: list[Any]) -> str:
        response_format: dict[str, Any] | None = None
        if mode == "json_schema":
            response_format = {
                "type": "json_schema",
                "json_schema": {
                    "name": "conversation_summary",
                    "strict": True,
                    "schema": SUMMARY_SCHEMA,
                },
            }
        elif mode == "json_object":
            response_format = {"type": "json_object"}
        content = self.client.complete(
            messages,
            temperature=self.config.temperature,
            max_tokens=self.config.max_tokens,
            response_format=response_format,
        )
        if content is None:
            raise _Unusable("the answer has no message")
        if not content.strip():
            raise _Unusable("the answer is empty")
        return content

    @staticmethod
    def _parse(mode: str, content: str) -> StructuredSummary:
        if len(content) > MAX_ANSWER_CHARS:
            raise _Unusable(
                f"the answer is too large ({len(content):,} characters; at most "
                f"{MAX_ANSWER_CHARS:,})"
            )
        if mode != "text":
            try:
                return _usable(StructuredSummary.model_validate(_json_object(content)))
            except ModelValidationError as exc:  # recorded in the commit: no pydantic wording
                raise _Unusable(
                    f"the JSON answer does not fit the schema ({describe_errors(exc)})"
                ) from None
        stripped = content.strip()
        if stripped.startswith(("{", "```")):
            try:
                found = StructuredSummary.model_validate(_json_object(stripped))
            except (ValueError, _Unusable):
                raise _Unusable("the answer looks like broken JSON") from None
            return _usable(found)
        try:
            value = json.loads(stripped)
        except ValueError:
            pass  # plain text, as asked
        else:  # "[1, 2, 3]", "42", "null": JSON, but not a summary
            raise _Unusable(f"the answer is a JSON {type(value).__name__}, not a summary")
        return _usable(_from_text(stripped))

    def summarize(
        self, turns: Sequence[Interaction], *, previous: Summary | None = None
    ) -> SummaryResult:
        """Ask the server for a summary of ``turns``; fall back (recorded) when it fails."""
        kept, transcript = self.fit(turns)
        speakers = {m.speaker for t in kept for m in t.messages}
        attempts: list[str] = []
        modes = [m for m in self.config.modes if m in MODES]
        reason = "no output mode configured"
        index = min(self._first_mode, max(len(modes) - 1, 0))
        while index < len(modes):
            mode = modes[index]
            index += 1
            started = time.perf_counter()
            try:
                content = self._ask(mode, self.messages(transcript, previous, mode))
                parsed = self._parse(mode, content)
                _written_as_notes(parsed, speakers)
            except ChatFailure as failure:
                if failure.kind == "refused":
                    reason = f"{mode}: HTTP {failure.status_code} ({failure.detail})"
                    attempts.append(reason)
                    self._first_mode = index  # the server does not support this mode
                    continue
                reason = self._failure(failure, started)
                attempts.append(f"{mode}: {reason}")
                break
            except _Unusable as exc:
                reason = f"{mode}: {exc}"
                attempts.append(reason)
                # a model that garbles JSON is best asked for plain text next
                if "text" in modes[index:]:
                    index = modes.index("text", index)
                continue
            attempts.append(f"{mode}: ok in {time.perf_counter() - started:.2f}s")
            return SummaryResult(
                content=parsed,
                model=self.config.model,
                covers=tuple(t.id for t in kept),
                mode=mode,
                attempts=tuple(attempts),
            )
        result = self.fallback.summarize(turns, previous=previous)
        return replace(
            result,
            fallback=f"LLM {self.config.model}: {reason}",
            attempts=(*attempts, *result.attempts),
        )

    def _failure(self, failure: ChatFailure, started: float) -> str:
        """Why a request failed, for the summary commit's ``Gitmem-Fallback``."""
        if failure.kind == "status":
            return f"HTTP {failure.status_code} from {self.client.where} ({failure.detail})"
        if failure.kind == "timeout":
            tries = self.config.max_retries + 1
            return (
                f"no answer from {self.client.where} in {time.perf_counter() - started:.1f}s: "
                f"{tries} attempt{'s' if tries > 1 else ''} timed out after "
                f"{self.config.timeout:g}s each ({BUDGET_HINT})"
            )
        if failure.kind == "connection":
            return f"cannot reach {self.client.where} ({failure.detail})"
        return f"{failure.error}: {failure.detail}"


def default_summarizer(config: LLMConfig | None = None, *, offline: bool = False) -> Summarizer:
    """The LLM summarizer when one is configured (``config`` or the environment), else the
    offline extractive one; ``offline=True`` forces the latter."""
    if offline:
        return ExtractiveSummarizer()
    config = config or LLMConfig.from_env()
    return ExtractiveSummarizer() if config is None else LLMSummarizer(config)


MANUAL, TURNS, TOPIC_SHIFT, IDLE = "manual", "turn-threshold", "topic-shift", "idle"
