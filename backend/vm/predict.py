"""What the plan promises: the memory a run should hold, predicted from the IR alone.

For one function at given dim values: the arena(s) PlanMemory made, and the storages left
dynamic, each live from its ``alloc_storage`` to the last use of anything that refers to
it (the alias-aware liveness of :func:`relaxc.ir.alias.buffer_liveness`, the same analysis
the passes use). The *peak* is the most bytes of arena and dynamic storage live at any
program point; storages marked ``external`` (outputs, which the caller receives) are
reported apart. This is computed independently of the VM, which counts what it really
holds; after the vm pipeline the two agree to the byte. With the inputs and outputs planned
into the arena (``io_in_arena``) the arena holds them, so the peak counts them and no
storage is external.

A call of a non-primitive function holds, while it runs, what the callee holds (predicted
the same way, at the dims the VM binds from the arguments' shapes), and afterwards the
callee's outputs until the caller's last use of the result: the VM counts those as
external (output) memory, handed over if the caller returns them, freed otherwise, so the
promise counts them as outputs too (``output_bytes`` is the most external bytes held at
once). Fresh kernel results of programs without destination passing are not predicted
(``complete`` is False then).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from relaxc.ir import dims as D
from relaxc.ir.alias import Liveness, analyze_aliases, buffer_liveness
from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Bind, Call, CallFunc, Effect, Expr, Module, call_dims
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import bind_args
from relaxc.ir.verifier import ModuleTypes, verify_module
from relaxc.ir.vocab import ALLOC_STORAGE
from relaxc.ir.walk import ExprFunctor, StmtVisitor


@dataclass
class MemoryPrediction:
    function: str
    dims: dict[str, int]
    arena_bytes: int = 0
    dynamic_peak: int = 0  # most bytes of dynamic storage live at once
    peak: int = 0  # most bytes of arena + dynamic storage live at once (callees' included)
    arena_peak: int = 0  # most bytes of arenas live at once, the callees' included
    result_bytes: int = 0  # the function's own external storages: what it returns
    output_bytes: int = 0  # most bytes of external storage (outputs, callees' results) at once
    io_in_arena: bool = False  # the inputs and outputs are planned into the arena
    complete: bool = True
    missing: list[str] = field(default_factory=list)  # why the prediction is not complete

    def to_json(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "dims": self.dims,
            "arena_bytes": self.arena_bytes,
            "dynamic_peak": self.dynamic_peak,
            "peak": self.peak,
            "arena_peak": self.arena_peak,
            "output_bytes": self.output_bytes,
            "io_in_arena": self.io_in_arena,
            "complete": self.complete,
            "missing": self.missing,
        }


ARENA, DYNAMIC, EXTERNAL = "arena", "dynamic", "external"

Interval = tuple[int, int, int, str]  # (first, last, bytes, kind): live over [first, last]


def predict_memory(
    module: Module,
    fn_name: str,
    dims: Mapping[str, int],
    _types: ModuleTypes | None = None,
    _calling: tuple[str, ...] = (),
) -> MemoryPrediction:
    """The predicted memory of ``fn_name`` run with symbolic dims ``dims``."""
    fn = module.get(fn_name)
    if fn is None:
        raise RxError(f"the module has no function @{fn_name}")
    pred = MemoryPrediction(fn_name, dict(dims), io_in_arena=fn.attr("io_in_arena") is True)
    if fn.is_primitive:
        return pred
    live = buffer_liveness(fn, info := analyze_aliases(fn, module))
    storages = _Storages(module, pred, dims, live, len(fn.body))
    storages.visit_function(fn)
    intervals = storages.intervals
    end = len(fn.body)
    returned = info.returned(fn)
    calls = [(i, s) for i, s in enumerate(fn.body) if isinstance(s.value, CallFunc)]
    for i, stmt in calls:
        call = stmt.value
        callee = module.get(call.func)  # type: ignore[union-attr]
        if callee is None or callee.is_primitive:
            continue
        if callee.name in _calling or callee.name == fn.name:
            storages._missing("recursive calls")
            continue
        if _types is None:
            _types = verify_module(module)
        fn_types = _types.get(fn.name, {})
        arg_types = [fn_types[a.name] for a in call.args if a.name in fn_types]  # type: ignore[union-attr]
        try:
            callee_dims = {
                k: v if isinstance(v, int) else D.evaluate(v, dims)
                for k, v in call_dims(callee, arg_types).items()
            }
        except D.DimError:
            storages._missing(f"the call of @{callee.name} (its dims cannot be evaluated)")
            continue
        sub = predict_memory(module, callee.name, callee_dims, _types, (*_calling, fn.name))
        for m in sub.missing:
            storages._missing(m)
        # While it runs: what the callee holds (its own outputs are in sub.output_bytes).
        intervals.append((i, i, sub.arena_peak, ARENA))
        intervals.append((i, i, sub.dynamic_peak, DYNAMIC))
        intervals.append((i, i, sub.output_bytes - sub.result_bytes, EXTERNAL))
        # Then its outputs, until the last use of the result (to the end if returned).
        last = end if isinstance(stmt, Bind) and stmt.name in returned else i
        if isinstance(stmt, Bind):
            last = max(last, live.last_use.get(stmt.name, i))
        intervals.append((i, last, sub.result_bytes, EXTERNAL))
    pred.result_bytes = sum(n for _, _, n, kind in storages.own_external)
    pred.peak = _peak(intervals, (ARENA, DYNAMIC))
    pred.arena_peak = _peak(intervals, (ARENA,))
    pred.dynamic_peak = _peak(intervals, (DYNAMIC,))
    pred.output_bytes = _peak(intervals, (EXTERNAL,))
    pred.complete = not pred.missing
    return pred


class _Storages(StmtVisitor, ExprFunctor[None]):
    """The storages a function allocates, each with its live interval; what it cannot
    predict goes to ``pred.missing``."""

    def __init__(
        self,
        module: Module,
        pred: MemoryPrediction,
        dims: Mapping[str, int],
        live: Liveness,
        end: int,
    ):
        self.module = module
        self.pred = pred
        self.dims = dims
        self.live = live
        self.intervals: list[Interval] = []
        self.own_external: list[Interval] = []  # the function's own output storages
        self.end = end
        self.bind: Bind | None = None

    def visit_bind(self, stmt: Bind) -> None:
        self.bind = stmt
        self.visit_expr(stmt.value)

    def visit_effect(self, stmt: Effect) -> None:
        self.bind = None
        self.visit_expr(stmt.value)

    def visit_default(self, e: Expr) -> None:
        pass  # moves, views, tuples, projections, invokes: no storage of their own

    def _missing(self, what: str) -> None:
        if what not in self.pred.missing:
            self.pred.missing.append(what)

    def visit_call_func(self, e: CallFunc) -> None:
        callee = self.module.get(e.func)
        if callee is None or callee.is_primitive:
            self._missing("results of primitive calls without destination passing")
        # a non-primitive callee: predict_memory adds what it holds

    def visit_call(self, e: Call) -> None:
        st = self.bind
        if st is None:
            return
        op = REGISTRY.get(e.op)
        if op is not None and op.category == "kernel":
            self._missing("kernel results without destination passing")
            return
        if e.op != ALLOC_STORAGE:
            return
        attrs = bind_args(REGISTRY.get(ALLOC_STORAGE), e.args, e.kwargs).attrs  # type: ignore[arg-type]
        size = attrs["size"]
        try:
            size = size if isinstance(size, int) else D.evaluate(size, self.dims)
        except D.DimError as err:
            raise RxError(
                f"dimension {D.dim_to_str(attrs['size'])} cannot be evaluated: {err}"
            ) from None
        first = self.live.defined[st.name]
        if attrs["external"]:
            # the function's outputs: held until it returns, then handed to its caller
            self.own_external.append((first, self.end, size, EXTERNAL))
            self.intervals.append(self.own_external[-1])
            return
        if attrs["arena"]:
            self.pred.arena_bytes += size
        kind = ARENA if attrs["arena"] else DYNAMIC
        self.intervals.append((first, self.live.last_use.get(st.name, first), size, kind))


def _peak(intervals: list[Interval], kinds: tuple[str, ...]) -> int:
    events: list[tuple[int, int]] = []
    for first, last, size, kind in intervals:
        if kind in kinds and size:
            events.append((first, size))
            events.append((last + 1, -size))  # free after the last use, before the next statement
    peak = cur = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):
        cur += delta
        peak = max(peak, cur)
    return peak
