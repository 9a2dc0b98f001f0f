"""ManifestAlloc: make every allocation explicit (destination passing).

In every non-primitive function, each value computed by a kernel op or by a call of a
primitive function becomes::

    %v_storage = memory.alloc_storage(SIZE, align=A, scope="global")
    %v = memory.alloc_tensor(%v_storage, 0, SHAPE, DTYPE)
    invoke op(args...) outs (%v)

Guarantees:

* SIZE is the tensor's byte size (elements × dtype bytes, bool = 1 byte) rounded up to the
  alignment; symbolic shapes give symbolic size expressions.
* A kernel returning a tuple gets one storage and tensor per field, and the tuple is
  rebuilt from them under the original name.
* Views, tuples, projections, aliases, constants, parameters, runtime calls and calls of
  non-primitive functions allocate nothing and are left as they are.
* Storage whose tensor reaches the function's return (directly or through views, tuples
  and aliases) is marked ``external=true``: the caller owns it, so PlanMemory must never
  place, share or enlarge it. Only what reaches the return: a field of a kernel's tuple
  result that is never returned is an intermediate like any other (decided by alias
  analysis of the rewritten body, where each field is its own tensor).
* Names of existing values are kept; new names never collide with existing ones.
* A kernel call written as a statement (its result unused) is pure and is dropped.

Left to later passes: placing allocations in arenas and reusing memory (PlanMemory) and
freeing values (KillAfterLastUse). Running the pass twice changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from relaxc.ir import dims as D
from relaxc.ir.nodes import (
    Bind,
    Call,
    CallFunc,
    DType,
    Effect,
    Function,
    Invoke,
    Module,
    Stmt,
    TupleExpr,
    Var,
    direct_constructor,
)
from relaxc.ir.ops import REGISTRY
from relaxc.ir.ops.memory import MAX_ALIGN
from relaxc.ir.types import TensorType, TupleType, Type, dtype_nbytes
from relaxc.ir.verifier import ModuleTypes, verify_module

from relaxc.ir.alias import analyze_aliases
from .base import Pass, PassError
from .properties import EXPLICIT_MEMORY


# The pass makes several nodes per allocation: build them without the frozen __init__'s cost.
_Bind, _Call, _Var, _Effect, _Invoke, _TupleExpr = map(
    direct_constructor, (Bind, Call, Var, Effect, Invoke, TupleExpr))


def round_up(nbytes: D.Dim, align: int) -> D.Dim:
    """``nbytes`` rounded up to a multiple of ``align``."""
    if isinstance(nbytes, int):
        return -(-nbytes // align) * align
    if align == 1:
        return nbytes
    return D.simplify(D.BinOp("*", D.BinOp("/", D.BinOp("+", nbytes, align - 1), align), align))


def tensor_bytes(t: TensorType) -> D.Dim:
    """Bytes of a tensor of type ``t``: elements × element size (bool counts one byte)."""
    return D.mul(D.product(t.shape), dtype_nbytes(t.dtype))


class _Names:
    """Hands out fresh value names that collide with nothing in the function."""

    def __init__(self, fn: Function):
        self.used = {p.name for p in fn.params} | {s.name for s in fn.body if isinstance(s, Bind)}

    def fresh(self, base: str) -> str:
        name = base
        i = 1
        while name in self.used:
            name = f"{base}_{i}"
            i += 1
        self.used.add(name)
        return name


@dataclass(frozen=True)
class ManifestAlloc(Pass):
    """Give every computed value its own storage and write it by destination passing."""

    name: ClassVar[str] = "ManifestAlloc"
    summary: ClassVar[str] = "allocate storage for every computed value; kernels write into it (invoke ... outs)"
    provides: ClassVar[frozenset[str]] = frozenset({EXPLICIT_MEMORY})

    align: int = 64

    def __post_init__(self) -> None:
        if self.align <= 0 or self.align & (self.align - 1) or self.align > MAX_ALIGN:
            raise ValueError(f"align={self.align} is not a power of two from 1 to {MAX_ALIGN}")

    def run(self, module: Module, types: ModuleTypes | None = None) -> Module:
        types = types if types is not None else verify_module(module)
        primitive = {f.name for f in module.functions if f.is_primitive}
        out = []
        for fn in module.functions:
            if fn.is_primitive:
                out.append(fn)
            else:
                out.append(self._function(fn, module, types[fn.name], primitive))
        return Module(tuple(out), module.loc)

    def _function(self, fn: Function, module: Module, types: dict[str, Type], primitive: set[str]) -> Function:
        names = _Names(fn)
        sizes: dict[TensorType, D.Dim] = {}  # most values share a few types: simplify each once
        body: list[Stmt] = []
        storage_at: dict[str, int] = {}  # tensor made here -> index in body of its alloc_storage
        for stmt in fn.body:
            e = stmt.value
            computes = (
                isinstance(e, Call) and (op := REGISTRY.get(e.op)) is not None and op.category == "kernel"
            ) or (isinstance(e, CallFunc) and e.func in primitive)
            if not computes:
                body.append(stmt)
                continue
            if isinstance(stmt, Effect):
                continue  # a kernel result nobody reads: pure, so nothing to compute
            body += self._manifest(stmt, stmt.name, types[stmt.name], names, sizes, storage_at, len(body))
        out = Function(fn.name, fn.params, fn.ret_type, fn.attrs, tuple(body), fn.ret, fn.loc)
        # Step 2: only what reaches the return is the caller's. Alias analysis of the new body
        # sees each tuple field as its own tensor, so a field nobody returns (a kernel's
        # scratch, a dead split output) stays an intermediate, planned and counted.
        returned = analyze_aliases(out, module).returned(out)
        external = sorted(storage_at[t] for t in returned if t in storage_at)
        if not external:
            return out
        for k in external:
            alloc = body[k]
            assert isinstance(alloc, Bind) and isinstance(alloc.value, Call)
            call = alloc.value
            body[k] = _Bind(alloc.name, alloc.type, _Call(call.op, call.args, call.kwargs + (("external", True),),
                                                          call.loc), alloc.loc)
        return Function(fn.name, fn.params, fn.ret_type, fn.attrs, tuple(body), fn.ret, fn.loc)

    def _manifest(self, stmt: Stmt, name: str, t: Type, names: _Names, sizes: dict[TensorType, D.Dim],
                  storage_at: dict[str, int], start: int) -> list[Stmt]:
        e = stmt.value
        loc = stmt.loc
        if isinstance(t, TensorType):
            leaves = [(name, t)]
        elif isinstance(t, TupleType) and all(isinstance(f, TensorType) for f in t.fields):
            leaves = [(names.fresh(f"{name}_{j}"), f) for j, f in enumerate(t.fields)]
        else:
            raise PassError(f"ManifestAlloc: cannot allocate a value of this type for %{name}", loc)
        out: list[Stmt] = []
        outs: list[Var] = []
        for leaf_name, leaf in leaves:
            storage = names.fresh(f"{leaf_name}_storage")
            kwargs: tuple = (("align", self.align), ("scope", "global"))
            storage_at[leaf_name] = start + len(out)
            size = sizes.get(leaf)
            if size is None:
                size = sizes[leaf] = round_up(tensor_bytes(leaf), self.align)
            out.append(_Bind(storage, None, _Call("memory.alloc_storage", (size,), kwargs, loc), loc))
            ann = stmt.type if (isinstance(stmt, Bind) and leaf_name == name) else None
            out.append(_Bind(leaf_name, ann, _Call(
                "memory.alloc_tensor", (_Var(storage, loc), 0, tuple(leaf.shape), DType(leaf.dtype)), (), loc), loc))
            outs.append(_Var(leaf_name, loc))
        if isinstance(e, Call):
            inv = _Invoke(e.op, False, e.args, e.kwargs, tuple(outs), e.loc)
        else:
            assert isinstance(e, CallFunc)
            inv = _Invoke(e.func, True, tuple(e.args), (), tuple(outs), e.loc)
        out.append(_Effect(inv, loc))
        if isinstance(t, TupleType):
            out.append(Bind(name, stmt.type if isinstance(stmt, Bind) else None, TupleExpr(tuple(outs), loc), loc))
        return out
