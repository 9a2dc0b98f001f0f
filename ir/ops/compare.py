"""Comparisons, logic and bit operations: elementwise ops with numpy broadcasting whose
outputs are bool (comparisons, logic, isnan, isinf) or integers (bitwise ops, bit_shift)."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from relaxc.ir.registry import AttrSpec, InferFn, KernelFn, OpDef, OpError, Registry
from relaxc.ir.types import DTYPES, TensorType, Type

from .checks import as_contiguous
from .common import broadcast_shapes, require_computable, require_float, same_dtype, tensors

Binary = Callable[[np.ndarray, np.ndarray], np.ndarray]

# name -> (summary, numpy kernel): a bool for each pair of elements of one dtype.
COMPARISONS: dict[str, tuple[str, Binary]] = {
    "equal": ("a == b", np.equal),
    "less": ("a < b", np.less),
    "greater": ("a > b", np.greater),
    "less_equal": ("a <= b", np.less_equal),
    "greater_equal": ("a >= b", np.greater_equal),
}

# name -> (summary, numpy kernel): bool inputs, a bool output.
LOGICAL: dict[str, tuple[str, Binary]] = {
    "logical_and": ("a and b (bools)", np.logical_and),
    "logical_or": ("a or b (bools)", np.logical_or),
    "logical_xor": ("a != b (bools)", np.logical_xor),
}

# name -> (summary, numpy kernel): integer inputs, the output of their dtype.
BITWISE: dict[str, tuple[str, Binary]] = {
    "bitwise_and": ("a & b (integers)", np.bitwise_and),
    "bitwise_or": ("a | b (integers)", np.bitwise_or),
    "bitwise_xor": ("a ^ b (integers)", np.bitwise_xor),
}

UNSIGNED = ("u8", "u16", "u32", "u64")


def _require_kind(dtype: str, kinds: tuple[str, ...], what: str, op: str) -> None:
    if DTYPES[dtype].kind not in kinds:
        raise OpError(f"{op}: needs {what}, got {dtype}")


def _binary_infer(name: str, kinds: tuple[str, ...] | None, what: str, out: str | None) -> InferFn:
    """Two inputs of one dtype (of ``kinds``, if given), broadcast; the output's dtype is
    ``out`` (None: the inputs')."""

    def infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
        a, b = tensors(inputs, name)
        dtype = same_dtype([a, b], name)
        require_computable(dtype, name)
        if kinds is not None:
            _require_kind(dtype, kinds, what, name)
        if name == "bit_shift":
            if attrs["direction"] not in ("left", "right"):
                raise OpError(
                    f"bit_shift: direction must be 'left' or 'right', got {attrs['direction']!r}"
                )
        return TensorType(broadcast_shapes([a.shape, b.shape], name), out or dtype)

    return infer


def _kernel(fn: Binary) -> KernelFn:
    def kernel(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        a, b = xs
        r = fn(a, b)
        return as_contiguous(r, r.dtype)

    return kernel


def _bit_shift(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """x shifted by s bits (ONNX BitShift-28): left shifts drop the bits past the width (into
    and past a signed type's sign bit); right shifts of signed integers are arithmetic. A
    shift that is negative or by the width or more gives what the sign extension alone
    gives: -1 for a right shift of a negative x, else 0."""
    x, s = xs
    bits = 8 * x.dtype.itemsize
    left = attrs["direction"] == "left"
    fn = np.left_shift if left else np.right_shift
    with np.errstate(all="ignore"):
        shifted = fn(x, np.clip(s, 0, bits - 1).astype(s.dtype))
    out_of_range = (s < 0) | (s >= bits) if s.dtype.kind == "i" else s >= bits
    fill = np.zeros((), x.dtype)
    if not left and x.dtype.kind == "i":
        fill = np.where(x < 0, x.dtype.type(-1), x.dtype.type(0))
    return as_contiguous(np.where(out_of_range, fill, shifted), x.dtype)


def _isnan_infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    (a,) = tensors(inputs, "isnan")
    require_computable(a.dtype, "isnan")
    require_float(a.dtype, "isnan")
    return TensorType(a.shape, "bool")


def _isinf_infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    (a,) = tensors(inputs, "isinf")
    require_computable(a.dtype, "isinf")
    require_float(a.dtype, "isinf")
    return TensorType(a.shape, "bool")


def _isinf(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    pos = np.isposinf(x) if attrs["detect_positive"] else np.zeros(x.shape, bool)
    neg = np.isneginf(x) if attrs["detect_negative"] else np.zeros(x.shape, bool)
    return as_contiguous(pos | neg, np.dtype(bool))


def _not_infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    (a,) = tensors(inputs, "logical_not")
    _require_kind(a.dtype, ("bool",), "a bool tensor", "logical_not")
    return a


def _register_binary(
    reg: Registry,
    table: Mapping[str, tuple[str, Binary]],
    kinds: tuple[str, ...] | None,
    what: str,
    out: str | None,
) -> None:
    for name, (summary, fn) in table.items():
        reg.register(
            OpDef(
                name,
                summary,
                "kernel",
                _binary_infer(name, kinds, what, out),
                min_inputs=2,
                max_inputs=2,
                kernel=_kernel(fn),
                elementwise=True,
                input_names=("lhs", "rhs"),
                inplace=(0, 1),
            )
        )


def register_all(reg: Registry) -> None:
    # In place only where the output has an input's type (bool logic, bitwise integers):
    # the element at a position is read before the output element there is written.
    _register_binary(reg, COMPARISONS, None, "", "bool")
    _register_binary(reg, LOGICAL, ("bool",), "bool tensors", "bool")
    _register_binary(reg, BITWISE, ("int", "uint"), "integer tensors", None)
    reg.register(
        OpDef(
            "bit_shift",
            "x << s or x >> s (arithmetic on signed integers; a shift out of [0, width) gives "
            "the sign extension: -1 right of a negative x, else 0)",
            "kernel",
            _binary_infer("bit_shift", ("int", "uint"), "integer tensors", None),
            min_inputs=2,
            max_inputs=2,
            kernel=_bit_shift,
            elementwise=True,
            input_names=("x", "shift"),
            attrs=(AttrSpec("direction", "str", "left", "'left' or 'right'"),),
            inplace=(0, 1),
        )
    )
    reg.register(
        OpDef(
            "logical_not",
            "not x (bools)",
            "kernel",
            _not_infer,
            kernel=lambda xs, attrs: as_contiguous(np.logical_not(xs[0]), np.dtype(bool)),
            elementwise=True,
            input_names=("x",),
            inplace=(0,),
        )
    )
    reg.register(
        OpDef(
            "isnan",
            "x is NaN (a bool)",
            "kernel",
            _isnan_infer,
            kernel=lambda xs, attrs: as_contiguous(np.isnan(xs[0]), np.dtype(bool)),
            elementwise=True,
            input_names=("x",),
            inplace=(0,),
            float_only=True,
        )
    )
    reg.register(
        OpDef(
            "isinf",
            "x is an infinity of a detected sign (a bool)",
            "kernel",
            _isinf_infer,
            kernel=_isinf,
            elementwise=True,
            input_names=("x",),
            attrs=(
                AttrSpec("detect_negative", "bool", True, "-inf counts"),
                AttrSpec("detect_positive", "bool", True, "+inf counts"),
            ),
            inplace=(0,),
            float_only=True,
        )
    )
