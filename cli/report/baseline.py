"""The report's baseline: one buffer per tensor, no reuse, no in-place.

The saving the report prints is measured against one figure that no pass can move: the
bytes of every value a function computes, each in a buffer of its own, as if no two
tensors ever shared memory. It is read off the program *as given to the pipeline* (the
``.rx`` file, or the ONNX model as imported), so the same program has the same baseline
whichever passes run (ComputeInPlace or ElideConcatSplit make the arena smaller, never the
baseline).

What counts, per function:

* every binding of a kernel op (``dense``, ``relu``, ``concat`` ...): the bytes of its value,
  outputs included; views (``reshape`` ...) share their input's bytes in every pipeline and
  parameters and constants are not computed, so none of them counts;
* a call of a primitive function: every kernel value its body computes (its result and its
  intermediates, which PlanWorkspace gives the caller's memory);
* a call of a non-primitive function: that function's baseline, once per call;
* in a program already in explicit-memory form (``invoke ... outs (...)``), every tensor an
  invoke writes, once; a tensor written only through views of it (the joined value of an
  elided concat); and a view no invoke writes (a part of an elided split). So a program
  planned by relaxc and reported again with ``-p none`` has the baseline it had.

Sizes are at the function's upper bounds (a callee's values at the dims of the call); a
value without one makes the baseline unknown (None).
"""

from __future__ import annotations

from relaxc.ir import dims as D
from relaxc.ir.sizes import value_nbytes
from relaxc.ir.call_graph import callees_first
from relaxc.ir.nodes import Bind, Call, CallFunc, Function, Invoke, Module, Var, call_dims
from relaxc.ir.ops import REGISTRY
from relaxc.ir.types import Type
from relaxc.ir.verifier import ModuleTypes
from relaxc.ir.vocab import MEMORY_VIEW, call_of


CONCAT = "concat"
"""The op a joined value is made by (ElideConcatSplit's producers write its slices)."""


def _is_kernel_value(e: object) -> bool:
    if not isinstance(e, Call):
        return False
    op = REGISTRY.get(e.op)
    return op is not None and op.category == "kernel"


def baselines(module: Module, types: ModuleTypes) -> dict[str, int | None]:
    """The baseline of every non-primitive function of ``module`` (``types``: its verified
    types), in bytes at its upper bounds (None: some value has no upper bound)."""
    memo: dict[str, D.Dim | None] = {}

    def of(fn: Function) -> D.Dim | None:
        """The baseline of ``fn`` as an expression of its own dims, its callees' already in
        ``memo`` (a callee missing there is a recursive call, whose depth is a run-time
        fact: None)."""
        fn_types = types.get(fn.name, {})
        total: D.Dim = 0
        known = True
        written: set[str] = set()
        for s in fn.body:
            e = s.value
            if isinstance(s, Bind) and _is_kernel_value(e) and s.name in fn_types:
                total = D.add(total, value_nbytes(fn_types[s.name]))
            elif isinstance(e, Invoke):
                for v in e.outs:
                    if v.name not in written and v.name in fn_types:
                        written.add(v.name)
                        total = D.add(total, value_nbytes(fn_types[v.name]))
            elif isinstance(e, CallFunc) and (callee := module.get(e.func)) is not None:
                inner = (
                    _primitive_values(callee, types.get(callee.name, {}))
                    if callee.is_primitive
                    else memo.get(callee.name)
                )
                if inner is None:
                    known = False
                    continue
                # the callee's dims at this call: its parameters' dims, from the arguments
                args = [fn_types[a.name] for a in e.args if a.name in fn_types]
                total = D.add(total, D.substitute(inner, call_dims(callee, args)))
        joined, parts = explicit_values(fn)
        for name in [*joined, *parts]:
            if name not in written and name in fn_types:
                written.add(name)
                total = D.add(total, value_nbytes(fn_types[name]))
        return total if known else None

    for fn in callees_first(module):  # callees before callers: no recursion here
        memo[fn.name] = of(fn)

    out: dict[str, int | None] = {}
    for fn in module.functions:
        if fn.is_primitive:
            continue
        total = memo[fn.name]
        ub = D.upper_bound(total, fn.upper_bounds()) if total is not None else None
        out[fn.name] = max(ub, 0) if ub is not None else None
    return out


def explicit_values(fn: Function) -> tuple[dict[str, int], list[str]]:
    """In explicit-memory IR, the values no invoke writes as a whole: ``joined`` (a tensor
    written only through views of it -> how many distinct offsets they are written at: the
    result of an elided concat) and ``parts`` (views no invoke writes and that are not of a
    joined tensor: the outputs of an elided split)."""
    base_of: dict[str, tuple[str, object]] = {}
    written: set[str] = set()
    for s in fn.body:
        if isinstance(s, Bind) and (view := call_of(s.value, MEMORY_VIEW)) is not None:
            if view.args and isinstance(view.args[0], Var):
                offset = view.args[1] if len(view.args) > 1 else 0
                base_of[s.name] = (view.args[0].name, offset)
        if isinstance(s.value, Invoke):
            written.update(v.name for v in s.value.outs)
    offsets: dict[str, set] = {}
    for view, (base, offset) in base_of.items():
        if view in written and base not in written and base not in base_of:
            offsets.setdefault(base, set()).add(offset)
    joined = {b: len(o) for b, o in offsets.items()}
    parts = [v for v, (base, _) in base_of.items() if v not in written and base not in offsets]
    return joined, parts


def _primitive_values(fn: Function, fn_types: dict[str, Type]) -> D.Dim:
    """Bytes of every kernel value a primitive function's body computes, in its dims."""
    total: D.Dim = 0
    for s in fn.body:
        if isinstance(s, Bind) and _is_kernel_value(s.value) and s.name in fn_types:
            total = D.add(total, value_nbytes(fn_types[s.name]))
    return total


def source_ops(module: Module) -> dict[str, dict[str, str]]:
    """Per function, the op of each kernel binding of the program as given (``%c =
    concat(...)`` -> ``{"c": "concat"}``): what made a value, even after a pass removed the
    statement (ElideConcatSplit's producers write the joined value's slices directly)."""
    out: dict[str, dict[str, str]] = {}
    for fn in module.functions:
        ops: dict[str, str] = {}
        for s in fn.body:
            if isinstance(s, Bind) and _is_kernel_value(s.value):
                ops[s.name] = s.value.op  # type: ignore[union-attr]
        out[fn.name] = ops
    return out
