"""The placement checker: inside a lowered primitive function, no two values that are live at
the same time share a byte of the workspace or of an output.

Independent of PlanWorkspace (it checks a placement, it does not compute one) and run by
the verifier on every lowered primitive function (``attrs {outputs = K}``), so a placement
written by hand or by a later pass is checked the same way.

A *region* is a ``memory.view`` of a parameter (the workspace or an output buffer) at a byte
offset, or an output parameter itself (bound by ``%v = %out0``, or a view of all of its bytes,
unless a later statement writes the output over again: then that view is an intermediate
placed in the output's bytes, a region of its own). A region is live from the
first statement that writes it (an ``invoke`` with it, or a value referring to it, in its
``outs``) to the last statement that reads any value referring to it; an output region
that is returned lives to the end. Two regions of the same parameter whose bytes intersect
must not be live at once, except where the later one is written, in place, by the very
statement that last reads the earlier one: same offset and size, and the op's record lets
its output overwrite that input (``OpDef.inplace``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from . import dims as D
from .diagnostics import Loc, RxError
from .nodes import Bind, Call, Effect, Function, Invoke, Project, TupleExpr, Var, expr_vars
from .registry import Registry
from .sizes import tensor_nbytes
from .storage_bounds import provably_le
from .types import TensorType, Type
from .vocab import MEMORY_VIEW, call_of, is_int


@dataclass(frozen=True)
class Region:
    name: str
    base: str  # the parameter
    offset: D.Dim
    nbytes: D.Dim
    type: TensorType
    loc: Loc | None = None  # where it is bound


def _intersect(a: Region, b: Region) -> bool:
    """May the byte ranges of ``a`` and ``b`` intersect? (True when it cannot be ruled out.)"""
    if is_int(a.nbytes) and a.nbytes == 0 or is_int(b.nbytes) and b.nbytes == 0:
        return False
    a_end, b_end = D.simplify(D.add(a.offset, a.nbytes)), D.simplify(D.add(b.offset, b.nbytes))
    return not (provably_le(a_end, b.offset, {}) or provably_le(b_end, a.offset, {}))


def check_placement(fn: Function, types: dict[str, Type], registry: Registry) -> None:
    """RxError at the first pair of regions of ``fn`` that may overlap while both are live."""
    params = {p.name for p in fn.params}
    outs = {p.name for p in fn.params[len(fn.params) - int(fn.attr("outputs")) :]}  # type: ignore[arg-type]
    regions: dict[str, Region] = {}
    refers: dict[str, set[str]] = {}  # value -> regions it may refer to
    overwritten = _overwritten_whole_views(fn, outs, types)
    for p in fn.params:
        refers[p.name] = set()
        if p.name in outs and isinstance(p.type, TensorType):  # the result's own region
            regions[p.name] = Region(p.name, p.name, 0, tensor_nbytes(p.type), p.type)
            refers[p.name] = {p.name}
    for stmt in fn.body:
        if not isinstance(stmt, Bind):
            continue
        e = stmt.value
        t = types.get(stmt.name)
        view = call_of(e, MEMORY_VIEW)
        if view is not None and isinstance(view.args[0], Var) and isinstance(t, TensorType):
            src = view.args[0].name
            offset = view.args[1] if len(view.args) > 1 else dict(view.kwargs).get("offset", 0)
            if (
                src in outs
                and stmt.name not in overwritten
                and offset == 0
                and D.dims_equal(tensor_nbytes(t), regions[src].nbytes)
            ):
                refers[stmt.name] = {src}  # the whole output under another shape: the result itself
                continue
            if src in params:
                at = cast(D.Dim, offset)  # the verifier checked it is a dim
                regions[stmt.name] = Region(stmt.name, src, at, tensor_nbytes(t), t, stmt.loc)
                refers[stmt.name] = {stmt.name}
                continue
        refs: set[str] = set()
        if isinstance(e, (Var, TupleExpr, Project)) or (
            isinstance(e, Call) and (op := registry.get(e.op)) is not None and op.is_view
        ):
            for v in expr_vars(e):
                refs |= refers.get(v.name, set())
        refers[stmt.name] = refs
    end = len(fn.body)
    written: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, stmt in enumerate(fn.body):
        e = stmt.value
        if isinstance(stmt, Effect) and isinstance(e, Invoke):
            for v in e.outs:
                for r in refers.get(v.name, set()):
                    written.setdefault(r, i)
            reads = [a for a in e.args if isinstance(a, Var)]
        else:
            reads = list(expr_vars(e))
        for v in reads:
            for r in refers.get(v.name, set()):
                last[r] = i
    for v in expr_vars(fn.ret):
        for r in refers.get(v.name, set()):
            last[r] = end
    for out in sorted(outs):
        if out not in written:
            raise RxError(
                f"lowered primitive function @{fn.name} never writes its output %{out}",
                fn.ret.loc or fn.loc,
            )
    spans = {r: (written.get(r, -1), last.get(r, written.get(r, -1))) for r in regions}
    by_base: dict[str, list[str]] = {}
    for r, reg in regions.items():
        by_base.setdefault(reg.base, []).append(r)
    for base, names in by_base.items():
        names.sort(key=lambda r: spans[r])
        for i, a in enumerate(names):
            wa, ua = spans[a]
            for b in names[i + 1 :]:
                wb, ub = spans[b]
                if wb > ua:
                    break
                if wa > ub or not _intersect(regions[a], regions[b]):
                    continue
                if ua == wb and _in_place(fn, wb, regions[a], regions[b], refers, registry, types):
                    continue
                raise RxError(
                    f"in @{fn.name}, %{b} (bytes {D.dim_to_str(regions[b].offset)} + "
                    f"{D.dim_to_str(regions[b].nbytes)} of %{base}) is written while %{a} (bytes "
                    f"{D.dim_to_str(regions[a].offset)} + {D.dim_to_str(regions[a].nbytes)}), "
                    "which shares memory with it, is still live",
                    regions[b].loc or (fn.body[wb].loc if 0 <= wb < end else fn.loc),
                )


def _overwritten_whole_views(fn: Function, outs: set[str], types: dict[str, Type]) -> set[str]:
    """The views of all of an output's bytes that a later statement writes over again
    (through the output or another such view): intermediates placed in the output, not the
    result (a whole-output view is the result itself only when it is the last one written)."""
    whole: dict[str, str] = {o: o for o in outs}  # value -> the output whose bytes it is
    aliases: set[str] = set()  # %v = %out0: the output under another name
    for stmt in fn.body:
        if not isinstance(stmt, Bind):
            continue
        if isinstance(stmt.value, Var) and stmt.value.name in whole:
            whole[stmt.name] = whole[stmt.value.name]
            aliases.add(stmt.name)
            continue
        view = call_of(stmt.value, MEMORY_VIEW)
        t = types.get(stmt.name)
        if view is None or not isinstance(view.args[0], Var) or not isinstance(t, TensorType):
            continue
        src = view.args[0].name
        offset = view.args[1] if len(view.args) > 1 else dict(view.kwargs).get("offset", 0)
        out_t = next((p.type for p in fn.params if p.name == src), None)
        if src in outs and offset == 0 and isinstance(out_t, TensorType):
            if D.dims_equal(tensor_nbytes(t), tensor_nbytes(out_t)):
                whole[stmt.name] = src
    last_write: dict[str, int] = {}  # value -> the last statement writing it
    for i, stmt in enumerate(fn.body):
        if isinstance(stmt, Effect) and isinstance(stmt.value, Invoke):
            for v in stmt.value.outs:
                if v.name in whole:
                    last_write[v.name] = i
    final: dict[str, int] = {}  # output -> the last statement writing any of its whole views
    for name, i in last_write.items():
        final[whole[name]] = max(final.get(whole[name], -1), i)
    return {
        name
        for name, i in last_write.items()
        if name not in outs and name not in aliases and i < final[whole[name]]
    }


def _in_place(
    fn: Function,
    at: int,
    a: Region,
    b: Region,
    refers: dict[str, set[str]],
    registry: Registry,
    types: dict[str, Type],
) -> bool:
    """The statement at ``at`` writes ``b`` in place over its input ``a``, as its op allows."""
    stmt = fn.body[at]
    e = stmt.value
    if not (isinstance(stmt, Effect) and isinstance(e, Invoke) and not e.is_func):
        return False
    op = registry.get(e.target)
    if op is None or not op.inplace:
        return False
    written = [types.get(v.name) for v in e.outs if b.name in refers.get(v.name, set())]
    # the value written over ``a`` has a's type (``b`` may be the output under another shape)
    if not (D.dims_equal(a.offset, b.offset) and (a.type == b.type or a.type in written)):
        return False
    ins = [v for v in e.args if isinstance(v, Var)]
    return any(k < len(ins) and refers.get(ins[k].name) == {a.name} for k in op.inplace)
