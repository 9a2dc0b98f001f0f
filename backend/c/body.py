"""What the runner and primitive functions share: emitting one function body into C lines.

:class:`BodyEmitter` walks a body with the IR walker (:class:`~relaxc.ir.walk.StmtVisitor`
for statements, :class:`~relaxc.ir.walk.ExprFunctor` for the value of a binding); the
runner (:mod:`~relaxc.backend.c.runner`) and primitive functions
(:mod:`~relaxc.backend.c.primitive`) add the expressions each of them accepts.
"""

from __future__ import annotations

from typing import Protocol

from relaxc.ir import dims as D
from relaxc.ir.diagnostics import Loc, RxError
from relaxc.ir.nodes import (
    Arg,
    Bind,
    Call,
    Effect,
    Function,
    Module,
    Project,
    Stmt,
    TupleExpr,
    Var,
)
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import OpError, bind_args
from relaxc.ir.sizes import tensor_nbytes
from relaxc.ir.types import TensorType
from relaxc.ir.verifier import ModuleTypes
from relaxc.ir.vocab import MEMORY_VIEW, call_of
from relaxc.ir.walk import ExprFunctor, StmtVisitor

from . import dtypes as T
from .helpers import Helpers
from .kernels import DimC, Spec, make_spec
from .model import CTensor, CValue
from .names import Scope, word_counts


class ModuleParts(Protocol):
    """What a body takes from the file it is emitted into: the module and its types, the
    file's C names, its helpers, and each kernel and constant emitted once
    (:class:`~relaxc.backend.c.module.ModuleEmitter` is it; naming it here, not importing
    it, keeps the module emitter above the bodies it emits)."""

    module: Module
    types: ModuleTypes
    scope: Scope
    helpers: Helpers

    def kernel(self, spec: Spec, loc: Loc | None) -> tuple[str, int]: ...

    def constant(self, fn: Function, name: str, call: Call, t: TensorType) -> str: ...


def bound_call(stmt: Stmt, *ops: str) -> Call | None:
    """The call (of one of ``ops``, or of any op) that a binding binds; None for any other
    statement."""
    return call_of(stmt.value, *ops) if isinstance(stmt, Bind) else None


def effect_call(stmt: Stmt, *ops: str) -> Call | None:
    """The call (of one of ``ops``, or of any op) an expression statement makes; None otherwise."""
    return call_of(stmt.value, *ops) if isinstance(stmt, Effect) else None


def bindings(fn: Function) -> list[tuple[int, Bind]]:
    """The bindings of ``fn``'s body with their statement indices."""
    return [(i, stmt) for i, stmt in enumerate(fn.body) if isinstance(stmt, Bind)]


def var_args(args: tuple[Arg, ...]) -> list[Var]:
    """The variables among a call's arguments (its tensor inputs), in order."""
    return [a for a in args if isinstance(a, Var)]


class BodyEmitter(StmtVisitor, ExprFunctor[CValue]):
    """Statement-by-statement emission of one function body into C lines.

    A binding's value is what :meth:`visit_expr` gives for its expression; while it runs,
    :attr:`binding` is the statement being emitted."""

    def __init__(self, m: ModuleParts, fn: Function):
        self.m = m
        self.fn = fn
        self.types = m.types[fn.name]
        self.scope = Scope(m.scope)
        self.values: dict[str, CValue] = {}
        self.lines: list[str] = []
        self.locals: list[str] = []
        self.dimvars: dict[str, str] = {}
        self.dimc = DimC(self.dimvars, m.helpers)
        self.binding: Bind | None = None

    depth = 1

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    # -- bindings ---------------------------------------------------------------------------
    def visit_bind(self, stmt: Bind) -> None:
        self.binding = stmt
        self.values[stmt.name] = self.visit_expr(stmt.value)

    def visit_var(self, e: Var) -> CValue:
        return self.read(e)  # an alias: the same pointer

    def visit_tuple(self, e: TupleExpr) -> CValue:
        return tuple(self.read(v) for v in e.fields)

    def visit_project(self, e: Project) -> CValue:
        tv = self.read(e.tuple_var)
        if not isinstance(tv, tuple):
            raise RxError(f"%{e.tuple_var.name} is not a tuple", e.loc)
        return tv[e.index]

    # -- values -----------------------------------------------------------------------------
    def read(self, v: Var) -> CValue:
        if v.name not in self.values:
            raise RxError(f"%{v.name} has no value the C target can represent", v.loc)
        return self.values[v.name]

    def tensor(self, v: Var, what: str) -> CTensor:
        val = self.read(v)
        if not isinstance(val, CTensor):
            raise RxError(f"{what}: %{v.name} is not a tensor", v.loc)
        return val

    def nbytes_c(self, t: TensorType) -> str:
        n = tensor_nbytes(t)
        if not isinstance(n, int):
            # Negative for dims the interpreter refuses (a height n - 2 at n = 1): copy nothing
            # rather than (size_t)-64 bytes.
            n = D.DimCall("max", (n, 0))
        return f"(size_t)({self.dimc(n)})"

    def local_ptr(self, ir_name: str, t: TensorType, init: str) -> CTensor:
        var = self.scope.name("v_", ir_name)
        ctype = T.c_type(t.dtype, f"%{ir_name}")
        self.emit(f"{ctype} *{var} = ({ctype} *)(void *)({init});")
        self.locals.append(var)
        return CTensor(var, t)

    def view(self, e: Call, t: TensorType) -> CTensor:
        """The value of a view op: its input's pointer, under the view's type (and, for
        ``memory.view``, moved by its byte offset)."""
        src = self.tensor(var_args(e.args)[0], e.op)
        offset: D.Dim = 0
        if e.op == MEMORY_VIEW:
            op = REGISTRY.get(e.op)
            assert op is not None
            try:
                offset = bind_args(op, e.args, e.kwargs).attrs["offset"]
            except OpError as err:
                raise RxError(str(err), e.loc) from None
        if offset == 0 and T.c_type(src.type.dtype) == T.c_type(t.dtype):
            return CTensor(src.expr, t, src.const)
        q = "const " if src.const else ""
        ctype = T.c_type(t.dtype)
        if offset == 0:
            return CTensor(f"(({q}{ctype} *)({q}void *){src.expr})", t, src.const)
        byte = f"(({q}unsigned char *)({q}void *){src.expr} + {self.dimc(offset)})"
        return CTensor(f"(({q}{ctype} *)({q}void *){byte})", t, src.const)

    def kernel_call(
        self,
        op_name: str,
        args: tuple,
        kwargs: tuple,
        outs: list[CTensor],
        loc: Loc | None,
        scratch: CTensor | None = None,
    ) -> None:
        """Call the kernel of ``op_name`` on ``args`` into ``outs``; a kernel with working
        arrays gets ``scratch`` (the call's planned scratch, or its function's): RxError
        when it has none, or too little."""
        op = REGISTRY.get(op_name)
        if op is None or op.category != "kernel":
            raise RxError(f"the C target cannot call {op_name}: not a kernel op", loc)
        try:
            bound = bind_args(op, args, kwargs)
        except OpError as e:
            raise RxError(str(e), loc) from None
        ins = [self.tensor(v, op_name) for v in bound.inputs]
        for o in outs:
            if o.const:
                raise RxError(f"{op_name} would write into read-only memory ({o.expr})", loc)
        spec = make_spec(op_name, bound.attrs, [i.type for i in ins], [o.type for o in outs])
        fname, need = self.m.kernel(spec, loc)
        cargs = [i.expr for i in ins] + [o.expr for o in outs]
        if need:
            cargs.append(self.scratch_arg(op_name, need, scratch, loc))
        self.emit(f"{fname}({', '.join(cargs + [self.dimvars[d] for d in spec.dims()])});")

    def scratch_arg(self, what: str, need: int, scratch: CTensor | None, loc: Loc | None) -> str:
        """The C argument of ``need`` bytes of ``scratch`` for the kernel of ``what``."""
        if scratch is None:
            raise RxError(
                f"the C kernel of {what} needs {need} bytes of scratch and this call passes "
                "none: run PlanKernelScratch before PlanMemory (the default pipeline of "
                "--target c does)",
                loc,
            )
        have = tensor_nbytes(scratch.type)
        if isinstance(have, int) and have < need:
            raise RxError(
                f"the C kernel of {what} needs {need} bytes of scratch; this call passes {have}",
                loc,
            )
        return f"((unsigned char *)(void *){scratch.expr})"

    def finish_locals(self) -> None:
        """``(void)v;`` for locals never read, so -Wunused-variable stays quiet."""
        counts = word_counts("\n".join(self.lines))
        for var in self.locals:
            if counts[var] <= 1:
                self.lines.append(f"    (void){var};")


__all__ = ["BodyEmitter", "ModuleParts", "bindings", "bound_call", "effect_call", "var_args"]
