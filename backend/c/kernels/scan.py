"""Ops along one axis or producing indices: arange."""

from __future__ import annotations

from .. import dtypes as T

from .base import Gen, int_wrap


def gen_arange(g: Gen) -> list[str]:
    """``start + i * delta``: floats in double (as the numpy kernel), integers in wrapping
    unsigned 64-bit arithmetic."""
    out = g.spec.outs[0]
    start, delta = g.spec.attr["start"], g.spec.attr["delta"]
    n = g.shape(out)[0]
    with g.loop("i", n):
        if T.kind(out.dtype) == "float":
            s = T.float_literal(float(start), "f64")
            d = T.float_literal(float(delta), "f64")
            g.emit(f"y0[i] = {g.store(out.dtype, f'{s} + (double)i * {d}')};")
        else:
            s = f"UINT64_C({int(start) % 2**64})"
            d = f"UINT64_C({int(delta) % 2**64})"
            g.emit(f"y0[i] = {int_wrap(out.dtype, f'{s} + (uint64_t)i * {d}')};")
    return ["int64_t i;"]
