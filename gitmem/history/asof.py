"""The read-only view of a store as of one commit (what ``mm.at(rev)`` returns).

The view wraps the manager it came from and pins ``commit=`` on every method that takes one;
anything else (a write) raises ``ReadOnlyError``. It knows the manager only by the
small protocol it reads through, so it works for any object with the manager's methods.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from gitmem.errors import ReadOnlyError
from gitmem.models import Session


class Readable(Protocol):
    """What the view needs of the manager it wraps (it looks up any other method by name)."""

    @property
    def path(self) -> Path: ...

    @property
    def load_memory(self) -> Callable[..., Session | None]: ...


class StoreView:
    """The store as it was at one commit. Reads only: writing raises ReadOnlyError.

    Any manager method that takes ``commit=`` is available and reads at this view's commit.
    """

    def __init__(self, manager: Readable, commit: str, asked: str) -> None:
        self._manager = manager
        self.commit = commit
        self.asked = asked

    def __repr__(self) -> str:
        return f"<StoreView {self._manager.path} at {self.commit[:12]} ({self.asked})>"

    def load_memory(self, session_id: str, **options: Any) -> Session | None:
        """The session as it was at this view's commit, or None if it did not exist."""
        return self._manager.load_memory(session_id, commit=self.commit, **options)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        attr = getattr(self._manager, name)
        if name.startswith("_") or not callable(attr):
            raise AttributeError(name)
        try:
            takes_commit = "commit" in inspect.signature(attr).parameters
        except (TypeError, ValueError):
            takes_commit = False
        if takes_commit:
            return functools.partial(attr, commit=self.commit)

        def refuse(*_args: Any, **_kwargs: Any) -> Any:
            raise ReadOnlyError(
                f"{name}() cannot be used on the read-only view of {self._manager.path} as of "
                f"{self.commit[:12]} ({self.asked}); call it on the manager to change the store"
            )

        return refuse
