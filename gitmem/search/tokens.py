"""Counting tokens: a ``TokenCounter`` protocol, an offline estimate, and ``tiktoken``
when it is installed."""

from __future__ import annotations

import hashlib
import importlib
import math
import os
import re
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from gitmem.text import is_cjk

_PIECES = re.compile(r"[A-Za-z0-9]+|\s+|.", re.S)


class TokenCounter(Protocol):
    """Counts tokens the way the model that reads the context would."""

    name: str

    def count(self, text: str) -> int:
        """The number of tokens in ``text``."""
        ...


class EstimateCounter:
    """A tokenizer-free estimate, on the high side of what BPE tokenizers give.

    ASCII words cost one token per four characters (at least one), CJK characters three
    tokens per two, any other character one token; whitespace is free.
    """

    name = "estimate"

    def count(self, text: str) -> int:
        return _estimate(text)


@lru_cache(maxsize=4096)
def _estimate(text: str) -> int:
    total = 0.0
    for piece in _PIECES.findall(text):
        first = piece[0]
        if first.isspace():
            continue
        if first.isascii() and first.isalnum():
            total += max(1, math.ceil(len(piece) / 4))
        elif is_cjk(first):
            total += 1.5
        else:
            total += 1
    return math.ceil(total)


class TiktokenCounter:
    """Counts with a ``tiktoken`` encoding (the ``tokens`` extra)."""

    def __init__(self, encoding: Any, name: str) -> None:
        self._encoding = encoding
        self.name = f"tiktoken:{name}"

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))

    @classmethod
    def load(cls, name: str = "cl100k_base") -> TiktokenCounter | None:
        """The counter, or None when tiktoken is missing or would need the network."""
        try:
            tiktoken: Any = importlib.import_module("tiktoken")
        except ImportError:
            return None
        if not _encoding_cached(name):
            return None
        try:
            return cls(tiktoken.get_encoding(name), name)
        except Exception:  # any failure to load means: use the estimate
            return None


_ENCODING_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}


def _encoding_cached(name: str) -> bool:
    """Whether tiktoken can load ``name`` without downloading (its cache-file layout)."""
    url = _ENCODING_URLS.get(name)
    if url is None:
        return False
    folder = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    base = Path(folder) if folder else Path(tempfile.gettempdir()) / "data-gym-cache"
    return (base / hashlib.sha1(url.encode()).hexdigest()).is_file()


def default_counter() -> TokenCounter:
    """tiktoken's cl100k_base when available offline, else the built-in estimate."""
    return TiktokenCounter.load() or EstimateCounter()
