"""PlanKernelScratch: give every kernel call the working memory its target's kernel needs.

A target's kernel may need memory of its own while it runs: the C target's blocked GEMM packs
panels of im2col rows and keeps a tile, its depthwise convolution frames a channel in zeros,
its max-pool keeps a row of maxima. That memory is planned like any other buffer, so the
arena, the report and ``--max-arena`` count it and the compiled program holds nothing else
(TFLite Micro's scratch buffers, TVM's kernel workspace pools).

Guarantees, per non-primitive function in explicit-memory form (before PlanMemory):

* Each ``invoke op(...) outs (...)`` whose kernel on the target needs ``N > 0`` bytes (the
  target's own :data:`~relaxc.ir.backends.ScratchFact`, handed to the pass by the
  composition layer in its :class:`~relaxc.passes.context.PipelineContext`: for C, the
  kernel's generator answers, so the plan and the code cannot disagree) gets, just before it, a
  storage of ``N`` bytes (``align=64``) and a ``Tensor[(N,), u8]`` carved from it, passed as
  ``invoke ... scratch (%s)``. It is used by that call only: it lives from its allocation to
  the invoke.
* A primitive function whose kernels need scratch gets ``attrs {scratch = N}``, ``N`` the most
  any kernel of its body needs (its kernels run one after another and share it), and every
  ``invoke @f(...)`` of it passes a scratch of ``N`` bytes the same way.
* Nothing else changes: the values, their order and every other allocation stay as they are.

Left to later passes: PlanMemory places each scratch storage in the arena (they are short
lived, so they go into holes and cost at most their size at the peak) and frees it after its
call; the backend passes it to the kernel. An invoke that already has a scratch is left as it
is, so running the pass twice changes nothing. The VM's kernels (numpy) need none: its
default pipeline leaves the pass out.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence, cast

from relaxc.ir.backends import ScratchFact
from relaxc.ir.diagnostics import RxError
from relaxc.ir.names import NameSupply
from relaxc.ir.nodes import (
    Arg,
    Bind,
    Call,
    DType,
    Effect,
    Function,
    Invoke,
    KwArgs,
    Module,
    Stmt,
    Var,
)
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import OpError, bind_args
from relaxc.ir.types import TensorType, Type
from relaxc.ir.verifier import ModuleTypes
from relaxc.ir.vocab import ALLOC_STORAGE, ALLOC_TENSOR, kernel_scratch

from .base import Pass, PassError, module_types
from .context import PipelineContext, context_field
from .properties import EXPLICIT_MEMORY, PACKED_CALLS, PLANNED

SCRATCH_ALIGN = 64
"""Alignment of a scratch storage (the kernels carve 64-byte aligned arrays from it)."""


@dataclass(frozen=True)
class PlanKernelScratch(Pass):
    """Plan the scratch memory of every kernel call, as the target's kernels ask."""

    name: ClassVar[str] = "PlanKernelScratch"
    summary: ClassVar[str] = (
        "give each kernel call the scratch memory its target's kernel needs, as a buffer"
    )
    requires: ClassVar[frozenset[str]] = frozenset({EXPLICIT_MEMORY})
    forbids: ClassVar[frozenset[str]] = frozenset({PLANNED, PACKED_CALLS})
    hints: ClassVar[dict[str, str]] = {
        EXPLICIT_MEMORY: "run ManifestAlloc before it",
        PLANNED: "plan kernel scratch before PlanMemory, which places it",
        PACKED_CALLS: "plan kernel scratch before LegalizePackedCalls",
    }

    target: str = "c"
    context: PipelineContext = context_field()
    """The targets' scratch facts (``kernel_scratch``), from the composition layer."""

    def run(self, module: Module, types: ModuleTypes | None = None) -> Module:
        facts = self.context.kernel_scratch
        if self.target not in facts:
            raise PassError(
                f"PlanKernelScratch: no kernel scratch facts for target {self.target!r} "
                f"(targets: {', '.join(sorted(facts)) or 'none given to the pipeline'})"
            )
        types = module_types(module, types)
        need = _Needs(facts[self.target])
        # -- analysis: what each primitive function's kernels need ---------------------
        prim_need = {
            fn.name: need.of_primitive(fn, types[fn.name])
            for fn in module.functions
            if fn.is_primitive
        }
        # -- rewrite ----------------------------------------------------------------------
        functions = []
        for fn in module.functions:
            if fn.is_primitive:
                functions.append(_with_scratch_attr(fn, prim_need[fn.name]))
            else:
                functions.append(_give_scratch(fn, types[fn.name], need, prim_need))
        return dataclasses.replace(module, functions=tuple(functions))


class _Needs:
    """The target's scratch fact, asked once per distinct kernel instance of a run."""

    def __init__(self, fact: ScratchFact):
        self.fact = fact
        self.memo: dict[tuple[object, ...], int] = {}

    def of_op(
        self,
        op_name: str,
        args: tuple[Arg, ...],
        kwargs: KwArgs,
        types: Mapping[str, Type],
        outs: Sequence[TensorType],
        where: Any,
    ) -> int:
        op = REGISTRY.get(op_name)
        if op is None or op.category != "kernel":
            return 0
        try:
            bound = bind_args(op, args, kwargs)
        except OpError as e:  # pragma: no cover - the verifier checked the call
            raise PassError(str(e), where) from None
        ins = [t for v in bound.inputs if isinstance(t := types[v.name], TensorType)]
        if len(ins) != len(bound.inputs):
            return 0
        key = (
            op_name,
            kwargs,
            tuple(a for a in args if not isinstance(a, Var)),
            tuple(ins),
            tuple(outs),
        )
        if key not in self.memo:
            try:
                self.memo[key] = self.fact(op_name, bound.attrs, ins, outs)
            except RxError:
                # The target has no kernel for it (an op on a dtype it lacks): nothing to plan;
                # the backend refuses the call itself, at its location.
                self.memo[key] = 0
        return self.memo[key]

    def of_primitive(self, fn: Function, types: Mapping[str, Type]) -> int:
        """The most any kernel of primitive function ``fn`` needs."""
        most = 0
        for st in fn.body:
            e = st.value
            if isinstance(st, Bind) and isinstance(e, Call):
                t = types.get(st.name)
                outs = [t] if isinstance(t, TensorType) else list(getattr(t, "fields", ()))
                if all(isinstance(o, TensorType) for o in outs):
                    most = max(most, self.of_op(e.op, e.args, e.kwargs, types, outs, e.loc))
            elif isinstance(e, Invoke) and not e.is_func:
                outs = [types[v.name] for v in e.outs]
                most = max(most, self.of_op(e.target, e.args, e.kwargs, types, outs, e.loc))
        return most


def _with_scratch_attr(fn: Function, n: int) -> Function:
    """``fn`` with ``attrs {scratch = n}`` (when ``n`` > 0 and it has none yet)."""
    if n <= 0 or kernel_scratch(fn) is not None:
        return fn
    return fn.with_attrs({"scratch": n})


def _give_scratch(
    fn: Function, types: Mapping[str, Type], need: _Needs, prim_need: Mapping[str, int]
) -> Function:
    """``fn`` with a scratch buffer made just before each invoke whose kernel needs one."""
    if fn.attr("planned"):
        return fn
    names = NameSupply.for_function(fn)
    body: list[Stmt] = []
    changed = False
    for st in fn.body:
        e = st.value
        if not (isinstance(st, Effect) and isinstance(e, Invoke)) or e.scratch is not None:
            body.append(st)
            continue
        if e.is_func:
            n = prim_need.get(e.target, 0)
        else:
            # The outs of an invoke are tensors (the verifier holds destinations to them).
            outs = cast(list[TensorType], [types[v.name] for v in e.outs])
            n = need.of_op(e.target, e.args, e.kwargs, types, outs, e.loc)
        if n <= 0:
            body.append(st)
            continue
        base = e.outs[0].name if e.outs else e.target
        storage = names.fresh(f"{base}_scratch_storage")
        tensor = names.fresh(f"{base}_scratch")
        loc = e.loc
        body.append(
            Bind(
                storage,
                None,
                Call(ALLOC_STORAGE, (n,), (("align", SCRATCH_ALIGN), ("scope", "global")), loc),
                st.loc,
            )
        )
        body.append(
            Bind(
                tensor,
                None,
                Call(ALLOC_TENSOR, (Var(storage, loc), 0, (n,), DType("u8")), (), loc),
                st.loc,
            )
        )
        body.append(dataclasses.replace(st, value=dataclasses.replace(e, scratch=Var(tensor, loc))))
        changed = True
    return dataclasses.replace(fn, body=tuple(body)) if changed else fn


__all__ = ["PlanKernelScratch", "SCRATCH_ALIGN"]
