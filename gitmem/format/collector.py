"""Python's cyclic collector paused while many objects are built that all stay alive.

A listing of 10,000 sessions or a 10,000-fact file makes tens of thousands of containers
at once: each collection they set off finds nothing to free, yet traverses every object a
new process holds (its imports' too), a third of such a read's time.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused(pause: bool = True) -> Iterator[None]:
    """The collector off for the block when ``pause``; left alone when it is off already
    (another reader, or the program turned it off)."""
    if not pause or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
