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
from relaxc.ir.alias import analyze_aliases, flatten
from relaxc.ir.names import NameSupply
from relaxc.ir.nodes import (
    Arg,
    Bind,
    Call,
    CallFunc,
    DType,
    Effect,
    Expr,
    Function,
    Invoke,
    KwArgs,
    Module,
    Stmt,
    TupleExpr,
    Var,
    direct_constructor,
)
from relaxc.ir.ops import REGISTRY
from relaxc.ir.ops.memory import MAX_ALIGN
from relaxc.ir.sizes import round_up_dim, tensor_nbytes
from relaxc.ir.types import TensorType, TupleType, Type, tensor_leaves
from relaxc.ir.verifier import ModuleTypes
from relaxc.ir.vocab import ALLOC_STORAGE, ALLOC_TENSOR
from relaxc.ir.walk import ExprFunctor, map_functions, with_body

from .base import Pass, PassError, module_types
from .properties import EXPLICIT_MEMORY


# The pass makes several nodes per allocation: build them without the frozen __init__'s cost.
_Bind, _Call, _Var, _Effect, _Invoke, _TupleExpr = map(
    direct_constructor, (Bind, Call, Var, Effect, Invoke, TupleExpr)
)

KernelCall = tuple[str, bool, tuple[Arg, ...], KwArgs]
"""What an ``invoke`` of a computation calls: (target, is_func, args, kwargs)."""


class _FindKernel(ExprFunctor["KernelCall | None"]):
    """The kernel an expression computes with, or None if it allocates nothing.

    A kernel op becomes ``invoke op(...)``, a call of a primitive function
    ``invoke @f(...)``; every other expression is left as it is.
    """

    def __init__(self, primitive: set[str]):
        self.primitive = primitive

    def visit_default(self, e: Expr) -> None:
        return None

    def visit_call(self, e: Call) -> KernelCall | None:
        op = REGISTRY.get(e.op)
        if op is not None and op.category == "kernel":
            return e.op, False, e.args, e.kwargs
        return None

    def visit_call_func(self, e: CallFunc) -> KernelCall | None:
        if e.func in self.primitive:
            return e.func, True, tuple(e.args), ()
        return None


@dataclass(frozen=True)
class ManifestAlloc(Pass):
    """Give every computed value its own storage and write it by destination passing."""

    name: ClassVar[str] = "ManifestAlloc"
    summary: ClassVar[str] = (
        "allocate storage for every computed value; kernels write into it (invoke ... outs)"
    )
    provides: ClassVar[frozenset[str]] = frozenset({EXPLICIT_MEMORY})

    align: int = 64

    def __post_init__(self) -> None:
        if self.align <= 0 or self.align & (self.align - 1) or self.align > MAX_ALIGN:
            raise ValueError(f"align={self.align} is not a power of two from 1 to {MAX_ALIGN}")

    def run(self, module: Module, types: ModuleTypes | None = None) -> Module:
        types = module_types(module, types)
        find_kernel = _FindKernel({f.name for f in module.functions if f.is_primitive})
        return map_functions(
            module,
            lambda fn: (
                fn if fn.is_primitive else self._function(fn, module, types[fn.name], find_kernel)
            ),
        )

    def _function(
        self, fn: Function, module: Module, types: dict[str, Type], find_kernel: _FindKernel
    ) -> Function:
        names = NameSupply.for_function(fn)
        sizes: dict[TensorType, D.Dim] = {}  # most values share a few types: simplify each once
        body: list[Stmt] = []
        storage_at: dict[str, int] = {}  # tensor made here -> index in body of its alloc_storage
        leaf_types: dict[str, TensorType] = {}
        for stmt in fn.body:
            kernel = find_kernel.visit_expr(stmt.value)
            if kernel is None:
                body.append(stmt)
            elif isinstance(stmt, Bind):
                body += self._manifest(
                    stmt, kernel, types[stmt.name], names, sizes, storage_at, len(body), leaf_types
                )
            # else: a kernel result nobody reads: pure, so nothing to compute
        out = with_body(fn, body)
        # Step 2: only what reaches the return is the caller's. Alias analysis of the new body
        # sees each tuple field as its own tensor, so a field nobody returns (a kernel's
        # scratch, a dead split output) stays an intermediate, planned and counted.
        info = analyze_aliases(out, module)
        whole: set[str] = (
            set()
        )  # tensors the return hands over whole (not a part of, by memory.view)
        for v in [out.ret] if isinstance(out.ret, Var) else list(out.ret.fields):
            leaves = tensor_leaves(types.get(v.name) or TupleType(()))
            trees = info.trees.get(v.name, frozenset())
            per_leaf = list(trees) if isinstance(trees, tuple) else [trees]
            for leaf, tree in zip(
                leaves, per_leaf if len(per_leaf) == len(leaves) else [trees] * len(leaves)
            ):
                for r in flatten(tree):
                    rt = leaf_types.get(r)
                    if rt is not None and D.dims_equal(tensor_nbytes(rt), tensor_nbytes(leaf)):
                        whole.add(r)
        external = sorted(
            storage_at[t] for t in info.returned(out) if t in storage_at and t in whole
        )
        if not external:
            return out
        for k in external:
            alloc = body[k]
            assert isinstance(alloc, Bind) and isinstance(alloc.value, Call)
            call = alloc.value
            body[k] = _Bind(
                alloc.name,
                alloc.type,
                _Call(call.op, call.args, call.kwargs + (("external", True),), call.loc),
                alloc.loc,
            )
        return with_body(fn, body)

    def _manifest(
        self,
        stmt: Bind,
        kernel: KernelCall,
        t: Type,
        names: NameSupply,
        sizes: dict[TensorType, D.Dim],
        storage_at: dict[str, int],
        start: int,
        leaf_types: dict[str, TensorType],
    ) -> list[Stmt]:
        name = stmt.name
        loc = stmt.loc
        if isinstance(t, TensorType):
            leaves = [(name, t)]
        elif isinstance(t, TupleType) and all(isinstance(f, TensorType) for f in t.fields):
            leaves = [
                (names.fresh(f"{name}_{j}"), f)
                for j, f in enumerate(t.fields)
                if isinstance(f, TensorType)  # all are (checked above)
            ]
        else:
            raise PassError(f"ManifestAlloc: cannot allocate a value of this type for %{name}", loc)
        out: list[Stmt] = []
        outs: list[Var] = []
        for leaf_name, leaf in leaves:
            storage = names.fresh(f"{leaf_name}_storage")
            kwargs: KwArgs = (("align", self.align), ("scope", "global"))
            storage_at[leaf_name] = start + len(out)
            leaf_types[leaf_name] = leaf
            size = sizes.get(leaf)
            if size is None:
                size = sizes[leaf] = round_up_dim(tensor_nbytes(leaf), self.align)
            out.append(_Bind(storage, None, _Call(ALLOC_STORAGE, (size,), kwargs, loc), loc))
            ann = stmt.type if leaf_name == name else None
            out.append(
                _Bind(
                    leaf_name,
                    ann,
                    _Call(
                        ALLOC_TENSOR,
                        (_Var(storage, loc), 0, tuple(leaf.shape), DType(leaf.dtype)),
                        (),
                        loc,
                    ),
                    loc,
                )
            )
            outs.append(_Var(leaf_name, loc))
        target, is_func, inv_args, inv_kwargs = kernel
        out.append(
            _Effect(
                _Invoke(target, is_func, inv_args, inv_kwargs, tuple(outs), stmt.value.loc), loc
            )
        )
        if isinstance(t, TupleType):
            out.append(Bind(name, stmt.type, TupleExpr(tuple(outs), loc), loc))
        return out
