"""Converters of padding, tiling and indexing operators: Pad, Tile, DepthToSpace, SpaceToDepth,
GatherElements, GatherND, ScatterND, ScatterElements (and the old Scatter), OneHot, Trilu,
CenterCropPad, Compress (with a condition known at import) and Einsum.

DepthToSpace and SpaceToDepth are a reshape (a view), one transpose (the one copy a kernel
of their own would make) and a reshape. Einsum is decomposed into transposes, reshapes,
strided slices (diagonals), sums, a multiply or a batched matmul; CenterCropPad is one pad
whose negative pads crop.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.nodes import DType
from relaxc.ir.types import DTYPES

from . import shape_fold
from .context import NodeContext, norm_axis, rank_of, shape_of
from .einsum import convert_einsum
from .convert_shape import broadcast_to
from .values import Folded, Runtime, ShapeValue, Value

Converter = Callable[[NodeContext], list]


def _static(ctx: NodeContext, dims: Sequence[D.Dim], what: str) -> list[int]:
    if not all(D.is_static(d) for d in dims):
        raise ctx.fail(f"{what} must be static, got ({', '.join(D.dim_to_str(d) for d in dims)})")
    return [int(d) for d in dims]  # type: ignore[arg-type]


# -- Pad / CenterCropPad ---------------------------------------------------------------------


def convert_pad(ctx: NodeContext) -> list:
    x = ctx.input(0)
    rank = rank_of(x)
    mode = ctx.attr("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode not in ("constant", "reflect", "edge", "wrap") or (mode == "wrap" and ctx.opset < 19):
        raise ctx.fail(f"mode '{mode}' is not an ONNX Pad mode at opset {ctx.opset}")
    runtime_value: Runtime | None = None
    if ctx.opset < 11:
        pads = ctx.attr("pads" if ctx.opset >= 2 else "paddings")
        if pads is None:
            raise ctx.fail("needs the pads attribute")
        pads = [int(p) for p in pads]
        value = float(ctx.attr("value", 0.0))
        axes = None
    else:
        given = ctx.input(1, "pads")
        symbolic = isinstance(given, ShapeValue) and not given.static
        pads = (
            list(given.dims)  # type: ignore[union-attr]
            if symbolic
            else ctx.ints(given, "the pads input", sets_shape=True)
        )
        value_in = ctx.optional(2)
        runtime_value = value_in if isinstance(value_in, Runtime) and mode == "constant" else None
        if runtime_value is not None:
            value_in = None
        value = ctx.scalar(value_in, "the constant_value input") or 0.0
        axes = ctx.ints(ctx.optional(3), "the axes input") if ctx.opset >= 18 else None
    assert pads is not None and value is not None
    axes = list(range(rank)) if axes is None else [norm_axis(a, rank, ctx) for a in axes]
    if len(set(axes)) != len(axes):
        raise ctx.fail(f"axes {axes} repeat an axis")
    if len(pads) != 2 * len(axes):
        raise ctx.fail(f"pads {pads} must hold 2 values for each of the {len(axes)} padded axes")
    full: list[D.Dim] = [0] * (2 * rank)
    for i, a in enumerate(axes):
        full[a], full[rank + a] = pads[i], pads[len(axes) + i]
    if runtime_value is not None and any(p != 0 for p in full):
        if not all(D.is_static(p) for p in full):
            raise ctx.fail(
                "it pads by symbolic amounts with a constant_value computed at run time; "
                "relaxc needs one of the two known when the model is imported"
            )
        static = tuple(int(p) for p in full)  # type: ignore[arg-type]
        return [_pad_with_runtime_value(ctx, x, static, runtime_value)]
    fixed = [int(p) if D.is_static(p) else 0 for p in full]  # type: ignore[arg-type]
    if any(fixed):
        x = ctx.emit("pad", [x], {"pads": tuple(fixed), "mode": mode, "value": value})
    for k, p in enumerate(full):
        if not D.is_static(p):
            x = _pad_symbolic(ctx, x, k % rank, p, k < rank, mode, value)
    return [x]


def _pad_symbolic(
    ctx: NodeContext, x: Value, axis: int, amount: D.Dim, before: bool, mode: str, value: float
) -> Value:
    """A pad of a symbolic ``amount`` (``(4 - n % 4) % 4``, padding to a multiple): the
    constant ``value`` joined to the axis, a ``full`` of that length."""
    if mode != "constant":
        raise ctx.fail(
            f"it pads axis {axis} by the symbolic {D.dim_to_str(amount)} in mode '{mode}'; "
            "relaxc pads by symbolic amounts only with a constant (give a static shape)"
        )
    if shape_fold.interval(amount, ctx.builder.bounds)[0] < 0:
        raise ctx.fail(
            f"it pads axis {axis} by {D.dim_to_str(amount)}, which may be negative (a crop); "
            "relaxc pads by symbolic amounts only when they are never negative"
        )
    shape = list(shape_of(x))
    shape[axis] = amount
    dtype = x.type.dtype
    filler = ctx.emit(
        "full", [], {"shape": tuple(shape), "fill_value": value, "dtype": DType(dtype)}
    )
    parts = [filler, x] if before else [x, filler]
    return ctx.emit("concat", parts, {"axis": axis})


def _pad_with_runtime_value(
    ctx: NodeContext, x: Value, pads: tuple[int, ...], value: Runtime
) -> Value:
    """A constant pad whose value is computed at run time: x padded with zeros, and the
    value where a pad of ones with falses is false (the same numbers as one pad)."""
    if value.type.dtype != x.type.dtype:
        raise ctx.fail(f"the constant_value is {value.type.dtype}, the data {x.type.dtype}")
    size = D.product(value.type.shape) if value.type.shape else 1
    if size != 1:
        raise ctx.fail(f"the constant_value input must be a single value, got {value.type}")
    scalar = ctx.emit("reshape", [value], {"newshape": ()}) if value.type.shape else value
    padded = ctx.emit("pad", [x], {"pads": pads})
    inside = ctx.emit("ones", [], {"shape": shape_of(x), "dtype": DType("bool")})
    inside = ctx.emit("pad", [inside], {"pads": pads})
    return ctx.emit("where", [inside, padded, scalar])


def convert_center_crop_pad(ctx: NodeContext) -> list:
    x = ctx.input(0)
    rank = rank_of(x)
    target = ctx.ints(ctx.input(1, "shape"), "the shape input", sets_shape=True)
    assert target is not None
    axes_attr = ctx.attr("axes")
    axes = (
        list(range(rank))
        if axes_attr is None
        else [norm_axis(int(a), rank, ctx) for a in axes_attr]
    )
    if len(target) != len(axes):
        raise ctx.fail(f"shape {target} must hold one length per axis of {axes}")
    dims = _static(ctx, [shape_of(x)[a] for a in axes], "the cropped or padded dims")
    pads = [0] * (2 * rank)
    for a, d, t in zip(axes, dims, target):
        if t < 0:
            raise ctx.fail(f"shape {target} has a negative length")
        begin = -((d - t) // 2) if d > t else (t - d) // 2
        pads[a], pads[rank + a] = begin, (t - d) - begin
    if not any(pads):
        return [x]
    return [ctx.emit("pad", [x], {"pads": tuple(pads)})]


# -- Tile ------------------------------------------------------------------------------------


def convert_tile(ctx: NodeContext) -> list:
    x = ctx.input(0)
    rank = rank_of(x)
    if ctx.opset < 6:
        tiles = ctx.scalar(ctx.input(1, "tiles"), "the tiles input", sets_shape=True)
        axis = ctx.scalar(ctx.input(2, "axis"), "the axis input")
        assert tiles is not None and axis is not None
        reps = [1] * rank
        reps[norm_axis(int(axis), rank, ctx)] = int(tiles)
    else:
        given = ctx.input(1, "repeats")
        if isinstance(given, ShapeValue) and not given.static:
            return [_tile_symbolic(ctx, x, given)]
        got = ctx.ints(given, "the repeats input", sets_shape=True)
        assert got is not None
        reps = got
    if len(reps) != rank:
        raise ctx.fail(f"repeats {reps} must hold one count per axis of the rank-{rank} input")
    if any(r < 0 for r in reps):
        raise ctx.fail(f"repeats {reps} must not be negative")
    if all(r == 1 for r in reps):
        return [x]
    return [ctx.emit("tile", [x], {"repeats": tuple(reps)})]


def _tile_symbolic(ctx: NodeContext, x: Value, repeats: ShapeValue) -> Value:
    """Tile by repeats with symbolic counts (``cls_token.repeat(batch, 1, 1)``): an axis
    of length 1 repeated ``r`` times is that axis broadcast to ``r`` (the static counts
    tile first)."""
    shape = shape_of(x)
    if len(repeats.dims) != len(shape):
        raise ctx.fail(f"repeats has {len(repeats.dims)} counts for a rank-{len(shape)} input")
    for a, (d, r) in enumerate(zip(shape, repeats.dims)):
        if not D.is_static(r) and d != 1:
            raise ctx.fail(
                f"it repeats axis {a} (of length {D.dim_to_str(d)}) a symbolic "
                f"{D.dim_to_str(r)} times; relaxc tiles by symbolic counts only axes of "
                "length 1 (give the input a static shape with --shape)"
            )
    static = tuple(int(r) if D.is_static(r) else 1 for r in repeats.dims)  # type: ignore[arg-type]
    if any(r < 0 for r in static):
        raise ctx.fail(f"repeats {list(static)} must not be negative")
    if any(r != 1 for r in static):
        x = ctx.emit("tile", [x], {"repeats": static})
    target = tuple(d if D.is_static(r) else r for d, r in zip(shape_of(x), repeats.dims))
    return broadcast_to(ctx, x, target)


# -- DepthToSpace / SpaceToDepth -------------------------------------------------------------


def _block(ctx: NodeContext, x: Value) -> tuple[int, list[D.Dim]]:
    if rank_of(x) != 4:
        raise ctx.fail(f"needs a 4-D NCHW input, got rank {rank_of(x)}")
    b = int(ctx.attr("blocksize", 0))
    if b < 1:
        raise ctx.fail(f"blocksize must be positive, got {b}")
    return b, list(shape_of(x))


def convert_depth_to_space(ctx: NodeContext) -> list:
    x = ctx.input(0)
    b, (n, c, h, w) = _block(ctx, x)
    mode = ctx.attr("mode", b"DCR")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode not in ("DCR", "CRD"):
        raise ctx.fail(f"mode '{mode}' is not DCR or CRD")
    (channels,) = _static(ctx, [c], "the channel count")
    if channels % (b * b):
        raise ctx.fail(f"{channels} channels do not divide into blocks of {b}x{b}")
    oc = channels // (b * b)
    if mode == "DCR":
        split, perm = (n, b, b, oc, h, w), (0, 3, 4, 1, 5, 2)
    else:
        split, perm = (n, oc, b, b, h, w), (0, 1, 4, 2, 5, 3)
    y = ctx.emit("reshape", [x], {"newshape": split})
    y = ctx.emit("transpose", [y], {"axes": perm})
    return [ctx.emit("reshape", [y], {"newshape": (n, oc, D.mul(h, b), D.mul(w, b))})]


def convert_space_to_depth(ctx: NodeContext) -> list:
    x = ctx.input(0)
    b, (n, c, h, w) = _block(ctx, x)
    hh, ww = _static(ctx, [h, w], "the spatial dims")
    if hh % b or ww % b:
        raise ctx.fail(f"the spatial size {hh}x{ww} does not divide into blocks of {b}x{b}")
    mode = ctx.attr("mode", b"DCR") if ctx.opset >= 28 else "DCR"
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode not in ("DCR", "CRD"):
        raise ctx.fail(f"mode '{mode}' is not DCR or CRD")
    perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    y = ctx.emit("reshape", [x], {"newshape": (n, c, hh // b, b, ww // b, b)})
    y = ctx.emit("transpose", [y], {"axes": perm})
    return [ctx.emit("reshape", [y], {"newshape": (n, D.mul(c, b * b), hh // b, ww // b)})]


# -- gathers and scatters --------------------------------------------------------------------


def _reduction(ctx: NodeContext) -> str:
    red = ctx.attr("reduction", b"none")
    red = red.decode() if isinstance(red, bytes) else str(red)
    allowed = (
        ["none"]
        + (["add", "mul"] if ctx.opset >= 16 else [])
        + (["max", "min"] if ctx.opset >= 18 else [])
    )
    if red not in allowed:
        raise ctx.fail(f"reduction '{red}' is not one of {', '.join(allowed)} at opset {ctx.opset}")
    return red


def convert_gather_elements(ctx: NodeContext) -> list:
    data, idx = ctx.input(0), ctx.input(1, "indices")
    axis = norm_axis(int(ctx.attr("axis", 0)), rank_of(data), ctx)
    return [ctx.emit("gather_elements", [data, idx], {"axis": axis})]


def convert_gather_nd(ctx: NodeContext) -> list:
    data, idx = ctx.input(0), ctx.input(1, "indices")
    return [ctx.emit("gather_nd", [data, idx], {"batch_dims": int(ctx.attr("batch_dims", 0))})]


def convert_scatter_nd(ctx: NodeContext) -> list:
    data, idx, upd = ctx.input(0), ctx.input(1, "indices"), ctx.input(2, "updates")
    return [ctx.emit("scatter_nd", [data, idx, upd], {"reduction": _reduction(ctx)})]


def convert_scatter_elements(ctx: NodeContext) -> list:
    data, idx, upd = ctx.input(0), ctx.input(1, "indices"), ctx.input(2, "updates")
    axis = norm_axis(int(ctx.attr("axis", 0)), rank_of(data), ctx)
    red = _reduction(ctx) if ctx.op_type == "ScatterElements" else "none"
    return [ctx.emit("scatter_elements", [data, idx, upd], {"axis": axis, "reduction": red})]


# -- OneHot / Trilu / Compress ---------------------------------------------------------------


def convert_one_hot(ctx: NodeContext) -> list:
    idx, values = ctx.input(0), ctx.input(2, "values")
    depth = ctx.scalar(ctx.input(1, "depth"), "the depth input", sets_shape=True)
    assert depth is not None
    if depth < 1:
        raise ctx.fail(f"depth must be positive, got {depth:g}")
    if DTYPES[idx.type.dtype].kind not in ("int", "uint"):
        idx = ctx.emit("cast", [idx], {"dtype": DType("i64")})  # ONNX truncates them
    if tuple(values.type.shape) != (2,):
        values = ctx.emit("reshape", [values], {"newshape": (2,)})
    axis = norm_axis(int(ctx.attr("axis", -1)), rank_of(idx) + 1, ctx)
    return [ctx.emit("one_hot", [idx, values], {"depth": int(depth), "axis": axis})]


def convert_trilu(ctx: NodeContext) -> list:
    x = ctx.input(0)
    k_in = ctx.optional(1)
    upper = bool(ctx.attr("upper", 1))
    if k_in is not None and not isinstance(k_in, Folded):  # k at run time: an input of the op
        return [ctx.emit("trilu", [x, k_in], {"upper": upper})]
    k = ctx.ints(k_in, "the k input") if k_in is not None else [0]
    assert k is not None
    if len(k) != 1:
        raise ctx.fail(f"k must be a single integer, got {k}")
    return [ctx.emit("trilu", [x], {"k": int(k[0]), "upper": upper})]


def convert_compress(ctx: NodeContext) -> list:
    x, cond_in = ctx.input(0), ctx.input(1, "condition")
    if not isinstance(cond_in, Folded):
        raise ctx.value_dependent("its condition (which elements it keeps)", cond_in)
    cond = cond_in.array.reshape(-1).astype(bool)
    axis_attr = ctx.attr("axis")
    if axis_attr is None:
        x = ctx.emit("reshape", [x], {"newshape": (-1,)})
        axis = 0
    else:
        axis = norm_axis(int(axis_attr), rank_of(x), ctx)
    length = shape_of(x)[axis]
    if D.is_static(length) and cond.size > int(length):  # type: ignore[arg-type]
        raise ctx.fail(f"the condition has {cond.size} values for an axis of {length}")
    picked = Folded(np.nonzero(cond)[0].astype(np.int64), ctx.hint() + "_kept")
    return [ctx.emit("take", [x, picked], {"axis": axis})]


def table() -> dict[str, Converter]:
    return {
        "Pad": convert_pad,
        "CenterCropPad": convert_center_crop_pad,
        "Tile": convert_tile,
        "DepthToSpace": convert_depth_to_space,
        "SpaceToDepth": convert_space_to_depth,
        "GatherElements": convert_gather_elements,
        "GatherND": convert_gather_nd,
        "ScatterND": convert_scatter_nd,
        "ScatterElements": convert_scatter_elements,
        "Scatter": convert_scatter_elements,
        "OneHot": convert_one_hot,
        "Trilu": convert_trilu,
        "Compress": convert_compress,
        "Einsum": convert_einsum,
    }
