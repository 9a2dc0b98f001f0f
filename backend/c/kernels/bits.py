"""bitcast: the bytes of x copied as they are into an output of another type of the same
width (C's way to read an object's bits as another type: memmove, never a pointer cast)."""

from __future__ import annotations

from .. import dtypes as T

from .base import Gen


def gen_bitcast(g: Gen) -> list[str]:
    x = g.spec.ins[0]
    nbytes = g.prod([g.numel(x), str(T.nbytes(x.dtype))])
    g.emit(f"memmove((void *)y0, (const void *)x0, (size_t)({nbytes}));")
    return []
