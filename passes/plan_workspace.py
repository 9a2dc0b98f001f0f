"""PlanWorkspace: decide where every value computed inside a primitive function lives.

A primitive function (a kernel, ``attrs {primitive = true}``) that computes intermediates
needs memory for them. This pass decides that memory in the IR, so ``--dump-after`` shows
it, the plan checker verifies it, the memory report and ``--max-arena`` count it, and the
VM and C only do what they are told (TVM's kernel workspace, which its AOT executor plans
with the rest of the program's memory).

Stages, per primitive function that computes at least one value it does not return:

1. **Analysis.** Alias-aware liveness of the body (:mod:`relaxc.ir.alias`). Each output's
   *result*: the one fresh value its buffer is (directly or through a view); the op record's
   ``inplace`` says which inputs a value may be computed over.
2. **Placement.** A result is computed in its output buffer. An intermediate goes into an
   output buffer when that buffer holds nothing else during its whole life (touching at one
   statement is allowed when the later value is computed in place over the earlier, at the
   same address) and, if it is smaller than the output, no value filling the whole output
   comes before it there (the placement checker takes such a value for the output itself,
   live to the end), otherwise into the *workspace*: values computed in place over a value
   that dies there share its slot; slots of static size are packed by the planner (their
   lifetimes are known), slots of symbolic size follow them, each aligned to ``align``.
3. **Rewrite.** The function becomes a *lowered* primitive function
   (``attrs {outputs = K, workspace = W}``): its parameters are the inputs, then
   ``%workspace: Tensor[(W,), u8]`` when ``W`` is not 0, then the ``K`` output buffers; every
   computed value is a ``memory.view`` of the workspace or of an output at a byte offset,
   written by ``invoke op(...) outs (...)``; a result that is not computed there (a
   parameter, a constant, a value returned twice) is copied into its output at the end; the
   function returns its output parameters. Every ``invoke`` of it gets a workspace storage of
   ``W`` bytes (the callee's dims replaced by the call's), made just before the call and
   passed as its last input.

Primitive functions without intermediates are left as they are: each output is written
by the function's one computation, with nothing to decide. Planned or legalized IR with
nothing to lower passes through unchanged; lowering in such IR is refused (it must come
before PlanMemory, which plans the workspaces it adds).

Left to later passes: the workspace storages are ordinary storages, placed in the arena by
PlanMemory (whose lower bound, report and ``--max-arena`` therefore count them) and freed
after their call by PlanMemory's kills or KillAfterLastUse. Running the pass twice changes
nothing (a lowered function is not lowered again).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence, cast

from relaxc.ir import dims as D
from relaxc.ir.alias import FRESH, analyze_aliases, buffer_liveness, flatten
from relaxc.ir.lowered import returned_vars
from relaxc.ir.names import NameSupply
from relaxc.ir.nodes import (
    Project,
    Bind,
    Call,
    DType,
    Effect,
    Expr,
    Function,
    Invoke,
    Module,
    Param,
    Stmt,
    TupleExpr,
    Var,
    call_dims,
)
from relaxc.ir.ops import REGISTRY
from relaxc.ir.sizes import round_up, round_up_dim, tensor_nbytes
from relaxc.ir.types import TensorType, TupleType, Type, dtype_nbytes, tensor_leaves
from relaxc.ir.verifier import ModuleTypes
from relaxc.ir.vocab import ALLOC_STORAGE, ALLOC_TENSOR, MEMORY_VIEW, is_int
from relaxc.ir.walk import ExprFunctor, FunctionRewriter

from .base import Pass, PassError, module_types
from .planning.model import Buffer
from .planning.planners import plan_buffers
from .properties import EXPLICIT_MEMORY, PACKED_CALLS, PLANNED, detect_properties

WORKSPACE = "workspace"
COPY_OP = "cast"  # a cast to the same dtype copies exactly, on every backend


def is_lowered(fn: Function) -> bool:
    """True for a primitive function already in destination-passing form."""
    return fn.is_primitive and is_int(fn.attr("outputs"))


# ---------------------------------------------------------------------------------------
# Analysis and placement of one primitive function.


@dataclass(frozen=True)
class Slot:
    """Where one computed tensor lives: ``base`` is ``"out"`` (output ``index``) or the
    workspace, at byte ``offset``."""

    base: str
    index: int
    offset: D.Dim


@dataclass
class Placement:
    """The decisions for one primitive function."""

    slots: dict[str, Slot]  # value name (or tuple field name) -> slot
    fields: dict[str, list[str]]  # tuple-valued kernel result -> its field names
    workspace: D.Dim  # bytes
    copies: list[tuple[int, Var | Project]]  # outputs written by a copy at the end: (index, source)
    out_types: list[TensorType]


class _Unplaceable(Exception):
    """A primitive function whose values the pass cannot place provably (left as it is)."""


class _Planner:
    def __init__(
        self, fn: Function, module: Module, types: dict[str, Type], align: int, names: NameSupply
    ):
        self.fn = fn
        self.types = types
        self.align = align
        self.names = names
        self.info = analyze_aliases(fn, module)
        self.live = buffer_liveness(fn, self.info)
        self.end = len(fn.body)
        self.producer: dict[str, int] = {}
        for i, stmt in enumerate(fn.body):
            if isinstance(stmt, Bind):
                self.producer[stmt.name] = i

    # -- which values are computed here ------------------------------------------------------
    def computed(self) -> list[Bind]:
        out = []
        for stmt in self.fn.body:
            if isinstance(stmt, Bind) and isinstance(stmt.value, Call):
                op = REGISTRY.get(stmt.value.op)
                if op is not None and op.category == "kernel":
                    out.append(stmt)
        return out

    def out_roots(self) -> list[frozenset[str]]:
        """The roots of each output leaf, in order."""
        out: list[frozenset[str]] = []
        for v in returned_vars(self.fn):
            tree = self.info.trees.get(v.name, frozenset())
            t = self.types[v.name]
            if isinstance(t, TupleType):
                if not isinstance(tree, tuple):
                    tree = tuple(tree for _ in tensor_leaves(t))
                out += [flatten(x) for x in tree]
            else:
                out.append(flatten(tree))
        return out

    def span(self, name: str) -> tuple[int, int]:
        d = self.live.defined[name]
        return d, self.live.last_use.get(name, d)

    # -- in place --------------------------------------------------------------------------
    def in_place_over(self, src: str, at: int) -> bool:
        """The value computed at statement ``at`` may be written over root ``src`` there."""
        stmt = self.fn.body[at]
        if not (isinstance(stmt, Bind) and isinstance(stmt.value, Call)):
            return False
        op = REGISTRY.get(stmt.value.op)
        if op is None or not op.inplace:
            return False
        a, b = self.types.get(src), self.types.get(stmt.name)
        if not (
            isinstance(a, TensorType)
            and isinstance(b, TensorType)
            and a.dtype == b.dtype
            and len(a.shape) == len(b.shape)
            and all(D.dims_equal(x, y) for x, y in zip(a.shape, b.shape))
        ):
            return False
        ins = [x for x in stmt.value.args if isinstance(x, Var)]
        return any(
            k < len(ins) and self.info.roots(ins[k].name) == frozenset({src}) for k in op.inplace
        )

    # -- the plan --------------------------------------------------------------------------
    def place(self) -> Placement | None:
        fn = self.fn
        rt = fn.ret_type
        if isinstance(rt, TupleType) and not all(isinstance(f, TensorType) for f in rt.fields):
            return None  # a nested tuple result: its outputs have no flat parameter list to name
        computed = self.computed()
        out_types = [leaf for leaf in tensor_leaves(fn.ret_type)]
        roots = self.out_roots()
        slots: dict[str, Slot] = {}
        fields: dict[str, list[str]] = {}
        copies: list[tuple[int, Var | Project]] = []
        occupants: dict[int, list[tuple[str, int, int]]] = {k: [] for k in range(len(out_types))}
        kinds = self.info.kind
        # A multi-output kernel whose tuple is the whole result writes every output.
        ret = fn.ret
        whole = None
        if isinstance(ret, Var) and isinstance(self.types.get(ret.name), TupleType):
            stmt = next((s for s in computed if s.name == ret.name), None)
            if stmt is not None:
                whole = stmt.name
                fields[whole] = [self.names.fresh(f"{whole}_{j}") for j in range(len(out_types))]
                for j, f in enumerate(fields[whole]):
                    slots[f] = Slot("out", j, 0)
        ret_leaf_vars = self._ret_leaf_vars()
        for k, rs in enumerate(roots):
            if whole is not None:
                break
            r = next(iter(rs)) if len(rs) == 1 else None
            t = self.types.get(r) if r is not None else None
            if (
                r is not None
                and kinds.get(r) == FRESH
                and r not in slots
                and isinstance(t, TensorType)
                and r in self.producer
                and self._fits_exactly(t, out_types[k])
            ):
                slots[r] = Slot("out", k, 0)
                occupants[k].append((r, self.span(r)[0], self.end))
            else:
                copies.append((k, ret_leaf_vars[k]))
        intermediates = [s for s in computed if s.name not in slots and s.name != whole]
        if not intermediates:
            return None
        workspace_items: list[tuple[str, TensorType, int, int]] = []
        # Statements come in order, so an occupant whose life ended before the current one
        # is disjoint from it and from every later one: only the others are compared (a
        # chain of in-place ops fills one output with thousands of values, one live at a
        # time). And the earliest definition of an occupant filling all of each output.
        active = {k: list(occ) for k, occ in occupants.items()}
        exact_from: dict[int, int] = {}
        for k, occ in occupants.items():
            for _r, rd, _ in occ:  # each fills all of the output (``_fits_exactly`` above)
                exact_from[k] = min(exact_from.get(k, rd), rd)
        for stmt in intermediates:
            t = self.types[stmt.name]
            d, u = self.span(stmt.name)
            leaves = tensor_leaves(t)
            if isinstance(t, TupleType):
                fields[stmt.name] = [
                    self.names.fresh(f"{stmt.name}_{j}") for j in range(len(leaves))
                ]
                for f, leaf in zip(fields[stmt.name], leaves):
                    self.types[f] = leaf
                    workspace_items.append((f, leaf, d, u))
                continue
            assert isinstance(t, TensorType)
            for k, out in enumerate(out_types):
                if not self._fits(t, out):
                    continue
                # The placement checker takes a value filling all of an output for the
                # output itself, live from its first write to the end: nothing smaller may
                # come after one (or after the result) in that output's bytes.
                fills = self._fits_exactly(t, out)
                if not fills and exact_from.get(k, d) < d:
                    continue
                live = active[k] = [occ for occ in active[k] if occ[2] >= d]
                if all(self._disjoint((stmt.name, d, u), occ) for occ in live):
                    occupants[k].append((stmt.name, d, u))
                    live.append((stmt.name, d, u))
                    if fills:
                        exact_from[k] = min(exact_from.get(k, d), d)
                    slots[stmt.name] = Slot("out", k, 0)
                    break
            else:
                workspace_items.append((stmt.name, t, d, u))
        try:
            workspace = self._pack(workspace_items, slots)
        except _Unplaceable:
            return None
        return Placement(slots, fields, workspace, copies, out_types)

    def _ret_leaf_vars(self) -> list[Var | Project]:
        """Each output's value: a returned variable, or a field of a returned tuple."""
        out: list[Var | Project] = []
        for v in returned_vars(self.fn):
            t = self.types[v.name]
            if isinstance(t, TupleType):
                out += [Project(v, j) for j in range(len(tensor_leaves(t)))]
            else:
                out.append(v)
        return out

    def _fits_exactly(self, t: TensorType, out: TensorType) -> bool:
        return t.dtype == out.dtype and D.dims_equal(tensor_nbytes(t), tensor_nbytes(out))

    def _fits(self, t: TensorType, out: TensorType) -> bool:
        if dtype_nbytes(t.dtype) > dtype_nbytes(out.dtype):
            return False  # a view of the output must keep the output's alignment
        a, b = tensor_nbytes(t), tensor_nbytes(out)
        if is_int(a) and is_int(b):
            return a <= b
        return D.dims_equal(a, b)

    def _disjoint(self, a: tuple[str, int, int], b: tuple[str, int, int]) -> bool:
        (_ra, da, ua), (_rb, db, ub) = a, b
        if ua < db or ub < da:
            return True
        # Touching at one statement: the later value is computed in place over the earlier.
        for (r1, _d1, u1), (_r2, d2, _u2) in ((a, b), (b, a)):
            if u1 == d2 and self.in_place_over(r1, d2):
                return True
        return False

    def _pack(
        self, items: Sequence[tuple[str, TensorType, int, int]], slots: dict[str, Slot]
    ) -> D.Dim:
        """Place ``items`` (name, type, defined, last use) in the workspace; return its size."""
        # Values computed in place over one that dies there share its slot: walk in order,
        # and let a value join the group whose latest member it overwrites.
        span = {name: (d, u) for name, _t, d, u in items}
        dying_at: dict[int, list[str]] = {}  # statement -> the values last used there
        for name, (_d, u) in span.items():
            dying_at.setdefault(u, []).append(name)
        group: dict[str, str] = {}
        tail: dict[str, str] = {}  # group -> its latest member
        for name, _t, d, _u in sorted(items, key=lambda it: it[2]):
            group[name] = name
            for src in dying_at.get(d, ()):
                g = group.get(src)
                if (
                    g is not None
                    and src != name
                    and tail.get(g) == src
                    and span[src][1] == d
                    and self.in_place_over(src, d)
                ):
                    group[name] = g
                    break
            tail[group[name]] = name
        spans: dict[str, list[Any]] = {}
        itemtype: dict[str, str] = {}
        for name, t, d, u in items:
            itemtype.setdefault(group[name], t.dtype)
            g = group[name]
            if g not in spans:
                spans[g] = [tensor_nbytes(t), d, u]
            else:
                spans[g][1] = min(spans[g][1], d)
                spans[g][2] = max(spans[g][2], u)
        static = [g for g, (size, _d, _u) in spans.items() if is_int(size)]
        symbolic = [g for g, (size, _d, _u) in spans.items() if not is_int(size)]
        if any(D.interval(spans[g][0], {})[0] < 0 for g in symbolic):
            # A size negative for some dims (a window taller than its input): such dims never
            # run, but no layout of it is provably inside the workspace. Left unlowered.
            raise _Unplaceable()
        offsets: dict[str, D.Dim] = {}
        top: D.Dim = 0
        if static:
            # Statement indices are program points: a value lives over [defined, last use].
            buffers = [
                Buffer(spans[g][1], spans[g][2] + 1, int(spans[g][0]), self.align, g)
                for g in static
            ]
            plan = plan_buffers(buffers, "greedy-size")
            for g, off in zip(static, plan.offsets):
                offsets[g] = off
            top = plan.size
        # Slots of symbolic size have no bound to plan them by: one after another, after the
        # static block, largest element first so that every offset stays a multiple of its
        # dtype's size without padding (which keeps every end provably inside the total).
        top = round_up(top, self.align) if is_int(top) else top
        for g in sorted(symbolic, key=lambda g: -dtype_nbytes(itemtype[g])):
            offsets[g] = top
            top = D.simplify(D.add(top, spans[g][0]))
        for name in span:
            slots[name] = Slot(WORKSPACE, 0, offsets[group[name]])
        return D.simplify(round_up_dim(top, self.align))


# ---------------------------------------------------------------------------------------
# Rewrite.


def _view(name: str, base: Var, offset: D.Dim, t: TensorType, loc: Any) -> Bind:
    return Bind(
        name, None, Call(MEMORY_VIEW, (base, offset, tuple(t.shape), DType(t.dtype)), (), loc), loc
    )


def _lower(
    fn: Function, placement: Placement, names: NameSupply, types: dict[str, Type]
) -> Function:
    loc = fn.loc
    params = list(fn.params)
    ws_var: Var | None = None
    if not (is_int(placement.workspace) and placement.workspace == 0):
        ws_name = names.fresh(WORKSPACE)
        params.append(Param(ws_name, TensorType((placement.workspace,), "u8"), loc))
        ws_var = Var(ws_name, loc)
    out_vars = []
    for k, t in enumerate(placement.out_types):
        name = names.fresh(f"out{k}")
        params.append(Param(name, t, loc))
        out_vars.append(Var(name, loc))

    def slot_binding(name: str, t: TensorType, at: Any) -> Stmt:
        slot = placement.slots[name]
        if slot.base == "out":
            base = out_vars[slot.index]
            ot = placement.out_types[slot.index]
            if t == ot and slot.offset == 0:
                return Bind(name, None, base, at)
        elif ws_var is not None:
            base = ws_var
        else:  # an empty workspace holds only empty tensors: any buffer can carry zero bytes
            base = out_vars[0]
        return _view(name, base, slot.offset, t, at)

    body: list[Stmt] = []
    for stmt in fn.body:
        if isinstance(stmt, Bind) and stmt.name in placement.fields:
            e = stmt.value
            assert isinstance(e, Call)
            fs = placement.fields[stmt.name]
            leaves = tensor_leaves(types[stmt.name])
            for f, leaf in zip(fs, leaves):
                body.append(slot_binding(f, leaf, stmt.loc))
            body.append(
                Effect(
                    Invoke(
                        e.op, False, e.args, e.kwargs, tuple(Var(f, stmt.loc) for f in fs), e.loc
                    ),
                    stmt.loc,
                )
            )
            body.append(
                Bind(
                    stmt.name,
                    stmt.type,
                    TupleExpr(tuple(Var(f, stmt.loc) for f in fs), stmt.loc),
                    stmt.loc,
                )
            )
        elif isinstance(stmt, Bind) and stmt.name in placement.slots:
            e = stmt.value
            assert isinstance(e, Call)
            vt = types[stmt.name]
            assert isinstance(vt, TensorType)
            body.append(slot_binding(stmt.name, vt, stmt.loc))
            body.append(
                Effect(
                    Invoke(e.op, False, e.args, e.kwargs, (Var(stmt.name, stmt.loc),), e.loc),
                    stmt.loc,
                )
            )
        else:
            body.append(stmt)
    for k, src in placement.copies:
        if isinstance(src, Project):  # a field of a returned tuple: bound first, then copied
            name = names.fresh(f"{src.tuple_var.name}_{src.index}")
            body.append(
                Bind(name, None, Project(Var(src.tuple_var.name, loc), src.index, loc), loc)
            )
            src = Var(name, loc)
        t = placement.out_types[k]
        body.append(
            Effect(
                Invoke(COPY_OP, False, (src,), (("dtype", DType(t.dtype)),), (out_vars[k],), loc),
                loc,
            )
        )
    ret: Var | TupleExpr = (
        out_vars[0] if isinstance(fn.ret_type, TensorType) else TupleExpr(tuple(out_vars), loc)
    )
    # (A function not lowered yet has neither attribute: the old ones are not replaced.)
    lowered = fn.with_attrs({"outputs": len(out_vars), WORKSPACE: placement.workspace})
    return dataclasses.replace(lowered, params=tuple(params), body=tuple(body), ret=ret)


@dataclass(frozen=True)
class PlanWorkspace(Pass):
    """Place every intermediate of a primitive function in its outputs or a planned workspace."""

    name: ClassVar[str] = "PlanWorkspace"
    summary: ClassVar[str] = "place kernels' intermediates (outputs or a workspace)"
    requires: ClassVar[frozenset[str]] = frozenset({EXPLICIT_MEMORY})
    hints: ClassVar[dict[str, str]] = {EXPLICIT_MEMORY: "run ManifestAlloc before it"}

    align: int = 64

    def __post_init__(self) -> None:
        if self.align <= 0 or self.align & (self.align - 1):
            raise ValueError(f"align={self.align} is not a positive power of two")

    def run(self, module: Module, types: ModuleTypes | None = None) -> Module:
        types = module_types(module, types)
        lowered: dict[str, Function] = {}
        originals: dict[str, Function] = {}
        for fn in module.functions:
            if not fn.is_primitive or is_lowered(fn):
                continue
            names = NameSupply.for_function(fn)
            ftypes = dict(types[fn.name])
            placement = _Planner(fn, module, ftypes, self.align, names).place()
            if placement is None:
                continue
            originals[fn.name] = fn
            lowered[fn.name] = _lower(fn, placement, names, ftypes)
        if not lowered:
            return module  # nothing to place (planned or legalized IR passes through unchanged)
        props = detect_properties(module)
        if PLANNED in props or PACKED_CALLS in props:
            what = "planned memory" if PLANNED in props else "packed calls"
            raise PassError(
                f"PlanWorkspace cannot lower @{next(iter(lowered))} in IR with "
                f"{what}: run it before PlanMemory, which plans the workspaces it adds (and before "
                "LegalizePackedCalls)",
                next(iter(originals.values())).loc,
            )
        out = []
        for fn in module.functions:
            if fn.name in lowered:
                out.append(lowered[fn.name])
            elif fn.is_primitive:
                out.append(fn)
            else:
                out.append(self._callers(fn, originals, lowered, types[fn.name]))
        return dataclasses.replace(module, functions=tuple(out))

    def _callers(
        self,
        fn: Function,
        originals: dict[str, Function],
        lowered: dict[str, Function],
        types: dict[str, Type],
    ) -> Function:
        rewriter = _WorkspaceArgs(fn, originals, lowered, types, self.align)
        out = rewriter.rewrite_function(fn)
        return out if rewriter.changed else fn


class _WorkspaceArgs(FunctionRewriter, ExprFunctor[Sequence[Stmt]]):
    """Each ``invoke`` of a lowered function with a workspace, in a caller: preceded by the
    workspace storage and tensor of the call's size, passed as the call's last input."""

    def __init__(
        self,
        fn: Function,
        originals: dict[str, Function],
        lowered: dict[str, Function],
        types: dict[str, Type],
        align: int,
    ):
        self.fn = fn
        self.originals = originals
        self.lowered = lowered
        self.types = types
        self.align = align
        self.names = NameSupply.for_function(fn)
        self.changed = False
        self.stmt: Effect | None = None

    def rewrite_stmt(self, stmt: Stmt) -> Sequence[Stmt]:
        if isinstance(stmt, Bind):
            return (stmt,)
        self.stmt = stmt
        return self.visit_expr(stmt.value)

    def visit_default(self, expr: Expr) -> Sequence[Stmt]:
        assert self.stmt is not None
        return (self.stmt,)

    def visit_invoke(self, e: Invoke) -> Sequence[Stmt]:
        stmt, fn = self.stmt, self.fn
        assert stmt is not None
        if not e.is_func or e.target not in self.lowered:
            return (stmt,)
        ws = self.lowered[e.target].attr(WORKSPACE)
        if is_int(ws) and ws == 0:
            return (stmt,)
        arg_types = [self.types[a.name] for a in e.args if isinstance(a, Var)]
        # _lower set the attribute: the placement's workspace, a dim.
        size = D.simplify(
            D.substitute(cast(D.Dim, ws), call_dims(self.originals[e.target], arg_types))
        )
        if D.free_vars(size) - set(fn.upper_bounds()) - _function_dim_names(fn):
            raise PassError(
                f"PlanWorkspace: the workspace of @{e.target} ({D.dim_to_str(size)} bytes) "
                f"depends on dims this call does not bind",
                e.loc,
            )
        loc = stmt.loc
        base = self.names.fresh(f"{e.target}_{WORKSPACE}")
        storage = self.names.fresh(f"{base}_storage")
        self.changed = True
        return (
            Bind(
                storage,
                None,
                Call(
                    ALLOC_STORAGE,
                    (round_up_dim(size, self.align),),
                    (("align", self.align), ("scope", "global")),
                    loc,
                ),
                loc,
            ),
            Bind(
                base,
                None,
                Call(ALLOC_TENSOR, (Var(storage, loc), 0, (size,), DType("u8")), (), loc),
                loc,
            ),
            Effect(dataclasses.replace(e, args=tuple(e.args) + (Var(base, loc),)), loc),
        )


def _function_dim_names(fn: Function) -> set[str]:
    out: set[str] = set()
    for p in fn.params:
        for leaf in tensor_leaves(p.type):
            for d in leaf.shape:
                out |= D.free_vars(d)
    return out


__all__ = ["PlanWorkspace", "is_lowered"]
