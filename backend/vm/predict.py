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

The prediction covers the function's own storages only: memory of functions it calls and
fresh kernel results of programs without destination passing are not predicted
(``complete`` is False then).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from relaxc.ir import dims as D
from relaxc.ir.alias import Liveness, analyze_aliases, buffer_liveness
from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Bind, Call, CallFunc, Effect, Expr, Module
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import bind_args
from relaxc.ir.vocab import ALLOC_STORAGE
from relaxc.ir.walk import ExprFunctor, StmtVisitor


@dataclass
class MemoryPrediction:
    function: str
    dims: dict[str, int]
    arena_bytes: int = 0
    dynamic_peak: int = 0  # most bytes of dynamic storage live at once
    peak: int = 0  # most bytes of arena + dynamic storage live at once
    output_bytes: int = 0  # external storages (the outputs)
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
            "output_bytes": self.output_bytes,
            "io_in_arena": self.io_in_arena,
            "complete": self.complete,
            "missing": self.missing,
        }


def predict_memory(module: Module, fn_name: str, dims: Mapping[str, int]) -> MemoryPrediction:
    """The predicted memory of ``fn_name`` run with symbolic dims ``dims``."""
    fn = module.get(fn_name)
    if fn is None:
        raise RxError(f"the module has no function @{fn_name}")
    pred = MemoryPrediction(fn_name, dict(dims), io_in_arena=fn.attr("io_in_arena") is True)
    if fn.is_primitive:
        return pred
    storages = _Storages(module, pred, dims, buffer_liveness(fn, analyze_aliases(fn, module)))
    storages.visit_function(fn)
    intervals = storages.intervals
    pred.peak = _peak(intervals, lambda arena: True)
    pred.dynamic_peak = _peak(intervals, lambda arena: not arena)
    pred.complete = not pred.missing
    return pred


class _Storages(StmtVisitor, ExprFunctor[None]):
    """The storages a function allocates, each with its live interval; what it cannot
    predict goes to ``pred.missing``."""

    def __init__(
        self, module: Module, pred: MemoryPrediction, dims: Mapping[str, int], live: Liveness
    ):
        self.module = module
        self.pred = pred
        self.dims = dims
        self.live = live
        self.intervals: list[tuple[int, int, int, bool]] = []  # (first, last, bytes, is_arena)
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
        self._missing(
            "calls of non-primitive functions"
            if callee is not None and not callee.is_primitive
            else "results of primitive calls without destination passing"
        )

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
        if attrs["external"]:
            self.pred.output_bytes += size
            return
        if attrs["arena"]:
            self.pred.arena_bytes += size
        first = self.live.defined[st.name]
        self.intervals.append(
            (first, self.live.last_use.get(st.name, first), size, bool(attrs["arena"]))
        )


def _peak(intervals: list[tuple[int, int, int, bool]], keep) -> int:
    events: list[tuple[int, int]] = []
    for first, last, size, arena in intervals:
        if keep(arena):
            events.append((first, size))
            events.append((last + 1, -size))  # free after the last use, before the next statement
    peak = cur = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):
        cur += delta
        peak = max(peak, cur)
    return peak
