"""The summarizers: the ``Summarizer`` protocol, the LLM one, the offline default, and
their settings (``LLMConfig``, the trigger names).

This is the only module that imports ``openai``. :class:`LLMSummarizer` talks Chat
Completions to OpenAI or any compatible server (Ollama, vLLM, llama.cpp, LM Studio) and
asks for a structured answer, degrading from JSON-schema output to JSON mode, to JSON
requested in the prompt, to plain text as servers refuse a mode. When the call fails it
falls back to :class:`ExtractiveSummarizer` (offline, deterministic) and says why in the
result, which the summary commit records. Nothing here writes to the store.
"""

from __future__ import annotations

import functools
import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from gitmem.errors import ConfigError, GitmemError
from gitmem.models import (
    Interaction,
    ModelValidationError,
    StructuredSummary,
    Summary,
    describe_errors,
)
from gitmem.store.config import parse_float, parse_int, unknown_key
from gitmem.summary.extractive import (
    EXTRACTIVE_MODEL,
    SummaryExtractor,
)
from gitmem.text import json_in

if TYPE_CHECKING:
    import openai  # imported when first used: it takes ~0.4 s, too slow for every CLI call


MODES = ("json_schema", "json_object", "prompt_json", "text")

DEFAULT_MODEL = "gpt-4o-mini"

SYSTEM_PROMPT = """You write the long-term memory of an AI assistant: concise, factual \
summaries of conversations. Never invent facts; keep names, dates, numbers, preferences and \
decisions exactly as stated. Write in the language of the conversation."""

DEFAULT_PROMPT = """Summarize the conversation below for long-term memory.

Previous summary (keep every fact from it that is still true):
{previous}

Conversation turns to add:
{conversation}

Write the summary as at most {max_bullets} short bullet points under these headings, leaving \
out a heading with nothing under it:
User's needs:
Resolved:
Open items:
Also list the key facts worth remembering (one short, self-contained fact each, including the \
still-true facts of the previous summary), the people/places/products/projects named \
(entities), and at most 5 short lowercase topic tags."""

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


def _env(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(f"GITMEM_LLM_{name}") or env.get(f"OPENAI_{name}")
    return value.strip() if value and value.strip() else None


@dataclass(frozen=True)
class LLMConfig:
    """How to reach an OpenAI-compatible Chat Completions server and what to ask it.

    Attributes:
        model: model name (``gpt-4o-mini``, ``llama3.1:8b``, ...).
        base_url: server URL ending in ``/v1``; None means OpenAI's own.
        api_key: the key; local servers usually need none (a placeholder is sent).
        timeout: seconds per request.
        max_retries: retries on connection errors, 408/409/429 and 5xx (with backoff).
        temperature: sampling temperature; low keeps summaries faithful.
        max_tokens: cap on the answer's length.
        prompt: user-message template; ``{conversation}``, ``{previous}`` and
            ``{max_bullets}`` are replaced (other braces are left alone).
        system: system message.
        max_bullets: bound on the summary's bullet points.
        max_input_chars: the transcript sent is cut (oldest turns first kept) to this size;
            the turns left out stay uncovered for the next summary.
        modes: output modes to try, best first.
    """

    model: str = DEFAULT_MODEL
    base_url: str | None = None
    api_key: str | None = None
    timeout: float = 60.0
    max_retries: int = 2
    temperature: float = 0.1
    max_tokens: int = 1200
    prompt: str = DEFAULT_PROMPT
    system: str = SYSTEM_PROMPT
    max_bullets: int = 8
    max_input_chars: int = 48_000
    modes: tuple[str, ...] = MODES

    def __post_init__(self) -> None:
        refuse_credentials(self.base_url, "GITMEM_LLM_BASE_URL")

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        git: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> LLMConfig | None:
        """The configuration from ``GITMEM_LLM_BASE_URL`` / ``_API_KEY`` / ``_MODEL``, each
        falling back to ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``OPENAI_MODEL``, with
        ``overrides`` on top; None when none of them is set (then gitmem stays offline).

        ``GITMEM_LLM_TIMEOUT`` (seconds per request) and ``GITMEM_LLM_RETRIES`` set the
        request budget; ``git`` holds the store's ``gitmem.llm.*`` values (``timeout``,
        ``retries``), which the variables override.

        Raises:
            ConfigError: a timeout or retry count that is not a number in range.
        """
        env = os.environ if env is None else env
        found = {
            "base_url": _env(env, "BASE_URL"),
            "api_key": _env(env, "API_KEY"),
            "model": _env(env, "MODEL"),
        }
        settings: dict[str, Any] = {k: v for k, v in found.items() if v is not None}
        settings.update(llm_budget(env, git or {}))
        settings.update({k: v for k, v in overrides.items() if v is not None})
        if not any(settings.get(k) for k in ("base_url", "api_key", "model")):
            return None
        return cls(**settings)

    @property
    def worst_case_seconds(self) -> float:
        """How long one request may block at most: every attempt timing out, plus the
        ``openai`` client's backoff between retries (0.5 s doubling, at most 8 s each)."""
        backoff = sum(min(0.5 * 2.0**n, 8.0) for n in range(self.max_retries))
        return self.timeout * (self.max_retries + 1) + backoff


LLM_KEYS = ("timeout", "retries")

_BUDGET_HINT = "set GITMEM_LLM_TIMEOUT/_RETRIES or git config gitmem.llm.timeout/retries"


def llm_budget(env: Mapping[str, str], git: Mapping[str, str]) -> dict[str, Any]:
    """``timeout`` and ``max_retries`` from ``gitmem.llm.*`` git values, then from the
    ``GITMEM_LLM_TIMEOUT`` / ``GITMEM_LLM_RETRIES`` variables (checked: 0.1-3600 s, 0-10)."""
    settings: dict[str, Any] = {}
    sources = [(f"gitmem.llm.{k.rsplit('.', 1)[-1].lower()}", v) for k, v in git.items()]
    sources += [
        (name, env[name])
        for name in ("GITMEM_LLM_TIMEOUT", "GITMEM_LLM_RETRIES")
        if env.get(name, "").strip()
    ]
    for key, value in sources:
        what = key.rsplit(".", 1)[-1].rsplit("_", 1)[-1].lower()
        if what == "timeout":
            settings["timeout"] = parse_float(key, value, 0.1, 3600)
        elif what == "retries":
            settings["max_retries"] = parse_int(key, value, 0, 10)
        else:
            raise unknown_key(key, LLM_KEYS)
    return settings


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
        client: an ``openai.OpenAI`` client to use instead of building one from ``config``.
    """

    def __init__(
        self,
        config: LLMConfig,
        *,
        fallback: Summarizer | None = None,
        client: openai.OpenAI | None = None,
    ) -> None:
        self.config = config
        self.name = config.model
        self.fallback: Summarizer = fallback or ExtractiveSummarizer()
        self._client = client
        # modes a server rejected are skipped on later calls of this summarizer
        self._first_mode = 0

    @property
    def client(self) -> openai.OpenAI:
        """The ``openai`` client (built on first use)."""
        if self._client is None:
            import openai

            self._client = openai.OpenAI(
                api_key=self.config.api_key or "not-needed",
                base_url=self.config.base_url,
                timeout=self.config.timeout,
                max_retries=self.config.max_retries,
            )
        return self._client

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
        extra: dict[str, Any] = {}
        if mode == "json_schema":
            extra["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": "conversation_summary",
                    "strict": True,
                    "schema": SUMMARY_SCHEMA,
                },
            }
        elif mode == "json_object":
            extra["response_format"] = {"type": "json_object"}
        reply = self.client.chat.completions.create(
            model=self.config.model,
            messages=messages,
            temperature=self.config.temperature,
            max_tokens=self.config.max_tokens,
            **extra,
        )
        try:
            content = reply.choices[0].message.content
        except (AttributeError, IndexError, TypeError):
            raise _Unusable("the answer has no message") from None
        if not isinstance(content, str) or not content.strip():
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
        import openai

        kept, transcript = self.fit(turns)
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
            except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                reason = f"{mode}: HTTP {exc.status_code} ({brief_error(exc)})"
                attempts.append(reason)
                self._first_mode = index  # the server does not support this mode
                continue
            except _Unusable as exc:
                reason = f"{mode}: {exc}"
                attempts.append(reason)
                # a model that garbles JSON is best asked for plain text next
                if "text" in modes[index:]:
                    index = modes.index("text", index)
                continue
            except openai.APIStatusError as exc:
                reason = f"HTTP {exc.status_code} from {self._where()} ({brief_error(exc)})"
                attempts.append(f"{mode}: {reason}")
                break
            except openai.APITimeoutError:
                tries = self.config.max_retries + 1
                reason = (
                    f"no answer from {self._where()} in {time.perf_counter() - started:.1f}s: "
                    f"{tries} attempt{'s' if tries > 1 else ''} timed out after "
                    f"{self.config.timeout:g}s each ({_BUDGET_HINT})"
                )
                attempts.append(f"{mode}: {reason}")
                break
            except openai.APIConnectionError as exc:
                reason = f"cannot reach {self._where()} ({brief_error(exc)})"
                attempts.append(f"{mode}: {reason}")
                break
            except openai.OpenAIError as exc:
                reason = f"{type(exc).__name__}: {brief_error(exc)}"
                attempts.append(f"{mode}: {reason}")
                break
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

    def _where(self) -> str:
        return str(self.client.base_url).rstrip("/")


@functools.lru_cache(maxsize=4)
def _shared_client(config: LLMConfig) -> openai.OpenAI:
    """One client per configuration for ``ask_json``: building one (connection pool, TLS
    context) costs tens of ms, more than a local model's answer to a rerank."""
    return LLMSummarizer(config).client


def ask_json(config: LLMConfig, system: str, user: str) -> str:
    """One JSON answer (JSON mode, then JSON asked in the prompt if the server refuses the
    mode) from the configured server, for callers other than summaries (fact
    consolidation); raises GitmemError saying why when there is none (the key left out)."""
    import openai

    client = _shared_client(config)
    messages: list[Any] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    modes: list[dict[str, Any]] = [{"response_format": {"type": "json_object"}}, {}]
    for extra in modes:
        try:
            reply = client.chat.completions.create(
                model=config.model,
                messages=messages,
                temperature=config.temperature,
                max_tokens=max(config.max_tokens, 4000),
                **extra,
            )
        except (openai.BadRequestError, openai.UnprocessableEntityError):
            if extra:
                continue  # the server has no JSON mode: ask in the prompt only
            raise _failed(config, "the server refused the request") from None
        except openai.APIStatusError as exc:
            raise _failed(config, f"HTTP {exc.status_code} ({brief_error(exc)})") from None
        except openai.APITimeoutError:
            raise _failed(
                config, f"no answer within {config.timeout:g}s ({_BUDGET_HINT})"
            ) from None
        except openai.OpenAIError as exc:
            raise _failed(config, f"{type(exc).__name__}: {brief_error(exc)}") from None
        try:
            content = reply.choices[0].message.content
        except (AttributeError, IndexError, TypeError):
            content = None
        if not isinstance(content, str) or not content.strip():
            raise _failed(config, "the answer is empty")
        return content
    raise _failed(config, "no output mode worked")  # pragma: no cover - the loop returns


def refuse_credentials(base_url: str | None, setting: str) -> None:
    """Refuse a server URL with ``user:pass@``: the client would send them as a Basic
    ``Authorization`` header, which a server's error can echo into a commit or a log."""
    if base_url and "://" in base_url:
        parts = urlsplit(base_url)
        if parts.username or parts.password:
            shown = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
            raise ConfigError(
                f"{setting}: the URL {shown} carries a user name or password; gitmem never "
                "sends credentials that way: give the key as an API key (e.g. "
                "GITMEM_LLM_API_KEY) and the URL without them"
            )


def redact_key(reason: str, api_key: str | None) -> str:
    """``reason`` without the API key a server or client error may quote back."""
    if api_key and len(api_key) >= 6:
        reason = reason.replace(api_key, "[REDACTED:api-key]")
    return reason


def _failed(config: LLMConfig, reason: str) -> GitmemError:
    return GitmemError(
        f"{config.model} at {config.base_url or 'OpenAI'}: {redact_key(reason, config.api_key)}"
    )


def brief_error(exc: BaseException) -> str:
    """An exception's message on one line, at most 160 characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 160 else text[:157] + "..."


def default_summarizer(config: LLMConfig | None = None, *, offline: bool = False) -> Summarizer:
    """The LLM summarizer when one is configured (``config`` or the environment), else the
    offline extractive one; ``offline=True`` forces the latter."""
    if offline:
        return ExtractiveSummarizer()
    config = config or LLMConfig.from_env()
    return ExtractiveSummarizer() if config is None else LLMSummarizer(config)


MANUAL, TURNS, TOPIC_SHIFT, IDLE = "manual", "turn-threshold", "topic-shift", "idle"
