"""Module properties that pass preconditions are stated in, detected from the IR itself.

Because they are read off the IR (not remembered by the driver), a module dumped after
any pass and fed back in has the same properties it had in the pipeline.
"""

from __future__ import annotations

from relaxc.ir.nodes import CallFunc, Function, Module
from relaxc.ir.ops import REGISTRY
from relaxc.ir.vocab import CALL_CPACKED, STACK_ALLOCA, STRUCT_SET, call_of

EXPLICIT_MEMORY = "explicit-memory"
PLANNED = "planned-memory"
PACKED_CALLS = "packed-calls"

_PACKED_CALL_PARTS = (STRUCT_SET, CALL_CPACKED, STACK_ALLOCA)
"""The ops LegalizePackedCalls writes: any of them in a runner means packed calls."""

PROPERTIES = {
    EXPLICIT_MEMORY: "explicit memory (every computed value written into an allocated tensor)",
    PLANNED: "planned memory (PlanMemory has placed the allocations)",
    PACKED_CALLS: "packed calls (buffers wrapped in argument structs by LegalizePackedCalls)",
}


def has_explicit_memory(fn: Function, primitive: set[str] | frozenset[str]) -> bool:
    """Every value the non-primitive ``fn`` computes is written into an allocated tensor (no
    kernel op called, no primitive function of ``primitive`` called rather than invoked)."""
    for s in fn.body:
        call = call_of(s.value)
        if call is not None:
            op = REGISTRY.get(call.op)
            if op is not None and op.category == "kernel":
                return False
        elif isinstance(s.value, CallFunc) and s.value.func in primitive:
            return False
    return True


def detect_properties(module: Module) -> set[str]:
    """The properties that hold for ``module``."""
    props = set()
    explicit = True
    planned = False
    packed = False
    primitive = {f.name for f in module.functions if f.is_primitive}
    for fn in module.functions:
        if fn.attr("planned") is True:
            planned = True
        if fn.is_primitive:
            continue
        explicit = explicit and has_explicit_memory(fn, primitive)
        for s in fn.body:
            call = call_of(s.value)
            if call is not None and call.op in _PACKED_CALL_PARTS:
                packed = True
    if explicit:
        props.add(EXPLICIT_MEMORY)
    if planned:
        props.add(PLANNED)
    if packed:
        props.add(PACKED_CALLS)
    return props
