"""How to reach an OpenAI-compatible Chat Completions server: :class:`LLMConfig`, read from
``GITMEM_LLM_*`` / ``OPENAI_*`` variables and ``gitmem.llm.*`` git settings, and the checks
every server setting goes through (no credentials in a URL, no key in an error)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gitmem.errors import ConfigError
from gitmem.store.config import parse_float, parse_int, unknown_key

MODES = ("json_schema", "json_object", "prompt_json", "text")

DEFAULT_MODEL = "gpt-4o-mini"

SYSTEM_PROMPT = """You write the long-term memory of an AI assistant: concise, factual \
summaries of conversations. Never invent facts; keep names, dates, numbers, preferences and \
decisions exactly as stated. Write in the language of the conversation, in the third person, \
naming who said or did what ("The user prefers ...", "Caroline adopted ..."): no transcript \
lines, no "User:" labels, no questions or first person in the key facts."""

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

BUDGET_HINT = "set GITMEM_LLM_TIMEOUT/_RETRIES or git config gitmem.llm.timeout/retries"


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


def brief_error(exc: BaseException) -> str:
    """An exception's message on one line, at most 160 characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 160 else text[:157] + "..."
