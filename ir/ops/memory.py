"""Constants, memory ops and runtime calls: the ops the passes emit around kernels.

These have no numpy kernel: the interpreter and the VM give them their meaning. Their
inference functions only check operand kinds and produce result types.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir import lowp
from relaxc.ir.nodes import ListLit
from relaxc.ir.sizes import tensor_nbytes
from relaxc.ir.storage_bounds import provably_le
from relaxc.ir.registry import AttrSpec, InferFn, OpDef, OpError, Registry
from relaxc.ir.types import (
    OBJECT,
    STORAGE,
    DTYPES,
    StorageType,
    TensorType,
    TupleType,
    Type,
    numpy_dtype,
)

MAX_ALIGN = 4096
"""The largest alignment a storage may ask for (a page): larger ones are refused, since no
backend can honour them without wasting up to that many bytes per allocation."""

UNIT = TupleType(())
"""The type of calls that return nothing (kills, struct_set)."""


def literal_shape(v: Any) -> tuple[int, ...]:
    """The shape of a nested-list literal; OpError if it is ragged or holds non-numbers."""
    if isinstance(v, ListLit):
        if not v.items:
            return (0,)
        shapes = {literal_shape(x) for x in v.items}
        if len(shapes) != 1:
            raise OpError("const: ragged list literal (rows of different lengths)")
        return (len(v.items),) + shapes.pop()
    if isinstance(v, (bool, int, float)):
        return ()
    raise OpError(
        "const: value must be a weight name (a string), a number or a nested list of numbers"
    )


def _plain(v: Any) -> Any:
    if isinstance(v, ListLit):
        return [_plain(x) for x in v.items]
    return v


def literal_to_array(v: Any, dtype: str) -> np.ndarray:
    """A numpy array holding the inline literal ``v`` as ``dtype``."""
    literal_shape(v)
    return np.array(_plain(v), dtype=numpy_dtype(dtype))


def _leaves(v: Any) -> Any:
    if isinstance(v, ListLit):
        for x in v.items:
            yield from _leaves(x)
    else:
        yield v


def check_literal_fits(v: Any, dtype: str) -> None:
    """OpError unless every number of the literal ``v`` is exactly representable in ``dtype``
    (integers in range, no fraction in an integer dtype, no finite float that overflows)."""
    info = DTYPES[dtype]
    for x in _leaves(v):
        if info.kind == "bool":
            if not (isinstance(x, bool) or (isinstance(x, int) and x in (0, 1))):
                raise OpError(f"const: {x!r} is not a bool (true, false, 0 or 1)")
        elif info.kind in ("int", "uint"):
            if isinstance(x, float):
                if not x.is_integer():
                    raise OpError(
                        f"const: {x!r} is not an integer, so dtype {dtype} cannot hold it exactly"
                    )
                x = int(x)
            lim = lowp.iinfo(numpy_dtype(dtype))
            if not lim.min <= int(x) <= lim.max:
                raise OpError(f"const: {x} is out of range for {dtype} ({lim.min} to {lim.max})")
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            finfo = np.finfo(numpy_dtype(dtype))
            if abs(float(x)) > float(finfo.max) and abs(float(x)) != float("inf"):
                raise OpError(
                    f"const: {x!r} is out of range for {dtype} (largest finite value "
                    f"{float(finfo.max):g})"
                )


def _infer_const(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    value = attrs["value"]
    if isinstance(value, str):
        raise OpError(
            f'const("{value}"): a named constant needs its type written after its name, '
            f'as in %w: Tensor[(4, 4), f32] = const("{value}")'
        )
    shape = literal_shape(value)
    dtype = attrs["dtype"]
    if DTYPES[dtype].numpy is None:
        raise OpError(f"const: dtype {dtype} is storage-only and cannot hold a literal")
    check_literal_fits(value, dtype)
    return TensorType(shape, dtype)


def _infer_alloc_storage(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    size = attrs["size"]
    if isinstance(size, int) and size < 0:
        raise OpError(f"memory.alloc_storage: size {size} is negative")
    align = attrs["align"]
    if align <= 0 or align & (align - 1) or align > MAX_ALIGN:
        raise OpError(
            f"memory.alloc_storage: align={align} is not a power of two from 1 to {MAX_ALIGN}"
        )
    return STORAGE


def _infer_alloc_tensor(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    if not isinstance(inputs[0], StorageType):
        raise OpError("memory.alloc_tensor: its first argument must be a Storage")
    offset = attrs["offset"]
    if isinstance(offset, int) and offset < 0:
        raise OpError(f"memory.alloc_tensor: offset {offset} is negative")
    return TensorType(tuple(attrs["shape"]), attrs["dtype"])


def view_bytes(x: np.ndarray, offset: int, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """``memory.view``'s meaning: the bytes of ``x`` from ``offset`` as a tensor of ``shape``
    and ``dtype``, sharing ``x``'s memory (``x`` must be contiguous, as relaxc's tensors are)."""
    if not x.flags.c_contiguous:
        raise OpError("memory.view: its input is not contiguous, so a view would copy")
    dt = numpy_dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    raw = x.reshape(-1).view(np.uint8)
    if offset < 0 or offset + n > raw.size:
        raise OpError(
            f"memory.view: bytes [{offset}, {offset + n}) are outside its input of {raw.size} bytes"
        )
    return raw[offset : offset + n].view(dt).reshape(shape)


def _infer_view(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    x = inputs[0]
    if not isinstance(x, TensorType):
        raise OpError("memory.view: its input must be a tensor")
    offset, dtype = attrs["offset"], attrs["dtype"]
    out = TensorType(tuple(attrs["shape"]), dtype)
    size = DTYPES[dtype].nbytes
    if isinstance(offset, int) and offset < 0:
        raise OpError(f"memory.view: offset {offset} is negative")
    if size > 1 and D.simplify(D.BinOp("%", offset, size)) != 0:
        raise OpError(
            f"memory.view: offset {D.dim_to_str(offset)} is not a multiple of {size}, the "
            f"size of {dtype}"
        )
    end = D.simplify(D.add(offset, tensor_nbytes(out)))
    if not provably_le(end, tensor_nbytes(x), {}):
        raise OpError(
            f"memory.view: bytes [{D.dim_to_str(offset)}, {D.dim_to_str(end)}) may reach "
            f"past its input of {D.dim_to_str(tensor_nbytes(x))} bytes"
        )
    return out


def _kernel_view(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    return view_bytes(
        xs[0], int(attrs["offset"]), tuple(int(d) for d in attrs["shape"]), attrs["dtype"]
    )


def _infer_kill_tensor(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    if not isinstance(inputs[0], TensorType):
        raise OpError("memory.kill_tensor: its argument must be a tensor")
    return UNIT


def _infer_kill_storage(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    if not isinstance(inputs[0], StorageType):
        raise OpError("memory.kill_storage: its argument must be a Storage")
    return UNIT


def _infer_kill_object(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    return UNIT


def _infer_runtime(name: str) -> InferFn:
    """Inference for the free-argument runtime ops.

    ``attrs["args"]`` holds every positional argument, variables replaced by their types.
    """

    def infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
        args = attrs.get("args", ())
        if name in ("call_packed", "call_cpacked"):
            if not args or not isinstance(args[0], str):
                raise OpError(
                    f'{name}: the first argument must be the function name, as in {name}("f", %x)'
                )
            return OBJECT
        if name == "tir.stack_alloca":
            if (
                len(args) != 2
                or not isinstance(args[0], str)
                or not isinstance(args[1], int)
                or isinstance(args[1], bool)
                or args[1] <= 0
            ):
                raise OpError(
                    "tir.stack_alloca: expects a kind and a positive count, as in "
                    'tir.stack_alloca("array", 1)'
                )
            return OBJECT
        # tir.struct_set(%handle, index, "field", value)
        if (
            len(args) != 4
            or not isinstance(args[1], int)
            or isinstance(args[1], bool)
            or not isinstance(args[2], str)
        ):
            raise OpError('tir.struct_set: expects (%handle, index, "field", value)')
        return UNIT

    return infer


def register_all(reg: Registry) -> None:
    reg.register(
        OpDef(
            "const",
            "a constant: a named weight from the side-car .npz or an inline literal",
            "constant",
            _infer_const,
            min_inputs=0,
            max_inputs=0,
            attrs=(
                AttrSpec("value", "value", doc="weight name (string) or literal"),
                AttrSpec("dtype", "dtype", "f32", "dtype of an inline literal"),
            ),
        )
    )
    reg.register(
        OpDef(
            "memory.alloc_storage",
            "allocate a block of bytes",
            "memory",
            _infer_alloc_storage,
            min_inputs=0,
            max_inputs=0,
            effectful=True,
            attrs=(
                AttrSpec("size", "dim", doc="bytes (may be symbolic)"),
                AttrSpec("align", "int", 64, "alignment in bytes"),
                AttrSpec("scope", "str", "global", "memory scope"),
                AttrSpec(
                    "external",
                    "bool",
                    False,
                    "true for storage the caller owns (outputs): never planned",
                ),
                AttrSpec("arena", "bool", False, "true for an arena made by PlanMemory"),
                AttrSpec(
                    "proven_bound",
                    "int",
                    0,
                    "of an arena: the smallest size its planner proved possible (0: not stated)",
                ),
                AttrSpec(
                    "clock_stopped",
                    "bool",
                    False,
                    "of an arena: the planner's safety clock ended its search (far past its work "
                    "budget), so this plan may differ from run to run",
                ),
            ),
        )
    )
    reg.register(
        OpDef(
            "memory.alloc_tensor",
            "carve a tensor out of a storage at an offset",
            "memory",
            _infer_alloc_tensor,
            min_inputs=1,
            max_inputs=1,
            effectful=True,
            input_names=("storage",),
            example="memory.alloc_tensor(%s, 0, (2, 3), f32) (%s from memory.alloc_storage)",
            attrs=(
                AttrSpec("offset", "dim"),
                AttrSpec("shape", "shape"),
                AttrSpec("dtype", "dtype"),
            ),
        )
    )
    reg.register(
        OpDef(
            "memory.view",
            "the bytes of a tensor from a byte offset, as another shape and dtype "
            "(a view: no copy)",
            "view",
            _infer_view,
            kernel=_kernel_view,
            input_names=("x",),
            attrs=(
                AttrSpec(
                    "offset",
                    "dim",
                    doc="byte offset into the input (a multiple of the dtype's size)",
                ),
                AttrSpec("shape", "shape"),
                AttrSpec("dtype", "dtype"),
            ),
        )
    )
    reg.register(
        OpDef(
            "memory.kill_tensor",
            "end a tensor's lifetime",
            "memory",
            _infer_kill_tensor,
            effectful=True,
        )
    )
    reg.register(
        OpDef(
            "memory.kill_storage",
            "release a storage",
            "memory",
            _infer_kill_storage,
            effectful=True,
        )
    )
    reg.register(
        OpDef(
            "vm.kill_object",
            "release a VM register holding an object",
            "memory",
            _infer_kill_object,
            effectful=True,
        )
    )
    for name, summary in (
        ("call_packed", "call a runtime function by name (VM)"),
        ("call_cpacked", "call a packed C function by name (C target)"),
        ("tir.stack_alloca", "reserve packed-call argument structs on the stack (C target)"),
        ("tir.struct_set", "store a field of a packed-call argument struct (C target)"),
    ):
        reg.register(
            OpDef(
                name,
                summary,
                "runtime",
                _infer_runtime(name),
                min_inputs=0,
                max_inputs=None,
                free_args=True,
                effectful=True,
            )
        )
