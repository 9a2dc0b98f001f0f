"""det (ONNX Det): the determinant of each square matrix of the last two axes, by Gaussian
elimination with partial pivoting in float64 (the first largest pivot of each column; a zero
column gives 0), rounded once to the input's float type. The C kernel does the same
operations in the same order, so both give the same bits."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from relaxc.ir.registry import OpDef, OpError, Registry
from relaxc.ir.types import TensorType, Type

from .checks import as_contiguous
from .common import require_float, tensors


def _infer_det(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    (x,) = tensors(inputs, "det")
    require_float(x.dtype, "det")
    if x.ndim < 2:
        raise OpError(f"det: needs matrices (rank 2 or more), got rank {x.ndim}")
    n, m = x.shape[-2:]
    if n != m:
        raise OpError(f"det: the matrices must be square, got {n} x {m}")
    return TensorType(x.shape[:-2], x.dtype)


def lu_det(a: np.ndarray) -> np.ndarray:
    """The determinants of ``a`` (float64, shape (batch, n, n), overwritten)."""
    batch, n = a.shape[0], a.shape[1]
    det = np.ones(batch, np.float64)
    rows = np.arange(batch)
    for k in range(n):
        p = k + np.argmax(np.abs(a[:, k:, k]), axis=1)  # the first largest (or NaN)
        pivot = a[rows, p, k]
        swap = p != k
        top = a[rows, k, :].copy()
        a[rows, k, :] = a[rows, p, :]
        a[rows, p, :] = np.where(swap[:, None], top, a[rows, p, :])
        det = np.where(swap, -det, det) * pivot
        live = np.nonzero(pivot != 0)[0]  # a zero column: nothing to eliminate
        if k + 1 < n and live.size:
            f = a[live, k + 1 :, k] / pivot[live, None]
            a[live, k + 1 :, k + 1 :] -= f[:, :, None] * a[live, k : k + 1, k + 1 :]
    return det


def _det(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    n = x.shape[-1]
    batch = int(np.prod(x.shape[:-2], dtype=np.int64))
    a = x.astype(np.float64).reshape(batch, n, n).copy()
    with np.errstate(all="ignore"):
        det = lu_det(a) if n else np.ones(a.shape[0], np.float64)
    return as_contiguous(det.reshape(x.shape[:-2]), x.dtype)


def register_all(reg: Registry) -> None:
    reg.register(
        OpDef(
            "det",
            "the determinant of each square matrix of the last two axes (LU with partial "
            "pivoting in double)",
            "kernel",
            _infer_det,
            family="matmul",
            kernel=_det,
            input_names=("x",),
        )
    )
