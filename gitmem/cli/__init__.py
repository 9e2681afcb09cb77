"""The ``gitmem`` command: parse arguments, call ``MemoryManager``, print the result.

One module per command group; ``base`` holds the group, the context and the shared
option handling. Importing this package registers every command on ``cli``.
"""

from __future__ import annotations

from gitmem.cli import (
    coders,
    facts,
    history,
    imports,
    search,
    serve,
    sessions,
    sharing,
    summaries,
)
from gitmem.cli.base import cli


def main() -> None:
    """Entry point of the ``gitmem`` console script."""
    cli(prog_name="gitmem")


__all__ = [
    "cli",
    "coders",
    "facts",
    "history",
    "imports",
    "main",
    "search",
    "serve",
    "sessions",
    "sharing",
    "summaries",
]
