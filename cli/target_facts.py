"""The targets' facts the passes need, gathered where every layer may be imported.

PlanKernelScratch plans each kernel call's working memory from the target's own answer (for
C, the kernel generator's :func:`relaxc.backend.c.kernels.scratch_bytes`). ``passes/`` and
``ir/`` import no backend, so this composition layer puts the facts in a
:class:`~relaxc.passes.context.PipelineContext` that
:func:`~relaxc.passes.assemble.assemble_pipeline` hands to the passes.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from relaxc.ir.types import TensorType
from relaxc.passes.context import PipelineContext


def _c_scratch_bytes(
    op: str, attrs: Mapping[str, Any], ins: Sequence[TensorType], outs: Sequence[TensorType]
) -> int:
    # The C backend is imported only when a pipeline plans scratch for it (a VM build
    # does not load it).
    from relaxc.backend.c.kernels import scratch_bytes

    return scratch_bytes(op, attrs, ins, outs)


def pipeline_context() -> PipelineContext:
    """The context every pipeline of relaxc's commands runs with."""
    return PipelineContext(kernel_scratch={"c": _c_scratch_bytes})


__all__ = ["pipeline_context"]
