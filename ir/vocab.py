"""The IR's vocabulary: the names of the ops passes emit, and predicates over statements.

Passes and backends spell memory and runtime ops through these constants, never as bare
strings, and ask the questions below instead of unpacking nodes by hand.
"""

from __future__ import annotations

from typing import TypeGuard

from . import dims as D
from .nodes import Bind, Call, Effect, Expr, Function, Module, Stmt, Var
from .types import TensorType, tensor_leaves

CONST = "const"
ALLOC_STORAGE = "memory.alloc_storage"
ALLOC_TENSOR = "memory.alloc_tensor"
MEMORY_VIEW = "memory.view"
KILL_TENSOR = "memory.kill_tensor"
KILL_STORAGE = "memory.kill_storage"
KILL_OBJECT = "vm.kill_object"
CALL_PACKED = "call_packed"
CALL_CPACKED = "call_cpacked"
STACK_ALLOCA = "tir.stack_alloca"
STRUCT_SET = "tir.struct_set"

KILL_OPS: frozenset[str] = frozenset({KILL_TENSOR, KILL_STORAGE, KILL_OBJECT})
"""The ops that end a lifetime: a tensor's, a storage's, or a VM register's."""

ALLOC_OPS: frozenset[str] = frozenset({ALLOC_STORAGE, ALLOC_TENSOR})
PACKED_CALL_OPS: frozenset[str] = frozenset({CALL_PACKED, CALL_CPACKED})


def is_int(v: object) -> TypeGuard[int]:
    """True for a Python int that is not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_dim(v: object) -> TypeGuard[D.Dim]:
    """True for a dimension: an integer or a symbolic dim expression."""
    return is_int(v) or isinstance(v, (D.Sym, D.BinOp, D.DimCall))


def call_of(expr: Expr | None, *ops: str) -> Call | None:
    """``expr`` if it is a call of one of ``ops`` (any op when none is named), else None."""
    if isinstance(expr, Call) and (not ops or expr.op in ops):
        return expr
    return None


def kill_of(stmt: Stmt) -> Call | None:
    """The kill call of a kill statement (``memory.kill_tensor(%t)`` and the rest), else None."""
    if isinstance(stmt, Effect):
        return call_of(stmt.value, *KILL_OPS)
    return None


def is_kill(stmt: Stmt) -> bool:
    return kill_of(stmt) is not None


def killed_var(stmt: Stmt) -> Var | None:
    """The variable a kill statement ends, or None for any other statement."""
    call = kill_of(stmt)
    if call is not None and call.args and isinstance(call.args[0], Var):
        return call.args[0]
    return None


def lowered_outputs(fn: Function) -> int | None:
    """``K`` for a lowered primitive function (``attrs {outputs = K}``: its last ``K``
    parameters are its output buffers), None for any other function."""
    k = fn.attr("outputs") if fn.is_primitive else None
    return k if is_int(k) else None


def kernel_io(fn: Function) -> tuple[list[TensorType], list[TensorType]]:
    """The tensors a primitive function reads and the ones it writes, in calling order:
    its parameters then its results, or, lowered, all but its last ``K`` parameters then those."""
    k = lowered_outputs(fn)
    params = [leaf for p in fn.params for leaf in tensor_leaves(p.type)]
    if k is None:
        return params, tensor_leaves(fn.ret_type)
    return params[: len(params) - k], params[len(params) - k :]


def kernel_scratch(fn: Function) -> TensorType | None:
    """The scratch a primitive function's caller passes after its outputs (``attrs {scratch
    = N}``, set by PlanKernelScratch: ``Tensor[(N,), u8]``), or None."""
    n = fn.attr("scratch")
    return TensorType((n,), "u8") if isinstance(n, int) and n > 0 else None


__all__ = [
    "ALLOC_OPS",
    "ALLOC_STORAGE",
    "ALLOC_TENSOR",
    "CALL_CPACKED",
    "CALL_PACKED",
    "CONST",
    "KILL_OBJECT",
    "KILL_OPS",
    "KILL_STORAGE",
    "KILL_TENSOR",
    "MEMORY_VIEW",
    "PACKED_CALL_OPS",
    "STACK_ALLOCA",
    "STRUCT_SET",
    "call_of",
    "kernel_scratch",
    "kernel_io",
    "lowered_outputs",
    "is_dim",
    "is_int",
    "is_kill",
    "kill_of",
    "killed_var",
    "named_constants",
]


def named_constants(module: Module) -> list[tuple[str, Bind]]:
    """Every ``%w: T = const("name")`` binding of the module (a weight the program reads by
    name), in order."""
    out = []
    for fn in module.functions:
        for s in fn.body:
            if isinstance(s, Bind) and isinstance(s.value, Call) and s.value.op == CONST:
                args = s.value.args
                value = args[0] if args else dict(s.value.kwargs).get("value")
                if isinstance(value, str):
                    out.append((value, s))
    return out
