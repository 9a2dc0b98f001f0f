"""Constants, memory ops and runtime calls: the ops the passes emit around kernels.

These have no numpy kernel: the interpreter and the VM give them their meaning. Their
inference functions only check operand kinds and produce result types.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from relaxc.ir.nodes import ListLit
from relaxc.ir.registry import AttrSpec, OpDef, OpError, Registry
from relaxc.ir.types import OBJECT, STORAGE, DTYPES, StorageType, TensorType, TupleType, Type, numpy_dtype

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
    raise OpError("const: value must be a weight name (a string), a number or a nested list of numbers")


def _plain(v: Any) -> Any:
    if isinstance(v, ListLit):
        return [_plain(x) for x in v.items]
    return v


def literal_to_array(v: Any, dtype: str) -> np.ndarray:
    """A numpy array holding the inline literal ``v`` as ``dtype``."""
    literal_shape(v)
    return np.array(_plain(v), dtype=numpy_dtype(dtype))


def _infer_const(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    value = attrs["value"]
    if isinstance(value, str):
        raise OpError(f"const(\"{value}\"): a named constant needs its type written after its name, "
                      f"as in %w: Tensor[(4, 4), f32] = const(\"{value}\")")
    shape = literal_shape(value)
    dtype = attrs["dtype"]
    if DTYPES[dtype].numpy is None:
        raise OpError(f"const: dtype {dtype} is storage-only and cannot hold a literal")
    return TensorType(shape, dtype)


def _infer_alloc_storage(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    size = attrs["size"]
    if isinstance(size, int) and size < 0:
        raise OpError(f"memory.alloc_storage: size {size} is negative")
    align = attrs["align"]
    if align <= 0 or align & (align - 1):
        raise OpError(f"memory.alloc_storage: align={align} is not a positive power of two")
    return STORAGE


def _infer_alloc_tensor(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    if not isinstance(inputs[0], StorageType):
        raise OpError("memory.alloc_tensor: its first argument must be a Storage")
    offset = attrs["offset"]
    if isinstance(offset, int) and offset < 0:
        raise OpError(f"memory.alloc_tensor: offset {offset} is negative")
    return TensorType(tuple(attrs["shape"]), attrs["dtype"])


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


def _infer_runtime(name: str):
    """Inference for the free-argument runtime ops.

    ``attrs["args"]`` holds every positional argument, variables replaced by their types.
    """

    def infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
        args = attrs.get("args", ())
        if name in ("call_packed", "call_cpacked"):
            if not args or not isinstance(args[0], str):
                raise OpError(f'{name}: the first argument must be the function name, as in {name}("f", %x)')
            return OBJECT
        if name == "tir.stack_alloca":
            if (len(args) != 2 or not isinstance(args[0], str) or not isinstance(args[1], int)
                    or isinstance(args[1], bool) or args[1] <= 0):
                raise OpError('tir.stack_alloca: expects a kind and a positive count, as in tir.stack_alloca("array", 1)')
            return OBJECT
        # tir.struct_set(%handle, index, "field", value)
        if (len(args) != 4 or not isinstance(args[1], int) or isinstance(args[1], bool)
                or not isinstance(args[2], str)):
            raise OpError('tir.struct_set: expects (%handle, index, "field", value)')
        return UNIT

    return infer


def register_all(reg: Registry) -> None:
    reg.register(OpDef(
        "const", "a constant: a named weight from the side-car .npz or an inline literal",
        "constant", _infer_const, min_inputs=0, max_inputs=0,
        attrs=(AttrSpec("value", "value", doc="weight name (string) or literal"),
               AttrSpec("dtype", "dtype", "f32", "dtype of an inline literal")),
    ))
    reg.register(OpDef(
        "memory.alloc_storage", "allocate a block of bytes", "memory", _infer_alloc_storage,
        min_inputs=0, max_inputs=0, effectful=True,
        attrs=(AttrSpec("size", "dim", doc="bytes (may be symbolic)"),
               AttrSpec("align", "int", 64, "alignment in bytes"),
               AttrSpec("scope", "str", "global", "memory scope"),
               AttrSpec("external", "bool", False, "true for storage the caller owns (outputs): never planned"),
               AttrSpec("arena", "bool", False, "true for an arena made by PlanMemory")),
    ))
    reg.register(OpDef(
        "memory.alloc_tensor", "carve a tensor out of a storage at an offset", "memory",
        _infer_alloc_tensor, min_inputs=1, max_inputs=1, effectful=True, input_names=("storage",),
        example="memory.alloc_tensor(%s, 0, (2, 3), f32) (%s from memory.alloc_storage)",
        attrs=(AttrSpec("offset", "dim"), AttrSpec("shape", "shape"), AttrSpec("dtype", "dtype")),
    ))
    reg.register(OpDef("memory.kill_tensor", "end a tensor's lifetime", "memory",
                       _infer_kill_tensor, effectful=True))
    reg.register(OpDef("memory.kill_storage", "release a storage", "memory",
                       _infer_kill_storage, effectful=True))
    reg.register(OpDef("vm.kill_object", "release a VM register holding an object", "memory",
                       _infer_kill_object, effectful=True))
    for name, summary in (
        ("call_packed", "call a runtime function by name (VM)"),
        ("call_cpacked", "call a packed C function by name (C target)"),
        ("tir.stack_alloca", "reserve packed-call argument structs on the stack (C target)"),
        ("tir.struct_set", "store a field of a packed-call argument struct (C target)"),
    ):
        reg.register(OpDef(name, summary, "runtime", _infer_runtime(name), min_inputs=0,
                           max_inputs=None, free_args=True, effectful=True))
