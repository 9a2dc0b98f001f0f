"""Small checks and dim arithmetic shared by the nn, reduce, transform and misc op modules."""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.registry import OpError
from relaxc.ir.types import DTYPES, TensorType

from .common import require_computable, require_float


def require_numeric(dtype: str, op: str) -> None:
    """A computable dtype that is not bool (arithmetic ops)."""
    require_computable(dtype, op)
    if DTYPES[dtype].kind == "bool":
        raise OpError(f"{op}: needs a numeric tensor, got bool (cast it first)")


def require_rank(t: TensorType, rank: int, op: str, what: str = "input") -> None:
    if t.ndim != rank:
        raise OpError(f"{op}: {what} must have rank {rank}, got rank {t.ndim}")


def dstr(d: D.Dim) -> str:
    return D.dim_to_str(d)


def sstr(shape: Sequence[D.Dim]) -> str:
    if len(shape) == 1:
        return f"({dstr(shape[0])},)"
    return "(" + ", ".join(dstr(d) for d in shape) + ")"


def require_dims_equal(a: D.Dim, b: D.Dim, op: str, what: str) -> None:
    if not D.dims_equal(a, b):
        raise OpError(f"{op}: {what}: {dstr(a)} and {dstr(b)} are not provably equal")


def sub(a: D.Dim, b: D.Dim) -> D.Dim:
    """Simplified ``a - b``."""
    if isinstance(a, int) and isinstance(b, int):
        return a - b
    return D.simplify(D.BinOp("-", a, b))


def floordiv(a: D.Dim, b: D.Dim) -> D.Dim:
    """Simplified floor division ``a / b``."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return D.simplify(D.BinOp("/", a, b))


def pair(v: tuple[int, ...], op: str, name: str) -> tuple[int, int]:
    """One or two ints as an (h, w) pair."""
    if len(v) == 1:
        return (v[0], v[0])
    if len(v) == 2:
        return (v[0], v[1])
    raise OpError(f"{op}: attribute '{name}' needs 1 or 2 integers, got {len(v)}")


def positive_pair(v: tuple[int, ...], op: str, name: str) -> tuple[int, int]:
    p = pair(v, op, name)
    if min(p) < 1:
        raise OpError(f"{op}: attribute '{name}' must be positive, got {v}")
    return p


def pad4(v: tuple[int, ...], op: str) -> tuple[int, int, int, int]:
    """Padding as (top, left, bottom, right) from 1, 2 or 4 ints."""
    if len(v) == 1:
        p = (v[0],) * 4
    elif len(v) == 2:
        p = (v[0], v[1], v[0], v[1])
    elif len(v) == 4:
        p = (v[0], v[1], v[2], v[3])
    else:
        raise OpError(
            f"{op}: padding needs 1, 2 or 4 integers (all / (h, w) / (top, left, bottom, "
            f"right)), got {len(v)}"
        )
    if min(p) < 0:
        raise OpError(f"{op}: padding must not be negative, got {v}")
    return p


def window_out(
    size: D.Dim,
    pad_before: int,
    pad_after: int,
    k: D.Dim,
    dilation: int,
    stride: int,
    op: str,
    axis: str,
    ceil_mode: bool = False,
) -> D.Dim:
    """Output length of a sliding window: ``(size + pads - dilation*(k-1) - 1) / stride + 1``.

    With ``ceil_mode`` the division rounds up, but (as in PyTorch) a last window that would
    start in the right padding is dropped.
    """
    effective = D.add(D.mul(dilation, sub(k, 1)), 1)
    span = sub(D.add(size, pad_before + pad_after), effective)
    if isinstance(span, int) and span < 0:
        raise OpError(
            f"{op}: window of extent {dstr(effective)} (with dilation) is larger than the padded "
            f"{axis} {dstr(D.add(size, pad_before + pad_after))}"
        )
    if not ceil_mode or stride == 1:
        return D.add(floordiv(span, stride), 1)
    out = D.add(floordiv(D.add(span, stride - 1), stride), 1)
    # Drop a last window starting at or past size + pad_before (entirely in the right padding).
    limit = D.add(floordiv(sub(D.add(size, pad_before), 1), stride), 1)
    if isinstance(out, int) and isinstance(limit, int):
        return min(out, limit)
    if D.dims_equal(out, limit):
        return out
    return D.simplify(D.DimCall("min", (out, limit)))


def as_contiguous(x: Any, dtype: np.dtype) -> np.ndarray:
    """``x`` as a C-contiguous array of ``dtype`` (0-d results included)."""
    return np.asarray(x, dtype=dtype, order="C")


def product_dtype(dt: np.dtype) -> np.dtype:
    """The dtype matmul, dense and conv2d sum their products in: float32 for f16 and f32 (the
    machine's BLAS ``sgemm``, as onnxruntime and the C target's blocked kernels sum), float64
    for f64, 64-bit integers for integers (exact, then wrapped)."""
    if dt.kind == "f":
        return np.dtype(np.float64) if dt.itemsize == 8 else np.dtype(np.float32)
    return accumulate_dtype(dt)


def accumulate_dtype(dt: np.dtype) -> np.dtype:
    """float64 for floats, int64/uint64 for integers: the type reference kernels sum in."""
    if dt.kind == "f":
        return np.dtype(np.float64)
    if dt.kind == "u":
        return np.dtype(np.uint64)
    return np.dtype(np.int64)


def require_float_math(dtype: str, op: str) -> None:
    """A computable floating-point dtype (f16, f32, f64)."""
    require_computable(dtype, op)
    require_float(dtype, op)


def exact_div(total: D.Dim, divisor: D.Dim) -> D.Dim | None:
    """``total / divisor`` when the division is provably exact, else None.

    The divisor must be a single term (``c * a * b ...``); every term of ``total`` must
    hold its names and a multiple of its coefficient: ``(4 * n * m) / (2 * m)`` is ``2 * n``.
    """
    if isinstance(total, int) and isinstance(divisor, int):
        return total // divisor if divisor and total % divisor == 0 else None
    num, den = D.normalize(total), D.normalize(divisor)
    if len(den.terms) != 1 or den.terms[0][1] == 0:
        return None
    dmono, dcoef = den.terms[0]
    atoms = dict(num.atoms)
    atoms.update(den.atoms)
    result: D.Dim = 0
    for mono, coef in num.terms:
        rest = list(mono)
        for name in dmono:
            if name not in rest:
                return None
            rest.remove(name)
        if coef % dcoef:
            return None
        term: D.Dim = coef // dcoef
        for name in rest:
            term = D.BinOp("*", term, atoms[name] if name.startswith("#") else D.Sym(name))
        result = D.BinOp("+", result, term)
    return D.simplify(result)


def quiet_mean(a: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    """``np.mean`` without its RuntimeWarning for an empty axis (the mean is nan; np.errstate
    does not silence that warning, and a kernel must not print)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.mean(a, axis=axis, keepdims=keepdims)
