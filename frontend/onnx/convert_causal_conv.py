"""The converter of CausalConvWithState (opset 27): a causal depthwise 1-D convolution that
carries its last ``k - 1`` input positions from one call to the next.

It is composed of existing ops: the carried state (``past_state``, or ``k - 1`` zeros) is
concatenated before the input, a depthwise ``conv2d`` over a unit height (``groups`` = the
channels, no padding) with the optional bias computes the output, ``silu`` applies the fused
activation, and the present state is the padded sequence's last ``k - 1`` positions (a crop).
Each op rounds once, as ONNX's reference does (its convolution, then its activation).
"""

from __future__ import annotations

from typing import Callable

from relaxc.ir import dims as D

from .context import NodeContext, rank_of, shape_of
from .values import Value

Converter = Callable[[NodeContext], list]

_ACTIVATIONS = ("none", "silu", "swish")


def _activation(ctx: NodeContext) -> str:
    raw = ctx.attr("activation", "none")
    name = raw.decode() if isinstance(raw, bytes) else str(raw)
    if name not in _ACTIVATIONS:
        raise ctx.fail(f"activation '{name}' is not one of {', '.join(_ACTIVATIONS)}")
    return name


def convert_causal_conv_with_state(ctx: NodeContext) -> list:
    """(output, present_state) of X (B, C, L), W (C, 1, k), bias (C,), past_state
    (B, C, k - 1)."""
    if ctx.opset < 27:
        raise ctx.fail(
            f"CausalConvWithState is an operator of opset 27 and later; the model imports "
            f"opset {ctx.opset}"
        )
    x, w = ctx.input(0, "input"), ctx.input(1, "weight")
    bias, past = ctx.optional(2), ctx.optional(3)
    activation = _activation(ctx)
    for name, t in (("input", x), ("weight", w), ("past_state", past)):
        if t is not None and rank_of(t) != 3:
            raise ctx.fail(f"{name} must have rank 3, got {rank_of(t)}")
    for name, t in (("weight", w), ("bias", bias), ("past_state", past)):
        if t is not None and t.type.dtype != x.type.dtype:
            raise ctx.fail(f"{name} is {t.type.dtype} but input is {x.type.dtype}")
    b, c, length = shape_of(x)
    if not isinstance(c, int):
        raise ctx.fail("the channels must be static (they are the convolution's groups)")
    wc, one, k = shape_of(w)
    if not isinstance(k, int) or k < 1:
        raise ctx.fail(f"the kernel size (the weight's last dim) must be static, got {k}")
    if not (isinstance(one, int) and one == 1) or not D.dims_equal(wc, c):
        raise ctx.fail(
            f"weight must be (channels, 1, k) = ({D.dim_to_str(c)}, 1, k), got "
            f"{tuple(D.dim_to_str(d) for d in shape_of(w))}"
        )
    if bias is not None and (rank_of(bias) != 1 or not D.dims_equal(shape_of(bias)[0], c)):
        raise ctx.fail(f"bias must be (channels,) = ({D.dim_to_str(c)},)")
    if past is not None:
        want = (b, c, k - 1)
        if not all(D.dims_equal(g, e) for g, e in zip(shape_of(past), want)):
            raise ctx.fail(
                f"past_state must be (batch, channels, k - 1) = "
                f"{tuple(D.dim_to_str(d) for d in want)}, got "
                f"{tuple(D.dim_to_str(d) for d in shape_of(past))}"
            )
    padded = _padded(ctx, x, past, k)
    total = shape_of(padded)[2]
    conv_in = ctx.emit("reshape", [padded], {"newshape": (b, c, 1, total)})
    kernel = ctx.emit("reshape", [w], {"newshape": (c, 1, 1, k)})
    conv = ctx.emit(
        "conv2d",
        [conv_in, kernel] + ([bias] if bias is not None else []),
        {"groups": c},
    )
    y = ctx.emit("reshape", [conv], {"newshape": (b, c, length)})
    if activation != "none":
        y = ctx.emit("silu", [y])
    return [y, _last(ctx, padded, total, k - 1)]


def _padded(ctx: NodeContext, x: Value, past: Value | None, k: int) -> Value:
    """past_state (or k - 1 zeros) and then X along the sequence."""
    if k == 1:
        return x
    if past is not None:
        return ctx.emit("concat", [past, x], {"axis": 2})
    return ctx.emit("pad", [x], {"pads": (0, 0, k - 1, 0, 0, 0)})


def _last(ctx: NodeContext, padded: Value, total: D.Dim, keep: int) -> Value:
    """The last ``keep`` positions of ``padded`` (B, C, total): a crop of the first."""
    if not isinstance(total, int):
        raise ctx.fail(
            "the input's length must be static: the present state is the last k - 1 positions "
            f"of the padded sequence, of symbolic length {D.dim_to_str(total)}"
        )
    return ctx.emit("pad", [padded], {"pads": (0, 0, keep - total, 0, 0, 0)})


def table() -> dict[str, Converter]:
    return {"CausalConvWithState": convert_causal_conv_with_state}
