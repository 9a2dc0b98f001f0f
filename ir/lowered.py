"""Lowered primitives: whether the IR itself says where each value of a primitive function lives.

A backend prints memory, it does not decide it. A primitive function states its memory in
one of two ways:

* **lowered** (PlanWorkspace's output, ``attrs {outputs = K}``): every value it computes is
  a view of its workspace or of an output buffer, written by ``invoke``;
* **results only**: every value it computes is the result of an output (the one root of an
  output leaf, so it is computed in that output's buffer), or it computes one multi-output
  kernel whose tuple is the whole result (written into every output).

Any other value it computes is an *intermediate*, and only a pass (PlanWorkspace) may give
it a place. Read off the IR: a module dumped after any pass and fed back has the same answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .alias import FRESH, analyze_aliases, tree_leaves
from .nodes import Bind, Call, Function, Module, TupleExpr, Var
from .types import TensorType, TupleType, Type
from .vocab import lowered_outputs

LOWERED_HINT = (
    "run PlanWorkspace before PlanMemory (the default pipeline of --target c does); it places "
    "a primitive function's intermediates in its outputs or in a workspace its caller allocates"
)
"""What to do about a primitive function whose intermediates have no place."""


def returned_vars(fn: Function) -> list[Var]:
    """The variables ``fn`` returns: its one result, or the fields of its result tuple."""
    ret = fn.ret
    return list(ret.fields) if isinstance(ret, TupleExpr) else [ret]


@dataclass(frozen=True)
class ResultPlaces:
    """Where the values an unlowered primitive function computes are written.

    ``outputs`` maps each computed value that is an output's result to that output (the
    first, when it is returned twice); ``whole`` is the multi-output kernel whose tuple is the
    whole result (it writes every output; ``outputs`` is then empty); ``unplaced`` is the
    first computed value that is neither (an intermediate), or None."""

    outputs: Mapping[str, int]
    whole: str | None
    unplaced: Bind | None


def result_places(fn: Function, module: Module, types: Mapping[str, Type]) -> ResultPlaces:
    """The places of the values the unlowered primitive function ``fn`` computes (``types``:
    the types of its bindings, from the verifier)."""
    assert fn.is_primitive and lowered_outputs(fn) is None, fn.name
    info = analyze_aliases(fn, module)
    computed = [s for s in fn.body if isinstance(s, Bind) and info.kind.get(s.name) == FRESH]
    ret = fn.ret
    if isinstance(ret, Var) and isinstance(types.get(ret.name), TupleType):
        whole = next((s for s in fn.body if isinstance(s, Bind) and s.name == ret.name), None)
        if whole is not None and isinstance(whole.value, Call):
            rest = next((s for s in computed if s.name != whole.name), None)
            return ResultPlaces({}, whole.name, rest)
    outputs: dict[str, int] = {}
    k = 0
    for v in returned_vars(fn):
        for roots in tree_leaves(info.trees.get(v.name, frozenset())):
            r = next(iter(roots)) if len(roots) == 1 else None
            if (
                r is not None
                and info.kind.get(r) == FRESH
                and isinstance(types.get(r), TensorType)  # a tuple is no output's buffer
                and r not in outputs
            ):
                outputs[r] = k
            k += 1
    unplaced = next((s for s in computed if s.name not in outputs), None)
    return ResultPlaces(outputs, None, unplaced)


__all__ = ["LOWERED_HINT", "ResultPlaces", "result_places", "returned_vars"]
