"""What the composition layer tells the passes about the targets.

Some facts a pass needs live in a backend: how many bytes of scratch the C target's kernel of
an op uses is answered by that kernel's generator. ``passes/`` does not import backends (the
layering rule, tests/test_layering.py), so the composition layer (``cli/``, or a test or
benchmark that assembles its own pipeline) gathers those facts into a :class:`PipelineContext`
and hands it to :func:`relaxc.passes.assemble.assemble_pipeline`, which gives it to every pass
that takes one (a pass field declared with :func:`context_field`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, TypeVar, cast

from relaxc.ir.backends import ScratchFact

from .base import Pass


@dataclass(frozen=True)
class PipelineContext:
    """Target facts for the passes, filled by the composition layer."""

    kernel_scratch: Mapping[str, ScratchFact] = field(default_factory=dict)
    """target -> its :data:`~relaxc.ir.backends.ScratchFact` (PlanKernelScratch's ``target``)."""


def context_field() -> Any:
    """A pass field that receives the pipeline's :class:`PipelineContext`: wiring, not an
    option (it is not listed, parsed, printed in a spec or compared)."""
    return field(
        default_factory=PipelineContext, compare=False, repr=False, metadata={"option": False}
    )


P = TypeVar("P", bound=Pass)


def takes_context(p: Pass) -> bool:
    return any(f.name == "context" for f in dataclasses.fields(p))


def with_context(passes: Sequence[P], context: PipelineContext) -> list[P]:
    """``passes``, each pass that takes a context given ``context``."""
    # (cast: mypy checks replace's keywords against Pass, which has no context field)
    return [
        cast(P, dataclasses.replace(cast(Any, p), context=context)) if takes_context(p) else p
        for p in passes
    ]


__all__ = ["PipelineContext", "context_field", "takes_context", "with_context"]
