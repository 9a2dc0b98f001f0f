"""Ops along one axis or producing indices: arange (a 1-D sequence start + i * delta),
argmax and argmin (i64 indices; NaN counts as the largest and the smallest, as numpy)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.registry import AttrSpec, InferFn, KernelFn, OpDef, OpError, Registry
from relaxc.ir.types import DTYPES, TensorType, Type

from .common import norm_axis, np_dtype, require_computable, tensors

# -- arange ------------------------------------------------------------------------------


def _number(v: Any, name: str) -> float | int:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise OpError(f"arange: {name} must be a number")
    return v


def _infer_arange(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    dtype = attrs["dtype"]
    kind = DTYPES[dtype].kind
    if kind not in ("float", "int", "uint") or DTYPES[dtype].numpy is None:
        raise OpError(f"arange: dtype {dtype} is not a number type it can count in")
    start, delta = _number(attrs["start"], "start"), _number(attrs["delta"], "delta")
    if kind != "float" and not (float(start).is_integer() and float(delta).is_integer()):
        raise OpError(f"arange: start {start} and delta {delta} must be integers for {dtype}")
    length = attrs["length"]
    if isinstance(length, int) and length < 0:
        raise OpError(f"arange: length {length} is negative")
    return TensorType((length,), dtype)


def arange_values(start: float | int, delta: float | int, n: int, dt: np.dtype) -> np.ndarray:
    """``start + i * delta`` for ``i`` in ``[0, n)`` in dtype ``dt`` (floats computed in
    double, integers wrapping in 64 bits)."""
    if dt.kind in "iu":
        i = np.arange(n, dtype=np.uint64)
        with np.errstate(all="ignore"):
            wide = np.uint64(int(start) % 2**64) + i * np.uint64(int(delta) % 2**64)
        return np.ascontiguousarray(wide.astype(dt))
    return np.ascontiguousarray(
        (float(start) + np.arange(n, dtype=np.float64) * float(delta)).astype(dt)
    )


def _arange(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    n = int(attrs["length"])
    return arange_values(attrs["start"], attrs["delta"], n, np_dtype(attrs["dtype"]))


def range_length(start: D.Dim, limit: D.Dim, delta: int) -> D.Dim:
    """ONNX Range's element count ``max(ceil((limit - start) / delta), 0)`` for an integer
    ``delta`` (not 0), as a dim expression of possibly symbolic ``start`` and ``limit``."""
    diff = D.simplify(D.BinOp("-", limit, start) if delta > 0 else D.BinOp("-", start, limit))
    span = diff if _non_negative(diff) else D.simplify(D.DimCall("max", (diff, 0)))
    step = abs(delta)
    if step == 1:
        return span
    return D.simplify(D.BinOp("/", D.add(span, step - 1), step))


def _non_negative(d: D.Dim) -> bool:
    """True when ``d`` is at least 0 for every value of its symbolic dims (dims are >= 0)."""
    low, _ = D.interval(d, {name: (0, None) for name in D.free_vars(d)})
    return low >= 0


# -- argmax / argmin -----------------------------------------------------------------------


def _arg_infer(name: str) -> InferFn:
    def infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
        (x,) = tensors(inputs, name)
        require_computable(x.dtype, name)
        if x.ndim == 0:
            raise OpError(f"{name}: needs a tensor of rank 1 or more")
        axis = norm_axis(attrs["axis"], x.ndim, name)
        if isinstance(x.shape[axis], int) and x.shape[axis] == 0:
            raise OpError(f"{name}: axis {axis} has length 0, so it has no {name[3:]}imum")
        shape = tuple(
            (1 if attrs["keepdims"] else None) if i == axis else d for i, d in enumerate(x.shape)
        )
        return TensorType(tuple(d for d in shape if d is not None), "i64")

    return infer


def _arg_kernel(largest: bool) -> KernelFn:
    def kernel(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        x = xs[0]
        name = "argmax" if largest else "argmin"
        axis = norm_axis(attrs["axis"], x.ndim, name)
        n = x.shape[axis]
        if n == 0:
            raise OpError(f"{name}: axis {axis} has length 0, so it has no {name[3:]}imum")
        fn = np.argmax if largest else np.argmin
        if attrs["select_last_index"]:
            idx = n - 1 - fn(np.flip(x, axis=axis), axis=axis)
        else:
            idx = fn(x, axis=axis)
        if attrs["keepdims"]:
            idx = np.expand_dims(idx, axis)
        return np.asarray(idx, dtype=np.int64, order="C")

    return kernel


def register_all(reg: Registry) -> None:
    for name, largest in (("argmax", True), ("argmin", False)):
        reg.register(
            OpDef(
                name,
                f"the i64 index of the {'largest' if largest else 'smallest'} element along axis "
                "(the first one, or with select_last_index the last)",
                "kernel",
                _arg_infer(name),
                family="reduction",
                kernel=_arg_kernel(largest),
                input_names=("x",),
                attrs=(
                    AttrSpec("axis", "int", 0, "the axis searched"),
                    AttrSpec("keepdims", "bool", True, "keep the axis with length 1"),
                    AttrSpec("select_last_index", "bool", False, "the last index on a tie"),
                ),
            )
        )
    reg.register(
        OpDef(
            "arange",
            "the 1-D sequence start + i * delta for i in [0, length)",
            "kernel",
            _infer_arange,
            family="fill",
            min_inputs=0,
            max_inputs=0,
            kernel=_arange,
            attrs=(
                AttrSpec("start", "value", doc="the first element (a number)"),
                AttrSpec("delta", "value", doc="the step (a number)"),
                AttrSpec("length", "dim", doc="the element count (may be symbolic)"),
                AttrSpec("dtype", "dtype", "i64", "result dtype"),
            ),
            example="arange(start=0, delta=1, length=n, dtype=i64)",
        )
    )


__all__ = ["arange_values", "range_length", "register_all"]
