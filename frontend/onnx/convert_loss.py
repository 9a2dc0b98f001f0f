"""Converters of the loss family: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
(opsets 12, 13 and 22, which change only types), composed from existing ops so that every
backend runs them with no kernel of their own.

Both take scores x of shape (N, C, d1, ..., dk), integer targets of shape (N, d1, ..., dk)
and an optional weight of shape (C,). The loss of position i is ``-w[t_i] * x[i, t_i]``
(SoftmaxCrossEntropyLoss first takes x's log_softmax along the class axis), and 0 where
``t_i`` is the ``ignore_index``. ``reduction`` mean divides the sum of the losses by the sum
of the weights of the targets not ignored (their count without a weight): all targets
ignored give 0 / 0, a nan, as onnxruntime and the ONNX reference. A target that is the
ignore_index may lie outside [0, C) (its index is clipped, its loss masked); any other
target outside [0, C) is undefined in ONNX and reads the clipped class here.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.nodes import DType
from relaxc.ir.types import numpy_dtype

from .context import NodeContext, rank_of, shape_of
from .values import Folded, Value

Converter = Callable[[NodeContext], list]

REDUCTIONS = ("none", "sum", "mean")
_FLOATS = ("f16", "bf16", "f32", "f64")


def _check_shapes(ctx: NodeContext, x: Value, target: Value, weight: Value | None) -> None:
    """x (N, C, d...) of a float type; target x's shape without C, of an integer type; the
    weight (C,) of x's type. Dims that are symbolic on either side are not compared."""
    xs, ts = shape_of(x), shape_of(target)
    if len(xs) < 2:
        raise ctx.fail(f"its input has rank {len(xs)}; it needs (N, C) or (N, C, d1, ...)")
    if x.type.dtype not in _FLOATS:
        raise ctx.fail(f"its input must be a float tensor, got {x.type.dtype}")
    if target.type.dtype not in ("i32", "i64"):
        raise ctx.fail(f"its target must be an int32 or int64 tensor, got {target.type.dtype}")
    want = (xs[0],) + xs[2:]
    if len(ts) != len(want) or any(
        isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(ts, want)
    ):
        raise ctx.fail(
            f"its target has shape {_shape_str(ts)}; the input {_shape_str(xs)} needs "
            f"{_shape_str(want)}"
        )
    if weight is None:
        return
    ws = shape_of(weight)
    if weight.type.dtype != x.type.dtype:
        raise ctx.fail(f"its weight is {weight.type.dtype}, its input {x.type.dtype}")
    c = xs[1]
    if len(ws) != 1 or (isinstance(ws[0], int) and isinstance(c, int) and ws[0] != c):
        raise ctx.fail(f"its weight has shape {_shape_str(ws)}; it needs one value per class ({c})")


def _shape_str(shape: tuple[D.Dim, ...]) -> str:
    return "(" + ", ".join(D.dim_to_str(d) for d in shape) + ")"


def _ignore_index(ctx: NodeContext, target: Value) -> int | None:
    """The ignore_index attribute, or None when absent or when no target of the target's
    type can equal it (an int32 target and an index beyond int32)."""
    ii = ctx.attr("ignore_index")
    if ii is None:
        return None
    info = np.iinfo(numpy_dtype(target.type.dtype))
    return int(ii) if info.min <= int(ii) <= info.max else None


def _loss(ctx: NodeContext, log_prob: Value, target: Value, weight: Value | None) -> Value:
    """The reduced (or not) loss of log probabilities ``log_prob`` (N, C, d...)."""
    reduction = str(ctx.attr("reduction", "mean"))
    if reduction not in REDUCTIONS:
        raise ctx.fail(f"reduction '{reduction}' is not one of {', '.join(REDUCTIONS)}")
    dtype = log_prob.type.dtype
    np_dtype = numpy_dtype(dtype)
    zero = Folded(np.zeros((), np_dtype), f"{ctx.hint()}_zero")
    # -log_prob[i, t_i, d...]: gather_elements along the class axis (indices clip).
    idx = ctx.emit("expand_dims", [target], {"axis": 1})
    picked = ctx.emit("gather_elements", [log_prob, idx], {"axis": 1})
    loss = ctx.emit("negative", [ctx.emit("squeeze", [picked], {"axes": (1,)})])
    w: Value | None = None
    if weight is not None:
        w = ctx.emit("take", [weight, target], {"axis": 0})  # the weight of each target
        loss = ctx.emit("multiply", [loss, w])
    ii = _ignore_index(ctx, target)
    kept: Value | None = None
    if ii is not None:
        ignored = Folded(np.array(ii, numpy_dtype(target.type.dtype)), f"{ctx.hint()}_ignore")
        kept = ctx.emit("logical_not", [ctx.emit("equal", [target, ignored])])
        loss = ctx.emit("where", [kept, loss, zero])
    if reduction == "none":
        return loss
    everything = {"axes": tuple(range(rank_of(loss))), "keepdims": False}
    if reduction == "sum":
        return ctx.emit("sum", [loss], everything)
    if kept is not None:  # the weights of the targets not ignored (1 each without a weight)
        w = (
            ctx.emit("cast", [kept], {"dtype": DType(dtype)})
            if w is None
            else ctx.emit("where", [kept, w, zero])
        )
    if w is None:
        return ctx.emit("mean", [loss], everything)
    total = ctx.emit("sum", [loss], everything)
    return ctx.emit("divide", [total, ctx.emit("sum", [w], everything)])


def convert_nll_loss(ctx: NodeContext) -> list:
    """NegativeLogLikelihoodLoss: x holds log probabilities already."""
    x, target, weight = ctx.input(0, "input"), ctx.input(1, "target"), ctx.optional(2)
    _check_shapes(ctx, x, target, weight)
    return [_loss(ctx, x, target, weight)]


def convert_softmax_cross_entropy(ctx: NodeContext) -> list:
    """SoftmaxCrossEntropyLoss: the loss of log_softmax(x) along the class axis, and that
    log_softmax as the optional second output (log_prob)."""
    x, target, weight = ctx.input(0, "scores"), ctx.input(1, "labels"), ctx.optional(2)
    _check_shapes(ctx, x, target, weight)
    log_prob = ctx.emit("log_softmax", [x], {"axis": 1}, k=1)
    return [_loss(ctx, log_prob, target, weight), log_prob]


def table() -> dict[str, Converter]:
    return {
        "NegativeLogLikelihoodLoss": convert_nll_loss,
        "SoftmaxCrossEntropyLoss": convert_softmax_cross_entropy,
    }
