"""Building many objects at once (a large memory file's facts, every listing of a big
store): Python's cyclic collector paused meanwhile.

Every object such a read makes is kept and none is part of a cycle, so the collections
that tens of thousands of new objects set off find nothing; they traverse every object a
new process holds and cost about a third of such a read.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused(pause: bool = True) -> Iterator[None]:
    """The cyclic collector off for the block when ``pause``; left alone when it is off
    already (another reader, or the program), and back on after the block otherwise."""
    if not pause or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
