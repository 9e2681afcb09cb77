"""The import paths of gitmem 0.1's flat modules, kept working for one release.

0.2 groups the modules by feature (``docs/upgrading.md`` has the table). Importing an old path,
e.g. ``from gitmem.summarize import LLMConfig``, still works: a finder at the end of
``sys.meta_path`` serves a stand-in module for each old name, and each attribute read from it
is looked up in the modules that now hold that old module's code, with a
``DeprecationWarning`` that names the new home. The stand-ins import nothing until used, so
the fast paths (``python -m gitmem merge-file``) pay nothing for them.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

# old module -> the modules (under gitmem.) that hold its names now, searched in order
OLD_HOMES: dict[str, tuple[str, ...]] = {
    "analysis": ("text",),
    "changes": ("history.diff", "history.undo"),
    "context": ("search.context", "search.tokens"),
    "demo": ("cli.demo",),
    "driver": ("sync.driver",),
    "extractive": ("summary.extractive", "text"),
    "gitconfig": ("store.config",),
    "history": ("history.methods", "history.asof"),
    "index": ("search.index", "search.indexfile", "errors"),
    "indexer": ("search.catchup",),
    "layout": ("format.labels", "format.render", "errors"),
    "locking": ("store.locks", "store.base"),
    "locomo": ("importers.locomo", "importers.engine"),
    "logcache": ("store.logcache",),
    "markdown": ("format.parse", "format.spans", "format.render", "format.labels"),
    "manager": ("models", "guard.names", "core"),
    "merging": ("sync.merge", "models"),
    "paths": ("format.paths",),
    "plumbing": ("store.objects", "store.gitindex", "errors"),
    "recall": ("search.methods", "models", "importers.engine"),
    "recovery": ("store.recovery", "store.base"),
    "remotes": ("sync.remotes", "sync.hooks", "store.git"),
    "repository": ("store.repository", "store.git", "store.base"),
    "retrieval": ("search.rank", "text"),
    "revisions": ("store.gitlog", "store.revisions", "store.base", "store.git"),
    "secrets": ("guard.secrets",),
    "secretscan": ("guard.scan", "models"),
    "security": ("guard.methods", "guard.redact"),
    "sharing": ("sync.methods", "sync.hooks", "models"),
    "stores": ("store.discover",),
    "summarize": ("summary.engines", "summary.triggers", "summary.loss", "models"),
    "summarizing": ("summary.methods", "summary.triggers", "models", "errors", "cli.views"),
    "transaction": ("store.transaction", "store.base"),
    "views": ("cli.views",),
    "worktree": ("store.worktree", "store.base", "errors"),
}


def old_attribute(old: str, name: str) -> object:
    """``gitmem.<old>.<name>`` of 0.1, found in its new home (with a ``DeprecationWarning``)."""
    if not name.startswith("__"):
        for home in OLD_HOMES[old]:
            try:
                module = importlib.import_module(f"gitmem.{home}")
            except ModuleNotFoundError:
                continue
            if name in vars(module):
                warnings.warn(
                    f"gitmem.{old}.{name} moved to gitmem.{home}.{name}; "
                    "the old path goes away in gitmem 0.3 (see docs/upgrading.md)",
                    DeprecationWarning,
                    stacklevel=3,
                )
                return vars(module)[name]
    raise AttributeError(
        f"module 'gitmem.{old}' has no attribute {name!r}: gitmem 0.2 moved its "
        "modules into feature packages (see docs/upgrading.md)"
    )


class OldModule(types.ModuleType):
    """A stand-in for a 0.1 module: each name resolves to its new home, with a warning."""

    def __getattr__(self, name: str) -> object:
        return old_attribute(self.__name__.removeprefix("gitmem."), name)


class OldPathFinder:
    """Finds ``gitmem.<old module>`` only when no real module of that name exists (a finder
    and loader by protocol: importlib.abc would cost every start, the merge driver's too)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        old = fullname.removeprefix("gitmem.")
        if old == fullname or old not in OLD_HOMES:
            return None
        return importlib.machinery.ModuleSpec(fullname, cast("Loader", self))

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return OldModule(spec.name, f"gitmem 0.1's {spec.name}, moved (see docs/upgrading.md)")

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def install() -> None:
    """Put the finder last on ``sys.meta_path`` (once), after every real module finder."""
    if not any(isinstance(finder, OldPathFinder) for finder in sys.meta_path):
        sys.meta_path.append(OldPathFinder())
