"""The one way gitmem runs the git binary: safe ``-c`` options, environment, timeouts, errors."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from gitmem.errors import RepositoryError
from gitmem.store.repository import SAFE_GIT_ARGS


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["GIT_TERMINAL_PROMPT"] = "0"  # fail instead of hanging on a password prompt
    env.setdefault("LC_ALL", "C")  # messages in English, so that they can be classified
    return env


def run_git(
    cwd: Path | None, *args: str, timeout: float | None = None, safe: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``git args`` and return the finished process (never raises on exit status).

    ``safe`` (the default) runs no hook or fsmonitor of the store; only a question about the
    store's own settings (where its hooks live) turns it off.
    """
    try:
        return subprocess.run(
            ["git", *(SAFE_GIT_ARGS if safe else ()), *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            env=_environment(),
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise RepositoryError(
            f"git {' '.join(args[:2])} took longer than {timeout:.0f}s; is the remote reachable?"
        ) from None


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages)."""
    if "://" not in url:
        return url
    with contextlib.suppress(ValueError):
        parts = urlsplit(url)
        if parts.password:
            host = parts.netloc.rsplit("@", 1)[-1]
            return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))
    return url


def _last_lines(text: str, count: int = 4) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines[-count:])
