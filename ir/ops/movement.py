"""Data-movement and indexing ops: pad, tile, gather_elements, gather_nd, scatter_nd,
scatter_elements, one_hot and trilu. Each computes a new tensor (none is a view).

Run-time indices (gather_elements, gather_nd, scatter_nd, scatter_elements) follow ONNX for
negative values (``-1`` is the last position of the axis) and are then **clipped** into the
axis, as ``take`` clips: ONNX calls an index outside ``[-d, d)`` an error, and relaxc's
backends cannot raise at run time, so every backend reads or writes the nearest position
instead. ``one_hot`` follows ONNX exactly: an index outside ``[-depth, depth)`` gives a row of
off values.

scatter_nd and scatter_elements may write their output over their data input (``inplace``):
each element of data is read only at its own position, before any update is written there.
Updates are applied in the row-major order of the updates tensor, so with duplicate indices
and reduction ``none`` the last update wins (ONNX leaves that order undefined).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.registry import AttrSpec, OpDef, OpError, Registry
from relaxc.ir.types import DTYPES, TensorType, Type

from .checks import as_contiguous, dstr, require_dims_equal, sstr
from .common import norm_axis, require_computable, tensor

PAD_MODES = ("constant", "reflect", "edge", "wrap")
SCATTER_REDUCTIONS = ("none", "add", "mul", "max", "min")


def _index_tensor(t: Type, op: str, what: str = "indices") -> TensorType:
    it = tensor(t, op, what)
    if DTYPES[it.dtype].kind not in ("int", "uint"):
        raise OpError(f"{op}: {what} must be an integer tensor, got {it.dtype}")
    return it


def clip_indices(idx: np.ndarray, d: int) -> np.ndarray:
    """Indices into an axis of length ``d`` (> 0): negatives wrap once, then every index is
    clipped into ``[0, d)`` (the defined behaviour of an out-of-range index)."""
    k = idx.astype(np.int64)
    k = np.where(k < 0, k + d, k)
    return np.clip(k, 0, d - 1)


# -- pad -----------------------------------------------------------------------------------


def _pad_widths(
    x: TensorType | np.ndarray, pads: tuple[int, ...], op: str = "pad"
) -> list[tuple[int, int]]:
    n = x.ndim
    if len(pads) != 2 * n:
        raise OpError(
            f"{op}: pads {pads} must hold 2 values per axis (all begins, then all ends) for "
            f"a tensor of rank {n}"
        )
    return [(pads[i], pads[n + i]) for i in range(n)]


def _infer_pad(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    x = tensor(inputs[0], "pad", "x")
    require_computable(x.dtype, "pad")
    mode = attrs["mode"]
    if mode not in PAD_MODES:
        raise OpError(f"pad: mode '{mode}' is not one of {', '.join(PAD_MODES)}")
    shape = []
    for i, (d, (b, e)) in enumerate(zip(x.shape, _pad_widths(x, attrs["pads"]))):
        kept = D.add(d, min(b, 0) + min(e, 0))
        if isinstance(kept, int) and kept < 0:
            raise OpError(
                f"pad: axis {i} of length {d} cannot be cropped by {-min(b, 0) - min(e, 0)}"
            )
        if mode != "constant" and (b > 0 or e > 0) and kept == 0:
            raise OpError(f"pad: axis {i} is empty; mode '{mode}' has nothing to repeat")
        shape.append(D.add(d, b + e))
    return TensorType(tuple(shape), x.dtype)


def _pad(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    widths = _pad_widths(x, attrs["pads"])
    crop = tuple(slice(-min(b, 0), x.shape[i] - (-min(e, 0))) for i, (b, e) in enumerate(widths))
    kept = x[crop]
    grow = [(max(b, 0), max(e, 0)) for b, e in widths]
    mode = attrs["mode"]
    if mode == "constant":
        value = np.array(attrs["value"]).astype(x.dtype)
        out = np.pad(kept, grow, mode="constant", constant_values=value)
    elif kept.size == 0:  # (a symbolic axis empty in this run)
        raise OpError(f"pad: an axis is empty; mode '{mode}' has nothing to repeat")
    else:
        out = np.pad(kept, grow, mode=mode)
    return as_contiguous(out, x.dtype)


# -- tile ----------------------------------------------------------------------------------


def _infer_tile(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    x = tensor(inputs[0], "tile", "x")
    require_computable(x.dtype, "tile")
    reps = attrs["repeats"]
    if len(reps) != x.ndim:
        raise OpError(f"tile: repeats {reps} must hold one count per axis of rank {x.ndim}")
    if any(r < 0 for r in reps):
        raise OpError(f"tile: repeats {reps} must not be negative")
    return TensorType(tuple(D.mul(d, r) for d, r in zip(x.shape, reps)), x.dtype)


def _tile(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    return as_contiguous(np.tile(x, attrs["repeats"]) if x.ndim else x.copy(), x.dtype)


# -- gather_elements / scatter_elements --------------------------------------------------------


def _require_within(data: TensorType, idx: TensorType, axis: int, op: str) -> None:
    """Off the indexed axis, indices address data's positions: no dim longer than data's."""
    for i, (a, b) in enumerate(zip(idx.shape, data.shape)):
        if i != axis and isinstance(a, int) and isinstance(b, int) and a > b:
            raise OpError(
                f"{op}: indices {sstr(idx.shape)} are longer than data {sstr(data.shape)} on "
                f"axis {i}"
            )


def _infer_gather_elements(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    data = tensor(inputs[0], "gather_elements", "data")
    idx = _index_tensor(inputs[1], "gather_elements")
    require_computable(data.dtype, "gather_elements")
    if data.ndim == 0 or idx.ndim != data.ndim:
        raise OpError(
            f"gather_elements: indices {sstr(idx.shape)} must have the rank of data "
            f"{sstr(data.shape)} (at least 1)"
        )
    axis = norm_axis(attrs["axis"], data.ndim, "gather_elements")
    _require_within(data, idx, axis, "gather_elements")
    if data.shape[axis] == 0 and idx.num_elements() != 0:
        raise OpError(f"gather_elements: axis {axis} of data is empty, there is nothing to take")
    return TensorType(idx.shape, data.dtype)


def _gather_elements(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    data, idx = xs
    axis = attrs["axis"] % data.ndim
    if idx.size == 0:
        return np.zeros(idx.shape, data.dtype)
    k = clip_indices(idx, data.shape[axis])
    grid: list[np.ndarray] = list(np.indices(idx.shape, sparse=True))
    grid[axis] = k
    return as_contiguous(data[tuple(grid)], data.dtype)


def _infer_scatter_elements(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    op = "scatter_elements"
    data = tensor(inputs[0], op, "data")
    idx = _index_tensor(inputs[1], op)
    upd = tensor(inputs[2], op, "updates")
    require_computable(data.dtype, op)
    _check_reduction(attrs["reduction"], data.dtype, op)
    if upd.dtype != data.dtype:
        raise OpError(f"{op}: updates are {upd.dtype}, data is {data.dtype}")
    if data.ndim == 0 or idx.ndim != data.ndim:
        raise OpError(
            f"{op}: indices {sstr(idx.shape)} must have the rank of data {sstr(data.shape)}"
        )
    for i, (a, b) in enumerate(zip(idx.shape, upd.shape)):
        require_dims_equal(a, b, op, f"dimension {i} of indices and updates")
    if idx.ndim != upd.ndim:
        raise OpError(f"{op}: indices {sstr(idx.shape)} and updates {sstr(upd.shape)} differ")
    _require_within(data, idx, norm_axis(attrs["axis"], data.ndim, op), op)
    return data


def _scatter_elements(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    data, idx, upd = xs
    axis = attrs["axis"] % data.ndim
    out = np.array(data, order="C", copy=True)
    if idx.size == 0:
        return out
    sparse: tuple[np.ndarray, ...] = np.indices(idx.shape, sparse=True)
    grid: list[np.ndarray] = [np.broadcast_to(g, idx.shape) for g in sparse]
    grid[axis] = clip_indices(idx, data.shape[axis])
    flat = np.ravel_multi_index(tuple(grid), data.shape).reshape(-1)
    _scatter_flat(out.reshape(-1), flat, upd.reshape(-1), attrs["reduction"])
    return out


def _check_reduction(reduction: str, dtype: str, op: str) -> None:
    if reduction not in SCATTER_REDUCTIONS:
        raise OpError(
            f"{op}: reduction '{reduction}' is not one of {', '.join(SCATTER_REDUCTIONS)}"
        )
    if reduction != "none" and DTYPES[dtype].kind == "bool":
        raise OpError(f"{op}: reduction '{reduction}' needs a numeric tensor, got bool")


_UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter_flat(out: np.ndarray, flat: np.ndarray, upd: np.ndarray, reduction: str) -> None:
    """Apply ``upd[i]`` at ``out[flat[i]]`` in order of ``i`` (the last write wins)."""
    if reduction == "none":
        if np.unique(flat).size == flat.size:
            out[flat] = upd
        else:
            for i, j in enumerate(flat.tolist()):
                out[j] = upd[i]
        return
    with np.errstate(over="ignore", invalid="ignore"):
        _UFUNCS[reduction].at(out, flat, upd)


# -- gather_nd / scatter_nd ----------------------------------------------------------------


def _nd_parts(
    data: TensorType, idx: TensorType, batch: int, op: str
) -> tuple[int, tuple[D.Dim, ...]]:
    """(k, the slice shape) of an nd gather or scatter: indices end in k coordinates."""
    if idx.ndim < 1:
        raise OpError(f"{op}: indices must have rank at least 1")
    k = idx.shape[-1]
    if not isinstance(k, int):
        raise OpError(f"{op}: the last dimension of indices must be static, got {dstr(k)}")
    if batch < 0 or batch >= min(data.ndim, idx.ndim):
        raise OpError(
            f"{op}: batch_dims {batch} must be less than the ranks of data ({data.ndim}) and "
            f"indices ({idx.ndim})"
        )
    if batch + k > data.ndim or k < 1:
        raise OpError(
            f"{op}: indices address {k} dimension(s) after {batch} batch dimension(s), but "
            f"data {sstr(data.shape)} has rank {data.ndim}"
        )
    for i in range(batch):
        require_dims_equal(data.shape[i], idx.shape[i], op, f"batch dimension {i}")
    return k, data.shape[batch + k :]


def _infer_gather_nd(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    data = tensor(inputs[0], "gather_nd", "data")
    idx = _index_tensor(inputs[1], "gather_nd")
    require_computable(data.dtype, "gather_nd")
    _, rest = _nd_parts(data, idx, attrs["batch_dims"], "gather_nd")
    return TensorType(idx.shape[:-1] + rest, data.dtype)


def _nd_linear(data_shape: tuple[int, ...], idx: np.ndarray, batch: int) -> np.ndarray:
    """The flat index (in slices of the trailing dims) of each index tuple: shape
    ``idx.shape[:-1]``, batch dims included."""
    k = idx.shape[-1]
    coords = [clip_indices(idx[..., j], data_shape[batch + j]) for j in range(k)]
    nb = int(np.prod(data_shape[:batch], dtype=np.int64))
    per_batch = int(np.prod(data_shape[batch : batch + k], dtype=np.int64))
    lin = np.zeros(idx.shape[:-1], np.int64)
    for j in range(k):
        lin = lin * data_shape[batch + j] + coords[j]
    b = np.arange(nb, dtype=np.int64).reshape(idx.shape[:batch] + (1,) * (idx.ndim - 1 - batch))
    return lin + b * per_batch


def _gather_nd(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    data, idx = xs
    batch = attrs["batch_dims"]
    k = idx.shape[-1]
    rest = data.shape[batch + k :]
    out_shape = idx.shape[:-1] + rest
    if int(np.prod(out_shape, dtype=np.int64)) == 0:
        return np.zeros(out_shape, data.dtype)
    lin = _nd_linear(data.shape, idx, batch)
    rows = data.reshape((-1,) + rest)
    return as_contiguous(rows[lin], data.dtype)


def _infer_scatter_nd(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    op = "scatter_nd"
    data = tensor(inputs[0], op, "data")
    idx = _index_tensor(inputs[1], op)
    upd = tensor(inputs[2], op, "updates")
    require_computable(data.dtype, op)
    _check_reduction(attrs["reduction"], data.dtype, op)
    if upd.dtype != data.dtype:
        raise OpError(f"{op}: updates are {upd.dtype}, data is {data.dtype}")
    if idx.ndim < 1:
        raise OpError(f"{op}: indices must have rank at least 1")
    _, rest = _nd_parts(data, idx, 0, op) if data.ndim else (0, ())
    want = idx.shape[:-1] + rest
    if len(want) != upd.ndim or not all(D.dims_equal(a, b) for a, b in zip(want, upd.shape)):
        raise OpError(f"{op}: updates {sstr(upd.shape)} must have the shape {sstr(want)}")
    return data


def _scatter_nd(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    data, idx, upd = xs
    out = np.array(data, order="C", copy=True)
    k = idx.shape[-1]
    inner = int(np.prod(data.shape[k:], dtype=np.int64))
    if upd.size == 0 or inner == 0:
        return out
    lin = _nd_linear(data.shape, idx, 0).reshape(-1, 1)
    flat = (lin * inner + np.arange(inner, dtype=np.int64)).reshape(-1)
    _scatter_flat(out.reshape(-1), flat, upd.reshape(-1), attrs["reduction"])
    return out


# -- one_hot -------------------------------------------------------------------------------


def _infer_one_hot(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    idx = _index_tensor(inputs[0], "one_hot")
    values = tensor(inputs[1], "one_hot", "values")
    require_computable(values.dtype, "one_hot")
    if values.shape != (2,):
        raise OpError(f"one_hot: values must be (off, on), shape (2,), got {sstr(values.shape)}")
    depth = attrs["depth"]
    if depth < 1:
        raise OpError(f"one_hot: depth must be positive, got {depth}")
    axis = norm_axis(attrs["axis"], idx.ndim + 1, "one_hot")
    shape = list(idx.shape)
    shape.insert(axis, depth)
    return TensorType(tuple(shape), values.dtype)


def _one_hot(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    idx, values = xs
    depth = attrs["depth"]
    axis = attrs["axis"] % (idx.ndim + 1)
    k = idx.astype(np.int64)
    k = np.where(k < 0, k + depth, k)
    hot = np.expand_dims(k, axis) == np.arange(depth).reshape((depth,) + (1,) * (idx.ndim - axis))
    return as_contiguous(np.where(hot, values[1], values[0]), values.dtype)


# -- trilu ---------------------------------------------------------------------------------


def _infer_trilu(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    x = tensor(inputs[0], "trilu", "x")
    require_computable(x.dtype, "trilu")
    if x.ndim < 2:
        raise OpError(f"trilu: x must have rank at least 2, got {sstr(x.shape)}")
    if len(inputs) > 1:
        k = _index_tensor(inputs[1], "trilu", "k")
        if not D.dims_equal(k.num_elements(), 1):
            raise OpError(f"trilu: k must hold one integer, got shape {sstr(k.shape)}")
    return x


def _trilu(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    k = int(xs[1].reshape(-1)[0]) if len(xs) > 1 else attrs["k"]
    fn = np.triu if attrs["upper"] else np.tril
    return as_contiguous(fn(x, k), x.dtype)


def register_all(reg: Registry) -> None:
    reg.register(
        OpDef(
            "pad",
            "pad (or, with negative pads, crop) every axis: constant, reflect, edge or wrap",
            "kernel",
            _infer_pad,
            family="data movement",
            kernel=_pad,
            input_names=("x",),
            attrs=(
                AttrSpec("pads", "ints", doc="the begin of every axis, then the end of every axis"),
                AttrSpec("mode", "str", "constant", "constant, reflect, edge or wrap"),
                AttrSpec("value", "float", 0.0, "the fill of mode constant"),
            ),
        )
    )
    reg.register(
        OpDef(
            "tile",
            "repeat the whole tensor along each axis",
            "kernel",
            _infer_tile,
            family="data movement",
            kernel=_tile,
            input_names=("x",),
            attrs=(AttrSpec("repeats", "ints", doc="the count of each axis"),),
        )
    )
    reg.register(
        OpDef(
            "gather_elements",
            "data at indices along axis, position by position (indices clip)",
            "kernel",
            _infer_gather_elements,
            family="data movement",
            min_inputs=2,
            max_inputs=2,
            kernel=_gather_elements,
            input_names=("data", "indices"),
            attrs=(AttrSpec("axis", "int", 0, "the indexed axis"),),
        )
    )
    reg.register(
        OpDef(
            "gather_nd",
            "slices of data at index tuples (the last axis of indices; indices clip)",
            "kernel",
            _infer_gather_nd,
            family="data movement",
            min_inputs=2,
            max_inputs=2,
            kernel=_gather_nd,
            input_names=("data", "indices"),
            attrs=(AttrSpec("batch_dims", "int", 0, "leading dims shared by data and indices"),),
        )
    )
    reg.register(
        OpDef(
            "scatter_nd",
            "data with slices at index tuples replaced or reduced with updates (indices clip)",
            "kernel",
            _infer_scatter_nd,
            family="data movement",
            min_inputs=3,
            max_inputs=3,
            kernel=_scatter_nd,
            inplace=(0,),
            input_names=("data", "indices", "updates"),
            attrs=(AttrSpec("reduction", "str", "none", "none, add, mul, max or min"),),
        )
    )
    reg.register(
        OpDef(
            "scatter_elements",
            "data with elements at indices along axis replaced or reduced (indices clip)",
            "kernel",
            _infer_scatter_elements,
            family="data movement",
            min_inputs=3,
            max_inputs=3,
            kernel=_scatter_elements,
            inplace=(0,),
            input_names=("data", "indices", "updates"),
            attrs=(
                AttrSpec("axis", "int", 0, "the indexed axis"),
                AttrSpec("reduction", "str", "none", "none, add, mul, max or min"),
            ),
        )
    )
    reg.register(
        OpDef(
            "one_hot",
            "values[1] where the new axis equals the index, values[0] elsewhere",
            "kernel",
            _infer_one_hot,
            family="data movement",
            min_inputs=2,
            max_inputs=2,
            kernel=_one_hot,
            input_names=("indices", "values"),
            attrs=(
                AttrSpec("depth", "int", doc="the length of the new axis"),
                AttrSpec("axis", "int", -1, "where the new axis goes, in [-rank-1, rank]"),
            ),
        )
    )
    reg.register(
        OpDef(
            "trilu",
            "the upper (or lower) triangle of the last two axes from diagonal k (an attribute, "
            "or a run-time input k of one integer); zeros elsewhere",
            "kernel",
            _infer_trilu,
            family="data movement",
            max_inputs=2,
            kernel=_trilu,
            inplace=(0,),
            input_names=("x", "k"),
            attrs=(
                AttrSpec("k", "int", 0, "the diagonal (without input k): 0 main, positive above"),
                AttrSpec("upper", "bool", True, "keep the upper triangle (else the lower)"),
            ),
        )
    )


__all__ = ["PAD_MODES", "SCATTER_REDUCTIONS", "clip_indices", "register_all"]
