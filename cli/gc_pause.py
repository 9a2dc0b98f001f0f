"""Pausing Python's cyclic garbage collector while relaxc builds large IR.

IR nodes are immutable trees: they never form reference cycles, so the collector finds
nothing in them, yet a large module makes every collection walk millions of objects (on a
100,000-binding module this more than halves ManifestAlloc's time). The CLI pauses the
collector around parsing and the pass pipeline and restores it afterwards; the library
itself leaves the collector alone.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def gc_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
