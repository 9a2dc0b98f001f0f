"""Converters of the second reduction family: CumSum and CumProd (LogSoftmax and Hardmax
are next to Softmax in convert_nn)."""

from __future__ import annotations

from typing import Callable

from .context import NodeContext, norm_axis, rank_of

Converter = Callable[[NodeContext], list]


def _cumulative(op: str) -> Converter:
    """CumSum (opsets 11, 14) and CumProd (26): the axis is a constant 0-D (or 1-element)
    integer input."""

    def convert(ctx: NodeContext) -> list:
        x = ctx.input(0)
        rank = rank_of(x)
        if rank == 0:
            raise ctx.fail("its input is a scalar; it needs a tensor of rank 1 or more")
        axes = ctx.ints(ctx.input(1, "axis"), "the axis input")
        assert axes is not None
        if len(axes) != 1:
            raise ctx.fail(f"the axis input must be a single integer, got {len(axes)} values")
        attrs = {
            "axis": norm_axis(axes[0], rank, ctx),
            "exclusive": bool(ctx.attr("exclusive", 0)),
            "reverse": bool(ctx.attr("reverse", 0)),
        }
        return [ctx.emit(op, [x], attrs)]

    return convert


def table() -> dict[str, Converter]:
    return {"CumSum": _cumulative("cumsum"), "CumProd": _cumulative("cumprod")}
