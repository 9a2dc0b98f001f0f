"""Shape and layout ops: concat, split, transpose, reshape, flatten, squeeze, expand_dims,
strided_slice and take.

reshape, flatten, squeeze and expand_dims are views (they alias input 0); the others copy.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.registry import AttrSpec, OpDef, OpError, Registry
from relaxc.ir.types import DTYPES, TensorType, TupleType, Type

from .checks import as_contiguous, dstr, exact_div, floordiv, require_dims_equal, sstr, sub
from .common import norm_axis, norm_axes, require_computable, same_dtype, tensor, tensors

# -- concat ------------------------------------------------------------------------------


def _infer_concat(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    ts = tensors(inputs, "concat")
    dtype = same_dtype(ts, "concat")
    require_computable(dtype, "concat")
    first = ts[0]
    if first.ndim == 0:
        raise OpError("concat: inputs must have rank at least 1")
    axis = norm_axis(attrs["axis"], first.ndim, "concat")
    total: D.Dim = 0
    for i, t in enumerate(ts):
        if t.ndim != first.ndim:
            raise OpError(f"concat: input {i} has rank {t.ndim}, input 0 has rank {first.ndim}")
        for j, (a, b) in enumerate(zip(first.shape, t.shape)):
            if j != axis:
                require_dims_equal(a, b, "concat", f"dimension {j} of input 0 and input {i}")
        total = D.add(total, t.shape[axis])
    shape = list(first.shape)
    shape[axis] = total
    return TensorType(tuple(shape), dtype)


def _concat(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    return as_contiguous(np.concatenate(list(xs), axis=attrs["axis"]), xs[0].dtype)


def _concat_into(xs: Sequence[np.ndarray], attrs: Mapping[str, Any], out: np.ndarray) -> bool:
    """concat copied straight into a separate ``out`` (the same bytes: a copy)."""
    if any(x.dtype != out.dtype or np.may_share_memory(out, x) for x in xs):
        return False
    try:
        np.concatenate(list(xs), axis=attrs["axis"], out=out)
    except ValueError:  # out is not the result's shape
        return False
    return True


# -- split -------------------------------------------------------------------------------


def _split_sizes(dim: D.Dim, spec: Any) -> list[D.Dim]:
    """The lengths of the parts ``split`` cuts an axis of length ``dim`` into."""
    if isinstance(spec, int) and not isinstance(spec, bool):
        if spec < 1:
            raise OpError(f"split: the number of sections must be positive, got {spec}")
        if isinstance(dim, int):
            if dim % spec:
                raise OpError(f"split: dimension {dim} does not divide into {spec} equal sections")
            return [dim // spec] * spec
        return [floordiv(dim, spec)] * spec
    if not (
        isinstance(spec, tuple)
        and all(isinstance(i, int) and not isinstance(i, bool) for i in spec)
    ):
        raise OpError("split: indices_or_sections must be an integer or a tuple of integers")
    if isinstance(dim, int):
        bounds = [0, *spec, dim]
        return [len(range(dim)[a:b]) for a, b in zip(bounds, bounds[1:])]
    if any(i < 0 for i in spec) or list(spec) != sorted(spec):
        raise OpError(
            f"split: with a symbolic dimension {dstr(dim)} the split indices must be "
            f"non-negative and increasing, got {spec}"
        )
    sizes: list[D.Dim] = [b - a for a, b in zip((0, *spec), spec)]
    sizes.append(sub(dim, spec[-1] if spec else 0))
    return sizes


def _infer_split(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    (x,) = tensors(inputs, "split")
    require_computable(x.dtype, "split")
    if x.ndim == 0:
        raise OpError("split: input must have rank at least 1")
    axis = norm_axis(attrs["axis"], x.ndim, "split")
    fields = []
    for size in _split_sizes(x.shape[axis], attrs["indices_or_sections"]):
        shape = list(x.shape)
        shape[axis] = size
        fields.append(TensorType(tuple(shape), x.dtype))
    return TupleType(tuple(fields))


def _split(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> tuple[np.ndarray, ...]:
    x = xs[0]
    axis = attrs["axis"]
    spec = attrs["indices_or_sections"]
    n = x.shape[axis]
    if isinstance(spec, int):
        if n % spec:
            raise OpError(f"split: dimension {n} does not divide into {spec} equal sections")
    parts = np.split(x, list(spec) if isinstance(spec, tuple) else spec, axis=axis)
    return tuple(np.ascontiguousarray(p) for p in parts)


# -- transpose ---------------------------------------------------------------------------


def _perm(axes: tuple[int, ...] | None, ndim: int) -> tuple[int, ...]:
    if axes is None:
        return tuple(reversed(range(ndim)))
    if len(axes) != ndim:
        raise OpError(f"transpose: axes {axes} must list all {ndim} axes")
    perm = tuple(norm_axis(a, ndim, "transpose") for a in axes)
    if sorted(perm) != list(range(ndim)):
        raise OpError(f"transpose: axes {axes} is not a permutation of the {ndim} axes")
    return perm


def _infer_transpose(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    (x,) = tensors(inputs, "transpose")
    require_computable(x.dtype, "transpose")
    perm = _perm(attrs["axes"], x.ndim)
    return TensorType(tuple(x.shape[p] for p in perm), x.dtype)


def _transpose(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    return as_contiguous(np.transpose(x, _perm(attrs["axes"], x.ndim)), x.dtype)


def _transpose_into(xs: Sequence[np.ndarray], attrs: Mapping[str, Any], out: np.ndarray) -> bool:
    """transpose copied straight into a separate ``out`` (the same bytes: a copy)."""
    x = xs[0]
    t = np.transpose(x, _perm(attrs["axes"], x.ndim))
    if out.shape != t.shape or out.dtype != x.dtype or np.may_share_memory(out, x):
        return False
    out[...] = t
    return True


# -- reshape -----------------------------------------------------------------------------


def _infer_reshape(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    (x,) = tensors(inputs, "reshape")
    new = tuple(attrs["newshape"])
    holes = [i for i, d in enumerate(new) if d == -1]
    for d in new:
        if isinstance(d, int) and d < -1:
            raise OpError(f"reshape: newshape {sstr(new)} has the negative dimension {d}")
    if len(holes) > 1:
        raise OpError(f"reshape: newshape {sstr(new)} has more than one -1")
    total = x.num_elements()
    if not holes:
        if not D.dims_equal(D.product(new), total):
            raise OpError(
                f"reshape: cannot reshape {sstr(x.shape)} ({dstr(total)} elements) to {sstr(new)} "
                f"({dstr(D.product(new))} elements)"
            )
        return TensorType(new, x.dtype)
    known = D.product(d for d in new if d != -1)
    if known == 0:
        raise OpError(
            f"reshape: cannot infer the -1 in {sstr(new)}: the other dimensions multiply to 0"
        )
    inferred = exact_div(total, known)
    if inferred is None:
        raise OpError(
            f"reshape: cannot infer the -1 in {sstr(new)}: {dstr(total)} elements are not provably "
            f"divisible by {dstr(known)}"
        )
    shape = list(new)
    shape[holes[0]] = inferred
    return TensorType(tuple(shape), x.dtype)


def _reshape(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    return as_contiguous(x.reshape(tuple(int(d) for d in attrs["newshape"])), x.dtype)


# -- flatten / squeeze / expand_dims -----------------------------------------------------


def _infer_flatten(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    (x,) = tensors(inputs, "flatten")
    if x.ndim == 0:
        raise OpError("flatten: input must have rank at least 1")
    return TensorType((x.shape[0], D.product(x.shape[1:])), x.dtype)


def _flatten(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    return as_contiguous(x.reshape(x.shape[0], int(np.prod(x.shape[1:], dtype=np.int64))), x.dtype)


def _squeeze_axes(x: TensorType, axes: tuple[int, ...] | None) -> set[int]:
    if axes is None:
        sym = [dstr(d) for d in x.shape if not isinstance(d, int)]
        if sym:
            raise OpError(
                f"squeeze: {sstr(x.shape)} has symbolic dims ({', '.join(sym)}) that may be "
                f"1 at run time; give the axes to squeeze explicitly"
            )
        return {i for i, d in enumerate(x.shape) if d == 1}
    out = set(norm_axes(axes, x.ndim, "squeeze"))
    for i in out:
        d = x.shape[i]
        if not isinstance(d, int):
            raise OpError(
                f"squeeze: axis {i} has symbolic length {dstr(d)}, which is not known to be 1"
            )
        if d != 1:
            raise OpError(f"squeeze: axis {i} has length {d}, only length-1 axes can be squeezed")
    return out


def _infer_squeeze(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    (x,) = tensors(inputs, "squeeze")
    drop = _squeeze_axes(x, attrs["axes"])
    return TensorType(tuple(d for i, d in enumerate(x.shape) if i not in drop), x.dtype)


def _squeeze(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    axes = attrs["axes"]
    drop = (
        tuple(i for i, d in enumerate(x.shape) if d == 1)
        if axes is None
        else norm_axes(axes, x.ndim, "squeeze")
    )
    return as_contiguous(np.squeeze(x, axis=drop), x.dtype)


def _infer_expand_dims(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    (x,) = tensors(inputs, "expand_dims")
    axis = norm_axis(attrs["axis"], x.ndim + 1, "expand_dims")
    shape = list(x.shape)
    shape.insert(axis, 1)
    return TensorType(tuple(shape), x.dtype)


def _expand_dims(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    return as_contiguous(
        np.expand_dims(x, norm_axis(attrs["axis"], x.ndim + 1, "expand_dims")), x.dtype
    )


# -- strided_slice -----------------------------------------------------------------------


def _slices(ndim: int, attrs: Mapping[str, Any]) -> dict[int, slice]:
    """Axis -> Python slice from begin/end/strides/axes (all checked)."""
    begin, end = attrs["begin"], attrs["end"]
    n = len(begin)
    strides = attrs["strides"] if attrs["strides"] is not None else (1,) * n
    axes = attrs["axes"] if attrs["axes"] is not None else tuple(range(n))
    if not (len(end) == len(strides) == len(axes) == n):
        raise OpError(
            f"strided_slice: begin, end, strides and axes must have the same length, got "
            f"{n}, {len(end)}, {len(strides)} and {len(axes)}"
        )
    if n > ndim:
        raise OpError(f"strided_slice: {n} sliced axes for a tensor of rank {ndim}")
    out: dict[int, slice] = {}
    for a, b, e, s in zip(axes, begin, end, strides):
        ax = norm_axis(a, ndim, "strided_slice")
        if ax in out:
            raise OpError(f"strided_slice: axis {ax} is sliced twice")
        if s == 0:
            raise OpError(f"strided_slice: stride of axis {a} is 0")
        out[ax] = slice(b, e, s)
    return out


def _infer_strided_slice(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    (x,) = tensors(inputs, "strided_slice")
    require_computable(x.dtype, "strided_slice")
    shape = list(x.shape)
    for ax, sl in _slices(x.ndim, attrs).items():
        d = shape[ax]
        if not isinstance(d, int):
            raise OpError(
                f"strided_slice: sliced axis {ax} has symbolic length {dstr(d)}; only static "
                "axes can be sliced"
            )
        shape[ax] = len(range(d)[sl])
    return TensorType(tuple(shape), x.dtype)


def _strided_slice(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    sl = _slices(x.ndim, attrs)
    index = tuple(sl.get(i, slice(None)) for i in range(x.ndim))
    return np.array(x[index], dtype=x.dtype, order="C", copy=True)


# -- take --------------------------------------------------------------------------------


def _infer_take(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    data = tensor(inputs[0], "take", "data")
    indices = tensor(inputs[1], "take", "indices")
    require_computable(data.dtype, "take")
    if DTYPES[indices.dtype].kind not in ("int", "uint"):
        raise OpError(f"take: indices must be an integer tensor, got {indices.dtype}")
    if data.ndim == 0:
        raise OpError("take: data must have rank at least 1")
    axis = norm_axis(attrs["axis"], data.ndim, "take")
    if data.shape[axis] == 0 and indices.num_elements() != 0:
        raise OpError(f"take: axis {axis} of data has length 0, there is nothing to take")
    shape = data.shape[:axis] + indices.shape + data.shape[axis + 1 :]
    return TensorType(tuple(shape), data.dtype)


def _take(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    data, indices = xs
    if data.shape[attrs["axis"]] == 0 and indices.size != 0:  # symbolic, 0 in this run
        raise OpError(
            f"take: axis {attrs['axis'] % data.ndim} of data has length 0, there is nothing to take"
        )
    out = np.take(data, indices, axis=attrs["axis"], mode="clip")
    return as_contiguous(out, data.dtype)


def register_all(reg: Registry) -> None:
    reg.register(
        OpDef(
            "concat",
            "join tensors along an axis",
            "kernel",
            _infer_concat,
            family="data movement",
            min_inputs=1,
            max_inputs=None,
            kernel=_concat,
            kernel_into=_concat_into,
            attrs=(AttrSpec("axis", "int", 0, "the joining axis"),),
        )
    )
    reg.register(
        OpDef(
            "split",
            "cut a tensor into equal sections or at indices along an axis (a tuple)",
            "kernel",
            _infer_split,
            family="data movement",
            kernel=_split,
            multi_output=True,
            input_names=("x",),
            attrs=(
                AttrSpec(
                    "indices_or_sections",
                    "value",
                    doc="number of equal sections, or a tuple of split indices",
                ),
                AttrSpec("axis", "int", 0, "the axis to cut"),
            ),
        )
    )
    reg.register(
        OpDef(
            "transpose",
            "permute axes (absent axes: reverse them); copies",
            "kernel",
            _infer_transpose,
            family="data movement",
            kernel=_transpose,
            kernel_into=_transpose_into,
            input_names=("x",),
            attrs=(AttrSpec("axes", "axes", None, "the permutation (absent: reversed)"),),
        )
    )
    reg.register(
        OpDef(
            "reshape",
            "the same elements under a new shape (one -1 is inferred); a view",
            "view",
            _infer_reshape,
            kernel=_reshape,
            input_names=("x",),
            attrs=(AttrSpec("newshape", "shape", doc="the new shape; at most one -1"),),
        )
    )
    reg.register(
        OpDef(
            "flatten",
            "(N, ...) -> (N, product of the rest); a view",
            "view",
            _infer_flatten,
            kernel=_flatten,
            input_names=("x",),
        )
    )
    reg.register(
        OpDef(
            "squeeze",
            "drop length-1 axes (absent axes: every 1 of a static shape); a view",
            "view",
            _infer_squeeze,
            kernel=_squeeze,
            input_names=("x",),
            attrs=(
                AttrSpec(
                    "axes",
                    "axes",
                    None,
                    "axes to drop (absent: all length-1 axes; needs a static shape)",
                ),
            ),
        )
    )
    reg.register(
        OpDef(
            "expand_dims",
            "insert a length-1 axis at position axis; a view",
            "view",
            _infer_expand_dims,
            kernel=_expand_dims,
            input_names=("x",),
            attrs=(AttrSpec("axis", "int", doc="position of the new axis, in [-ndim-1, ndim]"),),
        )
    )
    reg.register(
        OpDef(
            "strided_slice",
            "x[begin:end:strides] on the given axes (Python slicing); copies",
            "kernel",
            _infer_strided_slice,
            family="data movement",
            kernel=_strided_slice,
            input_names=("x",),
            attrs=(
                AttrSpec("begin", "ints", doc="start per sliced axis"),
                AttrSpec("end", "ints", doc="stop per sliced axis (exclusive)"),
                AttrSpec("strides", "ints", None, "step per sliced axis (absent: all 1)"),
                AttrSpec("axes", "axes", None, "the sliced axes (absent: the first len(begin))"),
            ),
        )
    )
    reg.register(
        OpDef(
            "take",
            "gather slices of data along axis at integer indices (out-of-range indices clip)",
            "kernel",
            _infer_take,
            family="data movement",
            min_inputs=2,
            max_inputs=2,
            kernel=_take,
            input_names=("data", "indices"),
            attrs=(AttrSpec("axis", "int", 0, "the gathered axis"),),
        )
    )


__all__ = ["register_all"]
