"""Types of IR values: tensors (shape + dtype), tuples, storages and opaque objects.

Dtypes are short canonical names (``f32``, ``i64``, ``bool`` …). TVM's long spellings
(``float32``) are accepted on input and mapped to the short ones. ``bf16`` is computed
(through float32, ``ir/bf16.py``) when ml_dtypes is installed, else storage-only: it has a
size and can be allocated, but no numpy kernel computes with it. So are the low-precision
types of :data:`LOWP` (8- and 4-bit floats, 4- and 2-bit integers: ``ir/lowp.py``), each
stored in one byte per element.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np

from . import dims as D
from .dims import Dim


try:  # ml_dtypes (the onnx extra) gives numpy a bfloat16: see ir/bf16.py
    import ml_dtypes  # noqa: F401

    _HAVE_BF16 = True
except ImportError:  # pragma: no cover - ml_dtypes comes with onnx
    _HAVE_BF16 = False


LOWP: tuple[tuple[str, str, str], ...] = (
    ("f8e4m3fn", "float8_e4m3fn", "float"),
    ("f8e4m3fnuz", "float8_e4m3fnuz", "float"),
    ("f8e5m2", "float8_e5m2", "float"),
    ("f8e5m2fnuz", "float8_e5m2fnuz", "float"),
    ("f8e8m0", "float8_e8m0fnu", "float"),
    ("f4e2m1", "float4_e2m1fn", "float"),
    ("i4", "int4", "int"),
    ("u4", "uint4", "uint"),
    ("i2", "int2", "int"),
    ("u2", "uint2", "uint"),
)
"""The low-precision dtypes: (relaxc name, ml_dtypes' numpy name, kind)."""


@dataclass(frozen=True, slots=True)
class DTypeInfo:
    """What relaxc knows of a dtype: its byte width and numpy equivalent (None: storage-only)."""

    name: str
    nbytes: int
    numpy: str | None
    kind: str  # "bool", "int", "uint" or "float"


DTYPES: dict[str, DTypeInfo] = {
    info.name: info
    for info in (
        DTypeInfo("bool", 1, "bool", "bool"),
        DTypeInfo("i8", 1, "int8", "int"),
        DTypeInfo("i16", 2, "int16", "int"),
        DTypeInfo("i32", 4, "int32", "int"),
        DTypeInfo("i64", 8, "int64", "int"),
        DTypeInfo("u8", 1, "uint8", "uint"),
        DTypeInfo("u16", 2, "uint16", "uint"),
        DTypeInfo("u32", 4, "uint32", "uint"),
        DTypeInfo("u64", 8, "uint64", "uint"),
        DTypeInfo("f16", 2, "float16", "float"),
        DTypeInfo("bf16", 2, "bfloat16" if _HAVE_BF16 else None, "float"),
        DTypeInfo("f32", 4, "float32", "float"),
        DTypeInfo("f64", 8, "float64", "float"),
        # The low-precision types (ir/lowp.py): one byte per element, as ml_dtypes holds
        # them (a 4- or 2-bit value in the low bits of its byte); computed through float32
        # (the 8- and 4-bit floats) or int8/uint8 when ml_dtypes is installed.
        *(
            DTypeInfo(name, 1, np_name if _HAVE_BF16 else None, kind)
            for name, np_name, kind in LOWP
        ),
    )
}

DTYPE_ALIASES: dict[str, str] = {
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    **{np_name: name for name, np_name, _ in LOWP},
}


def canonical_dtype(name: str) -> str | None:
    """The canonical short name of dtype ``name``, or None if it is not a dtype."""
    if name in DTYPES:
        return name
    return DTYPE_ALIASES.get(name)


def dtype_nbytes(dtype: str) -> int:
    """Bytes per element (bool counts as one byte)."""
    return DTYPES[dtype].nbytes


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype used to compute with ``dtype``; raises ValueError for storage-only types."""
    np_name = DTYPES[dtype].numpy
    if np_name is None:
        raise ValueError(f"dtype {dtype} is storage-only: no kernel computes with it")
    return np.dtype(np_name)


def dtype_from_numpy(dt: np.dtype) -> str | None:
    """The relaxc dtype of numpy dtype ``dt``, or None if relaxc has none."""
    for info in DTYPES.values():
        if info.numpy is not None and np.dtype(info.numpy) == dt:
            return info.name
    return None


@dataclass(frozen=True, slots=True)
class TensorType:
    """``Tensor[(d0, d1, ...), dtype]``; each dim an int or a symbolic expression."""

    shape: tuple[Dim, ...]
    dtype: str

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    def num_elements(self) -> Dim:
        return D.product(self.shape)


@dataclass(frozen=True, slots=True)
class TupleType:
    """``Tuple[T0, T1, ...]``."""

    fields: tuple["Type", ...]


@dataclass(frozen=True, slots=True)
class StorageType:
    """``Storage``: a raw block of bytes from ``memory.alloc_storage``."""


@dataclass(frozen=True, slots=True)
class ObjectType:
    """``Object``: an opaque runtime value (packed-call results, stack structs)."""


Type = Union[TensorType, TupleType, StorageType, ObjectType]

STORAGE = StorageType()
OBJECT = ObjectType()


def shape_to_str(shape: tuple[Dim, ...]) -> str:
    if len(shape) == 1:
        return f"({D.dim_to_str(shape[0])},)"
    return "(" + ", ".join(D.dim_to_str(d) for d in shape) + ")"


def type_to_str(t: Type) -> str:
    """The .rx spelling of ``t``."""
    if isinstance(t, TensorType):
        return f"Tensor[{shape_to_str(t.shape)}, {t.dtype}]"
    if isinstance(t, TupleType):
        return "Tuple[" + ", ".join(type_to_str(f) for f in t.fields) + "]"
    if isinstance(t, StorageType):
        return "Storage"
    return "Object"


def types_equal(a: Type, b: Type) -> bool:
    """Structural equality where symbolic dims are compared up to provable equality."""
    if a == b:
        return True
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        return (
            a.dtype == b.dtype
            and len(a.shape) == len(b.shape)
            and all(D.dims_equal(x, y) for x, y in zip(a.shape, b.shape))
        )
    if isinstance(a, TupleType) and isinstance(b, TupleType):
        return len(a.fields) == len(b.fields) and all(
            types_equal(x, y) for x, y in zip(a.fields, b.fields)
        )
    return False


def type_free_vars(t: Type) -> set[str]:
    """Symbolic dim names used anywhere in ``t``."""
    out: set[str] = set()
    if isinstance(t, TensorType):
        for d in t.shape:
            if not isinstance(d, int):
                out |= D.free_vars(d)
    elif isinstance(t, TupleType):
        for f in t.fields:
            out |= type_free_vars(f)
    return out


def tensor_leaves(t: Type) -> list[TensorType]:
    """All tensor types inside ``t`` (depth first), for byte counting."""
    if isinstance(t, TensorType):
        return [t]
    if isinstance(t, TupleType):
        return [leaf for f in t.fields for leaf in tensor_leaves(f)]
    return []
