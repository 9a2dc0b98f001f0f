"""Converters of data-movement and shape operators, and of constants.

Shape arithmetic on tensors with symbolic dims (``Shape`` → ``Gather`` → ``Concat`` →
``Reshape``, as exporters write attention blocks) is carried out at import time on
:class:`ShapeValue` and ends as a reshape whose target shape has symbolic dims.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.nodes import DType
from relaxc.ir.types import dtype_from_numpy, numpy_dtype

from .context import NodeContext, norm_axis, rank_of, shape_of
from .slice_dims import slice_axis
from .values import Folded, ShapeValue, Value

Converter = Callable[[NodeContext], list]

_BIG = 1 << 62  # beyond any dim: Slice bounds are clamped to it
_TO_THE_END = (2**31 - 1, 2**63 - 1)
"""Slice ends that exporters write for "to the end" (numpy's None). onnxruntime reads them
so for either step direction; a literal clamp would make ``x[0:INT_MAX:-1]`` empty."""


def _as_shape_value(v: Value) -> ShapeValue | None:
    if isinstance(v, ShapeValue):
        return v
    if isinstance(v, Folded) and v.array.dtype.kind in "iu" and v.array.ndim <= 1:
        return ShapeValue(tuple(int(x) for x in v.array.reshape(-1)), v.array.ndim == 0)
    return None


def convert_identity(ctx: NodeContext) -> list:
    return [ctx.input(0)]


def convert_dropout(ctx: NodeContext) -> list:
    """Inference Dropout is the identity, whatever its ratio (an attribute before opset 12,
    an input from 12); its mask is all true from opset 12 (``output = scale * data * mask``).
    Before opset 12 the mask has no value ONNX defines outside training (onnxruntime gives
    false, onnx's reference true): refused if used. ``training_mode`` (an input from 12) must be a
    constant false, or true with a constant ratio of 0 (nothing dropped: the identity, the mask
    all true)."""
    x = ctx.input(0)
    if ctx.opset >= 12:
        mode = ctx.optional(2)
        if mode is not None:
            if not isinstance(mode, Folded):
                raise ctx.fail(
                    "its training_mode input is computed at run time; relaxc compiles "
                    "inference, so training_mode must be a constant false (it must be known "
                    "when the model is imported)"
                )
            ratio = ctx.optional(1)
            if ctx.scalar(mode, "training_mode") and (
                ratio is None or ctx.scalar(ratio, "the ratio input") != 0.0
            ):
                raise ctx.fail(
                    "training_mode=true (random dropout) is not supported: relaxc compiles "
                    "inference (training with a constant ratio of 0, which drops nothing, "
                    "is the identity and is supported)"
                )
    if len(ctx.node.output) < 2 or not ctx.node.output[1]:
        return [x]
    if ctx.opset < 12:
        return [x]  # the mask before opset 12 is refused if used (converters.EXTRA_OUTPUTS)
    shape = shape_of(x)
    if not all(D.is_static(d) for d in shape):
        filler = {"shape": shape, "fill_value": 1.0, "dtype": DType("bool")}
        return [x, ctx.emit("full", [], filler, k=1)]
    ones = np.broadcast_to(np.ones((), bool), [int(d) for d in shape])  # type: ignore[arg-type]
    return [x, Folded(ones, ctx.hint(1))]


def convert_constant(ctx: NodeContext) -> list:
    name = ctx.hint()
    if "value" in ctx.attrs:
        return [Folded(ctx.attrs["value"], name)]
    for key, dtype, vector in (
        ("value_float", np.float32, False),
        ("value_floats", np.float32, True),
        ("value_int", np.int64, False),
        ("value_ints", np.int64, True),
    ):
        if key in ctx.attrs:
            arr = np.array(ctx.attrs[key], dtype=dtype)
            return [Folded(arr.reshape(-1) if vector else arr.reshape(()), name)]
    for key, what in (
        ("value_string", "a string (strings are out of scope: relaxc computes on numbers)"),
        ("value_strings", "strings (strings are out of scope: relaxc computes on numbers)"),
        ("sparse_value", "a sparse tensor, which relaxc does not read"),
    ):
        if key in ctx.attrs:
            raise ctx.fail(f"its value ({key}) is {what}")
    raise ctx.fail("it has no value attribute (value, value_float(s) or value_int(s))")


def convert_size(ctx: NodeContext) -> list:
    """Size: the number of elements, an int64 scalar (a symbolic dim when the shape is)."""
    return [ShapeValue((D.simplify(D.product(shape_of(ctx.input(0)))),), scalar=True)]


def convert_constant_of_shape(ctx: NodeContext) -> list:
    shape = _as_shape_value(ctx.input(0))
    if shape is None:
        raise ctx.value_dependent("its shape input", ctx.input(0))
    fill = ctx.attr("value")
    fill = np.zeros(1, np.float32) if fill is None else fill
    if fill.size != 1:
        raise ctx.fail(f"value must hold one element, got shape {fill.shape}")
    if shape.static:
        return [
            Folded(
                # a read-only view of the one value: no memory however large (a splat)
                np.broadcast_to(fill.reshape(-1)[0], [int(d) for d in shape.dims]),  # type: ignore[arg-type]
                ctx.hint(),
            )
        ]
    dtype = dtype_from_numpy(fill.dtype)
    return [
        ctx.emit(
            "full",
            [],
            {
                "shape": shape.dims,
                "fill_value": float(fill.reshape(-1)[0]),
                "dtype": DType(dtype or "f32"),
            },
        )
    ]


def convert_shape(ctx: NodeContext) -> list:
    dims = shape_of(ctx.input(0))
    start, end = ctx.attr("start", 0), ctx.attr("end")
    return [ShapeValue(tuple(dims[slice(start, end)]))]


def _target_shape(ctx: NodeContext, x: Value, target: list) -> tuple:
    """Reshape's target with 0 (copy) and -1 (infer) resolved to dims."""
    src = shape_of(x)
    allowzero = bool(ctx.attr("allowzero", 0))
    out: list = []
    for i, d in enumerate(target):
        if isinstance(d, int) and d == 0 and not allowzero:
            if i >= len(src):
                raise ctx.fail(
                    f"shape entry {i} is 0 (copy) but the input has only {len(src)} dims"
                )
            d = src[i]
        out.append(d)
    holes = [i for i, d in enumerate(out) if isinstance(d, int) and d == -1]
    if len(holes) > 1:
        raise ctx.fail("the target shape has more than one -1")
    if holes:
        inferred = _divide_dims(list(src), [d for i, d in enumerate(out) if i != holes[0]])
        if inferred is None:
            raise ctx.fail(
                f"cannot infer the -1 of the target shape: the input's "
                f"{D.dim_to_str(D.product(src))} elements are not provably divisible by "
                f"{D.dim_to_str(D.product([d for i, d in enumerate(out) if i != holes[0]]))}"
            )
        out[holes[0]] = inferred
    return tuple(out)


def _divide_dims(numerator: list, denominator: list) -> D.Dim | None:
    """product(numerator) / product(denominator) when it is exact: symbolic factors cancel
    one for one, static parts divide evenly; None otherwise."""
    num_static, num_syms = 1, []
    for d in numerator:
        if D.is_static(d):
            num_static *= int(d)
        else:
            num_syms.append(d)
    den_static = 1
    for d in denominator:
        if D.is_static(d):
            den_static *= int(d)
            continue
        match = next((i for i, s in enumerate(num_syms) if D.dims_equal(s, d)), None)
        if match is None:
            return None
        del num_syms[match]
    if den_static == 0 or num_static % den_static:
        return None
    return D.simplify(D.mul(num_static // den_static, D.product(num_syms)))


def convert_reshape(ctx: NodeContext) -> list:
    x = ctx.input(0)
    if ctx.opset < 5:
        target = list(ctx.attr("shape"))
    else:
        sv = _as_shape_value(ctx.input(1, "shape"))
        if sv is None:
            raise ctx.value_dependent("the target shape", ctx.input(1))
        target = list(sv.dims)
    if isinstance(x, ShapeValue):
        if len(x.dims) == 1 and target in ([], [1], [-1]):
            return [ShapeValue(x.dims, scalar=not target)]
    new = _target_shape(ctx, x, target)
    if tuple(new) == tuple(shape_of(x)) and all(
        D.dims_equal(a, b) for a, b in zip(new, shape_of(x))
    ):
        return [x]
    return [ctx.emit("reshape", [x], {"newshape": new})]


def convert_flatten(ctx: NodeContext) -> list:
    x = ctx.input(0)
    shape = shape_of(x)
    axis = int(ctx.attr("axis", 1))
    if not -len(shape) <= axis <= len(shape):
        raise ctx.fail(f"axis {axis} is out of range for rank {len(shape)}")
    if axis < 0:
        axis += len(shape)
    return [
        ctx.emit("reshape", [x], {"newshape": (D.product(shape[:axis]), D.product(shape[axis:]))})
    ]


def convert_transpose(ctx: NodeContext) -> list:
    x = ctx.input(0)
    rank = rank_of(x)
    perm = ctx.attr("perm")
    perm = tuple(range(rank - 1, -1, -1)) if perm is None else tuple(int(p) for p in perm)
    if sorted(p % rank if rank else p for p in perm) != list(range(rank)):
        raise ctx.fail(f"perm {list(perm)} is not a permutation of {rank} axes")
    if perm == tuple(range(rank)):
        return [x]
    return [ctx.emit("transpose", [x], {"axes": perm})]


def _axes(ctx: NodeContext, since: int, what: str = "axes") -> list[int] | None:
    if ctx.opset >= since:
        return ctx.ints(ctx.optional(1), f"the {what} input", sets_shape=True)
    axes = ctx.attr(what)
    return None if axes is None else [int(a) for a in axes]


def convert_squeeze(ctx: NodeContext) -> list:
    x = ctx.input(0)
    axes = _axes(ctx, 13)
    if isinstance(x, ShapeValue) and len(x.dims) == 1 and axes in (None, [0], [-1]):
        return [ShapeValue(x.dims, scalar=True)]
    shape = shape_of(x)
    if axes is None:
        if not all(D.is_static(d) for d in shape):
            raise ctx.fail("Squeeze without axes needs a static input shape")
        axes = [i for i, d in enumerate(shape) if d == 1]
    normalized = tuple(sorted({norm_axis(a, len(shape), ctx) for a in axes}))
    if not normalized:
        return [x]
    return [ctx.emit("squeeze", [x], {"axes": normalized})]


def convert_unsqueeze(ctx: NodeContext) -> list:
    x = ctx.input(0)
    axes = _axes(ctx, 13)
    if axes is None:
        raise ctx.fail("needs axes")
    out_rank = rank_of(x) + len(axes)
    normalized = sorted({norm_axis(a, out_rank, ctx) for a in axes})
    if len(normalized) != len(axes):
        raise ctx.fail(f"axes {axes} repeat an axis")
    if isinstance(x, ShapeValue) and x.scalar and normalized == [0]:
        return [ShapeValue(x.dims)]
    for a in normalized:
        x = ctx.emit("expand_dims", [x], {"axis": a})
    return [x]


def convert_concat(ctx: NodeContext) -> list:
    values = [v for v in ctx.inputs if v is not None]
    if any(isinstance(v, ShapeValue) for v in values):
        parts = [_as_shape_value(v) for v in values]
        if all(p is not None and not p.scalar for p in parts):
            return [ShapeValue(tuple(d for p in parts for d in p.dims))]  # type: ignore[union-attr]
    axis = int(ctx.attr("axis", 0))
    rank = rank_of(values[0])
    axis = norm_axis(axis, rank, ctx)
    values = [
        v for v in values if not (len(shape_of(v)) == rank and shape_of(v)[axis] == 0)
    ] or values[:1]
    if len(values) == 1:
        return [values[0]]
    return [ctx.emit("concat", values, {"axis": axis})]


def convert_split(ctx: NodeContext) -> list:
    x = ctx.input(0)
    shape = shape_of(x)
    axis = norm_axis(int(ctx.attr("axis", 0)), len(shape), ctx)
    n = len(ctx.node.output)
    sizes = (
        ctx.ints(ctx.optional(1), "the split input", sets_shape=True)
        if ctx.opset >= 13
        else ctx.attr("split")
    )
    dim = shape[axis]
    if sizes is None and ctx.opset >= 18 and ctx.attr("num_outputs") is not None:
        if int(ctx.attr("num_outputs")) != n:
            raise ctx.fail(f"num_outputs={ctx.attr('num_outputs')}, but the node has {n} outputs")
        if D.is_static(dim) and int(dim) % n:  # type: ignore[arg-type]
            chunk = -(-int(dim) // n)  # type: ignore[arg-type]
            sizes = [chunk] * (n - 1) + [int(dim) - chunk * (n - 1)]  # type: ignore[arg-type]
    if n == 1:
        return [x]
    if sizes is not None:
        sizes = [int(s) for s in sizes]
        if len(sizes) != n:
            raise ctx.fail(f"split sizes {sizes} do not match its {n} outputs")
        if D.is_static(dim) and sum(sizes) != int(dim):  # type: ignore[arg-type]
            raise ctx.fail(f"split sizes {sizes} add up to {sum(sizes)}, but the axis has {dim}")
        indices = tuple(int(i) for i in np.cumsum(sizes)[:-1])
        return ctx.emit("split", [x], {"indices_or_sections": indices, "axis": axis})
    return ctx.emit("split", [x], {"indices_or_sections": n, "axis": axis})


def convert_gather(ctx: NodeContext) -> list:
    data, indices = ctx.input(0), ctx.input(1)
    rank = rank_of(data)
    axis = norm_axis(int(ctx.attr("axis", 0)), rank, ctx)
    dim = shape_of(data)[axis]
    if isinstance(indices, (Folded, ShapeValue)):
        idx = ctx.folded(indices, "the indices")
        if D.is_static(dim):
            if ((idx < -int(dim)) | (idx >= int(dim))).any():  # type: ignore[arg-type]
                raise ctx.fail(f"an index is out of range for an axis of {dim}")
            idx = np.where(idx < 0, idx + int(dim), idx)  # type: ignore[arg-type]
        elif (idx < 0).any():
            raise ctx.fail(
                f"negative indices into the symbolic dim {D.dim_to_str(dim)} are not supported"
            )
        if isinstance(data, ShapeValue):
            picked = tuple(data.dims[int(i)] for i in idx.reshape(-1))
            return [ShapeValue(picked, scalar=idx.ndim == 0)]
        indices = Folded(idx.astype(np.int64), getattr(indices, "name", ctx.hint()) or ctx.hint())
    elif indices.type.dtype not in ("i32", "i64"):
        raise ctx.fail(f"the indices must be int32 or int64, got {indices.type.dtype}")
    elif D.is_static(dim):
        indices = _wrapped_indices(ctx, indices, int(dim))  # type: ignore[arg-type]
    else:
        indices = _wrapped_symbolic(ctx, indices, dim)
    return [ctx.emit("take", [data, indices], {"axis": axis})]


def _wrapped_symbolic(ctx: NodeContext, indices: Value, dim: D.Dim) -> Value:
    """Run-time ``indices`` into the symbolic ``dim``, negative ones wrapped as ONNX reads
    them: ``where(indices < 0, indices + dim, indices)``, the dim computed at run time."""
    size: Value = ShapeValue((dim,), scalar=True)
    if indices.type.dtype != "i64":
        size = ctx.emit(
            "cast",
            [ctx.builder.runtime(size, f"{ctx.hint()}_dim")],
            {"dtype": DType(indices.type.dtype)},
        )
    zero = Folded(np.zeros((), numpy_dtype(indices.type.dtype)), f"{ctx.hint()}_zero")
    negative = ctx.emit("less", [indices, zero])
    shifted = ctx.emit("add", [indices, ctx.builder.runtime(size, f"{ctx.hint()}_dim")])
    return ctx.emit("where", [negative, shifted, indices])


def _wrapped_indices(ctx: NodeContext, indices: Value, dim: int) -> Value:
    """Run-time ``indices`` in [-dim, dim) as ONNX reads them, wrapped into [0, dim):
    ``table[indices + dim]`` with ``table = [0 .. dim-1, 0 .. dim-1]`` (exact, one temporary
    the size of the indices)."""
    dtype = numpy_dtype(indices.type.dtype)
    table = Folded(np.tile(np.arange(dim, dtype=dtype), 2), f"{ctx.hint()}_wrap")
    shift = Folded(np.array(dim, dtype=dtype), f"{ctx.hint()}_dim")
    shifted = ctx.emit("add", [indices, shift])
    return ctx.emit("take", [table, shifted], {"axis": 0})


def convert_slice(ctx: NodeContext) -> list:
    x = ctx.input(0)
    if ctx.opset < 10:
        starts, ends, axes, steps = ctx.attr("starts"), ctx.attr("ends"), ctx.attr("axes"), None
    else:
        starts = _bound_dims(ctx, ctx.input(1, "starts"), "starts")
        ends = _bound_dims(ctx, ctx.input(2, "ends"), "ends")
        axes = ctx.ints(ctx.optional(3), "axes")
        steps = ctx.ints(ctx.optional(4), "steps")
    rank = rank_of(x)
    axes = (
        list(range(len(starts))) if axes is None else [norm_axis(int(a), rank, ctx) for a in axes]
    )
    steps = [1] * len(starts) if steps is None else [int(s) for s in steps]
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.fail("starts, ends, axes and steps must have the same length")
    if 0 in steps:
        raise ctx.fail("a step of 0")
    shape = shape_of(x)
    symbolic = [
        i
        for i, a in enumerate(axes)
        if not (D.is_static(shape[a]) and D.is_static(starts[i]) and D.is_static(ends[i]))
    ]
    if isinstance(x, ShapeValue) and not x.scalar:
        if symbolic:
            raise ctx.fail("it slices a shape with symbolic bounds, which relaxc does not fold")
        return [ShapeValue(tuple(x.dims[slice(int(starts[0]), int(ends[0]), steps[0])]))]
    for i in symbolic:  # each such axis on its own (slice_dims); the static ones below
        x = slice_axis(ctx, x, axes[i], starts[i], ends[i], steps[i])
    keep = [i for i in range(len(axes)) if i not in symbolic]
    if not keep:
        return [x]
    starts, ends, axes, steps = ([int(v[i]) for i in keep] for v in (starts, ends, axes, steps))
    begin, end = [], []
    for s, e, a, step in zip(starts, ends, axes, steps):
        dim = shape[a]
        limit = int(dim) + 1 if D.is_static(dim) else _BIG  # type: ignore[arg-type]
        if e in _TO_THE_END:  # "slice to the end" in the direction of the step, as numpy's None
            e = limit if step > 0 else -limit
        elif step < 0 and D.is_static(dim):
            # ONNX clamps a negative step's start to [0, dim - 1] and its end to [-1, dim - 1]
            # after adding dim to negative ones; numpy would give an empty slice for a start
            # below 0 (x[-5::-1] of 3 elements is [x2, x1, x0] in ONNX, [] in numpy).
            n = int(dim)  # type: ignore[arg-type]
            s = min(max(s + n if s < 0 else s, 0), n - 1) if n else 0
            e = min(max(e + n if e < 0 else e, -1), n - 1)
            e = -limit if e == -1 else e  # before index 0, as numpy spells it
        begin.append(max(-limit, min(limit, s)))
        end.append(max(-limit, min(limit, e)))
    order = sorted(range(len(axes)), key=lambda i: axes[i])
    attrs = {
        "begin": tuple(begin[i] for i in order),
        "end": tuple(end[i] for i in order),
        "strides": tuple(steps[i] for i in order),
        "axes": tuple(axes[i] for i in order),
    }
    return [ctx.emit("strided_slice", [x], attrs)]


def _bound_dims(ctx: NodeContext, v: Value, what: str) -> list[D.Dim]:
    """Slice's starts or ends as dims: constants, or shape arithmetic on (symbolic) dims."""
    sv = _as_shape_value(v)
    if sv is None:
        ctx.ints(v, f"its {what} input", sets_shape=True)  # a run-time or non-integer input
        raise ctx.fail(f"{what} must be integers")
    return list(sv.dims)


def convert_expand(ctx: NodeContext) -> list:
    x = ctx.input(0)
    target = _as_shape_value(ctx.input(1, "shape"))
    if target is None:
        raise ctx.value_dependent("the target shape", ctx.input(1))
    return [broadcast_to(ctx, x, target.dims)]


def broadcast_to(ctx: NodeContext, x: Value, dims: tuple[D.Dim, ...]) -> Value:
    """``x`` broadcast with the (possibly symbolic) shape ``dims``, as ONNX Expand does:
    ``x * ones(dims)``, or for bool ``where(x, ones, false)``."""
    dtype = x.type.dtype
    ones = ShapeValue(dims)
    if ones.static:
        base: Value = Folded(
            np.broadcast_to(np.ones((), numpy_dtype(dtype)), [int(d) for d in ones.dims]),  # type: ignore[arg-type]
            f"{ctx.hint()}_ones",
        )
    else:
        base = ctx.emit("full", [], {"shape": ones.dims, "fill_value": 1.0, "dtype": DType(dtype)})
    if dtype == "bool":  # x where true, else false: x broadcast to the target
        return ctx.emit("where", [x, base, _false()])
    return ctx.emit("multiply", [x, base])


def _false() -> Folded:
    return Folded(np.array(False), "false")


def table() -> dict[str, Converter]:
    return {
        "Identity": convert_identity,
        "Dropout": convert_dropout,
        "Constant": convert_constant,
        "ConstantOfShape": convert_constant_of_shape,
        "Shape": convert_shape,
        "Size": convert_size,
        "Reshape": convert_reshape,
        "Flatten": convert_flatten,
        "Transpose": convert_transpose,
        "Squeeze": convert_squeeze,
        "Unsqueeze": convert_unsqueeze,
        "Concat": convert_concat,
        "Split": convert_split,
        "Gather": convert_gather,
        "Slice": convert_slice,
        "Expand": convert_expand,
    }
