"""Dtypes in C: storage types, DLPack type codes, and exact literals."""

from __future__ import annotations

import binascii
import math

import numpy as np

from relaxc.ir.diagnostics import Loc, RxError
from relaxc.ir.types import DTYPES

from .lowp import STORAGE as NARROW_STORAGE

C_TYPE = {
    "bool": "uint8_t",
    "i8": "int8_t",
    "i16": "int16_t",
    "i32": "int32_t",
    "i64": "int64_t",
    "u8": "uint8_t",
    "u16": "uint16_t",
    "u32": "uint32_t",
    "u64": "uint64_t",
    "f16": "uint16_t",
    "f32": "float",
    "f64": "double",
}
C_TYPE.update(NARROW_STORAGE)
"""The C type an element is stored as (bool: one byte 0/1; f16: the IEEE half bits; bf16
and the low-precision types: their bits, backend/c/lowp.py)."""

DL_CODE = {"int": 0, "uint": 1, "float": 2, "bool": 6}
"""DLPack's DLDataTypeCode by dtype kind (kDLInt, kDLUInt, kDLFloat, kDLBool)."""

SUPPORTED = frozenset(C_TYPE) - frozenset(NARROW_STORAGE)
"""Dtypes the C kernels compute with; bf16 and the low-precision types are stored (inputs,
outputs, constants, planned memory) and converted by ``cast``, which no other kernel takes."""


def c_type(dtype: str, what: str = "", loc: Loc | None = None) -> str:
    """The C type of ``dtype``; an RxError (about ``what``, located at ``loc``) if C has none."""
    t = C_TYPE.get(dtype)
    if t is None:
        where = f" ({what})" if what else ""
        raise RxError(f"the C target does not support dtype {dtype}{where}", loc)
    return t


def kind(dtype: str) -> str:
    return DTYPES[dtype].kind


def nbytes(dtype: str) -> int:
    return DTYPES[dtype].nbytes


DL_NARROW = {
    "bf16": (4, 16),
    "f8e4m3fn": (10, 8),
    "f8e4m3fnuz": (11, 8),
    "f8e5m2": (12, 8),
    "f8e5m2fnuz": (13, 8),
    "f8e8m0": (14, 8),
    "f4e2m1": (17, 4),
    "i4": (0, 4),
    "u4": (1, 4),
    "i2": (0, 2),
    "u2": (1, 2),
}
"""DLPack's (code, bits) of bf16 and the low-precision types (kDLBfloat, kDLFloat8_*,
kDLFloat4_e2m1fn; the 4- and 2-bit types by their width, though relaxc holds one element
per byte), so that a packed call tells them from the 8-bit integers."""


def dl_type(dtype: str) -> tuple[int, int]:
    """(code, bits) of ``dtype`` in a DLDataType."""
    if dtype in DL_NARROW:
        return DL_NARROW[dtype]
    return DL_CODE[kind(dtype)], 8 * nbytes(dtype)


def int_literal(v: int) -> str:
    """An int64-safe C integer constant."""
    if v == -(1 << 63):
        return "(-INT64_C(9223372036854775807) - 1)"
    if -(1 << 31) < v < (1 << 31):
        return str(v)
    if v < (1 << 63):
        return f"INT64_C({v})"
    return f"UINT64_C({v})"


def float_literal(v: float, dtype: str) -> str:
    """An exact C literal of the f32/f64 value ``v`` (shortest decimal that round-trips)."""
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    if dtype == "f32":
        return np.format_float_scientific(np.float32(v), unique=True, trim="0") + "f"
    return np.format_float_scientific(np.float64(v), unique=True, trim="0")


def element_literal(v: object, dtype: str) -> str:
    """A literal of the storage type of ``dtype`` for the numpy scalar ``v``."""
    k = kind(dtype)
    if dtype == "f16":
        return f"0x{int(np.asarray(v, dtype=np.float16).view(np.uint16)):04x}"
    if dtype in NARROW_STORAGE:  # its bits
        a = np.asarray(v, dtype=DTYPES[dtype].numpy).reshape(1)
        return f"0x{int(a.view(f'u{a.dtype.itemsize}')[0]):x}u"
    if k == "float":
        return float_literal(float(v), dtype)  # type: ignore[arg-type]
    if k == "bool":
        return "1" if bool(v) else "0"
    iv = int(v)  # type: ignore[call-overload]
    if k == "uint":
        return f"{iv}u" if iv < (1 << 31) else f"UINT64_C({iv})"
    return int_literal(iv)


def array_literal(arr: np.ndarray, dtype: str, per_line: int = 8, indent: str = "    ") -> str:
    """The brace initializer of a C array holding ``arr`` (flattened, C order)."""
    flat = np.ascontiguousarray(arr).reshape(-1)
    if flat.size == 0:
        return "{0}"
    if dtype == "f16":
        items = [f"0x{int(b):04x}" for b in flat.view(np.uint16)]
    elif dtype in NARROW_STORAGE:  # their bits
        items = [f"0x{int(b):x}u" for b in flat.view(f"u{flat.dtype.itemsize}")]
    elif kind(dtype) == "float":
        items = [float_literal(float(x), dtype) for x in flat]
    else:
        items = [element_literal(x, dtype) for x in flat]
    lines = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
    return "{\n" + ",\n".join(indent + ln for ln in lines) + "\n}"


def constant_words(arr: np.ndarray, per_line: int = 8, indent: str = "    ") -> tuple[str, str]:
    """The C word type and the brace initializer that hold ``arr``'s bytes exactly, one
    unsigned word per element (its bit pattern in hex, C order, ``per_line`` to a line; an
    all-zero word is written ``0``).

    No per-element Python work: the hex digits come from one ``hexlify`` of the bytes, and
    the text is laid out by numpy in fixed-width rows (one per element: the word, then its
    separator) whose unused bytes are NUL and dropped at the end, so the time is linear in
    the bytes with a small constant (resnet50's 102 MB of weights: about a second).
    """
    flat = np.ascontiguousarray(arr).reshape(-1)
    size = flat.dtype.itemsize
    word = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}[size]
    n = int(flat.size)
    if n == 0:
        return word, "{0}"
    bits = flat.view(f"u{size}")
    suffix = b"u" if size <= 4 else b"ull"
    nd = 2 * size
    wlen = 2 + nd + len(suffix)  # 0x, the digits, the suffix
    mid, eol = b", ", b",\n" + indent.encode("ascii")
    width = wlen + max(len(mid), len(eol))

    def row(sep: bytes) -> np.ndarray:
        return np.frombuffer((b"0x" + b"0" * nd + suffix + sep).ljust(width, b"\0"), np.uint8)

    # One row per element, from a template line of per_line rows; then the digits.
    line = np.vstack([np.tile(row(mid), (per_line - 1, 1)), row(eol)[None]])
    rows = np.tile(line, (-(-n // per_line), 1))[:n]
    digits = binascii.hexlify(bits.astype(f">u{size}").tobytes())
    rows[:, 2 : 2 + nd] = np.frombuffer(digits, np.uint8).reshape(n, nd)
    rows[bits == 0, 1:wlen] = 0  # a zero is written 0
    rows[-1, wlen:] = 0
    rows[-1, wlen] = ord("\n")
    chars = rows.reshape(-1)
    return word, "{\n" + indent + chars[chars != 0].tobytes().decode("ascii") + "}"
