"""Chat Completions calls: :class:`ChatClient` asks, :func:`ask_json` wants one JSON answer.

Every failure of the ``openai`` client leaves here as a :class:`ChatFailure` saying what kind
it was (the server refused the request's form, answered an HTTP error, timed out, could not
be reached), so the callers decide what to try next without knowing the client library.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from gitmem.errors import GitmemError
from gitmem.llm.config import BUDGET_HINT, LLMConfig, brief_error, redact_key

if TYPE_CHECKING:
    import openai  # imported when first used: it takes ~0.4 s, too slow for every CLI call

FailureKind = Literal["refused", "status", "timeout", "connection", "other"]


@dataclass
class ChatFailure(Exception):
    """A request that got no answer: ``refused`` (HTTP 400/422: the server does not take
    this form of request), ``status`` (another HTTP error), ``timeout``, ``connection``
    or ``other``; ``detail`` is the client's message on one line."""

    kind: FailureKind
    detail: str
    status_code: int | None = None
    seconds: float = 0.0
    error: str = ""  # the client's exception class, for the message of ``other``


class ChatClient:
    """One OpenAI-compatible server and model, as ``config`` says.

    Args:
        config: server, key, model and the request budget (timeout, retries).
        client: an ``openai.OpenAI`` client to use instead of building one from ``config``.
    """

    def __init__(self, config: LLMConfig, client: openai.OpenAI | None = None) -> None:
        self.config = config
        self._client = client

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

    @property
    def where(self) -> str:
        """The server's URL, as errors name it."""
        return str(self.client.base_url).rstrip("/")

    def complete(
        self,
        messages: list[Any],
        *,
        temperature: float,
        max_tokens: int,
        response_format: dict[str, Any] | None = None,
    ) -> str | None:
        """The first choice's message content (None when the answer has none).

        Raises:
            ChatFailure: the request got no answer (see its ``kind``).
        """
        import openai

        extra: dict[str, Any] = {}
        if response_format is not None:
            extra["response_format"] = response_format
        started = time.perf_counter()
        try:
            reply = self.client.chat.completions.create(
                model=self.config.model,
                messages=messages,
                temperature=temperature,
                max_tokens=max_tokens,
                **extra,
            )
        except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
            raise ChatFailure("refused", brief_error(exc), exc.status_code) from None
        except openai.APIStatusError as exc:
            raise ChatFailure("status", brief_error(exc), exc.status_code) from None
        except openai.APITimeoutError:
            raise ChatFailure("timeout", "", seconds=time.perf_counter() - started) from None
        except openai.APIConnectionError as exc:
            raise ChatFailure("connection", brief_error(exc), error=type(exc).__name__) from None
        except openai.OpenAIError as exc:
            raise ChatFailure("other", brief_error(exc), error=type(exc).__name__) from None
        try:
            content = reply.choices[0].message.content
        except (AttributeError, IndexError, TypeError):
            return None
        return content if isinstance(content, str) else None


@functools.lru_cache(maxsize=4)
def _shared_client(config: LLMConfig) -> ChatClient:
    """One client per configuration for ``ask_json``: building one (connection pool, TLS
    context) costs tens of ms, more than a local model's answer to a rerank."""
    return ChatClient(config)


def ask_json(config: LLMConfig, system: str, user: str) -> str:
    """One JSON answer (JSON mode, then JSON asked in the prompt if the server refuses the
    mode) from the configured server, for callers other than summaries (fact
    consolidation, the reranker); raises GitmemError saying why when there is none (the key
    left out)."""
    client = _shared_client(config)
    messages: list[Any] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    for response_format in ({"type": "json_object"}, None):
        try:
            content = client.complete(
                messages,
                temperature=config.temperature,
                max_tokens=max(config.max_tokens, 4000),
                response_format=response_format,
            )
        except ChatFailure as failure:
            if failure.kind == "refused" and response_format is not None:
                continue  # the server has no JSON mode: ask in the prompt only
            raise _failed(config, _reason(failure, config)) from None
        if content is None or not content.strip():
            raise _failed(config, "the answer is empty")
        return content
    raise _failed(config, "no output mode worked")  # pragma: no cover - the loop returns


def _reason(failure: ChatFailure, config: LLMConfig) -> str:
    if failure.kind == "refused":
        return "the server refused the request"
    if failure.kind == "status":
        return f"HTTP {failure.status_code} ({failure.detail})"
    if failure.kind == "timeout":
        return f"no answer within {config.timeout:g}s ({BUDGET_HINT})"
    return f"{failure.error}: {failure.detail}"


def _failed(config: LLMConfig, reason: str) -> GitmemError:
    return GitmemError(
        f"{config.model} at {config.base_url or 'OpenAI'}: {redact_key(reason, config.api_key)}"
    )
