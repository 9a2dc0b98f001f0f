"""Helpers shared by op definitions: type checks, broadcasting, axis normalization."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.registry import OpError
from relaxc.ir.types import DTYPES, TensorType, Type, numpy_dtype


def tensor(t: Type, op: str, what: str = "input") -> TensorType:
    """``t`` as a TensorType, or an OpError saying the op needs a tensor."""
    if not isinstance(t, TensorType):
        raise OpError(f"{op}: {what} must be a tensor")
    return t


def tensors(ts: Sequence[Type], op: str) -> list[TensorType]:
    return [tensor(t, op, f"input {i}") for i, t in enumerate(ts)]


def same_dtype(ts: Sequence[TensorType], op: str) -> str:
    """The common dtype of ``ts``; an OpError when they differ (no implicit promotion)."""
    dt = ts[0].dtype
    for t in ts[1:]:
        if t.dtype != dt:
            raise OpError(f"{op}: dtype mismatch, {dt} and {t.dtype} (insert a cast)")
    return dt


def require_float(dtype: str, op: str) -> None:
    if DTYPES[dtype].kind != "float":
        raise OpError(f"{op}: needs a floating-point tensor, got {dtype}")


def require_computable(dtype: str, op: str) -> None:
    if DTYPES[dtype].numpy is None:
        raise OpError(f"{op}: dtype {dtype} is storage-only and cannot be computed with")


def broadcast_dim(a: D.Dim, b: D.Dim, op: str) -> D.Dim:
    if a == 1:
        return b
    if b == 1:
        return a
    if D.dims_equal(a, b):
        return a
    raise OpError(f"{op}: cannot broadcast dimension {D.dim_to_str(a)} with {D.dim_to_str(b)}")


def broadcast_shapes(shapes: Sequence[tuple[D.Dim, ...]], op: str) -> tuple[D.Dim, ...]:
    """Numpy broadcasting over possibly symbolic shapes (dims must be provably equal or 1)."""
    ndim = max(len(s) for s in shapes)
    out: list[D.Dim] = []
    for i in range(ndim):
        d: D.Dim = 1
        for s in shapes:
            j = i - (ndim - len(s))
            if j >= 0:
                d = broadcast_dim(d, s[j], op)
        out.append(d)
    return tuple(out)


def norm_axis(axis: int, ndim: int, op: str) -> int:
    """Map a possibly negative axis into ``[0, ndim)``."""
    if not -ndim <= axis < ndim:
        raise OpError(f"{op}: axis {axis} is out of range for a tensor of rank {ndim}")
    return axis % ndim


def norm_axes(axes: Sequence[int] | None, ndim: int, op: str) -> tuple[int, ...]:
    """Normalized, sorted, duplicate-free axes; None means every axis."""
    if axes is None:
        return tuple(range(ndim))
    out = sorted({norm_axis(a, ndim, op) for a in axes})
    if len(out) != len(axes):
        raise OpError(f"{op}: an axis is repeated in {tuple(axes)}")
    return tuple(out)


def np_dtype(dtype: str) -> np.dtype:
    return numpy_dtype(dtype)


def attrs_get(attrs: Mapping[str, Any], name: str) -> Any:
    return attrs[name]
