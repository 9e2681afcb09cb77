"""The ``gitmem`` command: parse arguments, call ``MemoryManager``, print the result.

One module per command group; ``base`` holds the group, the context and the shared
option handling. A command's module is imported when the command is first asked for
(:class:`~gitmem.cli.base.CommandsOnFirstUse`), so a hook's ``gitmem save`` starts fast.
"""

from __future__ import annotations

from gitmem.cli.base import cli


def main() -> None:
    """Entry point of the ``gitmem`` console script."""
    cli(prog_name="gitmem")


__all__ = ["cli", "main"]
