"""Converters of the CNN operators of every spatial rank: Conv, MaxPool, AveragePool (1-D as
the 2-D ops over a unit height axis, a view; 2-D as conv2d / max_pool2d / avg_pool2d; 3-D and
up as conv_nd / max_pool_nd / avg_pool_nd), LpPool, GlobalMaxPool, GlobalLpPool,
InstanceNormalization, GroupNormalization (opset 18: scale and bias per group; 21: per
channel), MeanVarianceNormalization, and LayerNormalization with its Mean and InvStdDev
outputs."""

from __future__ import annotations

import math
from typing import Callable, cast

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.nodes import DType

from .context import NodeContext, norm_axis, rank_of, shape_of
from .convert_nn import convert_layer_norm
from .values import Folded, Value

Converter = Callable[[NodeContext], list]


def _spatial_rank(ctx: NodeContext, x: Value) -> int:
    r = rank_of(x) - 2
    if r < 1:
        raise ctx.fail(f"needs an input of rank 3 or more (N, C, spatial...), got {rank_of(x)}")
    return r


def _ints(ctx: NodeContext, name: str, r: int, default: int) -> tuple[int, ...]:
    v = ctx.attr(name)
    if v is None:
        return (default,) * r
    if len(v) != r:
        raise ctx.fail(f"{name} must have {r} values for {r} spatial axes, got {list(v)}")
    if min(int(a) for a in v) < 1:
        raise ctx.fail(f"{name} must be positive, got {list(v)}")
    return tuple(int(a) for a in v)


def _pads(
    ctx: NodeContext,
    x: Value,
    kernel: tuple[int, ...],
    strides: tuple[int, ...],
    dilation: tuple[int, ...],
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(beginnings, ends) of the padding, from ``pads`` or ``auto_pad``."""
    r = len(kernel)
    auto = ctx.attr("auto_pad", "NOTSET")
    if isinstance(auto, bytes):
        auto = auto.decode()
    if auto in ("NOTSET", ""):
        pads = ctx.attr("pads")
        if pads is None:
            return (0,) * r, (0,) * r
        if len(pads) != 2 * r:
            raise ctx.fail(f"pads must have {2 * r} values for {r} spatial axes, got {list(pads)}")
        if min(int(p) for p in pads) < 0:
            raise ctx.fail(f"pads must not be negative, got {list(pads)}")
        return tuple(int(p) for p in pads[:r]), tuple(int(p) for p in pads[r:])
    if auto == "VALID":
        return (0,) * r, (0,) * r
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.fail(f"auto_pad '{auto}' is not an ONNX padding mode")
    before, after = [], []
    for size, k, s, d in zip(shape_of(x)[2:], kernel, strides, dilation):
        if not D.is_static(size):
            raise ctx.fail(
                f"auto_pad={auto} needs static spatial sizes; this input has {D.dim_to_str(size)}"
            )
        out = math.ceil(int(cast(int, size)) / s)
        total = max((out - 1) * s + (k - 1) * d + 1 - int(cast(int, size)), 0)
        small, big = total // 2, total - total // 2
        before.append(small if auto == "SAME_UPPER" else big)
        after.append(big if auto == "SAME_UPPER" else small)
    return tuple(before), tuple(after)


def _unit_height(ctx: NodeContext, v: Value) -> Value:
    """(A, B, L) as (A, B, 1, L): a view."""
    a, b, n = shape_of(v)
    return ctx.emit("reshape", [v], {"newshape": (a, b, 1, n)})


def _drop_height(ctx: NodeContext, y: Value) -> Value:
    a, b, _, n = shape_of(y)
    return ctx.emit("reshape", [y], {"newshape": (a, b, n)})


def _two_d(before: tuple[int, ...], after: tuple[int, ...], r: int) -> tuple[int, int, int, int]:
    """The (top, left, bottom, right) padding of a 1-D (over a unit height) or 2-D window."""
    if r == 1:
        return (0, before[0], 0, after[0])
    return (before[0], before[1], after[0], after[1])


def _lift(vals: tuple[int, ...], r: int, unit: int) -> tuple[int, ...]:
    return (unit, *vals) if r == 1 else vals


def convert_conv(ctx: NodeContext) -> list:
    x, w, b = ctx.input(0, "X"), ctx.input(1, "W"), ctx.optional(2)
    r = _spatial_rank(ctx, x)
    if rank_of(w) != r + 2:
        raise ctx.fail(f"the weight must have rank {r + 2} like the input, got {rank_of(w)}")
    if not all(D.is_static(d) for d in shape_of(w)[2:]):
        raise ctx.fail("the kernel size (the weight's spatial dims) must be static")
    kernel = tuple(int(cast(int, d)) for d in shape_of(w)[2:])
    given = ctx.attr("kernel_shape")
    if given is not None and tuple(int(k) for k in given) != kernel:
        raise ctx.fail(f"kernel_shape {list(given)} does not match the weight's {list(kernel)}")
    strides, dilation = _ints(ctx, "strides", r, 1), _ints(ctx, "dilations", r, 1)
    before, after = _pads(ctx, x, kernel, strides, dilation)
    groups = int(ctx.attr("group", 1))
    bias = [b] if b is not None else []
    if r <= 2:
        attrs = {
            "strides": _lift(strides, r, 1),
            "padding": _two_d(before, after, r),
            "dilation": _lift(dilation, r, 1),
            "groups": groups,
        }
        if r == 1:
            y = ctx.emit("conv2d", [_unit_height(ctx, x), _unit_height(ctx, w), *bias], attrs)
            return [_drop_height(ctx, y)]
        return [ctx.emit("conv2d", [x, w, *bias], attrs)]
    attrs_nd = {
        "strides": strides,
        "padding": before + after,
        "dilation": dilation,
        "groups": groups,
    }
    return [ctx.emit("conv_nd", [x, w, *bias], attrs_nd)]


def _window(ctx: NodeContext, x: Value) -> tuple[int, dict]:
    """The spatial rank and the attributes of an N-d pool (pool_size, strides, padding as
    beginnings then ends, dilation, ceil_mode)."""
    r = _spatial_rank(ctx, x)
    kernel = ctx.attr("kernel_shape")
    if kernel is None or len(kernel) != r:
        raise ctx.fail(f"kernel_shape must have {r} values for {r} spatial axes, got {kernel}")
    k = tuple(int(a) for a in kernel)
    if min(k) < 1:
        raise ctx.fail(f"kernel_shape must be positive, got {list(k)}")
    strides, dilation = _ints(ctx, "strides", r, 1), _ints(ctx, "dilations", r, 1)
    before, after = _pads(ctx, x, k, strides, dilation)
    for i in range(r):
        extent = dilation[i] * (k[i] - 1) + 1
        if max(before[i], after[i]) >= extent:
            raise ctx.fail(
                f"padding {max(before[i], after[i])} of spatial axis {i} is not smaller than "
                f"the window extent {extent}: a window would lie entirely in the padding"
            )
    return r, {
        "pool_size": k,
        "strides": strides,
        "padding": before + after,
        "dilation": dilation,
        "ceil_mode": bool(ctx.attr("ceil_mode", 0)),
    }


def _pool(ctx: NodeContext, op2d: str, opnd: str, extra: dict) -> list:
    x = ctx.input(0)
    r, attrs = _window(ctx, x)
    attrs.update(extra)
    if r > 2:
        return [ctx.emit(opnd, [x], attrs)]
    before, after = attrs["padding"][:r], attrs["padding"][r:]
    attrs2 = {
        **attrs,
        "pool_size": _lift(attrs["pool_size"], r, 1),
        "strides": _lift(attrs["strides"], r, 1),
        "dilation": _lift(attrs["dilation"], r, 1),
        "padding": _two_d(before, after, r),
    }
    if r == 1:
        return [_drop_height(ctx, ctx.emit(op2d, [_unit_height(ctx, x)], attrs2))]
    return [ctx.emit(op2d, [x], attrs2)]


def convert_max_pool(ctx: NodeContext) -> list:
    """Y, and where the node names it, Indices (storage_order orders only those)."""
    outs = _pool(ctx, "max_pool2d", "max_pool_nd", {})
    names = list(ctx.node.output)
    if len(names) > 1 and names[1]:
        order = int(ctx.attr("storage_order", 0))
        if order not in (0, 1):
            raise ctx.fail(f"storage_order must be 0 or 1, got {order}")
        x = ctx.input(0)
        _, attrs = _window(ctx, x)
        attrs["storage_order"] = order
        outs.append(ctx.emit("max_pool_indices", [x], attrs, k=1))
    return outs


def convert_average_pool(ctx: NodeContext) -> list:
    include = bool(ctx.attr("count_include_pad", 0))
    return _pool(ctx, "avg_pool2d", "avg_pool_nd", {"count_include_pad": include})


def _p(ctx: NodeContext) -> float:
    p = float(ctx.attr("p", 2))
    if not p > 0:
        raise ctx.fail(f"p must be positive, got {p}")
    return p


def convert_lp_pool(ctx: NodeContext) -> list:
    x = ctx.input(0)
    _, attrs = _window(ctx, x)
    attrs["p"] = _p(ctx)
    return [ctx.emit("lp_pool_nd", [x], attrs)]


def convert_global_max_pool(ctx: NodeContext) -> list:
    x = ctx.input(0)
    r = _spatial_rank(ctx, x)
    return [ctx.emit("max", [x], {"axes": tuple(range(2, r + 2)), "keepdims": True})]


def convert_global_lp_pool(ctx: NodeContext) -> list:
    x = ctx.input(0)
    r = _spatial_rank(ctx, x)
    sizes = shape_of(x)[2:]
    if not all(D.is_static(d) for d in sizes):
        raise ctx.fail("GlobalLpPool needs static spatial sizes")
    attrs = {
        "pool_size": tuple(int(cast(int, d)) for d in sizes),
        "strides": (1,) * r,
        "padding": (0,) * (2 * r),
        "dilation": (1,) * r,
        "ceil_mode": False,
        "p": _p(ctx),
    }
    return [ctx.emit("lp_pool_nd", [x], attrs)]


def _epsilon(ctx: NodeContext, default: float = 1e-5) -> float:
    return float(ctx.attr("epsilon", default))


def convert_instance_norm(ctx: NodeContext) -> list:
    x, scale, bias = ctx.input(0), ctx.input(1, "scale"), ctx.input(2, "B")
    if rank_of(x) < 3:
        raise ctx.fail(f"needs an input of rank 3 or more (N, C, spatial...), got {rank_of(x)}")
    c = shape_of(x)[1]
    if not D.is_static(c):
        raise ctx.fail("the channel count must be static")
    attrs = {"num_groups": int(cast(int, c)), "epsilon": _epsilon(ctx)}
    return [ctx.emit("group_norm", [x, scale, bias], attrs)]


def _per_channel(ctx: NodeContext, v: Value, groups: int, c: int, what: str) -> Value:
    """A GroupNormalization-18 parameter given per group, repeated for each channel."""
    if tuple(shape_of(v)) == (c,) and groups == c:
        return v
    if tuple(shape_of(v)) != (groups,):
        raise ctx.fail(
            f"{what} must have num_groups={groups} values at opset 18, got {shape_of(v)}"
        )
    if not isinstance(v, Folded):
        raise ctx.fail(
            f"{what} per group (opset 18) must be a constant to be repeated for each channel"
        )
    return Folded(np.repeat(v.array, c // groups), f"{v.name}_per_channel")


def convert_group_norm(ctx: NodeContext) -> list:
    x, scale, bias = ctx.input(0), ctx.input(1, "scale"), ctx.input(2, "bias")
    if rank_of(x) < 3:
        raise ctx.fail(f"needs an input of rank 3 or more (N, C, spatial...), got {rank_of(x)}")
    if ctx.attr("stash_type", 1) != 1:
        raise ctx.fail("stash_type other than 1 (float32 statistics) is not supported")
    groups = int(ctx.attr("num_groups"))
    c = shape_of(x)[1]
    if not D.is_static(c):
        raise ctx.fail("the channel count must be static")
    channels = int(cast(int, c))
    if groups < 1 or channels % groups:
        raise ctx.fail(f"{channels} channels are not divisible into num_groups={groups}")
    if ctx.opset < 21:
        scale = _per_channel(ctx, scale, groups, channels, "scale")
        bias = _per_channel(ctx, bias, groups, channels, "bias")
    attrs = {"num_groups": groups, "epsilon": _epsilon(ctx)}
    return [ctx.emit("group_norm", [x, scale, bias], attrs)]


def convert_mvn(ctx: NodeContext) -> list:
    x = ctx.input(0)
    rank = rank_of(x)
    axes = tuple(norm_axis(int(a), rank, ctx, "axes") for a in ctx.attr("axes", (0, 2, 3)))
    if len(set(axes)) != len(axes):
        raise ctx.fail(f"an axis is repeated in axes {list(axes)}")
    return [ctx.emit("mean_variance_norm", [x], {"axes": tuple(sorted(axes)), "epsilon": 1e-9})]


def convert_layer_norm_stats(ctx: NodeContext) -> list:
    """LayerNormalization: Y, and where the node names them, Mean and InvStdDev (in float32,
    the stash type, over the normalized axes, kept as length 1)."""
    outs = convert_layer_norm(ctx)
    names = list(ctx.node.output)
    if not any(names[1:]):
        return outs
    x = ctx.input(0)
    rank = rank_of(x)
    axis = norm_axis(int(ctx.attr("axis", -1)), rank, ctx)
    axes = tuple(range(axis, rank))
    stats_in = (
        x if x.type.dtype in ("f32", "f64") else ctx.emit("cast", [x], {"dtype": DType("f32")})
    )
    if len(names) > 1 and names[1]:
        mean = ctx.emit("mean", [stats_in], {"axes": axes, "keepdims": True}, k=1)
        outs.append(_as_f32(ctx, mean, 1))
    else:
        outs.append(outs[0])  # a placeholder for the unnamed output
    if len(names) > 2 and names[2]:
        attrs = {"axes": axes, "epsilon": _epsilon(ctx), "keepdims": True}
        inv = ctx.emit("inv_std_dev", [stats_in], attrs, k=2)
        outs.append(_as_f32(ctx, inv, 2))
    return outs


def _as_f32(ctx: NodeContext, v: Value, k: int) -> Value:
    if v.type.dtype == "f32":
        return v
    return ctx.emit("cast", [v], {"dtype": DType("f32")}, k=k)


def table() -> dict[str, Converter]:
    return {
        "Conv": convert_conv,
        "MaxPool": convert_max_pool,
        "AveragePool": convert_average_pool,
        "LpPool": convert_lp_pool,
        "GlobalMaxPool": convert_global_max_pool,
        "GlobalLpPool": convert_global_lp_pool,
        "InstanceNormalization": convert_instance_norm,
        "GroupNormalization": convert_group_norm,
        "MeanVarianceNormalization": convert_mvn,
        "LayerNormalization": convert_layer_norm_stats,
    }
