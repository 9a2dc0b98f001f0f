"""Run-time values as both executors hold them: kernel results, and copies across the call boundary.

The reference interpreter and the VM run the same numpy kernels and must agree on what a
kernel's result is: an array (never a numpy scalar) in memory of its own (never a view of
an input), and on what crosses between the caller and the program (copies). Both import
these helpers from here.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def as_arrays(result: Any) -> Any:
    """Kernels may hand back numpy scalars for 0-d results; make them arrays."""
    if isinstance(result, tuple):
        return tuple(as_arrays(r) for r in result)
    if isinstance(result, np.generic):
        return np.asarray(result)
    return result


def fresh(result: Any, inputs: Sequence[Any]) -> Any:
    """A kernel's result as memory of its own: numpy may return a view of an input (a
    one-element slice, say), and a kernel result must never alias its inputs."""
    if isinstance(result, tuple):
        return tuple(fresh(r, inputs) for r in result)
    if isinstance(result, np.ndarray) and (
        # An empty view shares no bytes with its input, but it keeps the input's buffer as its
        # base: the VM would take that buffer for the result's own (and poison it on release).
        (result.size == 0 and result.base is not None)
        # A read-only result is a constant a primitive function returned (or a broadcast view):
        # not memory of its own either.
        or not result.flags.writeable
        or any(isinstance(x, np.ndarray) and np.may_share_memory(result, x) for x in inputs)
    ):
        return result.copy()
    return result


def copy_value(v: Any) -> Any:
    """A C-ordered copy of an array, or of every array of a tuple (the caller's inputs go in
    as copies: the program may write into its parameters)."""
    if isinstance(v, np.ndarray):
        return np.array(v, copy=True, order="C")
    if isinstance(v, tuple):
        return tuple(copy_value(x) for x in v)
    return v


__all__ = ["as_arrays", "copy_value", "fresh"]
