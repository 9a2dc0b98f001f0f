"""The narrow dtypes computed through a wider one: bf16 and the low-precision types.

numpy has none of bfloat16, the 8-bit floats (``f8e4m3fn f8e4m3fnuz f8e5m2 f8e5m2fnuz
f8e8m0``), the 4-bit float ``f4e2m1`` and the 4- and 2-bit integers (``i4 u4 i2 u2``);
ml_dtypes (the ``onnx`` extra) registers them, each element in one byte, but einsum,
reductions and most ufuncs do not take them. So a kernel never sees such an array:
:func:`via_wider` widens each input of a narrow dtype to its compute type (float32 for the
floats, int8 / uint8 for the integers: exact), runs the op's kernel, and converts each
result of that compute type back to the narrow dtype (ml_dtypes: round to nearest even for
the floats, wrapping for the integers). An op with a ``dtype`` attribute (``cast`` and the
like) chooses its output dtype itself, so its results are left as the kernel made them.

:func:`cast_to` is ``cast``'s conversion to a narrow dtype, as ONNX's Cast defines it (its
reference implementation, onnx.reference.ops.op_cast, is what ONNX's expected outputs
assume): the 8-bit floats round to nearest even and, with ``saturate`` (the default),
clamp to the finite range (infinities included), else overflow to infinity (f8e5m2) or NaN;
f8e8m0 follows ``round_mode`` (up, down, nearest) on the float32 bits; the other narrow
types convert as ml_dtypes does (f4e2m1 saturates; a float to i4/u4/i2/u2 truncates, a
value outside the type's range giving 0; an integer wraps).
"""

from __future__ import annotations

from functools import wraps
from typing import Any, Callable, Mapping, Sequence

import numpy as np

try:
    import ml_dtypes

    HAVE_ML_DTYPES = True
except ImportError:  # pragma: no cover - ml_dtypes comes with onnx
    HAVE_ML_DTYPES = False

Kernel = Callable[[Sequence[np.ndarray], Mapping[str, Any]], Any]
Into = Callable[[Sequence[np.ndarray], Mapping[str, Any], np.ndarray], bool]

_NAMES = {
    "bfloat16": np.float32,
    "float8_e4m3fn": np.float32,
    "float8_e4m3fnuz": np.float32,
    "float8_e5m2": np.float32,
    "float8_e5m2fnuz": np.float32,
    "float8_e8m0fnu": np.float32,
    "float4_e2m1fn": np.float32,
    "int4": np.int8,
    "uint4": np.uint8,
    "int2": np.int8,
    "uint2": np.uint8,
}
WIDER: dict[np.dtype, np.dtype] = {}
for _name, _wide in _NAMES.items() if HAVE_ML_DTYPES else ():
    WIDER[np.dtype(_name)] = np.dtype(_wide)
"""Each narrow numpy dtype and the dtype it is computed in."""

SATURATING_F8 = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")
"""The 8-bit floats whose casts follow ``saturate``."""

ROUND_MODES = ("up", "down", "nearest")


def iinfo(dt: np.dtype) -> Any:
    """numpy's iinfo of ``dt``, ml_dtypes' for the 4- and 2-bit integers (numpy's refuses
    them)."""
    return ml_dtypes.iinfo(dt) if dt.name in _INT_NAMES else np.iinfo(dt)


def is_narrow(x: object) -> bool:
    return isinstance(x, np.ndarray) and x.dtype in WIDER


def _round_back(result: Any, narrow: np.dtype) -> Any:
    if isinstance(result, np.ndarray) and result.dtype == WIDER[narrow]:
        with np.errstate(all="ignore"):
            return result.astype(narrow)
    if isinstance(result, np.generic) and result.dtype == WIDER[narrow]:
        with np.errstate(all="ignore"):  # a ufunc of 0-D arrays gives a scalar
            return np.asarray(result).astype(narrow)
    if isinstance(result, tuple):
        return tuple(_round_back(r, narrow) for r in result)
    if isinstance(result, list):
        return [_round_back(r, narrow) for r in result]
    return result


def via_wider(kernel: Kernel) -> Kernel:
    """``kernel``, taking narrow inputs by computing in their wider type and converting the
    results of that type back to the (first) narrow input's dtype."""

    @wraps(kernel)
    def run(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> Any:
        narrow = next((x.dtype for x in inputs if is_narrow(x)), None)
        if narrow is None:
            return kernel(inputs, attrs)
        widened = [x.astype(WIDER[x.dtype]) if is_narrow(x) else x for x in inputs]
        result = kernel(widened, attrs)
        return result if "dtype" in attrs else _round_back(result, narrow)

    return run


def into_declining_narrow(into: Into) -> Into:
    """``into``, declining (returning False) whenever an input or the output is narrow."""

    @wraps(into)
    def run(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any], out: np.ndarray) -> bool:
        if is_narrow(out) or any(is_narrow(x) for x in inputs):
            return False
        return into(inputs, attrs, out)

    return run


def cast_to(x: np.ndarray, target: np.dtype, saturate: bool, round_mode: str) -> np.ndarray:
    """``x`` (of a numpy dtype of its own: bool, an integer or a float) as the narrow
    ``target`` (the module docstring)."""
    name = target.name
    with np.errstate(all="ignore"):
        if name == "float8_e8m0fnu":
            return to_e8m0(x, saturate, round_mode)
        if name in _INT_NAMES:
            if x.dtype.kind == "f":
                return _float_to_small_int(x, target)
            return x.astype(np.int64).astype(target)  # wraps
        src = x if x.dtype.kind == "f" else x.astype(np.float64)
        if name in SATURATING_F8 and saturate:
            info = ml_dtypes.finfo(target)
            src = np.clip(src, src.dtype.type(float(info.min)), src.dtype.type(float(info.max)))
        return src.astype(target)


_INT_NAMES = ("int4", "uint4", "int2", "uint2")


def _float_to_small_int(x: np.ndarray, target: np.dtype) -> np.ndarray:
    """Truncated; a value outside the type's range (and NaN) gives 0, as ml_dtypes converts."""
    info = ml_dtypes.iinfo(target)
    t = np.trunc(x.astype(np.float64))
    inside = (t >= int(info.min)) & (t <= int(info.max))
    return np.where(inside, t, 0).astype(np.int8).astype(target)


def to_e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """float8_e8m0fnu as onnx.numpy_helper.to_float8e8m0 computes it (through float32; the
    sign is ignored; NaN and infinity give NaN, 0xFF): the float32 exponent, moved up by
    one where ``round_mode`` rounds the mantissa up (up: any mantissa bit; nearest: the
    guard bit and any bit below it or a nonzero exponent; down: never), except, with
    ``saturate``, from 0xFE."""
    if round_mode not in ROUND_MODES:
        raise ValueError(f"round_mode must be one of {', '.join(ROUND_MODES)}, got {round_mode!r}")
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.uint16)
    special = exponent == 0xFF
    if round_mode == "nearest":
        g = (bits & 0x400000) != 0
        r = (bits & 0x200000) != 0
        s = (bits & 0x1FFFFF) != 0
        up = g & (r | s | (exponent > 0))
    elif round_mode == "up":
        up = (bits & 0x7FFFFF) != 0
    else:
        up = np.zeros(bits.shape, bool)
    up &= ~special
    if saturate:
        up &= exponent != 0xFE
    out = (exponent + up).astype(np.uint8)
    out[special] = 0xFF
    return out.view(ml_dtypes.float8_e8m0fnu)
