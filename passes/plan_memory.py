"""PlanMemory: place allocations of known or bounded size in one arena per memory scope.

Stages (per non-primitive function, each function on its own — no sharing across
functions):

1. **Analysis.** Alias-aware liveness per buffer (:mod:`relaxc.ir.alias`): a storage is
   live from its ``alloc_storage`` until the last use of any tensor carved from it or of
   any value that may refer to one (views, aliases, tuples, projections, function results,
   packed calls). Candidates are the ``alloc_storage`` bindings that are not ``external``
   (outputs: the caller owns them), not kept by a runtime function, and whose size is an
   integer or bounded through the function's ``upper_bounds``.
2. **Planning.** The candidates of each scope become intervals with sizes (rounded up to
   their alignment) and a planner (``none``, ``greedy-size``, ``greedy-conflict`` or
   ``best``) assigns aligned offsets; with ``check=true`` the independent checker verifies
   the plan and a failure is an internal error.
3. **Rewrite.** One ``memory.alloc_storage(ARENA, ..., arena=true)`` per scope at the top of
   the function; every tensor carved from a planned storage is carved from the arena at the
   storage's offset; the planned ``alloc_storage`` bindings (and kills of them) disappear;
   ``memory.kill_tensor`` follows the last use of every planned tensor and
   ``memory.kill_storage`` the last use of the arena. Dynamic storages (unbounded
   symbolic sizes) stay as they are, except that a later one reuses an earlier dead one
   whose size is provably equal. The function gets ``planned = true``.

Guarantees: inputs, outputs (``external``) and constants are never placed or shared; two
tensors live at the same time never overlap; every offset honours its alignment. Refuses
IR whose buffers are already wrapped into packed-call structs (plan before
LegalizePackedCalls). Freeing dynamic allocations is left to KillAfterLastUse.

**Inputs and outputs in the arena** (``io_in_arena=true``, as TFLite Micro plans them; off
by default). In every entry function (a non-primitive function no other function calls:
``@main``), each tensor input of bounded size is first copied into a storage of its own at
the top of the body (``call_packed("relaxc.copy", %x, %x_in)``; the body reads ``%x_in``),
and the storages of its outputs are no longer ``external``: so the planner places an input
as a buffer live from the start to its last use (alias-aware: views and aliases of it keep
it alive), whose bytes later tensors reuse, and an output as a buffer live from its
producer to the end, whose bytes nothing reuses. The function gets ``io_in_arena = true``;
:mod:`relaxc.ir.io_arena` says what that means and the verifier checks it. Constants stay
out of the arena; inputs and outputs of unbounded size stay the caller's memory; functions
that other functions call keep the caller's convention (their inputs are the caller's
buffers, their outputs handed back to it).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Callable, ClassVar, Literal, Union, cast

from relaxc.ir import dims as D
from relaxc.ir.alias import STORAGE, AliasInfo, Liveness, analyze_aliases, buffer_liveness
from relaxc.ir.diagnostics import InternalError
from relaxc.ir.io_arena import COPY, IO_IN_ARENA, entry_functions
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
    Project,
    Stmt,
    TupleExpr,
    Var,
)
from relaxc.ir.sizes import round_up, round_up_dim, tensor_nbytes, tensor_nbytes_bound
from relaxc.ir.types import TensorType, TupleType, Type
from relaxc.ir.verifier import ModuleTypes
from relaxc.ir.vocab import (
    ALLOC_STORAGE,
    ALLOC_TENSOR,
    CALL_PACKED,
    KILL_STORAGE,
    KILL_TENSOR,
    call_of,
    kill_of,
    killed_var,
)
from relaxc.ir.walk import ExprFunctor, map_functions

from .base import Pass, module_types
from .candidates import StorageInfo, planning_candidates
from .planning.checker import check_plan
from .planning.planners import plan_buffers
from .properties import EXPLICIT_MEMORY, PACKED_CALLS, PLANNED


@dataclass
class FunctionPlan:
    """The plan of one function: what was placed where, and what stayed dynamic."""

    placed: dict[str, tuple[str, int]] = field(
        default_factory=dict
    )  # storage -> (arena name, offset)
    arenas: dict[str, tuple[str, int, int]] = field(
        default_factory=dict
    )  # scope -> (name, size, align)
    bounds: dict[str, int] = field(default_factory=dict)  # scope -> the planner's proven bound
    clock_stopped: set[str] = field(default_factory=set)  # scopes whose search the clock ended
    reused: dict[str, str] = field(
        default_factory=dict
    )  # dynamic storage -> the dead one it reuses


@dataclass(frozen=True)
class PlanMemory(Pass):
    """Plan every allocation of known or bounded size into one arena per scope."""

    name: ClassVar[str] = "PlanMemory"
    summary: ClassVar[str] = (
        "alias-aware liveness, then place bounded allocations in one arena per scope"
    )
    requires: ClassVar[frozenset[str]] = frozenset({EXPLICIT_MEMORY})
    forbids: ClassVar[frozenset[str]] = frozenset({PACKED_CALLS})
    provides: ClassVar[frozenset[str]] = frozenset({PLANNED})
    hints: ClassVar[dict[str, str]] = {
        EXPLICIT_MEMORY: "run ManifestAlloc before it",
        PACKED_CALLS: (
            "plan memory before LegalizePackedCalls: a planner that sees buffers only through the "
            "structs that wrap them misses their lifetimes and would reuse live memory"
        ),
    }

    planner: Literal["none", "greedy-size", "greedy-conflict", "best"] = "best"
    time_limit: float = 2.0
    check: bool = False
    io_in_arena: bool = False
    # Bytes the global scope's arena should fit (0: none), such as a device's memory:
    # ``best`` asks for that capacity (see docs/planning.md); ``--max-arena`` sets it.
    capacity: int = 0

    def __post_init__(self) -> None:
        if not math.isfinite(self.time_limit) or self.time_limit < 0:
            raise ValueError(
                f"time_limit={self.time_limit} must be a finite number of seconds, 0 or more"
            )
        if self.capacity < 0:
            raise ValueError(f"capacity={self.capacity} must be a number of bytes, 0 or more")

    def run(self, module: Module, types: ModuleTypes | None = None) -> Module:
        module_types(module, types)  # valid IR in: the analysis below relies on it
        entries = entry_functions(module) if self.io_in_arena else set()
        return map_functions(module, lambda fn: self._function(fn, module, fn.name in entries))

    # -- per function -------------------------------------------------------------------
    def _function(self, fn: Function, module: Module, entry: bool) -> Function:
        if fn.is_primitive:
            return fn
        if entry and fn.attr(IO_IN_ARENA) is None:
            fn = io_into_storages(fn)
        if self.planner == "none":
            return _planned(fn, fn.body)
        info = analyze_aliases(fn, module)
        live = buffer_liveness(fn, info)
        plan = self._plan(fn, info, live)
        body = _rewrite(fn, plan, info, live)
        return _planned(fn, body)

    def _plan(self, fn: Function, info: AliasInfo, live: Liveness) -> FunctionPlan:
        plan = FunctionPlan()
        by_scope, dynamic = planning_candidates(fn, info, live)
        names = NameSupply.for_function(fn)
        for scope in sorted(by_scope):
            items = by_scope[scope]
            buffers = [b for _, b in items]
            result = plan_buffers(
                buffers,
                self.planner,
                time_limit=self.time_limit,
                capacity=self.capacity if scope == "global" else 0,
            )
            if self.check:
                problems = check_plan(buffers, result.offsets, result.size)
                if problems:
                    raise InternalError(
                        f"PlanMemory ({result.algorithm}) made an invalid plan: "
                        + "; ".join(problems)
                    )
            name = names.fresh("arena" if scope == "global" else f"arena_{_ident(scope)}")
            align = max(b.align for b in buffers)
            plan.arenas[scope] = (name, round_up(result.size, align), align)
            # What the planner proved no plan can beat (at least the most bytes live), so the
            # report can say "optimal" or give the bound, not only the ratio to max-live.
            proven = getattr(result, "proven_bound", 0)
            if proven:
                plan.bounds[scope] = round_up(proven, align)
            if getattr(result, "stopped_by_clock", False):
                plan.clock_stopped.add(scope)
            for (s, _), off in zip(items, result.offsets):
                plan.placed[s.name] = (name, off)
        plan.reused = _reuse_equal_dynamic(dynamic, live)
        return plan


IO_ALIGN = 64
"""Alignment of the storage an input is copied into (ManifestAlloc's default)."""


def io_into_storages(fn: Function) -> Function:
    """The first step of ``io_in_arena``: each input of bounded size copied into a storage of
    its own at the top of the body (the body reads the copy), the outputs' storages no longer
    ``external``, and ``io_in_arena = true``. Planning then places them like any other."""
    bounds = fn.upper_bounds()
    names = NameSupply.for_function(fn)
    prologue: list[Stmt] = []
    rename: dict[str, str] = {}
    for p in fn.params:
        if _bounded_tensors(p.type, bounds):
            rename[p.name] = _copy_in(p.name, p.type, names, prologue)
    body = prologue + [_renamed(st, rename) for st in fn.body]
    body = [_internal(st, bounds) for st in body]
    # Renaming keeps each node's class: a returned Var or TupleExpr stays one.
    ret = cast(Union[Var, TupleExpr], _RenameVars(rename).visit_expr(fn.ret)) if rename else fn.ret
    return dataclasses.replace(fn.with_attrs({IO_IN_ARENA: True}), body=tuple(body), ret=ret)


def _bounded_tensors(t: Type, bounds: dict[str, int]) -> bool:
    """``t`` is a tensor, or a tuple of them, whose every size has an upper bound."""
    if isinstance(t, TupleType):
        return all(_bounded_tensors(f, bounds) for f in t.fields)
    if not isinstance(t, TensorType):
        return False
    return tensor_nbytes_bound(t, bounds) is not None


def _copy_in(src: str, t: Type, names: NameSupply, out: list[Stmt]) -> str:
    """Statements (appended to ``out``) that copy the value ``src`` of type ``t`` into storages
    of its own; returns the name of the copy (a tuple of copies for a tuple)."""
    if isinstance(t, TupleType):
        fields = []
        for i, f in enumerate(t.fields):
            part = names.fresh(f"{src}_{i}")
            out.append(Bind(part, None, Project(Var(src), i)))
            fields.append(Var(_copy_in(part, f, names, out)))
        whole = names.fresh(f"{src}_in")
        out.append(Bind(whole, None, TupleExpr(tuple(fields))))
        return whole
    assert isinstance(t, TensorType)
    storage = names.fresh(f"{src}_storage")
    tensor = names.fresh(f"{src}_in")
    size = round_up_dim(tensor_nbytes(t), IO_ALIGN)
    kwargs: KwArgs = (("align", IO_ALIGN), ("scope", "global"))
    out.append(Bind(storage, None, Call(ALLOC_STORAGE, (size,), kwargs)))
    shape = tuple(t.shape)
    out.append(Bind(tensor, None, Call(ALLOC_TENSOR, (Var(storage), 0, shape, DType(t.dtype)))))
    out.append(Effect(Call(CALL_PACKED, (COPY, Var(src), Var(tensor)))))
    return tensor


def _internal(st: Stmt, bounds: dict[str, int]) -> Stmt:
    """An ``external`` storage of bounded size made an ordinary one (the arena will hold it)."""
    call = call_of(st.value, ALLOC_STORAGE) if isinstance(st, Bind) else None
    if call is None or not dict(call.kwargs).get("external"):
        return st
    size = call.args[0] if call.args else dict(call.kwargs).get("size")
    # The verifier holds the size to a dim (AttrSpec "size", "dim").
    if size is None or (
        not isinstance(size, int) and D.upper_bound(cast(D.Dim, size), bounds) is None
    ):
        return st  # unbounded: stays the caller's
    kwargs = tuple((k, v) for k, v in call.kwargs if k != "external")
    assert isinstance(st, Bind)
    return Bind(st.name, st.type, Call(call.op, call.args, kwargs, call.loc), st.loc)


class _RenameVars(ExprFunctor[Expr]):
    """An expression with some variables renamed."""

    def __init__(self, rename: dict[str, str]):
        self.rename = rename

    def var(self, v: Var) -> Var:
        new = self.rename.get(v.name)
        return v if new is None else Var(new, v.loc)

    def args(self, args: tuple[Arg, ...]) -> tuple[Arg, ...]:
        return tuple(self.var(a) if isinstance(a, Var) else a for a in args)

    def vars(self, vs: tuple[Var, ...]) -> tuple[Var, ...]:
        return tuple(self.var(v) for v in vs)

    def visit_default(self, e: Expr) -> Expr:
        return e

    def visit_var(self, e: Var) -> Expr:
        return self.var(e)

    def visit_call(self, e: Call) -> Expr:
        return dataclasses.replace(e, args=self.args(e.args))

    def visit_call_func(self, e: CallFunc) -> Expr:
        return dataclasses.replace(e, args=self.vars(tuple(e.args)))

    def visit_invoke(self, e: Invoke) -> Expr:
        scratch = self.var(e.scratch) if e.scratch is not None else None
        return dataclasses.replace(
            e, args=self.args(e.args), outs=self.vars(e.outs), scratch=scratch
        )

    def visit_tuple(self, e: TupleExpr) -> Expr:
        return dataclasses.replace(e, fields=self.vars(e.fields))

    def visit_project(self, e: Project) -> Expr:
        return dataclasses.replace(e, tuple_var=self.var(e.tuple_var))


def _renamed(st: Stmt, rename: dict[str, str]) -> Stmt:
    if not rename:
        return st
    value = _RenameVars(rename).visit_expr(st.value)
    return st if value is st.value else dataclasses.replace(st, value=value)


def _ident(text: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in text)


def _reuse_equal_dynamic(dynamic: list[StorageInfo], live: Liveness) -> dict[str, str]:
    """A dynamic storage reuses an earlier one that is dead, when their sizes are provably equal."""
    reused: dict[str, str] = {}
    holder_end: dict[str, int] = {}  # physical storage -> last use of anything placed in it
    physical: list[StorageInfo] = []
    for s in dynamic:
        start = live.defined[s.name]
        end = live.last_use.get(s.name, start)
        for p in physical:
            if (
                holder_end[p.name] < start
                and p.scope == s.scope
                and p.align >= s.align
                and D.dims_equal(p.size, s.size)
            ):
                reused[s.name] = p.name
                holder_end[p.name] = end
                break
        else:
            physical.append(s)
            holder_end[s.name] = end
    return reused


def _planned(fn: Function, body: tuple[Stmt, ...] | list[Stmt]) -> Function:
    """``fn`` with ``body`` and the attribute ``planned = true`` (last, replacing any earlier
    one)."""
    return dataclasses.replace(fn.with_attrs({"planned": True}), body=tuple(body))


def _rewrite(fn: Function, plan: FunctionPlan, info: AliasInfo, live: Liveness) -> tuple[Stmt, ...]:
    """Apply ``plan`` to the body of ``fn`` and insert kills for what was planned."""
    placed = plan.placed
    moved = {s: plan.reused[s] for s in plan.reused}  # dynamic storage -> physical storage
    # Tensors carved from planned storages, and the arena they end up in.
    planned_tensors = {t: placed[s][0] for t, s in info.storage_of.items() if s in placed}
    killed_already = {v.name for v in map(killed_var, fn.body) if v is not None}
    # Where each kill goes: after the last use of the value.
    kills_after: dict[int, list[Stmt]] = {}
    end = len(fn.body)
    for t in sorted(planned_tensors, key=lambda t: (live.last_use.get(t, -1), t)):
        last = live.last_use.get(t, live.defined.get(t, 0))
        if t not in killed_already and last < end:
            kills_after.setdefault(last, []).append(Effect(Call(KILL_TENSOR, (Var(t),))))
    for scope, (arena, _, _) in sorted(plan.arenas.items()):
        members = [t for t, a in planned_tensors.items() if a == arena]
        last = max((live.last_use.get(t, live.defined.get(t, 0)) for t in members), default=-1)
        if 0 <= last < end:
            kills_after.setdefault(last, []).append(Effect(Call(KILL_STORAGE, (Var(arena),))))
    # Dynamic storages that now share: the reused one's kill moves after the last sharer.
    last_of_physical: dict[str, int] = {}
    for s, p in moved.items():
        last_of_physical[p] = max(last_of_physical.get(p, -1), live.last_use.get(s, -1))

    physical_kills: dict[int, list[Stmt]] = {}
    for p, last in sorted(last_of_physical.items()):
        if p in killed_already:
            physical_kills.setdefault(last, []).append(Effect(Call(KILL_STORAGE, (Var(p),))))

    def storage_root(name: str) -> str:
        """The storage a name is (``%s2 = %s`` is ``%s``), or the name itself."""
        roots = info.roots(name)
        if len(roots) == 1:
            (r,) = roots
            if info.kind.get(r) == STORAGE:
                return r
        return name

    body: list[Stmt] = []
    for scope, (arena, size, align) in sorted(plan.arenas.items()):
        kwargs: KwArgs = (("align", align), ("scope", scope), ("arena", True))
        if scope in plan.bounds:
            kwargs += (("proven_bound", plan.bounds[scope]),)
        if scope in plan.clock_stopped:
            kwargs += (("clock_stopped", True),)
        body.append(Bind(arena, None, Call(ALLOC_STORAGE, (size,), kwargs)))
    for i, st in enumerate(fn.body):
        if isinstance(st, Bind):
            if call_of(st.value, ALLOC_STORAGE) and (st.name in placed or st.name in moved):
                pass  # the arena (or the reused storage) replaces it
            elif isinstance(st.value, Var) and (
                (r := storage_root(st.value.name)) in placed or r in moved
            ):
                # An alias of a planned storage names what replaced it; the tensors carved
                # from it are re-carved through their root, at the storage's offset.
                target = placed[r][0] if r in placed else moved[r]
                body.append(Bind(st.name, st.type, Var(target, st.value.loc), st.loc))
            else:
                body.append(_carve_from_plan(st, placed, moved, storage_root))
        else:
            kill, storage = kill_of(st), killed_var(st)
            root = storage_root(storage.name) if storage is not None else None
            if (
                kill is not None
                and kill.op == KILL_STORAGE
                and root is not None
                and (root in placed or root in moved or root in last_of_physical)
            ):
                # kills of storages that no longer exist, or whose life got longer, are re-placed
                pass
            else:
                body.append(st)
        body.extend(kills_after.get(i, []))
        body.extend(physical_kills.get(i, []))
    return tuple(body)


def _carve_from_plan(
    st: Bind,
    placed: dict[str, tuple[str, int]],
    moved: dict[str, str],
    storage_root: Callable[[str], str],
) -> Bind:
    """``st``, or, if it carves a tensor from a planned or reused storage (or an alias of
    one), the same tensor carved from the arena at the storage's offset (or from the storage
    it reuses)."""
    v = call_of(st.value, ALLOC_TENSOR)
    if v is None or not v.args or not isinstance(v.args[0], Var):
        return st
    src = storage_root(v.args[0].name)
    if src in placed:
        arena, off = placed[src]
        offset = v.args[1] if len(v.args) > 1 else dict(v.kwargs).get("offset", 0)
        # The verifier holds the offset to a dim (AttrSpec "offset", "dim").
        new_off = D.add(off, cast(D.Dim, offset)) if not isinstance(offset, int) else off + offset
        args = (Var(arena, v.args[0].loc), new_off) + tuple(v.args[2:])
    elif src in moved:
        args = (Var(moved[src], v.args[0].loc),) + tuple(v.args[1:])
    else:
        return st
    return Bind(st.name, st.type, Call(v.op, args, v.kwargs, v.loc), st.loc)
