"""The nanobot plugin: every turn nanobot saves becomes a gitmem commit as it happens.

nanobot (``nanobot-ai`` >= 0.3.5, < 0.4) loads tool classes from the ``nanobot.tools``
entry-point group when an agent loop starts, and asks each ``enabled(ctx)`` with a
``ToolContext`` that holds the loop's message bus, workspace and session manager; after it
has written a turn to the session file, the loop publishes ``SessionTurnPersisted`` (session
key, turn id) on that bus and awaits the subscribers. :class:`GitmemCapture` is registered in
that group (``pyproject.toml``); its ``enabled`` subscribes a
:class:`~gitmem.importers.live.Capture` to the event and answers False, so the model is
offered no tool: capturing is all it does. The handler only queues the session key; the
import runs on the capture's worker thread, and a failure is logged, never raised into
nanobot.

The store is ``$GITMEM_REPO``, else ``gitmem/`` in nanobot's data folder (the folder of its
``config.json``, ``~/.nanobot`` by default). Capturing is opt-in, since an entry point cannot
wait for an extra: it runs when that store exists (``gitmem init ~/.nanobot/gitmem``), when
``GITMEM_REPO`` is set, or with ``GITMEM_NANOBOT_CAPTURE=1`` (the store is then created on
first use); ``GITMEM_NANOBOT_CAPTURE=0`` turns it off. ``GITMEM_NAMESPACE`` names the
namespace the turns go to, as for the ``gitmem`` command. This is the only module that imports
``nanobot`` (the ``nanobot`` extra); docs/nanobot.md is the user's guide.
"""

from __future__ import annotations

import logging
import os
import weakref
from pathlib import Path
from typing import Any

from nanobot.agent.tools.base import Tool
from nanobot.config.paths import get_data_dir

from gitmem.importers.live import Capture, nanobot_importer

# nanobot 0.3.0 loads tool plugins but has no such event: the capture then says so
try:
    from nanobot.bus.runtime_events import SessionTurnPersisted
except ImportError:
    SessionTurnPersisted = None

log = logging.getLogger("gitmem.importers.live")  # the capture's one logger

# nanobot-ai versions whose bus publishes SessionTurnPersisted (also the `nanobot` extra's pin)
SUPPORTED = ">=0.3.5,<0.4"

STORE_ENV = "GITMEM_REPO"
NAMESPACE_ENV = "GITMEM_NAMESPACE"
SWITCH_ENV = "GITMEM_NANOBOT_CAPTURE"

# one capture per message bus (nanobot may build several agent loops in one process)
_captures: weakref.WeakKeyDictionary[Any, Capture] = weakref.WeakKeyDictionary()


def store_path(sessions: Path | None = None) -> Path:
    """Where captured turns go: ``$GITMEM_REPO``, else ``gitmem/`` in nanobot's data folder
    (the folder of its ``config.json``, which holds ``sessions/<workspace id>/``: ``sessions``
    is that last folder when known)."""
    given = os.environ.get(STORE_ENV, "").strip()
    if given:
        return Path(given).expanduser()
    if sessions is not None:
        return sessions.parent.parent / "gitmem"
    return Path(get_data_dir()) / "gitmem"


def attach(ctx: Any) -> Capture | None:
    """Subscribe a capture to ``ctx.bus`` (once per bus); None when there is nothing to
    capture (no bus, capture switched off, a nanobot without ``SessionTurnPersisted``)."""
    bus = getattr(ctx, "bus", None)
    switch = os.environ.get(SWITCH_ENV, "").strip().lower()
    if bus is None or switch in ("0", "off", "no", "false"):
        return None
    if bus in _captures:
        return _captures[bus]
    found = getattr(getattr(ctx, "sessions", None), "sessions_dir", None)
    sessions = Path(found) if found is not None else None
    store = store_path(sessions)
    # opt in: installing gitmem beside nanobot (e.g. for `gitmem mcp`) must not start
    # writing a store nobody asked for
    if (
        switch not in ("1", "on", "yes", "true")
        and not os.environ.get(STORE_ENV, "").strip()
        and not store.exists()
    ):
        log.debug(
            "gitmem: live capture is off: no store at %s (`gitmem init %s`, "
            "GITMEM_REPO or GITMEM_NANOBOT_CAPTURE=1 turn it on)",
            store,
            store,
        )
        return None
    if SessionTurnPersisted is None:
        log.warning(
            "gitmem: this nanobot has no SessionTurnPersisted event; live capture "
            "needs nanobot-ai%s (batch imports work: gitmem import nanobot)",
            SUPPORTED,
        )
        return None
    capture = Capture(
        store,
        nanobot_importer(Path(ctx.workspace), sessions),
        agent="nanobot",
        via="nanobot-plugin",
        namespace=os.environ.get(NAMESPACE_ENV, "").strip() or None,
    )

    def turn_persisted(event: Any) -> None:
        capture.persisted(event.context.session_key)

    bus.subscribe(turn_persisted, SessionTurnPersisted)
    _captures[bus] = capture
    _show_log()
    log.info("gitmem: capturing nanobot's turns into %s", capture.store)
    return capture


def _show_log() -> None:
    """Send the capture's log lines to stderr, where nanobot's own log goes, unless the
    process has set up Python logging itself (nanobot logs with loguru, which leaves it
    alone, and Python alone would drop the info lines)."""
    if log.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s | %(levelname)-8s | %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


class GitmemCapture(Tool):  # type: ignore[misc]  # nanobot ships no type information
    """Registered in ``nanobot.tools``; never offered to the model (see the module text)."""

    @classmethod
    def enabled(cls, ctx: Any) -> bool:
        try:
            attach(ctx)
        except Exception:  # nanobot must start whatever happens here
            log.exception("gitmem: live capture could not start")
        return False

    @property
    def name(self) -> str:
        return "gitmem_capture"

    @property
    def description(self) -> str:
        return "Mirrors saved turns into a gitmem store (not a callable tool)."

    @property
    def parameters(self) -> dict[str, Any]:
        return {"type": "object", "properties": {}}

    async def execute(self, **kwargs: Any) -> str:
        return "gitmem capture runs by itself; there is nothing to call."
