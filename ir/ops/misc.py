"""Miscellaneous ops: clip, cast, where and the tensor factories zeros, ones and full."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from relaxc.ir import lowp
from relaxc.ir.registry import AttrSpec, OpDef, OpError, Registry
from relaxc.ir.types import DTYPES, TensorType, Type

from .checks import as_contiguous, dstr, require_numeric
from .common import broadcast_shapes, np_dtype, require_computable, same_dtype, tensors

# -- clip --------------------------------------------------------------------------------


def _infer_clip(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    (x,) = tensors(inputs, "clip")
    require_numeric(x.dtype, "clip")
    lo, hi = attrs["a_min"], attrs["a_max"]
    if math.isnan(lo) or math.isnan(hi):
        raise OpError("clip: a_min and a_max must not be nan")
    if lo > hi:
        raise OpError(f"clip: a_min {lo} is larger than a_max {hi}")
    if DTYPES[x.dtype].kind in ("int", "uint"):
        info = lowp.iinfo(np_dtype(x.dtype))
        lo_i = math.ceil(lo) if math.isfinite(lo) else int(info.min)
        hi_i = math.floor(hi) if math.isfinite(hi) else int(info.max)
        if max(lo_i, int(info.min)) > min(hi_i, int(info.max)):
            raise OpError(f"clip: no {x.dtype} value lies in [{lo}, {hi}]")
    return x


def _int_bound(v: float, info: np.iinfo, up: bool) -> int:
    """A float clip bound as an integer of the dtype's range (rounded inward)."""
    if math.isinf(v):
        return int(info.max) if v > 0 else int(info.min)
    n = math.ceil(v) if up else math.floor(v)
    return max(int(info.min), min(int(info.max), n))


def _clip(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    lo, hi = attrs["a_min"], attrs["a_max"]
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        lo_v, hi_v = _int_bound(lo, info, True), _int_bound(hi, info, False)
    else:
        lo_v, hi_v = lo, hi
    out = np.clip(x, x.dtype.type(lo_v), x.dtype.type(hi_v))
    return as_contiguous(out, x.dtype)


# -- cast --------------------------------------------------------------------------------


def _infer_cast(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    (x,) = tensors(inputs, "cast")
    require_computable(x.dtype, "cast")
    target = attrs["dtype"]
    if DTYPES[target].numpy is None:
        raise OpError(f"cast: target dtype {target} is storage-only and cannot be computed with")
    if attrs["round_mode"] not in lowp.ROUND_MODES:
        raise OpError(
            f"cast: round_mode must be one of {', '.join(lowp.ROUND_MODES)}, "
            f"got {attrs['round_mode']!r}"
        )
    return TensorType(x.shape, target)


def _cast(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    target = np_dtype(attrs["dtype"])
    if target in lowp.WIDER:  # (x is not narrow: the registry widened it)
        return as_contiguous(
            lowp.cast_to(x, target, attrs["saturate"], attrs["round_mode"]), target
        )
    if x.dtype.kind == "f" and target.kind in "iu":
        # Float -> integer: truncate toward zero, nan -> 0, saturate at the target's range.
        info = np.iinfo(target)
        with np.errstate(invalid="ignore"):
            t = np.trunc(
                np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=np.inf, neginf=-np.inf)
            )
        lo, hi = float(info.min), float(info.max)
        res = np.where(t <= lo, info.min, np.where(t >= hi, info.max, 0)).astype(target)
        inside = (t > lo) & (t < hi)
        res[inside] = t[inside].astype(target)
        return as_contiguous(res, target)
    with np.errstate(all="ignore"):
        return as_contiguous(x.astype(target), target)


# -- where -------------------------------------------------------------------------------


def _infer_where(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    cond, x, y = tensors(inputs, "where")
    if cond.dtype != "bool":
        raise OpError(f"where: condition must be a bool tensor, got {cond.dtype}")
    dtype = same_dtype([x, y], "where")
    require_computable(dtype, "where")
    return TensorType(broadcast_shapes([cond.shape, x.shape, y.shape], "where"), dtype)


def _where(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    cond, x, y = xs
    return as_contiguous(np.where(cond, x, y), x.dtype)


# -- zeros / ones / full -----------------------------------------------------------------


def _factory_type(name: str, attrs: Mapping[str, Any]) -> TensorType:
    shape = tuple(attrs["shape"])
    for d in shape:
        if isinstance(d, int) and d < 0:
            raise OpError(f"{name}: shape {tuple(dstr(x) for x in shape)} has a negative dimension")
    dtype = attrs["dtype"]
    if DTYPES[dtype].numpy is None:
        raise OpError(f"{name}: dtype {dtype} is storage-only and cannot be computed with")
    return TensorType(shape, dtype)


def _infer_zeros(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    return _factory_type("zeros", attrs)


def _infer_ones(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    return _factory_type("ones", attrs)


def _infer_full(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    t = _factory_type("full", attrs)
    v = attrs["fill_value"]
    kind = DTYPES[t.dtype].kind
    if kind == "bool" and v not in (0.0, 1.0):
        raise OpError(f"full: fill_value {v} is not a bool (use 0 or 1)")
    if kind in ("int", "uint"):
        info = lowp.iinfo(np_dtype(t.dtype))
        if not (math.isfinite(v) and v.is_integer() and info.min <= v <= info.max):
            raise OpError(f"full: fill_value {v} is not representable as {t.dtype}")
    return t


def _shape_of(attrs: Mapping[str, Any]) -> tuple[int, ...]:
    return tuple(int(d) for d in attrs["shape"])


def _zeros(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    return np.zeros(_shape_of(attrs), np_dtype(attrs["dtype"]))


def _ones(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    return np.ones(_shape_of(attrs), np_dtype(attrs["dtype"]))


def _full(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    dt = np_dtype(attrs["dtype"])
    v: Any = attrs["fill_value"]
    if dt.kind in "iub":
        v = int(v)
    return np.full(_shape_of(attrs), v, dtype=dt)


def register_all(reg: Registry) -> None:
    reg.register(
        OpDef(
            "clip",
            "clamp x into [a_min, a_max] (integer tensors round the bounds inward)",
            "kernel",
            _infer_clip,
            kernel=_clip,
            elementwise=True,
            input_names=("x",),
            inplace=(0,),
            attrs=(
                AttrSpec("a_min", "float", doc="lower bound (-inf for none)"),
                AttrSpec("a_max", "float", doc="upper bound (inf for none)"),
            ),
        )
    )
    reg.register(
        OpDef(
            "cast",
            "convert x to dtype (float -> int truncates, saturates, nan -> 0; int -> int wraps; "
            "to the low-precision types as ONNX's Cast)",
            "kernel",
            _infer_cast,
            kernel=_cast,
            elementwise=True,
            input_names=("x",),
            attrs=(
                AttrSpec("dtype", "dtype", doc="target dtype"),
                AttrSpec(
                    "saturate",
                    "bool",
                    True,
                    "to an 8-bit float but f8e8m0: clamp to the finite range (else overflow "
                    "gives inf or NaN); to f8e8m0: stay below NaN",
                ),
                AttrSpec("round_mode", "str", "up", "to f8e8m0: up, down or nearest"),
            ),
        )
    )
    reg.register(
        OpDef(
            "where",
            "cond ? x : y, broadcasting all three",
            "kernel",
            _infer_where,
            min_inputs=3,
            max_inputs=3,
            kernel=_where,
            elementwise=True,
            input_names=("cond", "x", "y"),
            inplace=(0, 1, 2),
        )
    )
    shape = AttrSpec("shape", "shape", doc="result shape (may be symbolic)")
    dtype = AttrSpec("dtype", "dtype", "f32", "result dtype")
    reg.register(
        OpDef(
            "zeros",
            "a tensor of zeros",
            "kernel",
            _infer_zeros,
            family="fill",
            min_inputs=0,
            max_inputs=0,
            kernel=_zeros,
            attrs=(shape, dtype),
        )
    )
    reg.register(
        OpDef(
            "ones",
            "a tensor of ones",
            "kernel",
            _infer_ones,
            family="fill",
            min_inputs=0,
            max_inputs=0,
            kernel=_ones,
            attrs=(shape, dtype),
        )
    )
    reg.register(
        OpDef(
            "full",
            "a tensor filled with fill_value",
            "kernel",
            _infer_full,
            family="fill",
            min_inputs=0,
            max_inputs=0,
            kernel=_full,
            attrs=(
                shape,
                AttrSpec("fill_value", "float", doc="the value (must fit the dtype)"),
                dtype,
            ),
        )
    )


__all__ = ["register_all"]
