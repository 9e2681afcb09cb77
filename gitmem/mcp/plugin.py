"""The nanobot plugin bundle (placeholder: being written on the nanobot branch)."""

from __future__ import annotations

from pathlib import Path


def write_plugin(folder: str | Path, *, store: str | Path, agent: str) -> list[Path]:
    raise NotImplementedError("the nanobot plugin bundle is not written yet")
