"""What the plan promises: the memory a run should hold, predicted from the IR alone.

For one function at given dim values: the arena(s) PlanMemory made, and the storages left
dynamic, each live from its ``alloc_storage`` to the last use of anything that refers to
it (the alias-aware liveness of :func:`relaxc.ir.alias.buffer_liveness`, the same analysis
the passes use). The *peak* is the most bytes of arena and dynamic storage live at any
program point; storages marked ``external`` (outputs, which the caller receives) are
reported apart. This is computed independently of the VM, which counts what it really
holds; after the vm pipeline the two agree to the byte.

The prediction covers the function's own storages only: memory of functions it calls and
fresh kernel results of programs without destination passing are not predicted
(``complete`` is False then).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from relaxc.ir import dims as D
from relaxc.ir.alias import analyze_aliases, buffer_liveness
from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Bind, Call, CallFunc, Module
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import bind_args


@dataclass
class MemoryPrediction:
    function: str
    dims: dict[str, int]
    arena_bytes: int = 0
    dynamic_peak: int = 0  # most bytes of dynamic storage live at once
    peak: int = 0  # most bytes of arena + dynamic storage live at once
    output_bytes: int = 0  # external storages (the outputs)
    complete: bool = True
    missing: list[str] = field(default_factory=list)  # why the prediction is not complete

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "dims": self.dims, "arena_bytes": self.arena_bytes,
                "dynamic_peak": self.dynamic_peak, "peak": self.peak, "output_bytes": self.output_bytes,
                "complete": self.complete, "missing": self.missing}


def predict_memory(module: Module, fn_name: str, dims: Mapping[str, int]) -> MemoryPrediction:
    """The predicted memory of ``fn_name`` run with symbolic dims ``dims``."""
    fn = module.get(fn_name)
    if fn is None:
        raise RxError(f"the module has no function @{fn_name}")
    pred = MemoryPrediction(fn_name, dict(dims))
    if fn.is_primitive:
        return pred
    live = buffer_liveness(fn, analyze_aliases(fn, module))
    alloc = REGISTRY.get("memory.alloc_storage")
    intervals: list[tuple[int, int, int, bool]] = []  # (first, last, bytes, is_arena)
    for i, st in enumerate(fn.body):
        e = st.value
        if isinstance(e, CallFunc):
            callee = module.get(e.func)
            what = "calls of non-primitive functions" if callee is not None and not callee.is_primitive \
                else "results of primitive calls without destination passing"
            if what not in pred.missing:
                pred.missing.append(what)
            continue
        if not (isinstance(st, Bind) and isinstance(e, Call)):
            continue
        op = REGISTRY.get(e.op)
        if op is not None and op.category == "kernel":
            if "kernel results without destination passing" not in pred.missing:
                pred.missing.append("kernel results without destination passing")
            continue
        if e.op != "memory.alloc_storage":
            continue
        attrs = bind_args(alloc, e.args, e.kwargs).attrs  # type: ignore[arg-type]
        size = attrs["size"]
        try:
            size = size if isinstance(size, int) else D.evaluate(size, dims)
        except D.DimError as err:
            raise RxError(f"dimension {D.dim_to_str(attrs['size'])} cannot be evaluated: {err}") from None
        if attrs["external"]:
            pred.output_bytes += size
            continue
        if attrs["arena"]:
            pred.arena_bytes += size
        first = live.defined[st.name]
        intervals.append((first, live.last_use.get(st.name, first), size, bool(attrs["arena"])))
    pred.peak = _peak(intervals, lambda arena: True)
    pred.dynamic_peak = _peak(intervals, lambda arena: not arena)
    pred.complete = not pred.missing
    return pred


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
