"""Converters of reductions, index-producing ops and Range."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.nodes import DType
from relaxc.ir.ops.scan import arange_values, range_length

from .context import NodeContext
from .values import Folded, Runtime, ShapeValue, Value

Converter = Callable[[NodeContext], list]

_RANGE_INPUTS = ("start", "limit", "delta")


def _range_scalar(ctx: NodeContext, i: int) -> Value:
    v = ctx.input(i, _RANGE_INPUTS[i])
    if isinstance(v, Runtime):
        raise ctx.fail(
            f"the output length depends on the run-time value of its {_RANGE_INPUTS[i]} input; "
            "relaxc needs start, limit and delta constant or computed from the input shapes"
        )
    size = v.array.size if isinstance(v, Folded) else len(v.dims)
    if size != 1:
        raise ctx.fail(f"its {_RANGE_INPUTS[i]} input must be a scalar, got {size} values")
    return v


def _known_number(v: Value) -> float | int | None:
    """The value of a scalar known at import time (None for a symbolic dim)."""
    if isinstance(v, Folded):
        x = v.array.reshape(-1)[0]
        return int(x) if v.array.dtype.kind in "iu" else float(x)
    assert isinstance(v, ShapeValue)
    d = v.dims[0]
    return d if isinstance(d, int) else None


def _as_dim(v: Value) -> D.Dim:
    if isinstance(v, ShapeValue):
        return v.dims[0]
    assert isinstance(v, Folded)
    return int(v.array.reshape(-1)[0])


def convert_range(ctx: NodeContext) -> list:
    start, limit, delta = (_range_scalar(ctx, i) for i in range(3))
    folded = next((v for v in (start, limit, delta) if isinstance(v, Folded)), None)
    dt = folded.array.dtype if folded is not None else np.dtype(np.int64)
    numbers = [_known_number(v) for v in (start, limit, delta)]
    s, lim, d = numbers
    if d is None:
        raise ctx.fail("its delta input is a symbolic dim; relaxc needs the step known at import")
    if d == 0:
        raise ctx.fail("its delta input is 0, so the sequence never reaches its limit")
    if s is not None and lim is not None:
        n = max(int(math.ceil((float(lim) - float(s)) / float(d))), 0)
        if dt.kind in "iu":
            n = max(-((int(s) - int(lim)) // int(d)), 0)
        return [Folded(arange_values(s, d, n, dt), ctx.hint())]
    if s is None:
        raise ctx.fail(
            "its start input is a symbolic dim; relaxc computes a Range from symbolic dims "
            "only when start and delta are constants"
        )
    if dt.kind not in "iu" or not float(d).is_integer() or not float(s).is_integer():
        raise ctx.fail(
            f"its limit is a symbolic dim but the sequence is of {dt} "
            "(relaxc computes symbolic lengths of integer ranges only)"
        )
    length = range_length(int(s), _as_dim(limit), int(d))
    dtype = Folded(np.zeros((), dt), "").type.dtype
    return [
        ctx.emit(
            "arange",
            [],
            {"start": int(s), "delta": int(d), "length": length, "dtype": DType(dtype)},
        )
    ]


def table() -> dict[str, Converter]:
    return {"Range": convert_range}
