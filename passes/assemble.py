"""Assembling a pass list from what a user asked for: a target, a pipeline, options."""

from __future__ import annotations

from typing import Sequence

from .base import Pass
from .context import PipelineContext, with_context
from .registry import PASSES, PIPELINES
from .spec import SpecError, apply_pass_config, kebab, parse_pipeline, resolve_pass_name

TARGET_PIPELINES = {"vm": "vm", "ir": "vm", "c": "c"}


def named_pipeline(name: str) -> list[Pass]:
    """The passes of a named pipeline, with default options."""
    passes = []
    for pass_name in PIPELINES[name]:
        cls = PASSES.get(pass_name)
        if cls is None:
            raise SpecError(
                f"pipeline '{name}' needs pass {pass_name}, which this build of relaxc "
                "does not have yet"
            )
        passes.append(cls())
    return passes


def assemble_pipeline(
    target: str = "vm",
    passes: str | None = None,
    disable: Sequence[str] = (),
    configs: Sequence[str] = (),
    context: PipelineContext | None = None,
) -> list[Pass]:
    """The pass list for ``target``, or for ``passes`` (a pipeline name or a spec), minus the
    disabled passes, with ``--pass-config`` settings applied, and ``context`` (the targets'
    facts, from the composition layer: :func:`relaxc.cli.target_facts.pipeline_context`)
    given to the passes that take one. Without a context such a pass refuses to run."""
    if passes is None:
        pipeline = named_pipeline(TARGET_PIPELINES[target])
    elif passes.strip() in PIPELINES:
        pipeline = named_pipeline(passes.strip())
    else:
        pipeline = parse_pipeline(passes, PASSES)
    for item in disable:
        for name in filter(None, (n.strip() for n in item.split(","))):
            cls = resolve_pass_name(name, PASSES)
            if not any(type(p) is cls for p in pipeline):
                raise SpecError(
                    f"--disable-pass {name}: {cls.name} is not in the pipeline "
                    f"({', '.join(p.name for p in pipeline) or 'empty'})"
                )
            pipeline = [p for p in pipeline if type(p) is not cls]
    pipeline = apply_pass_config(pipeline, configs, PASSES)
    return with_context(pipeline, context) if context is not None else pipeline


def resolve_dump_names(
    values: Sequence[str], pipeline: Sequence[Pass], flag: str
) -> frozenset[str]:
    """Canonical names from ``--dump-after`` style values (comma lists, ``all``)."""
    out: set[str] = set()
    for item in values:
        for name in filter(None, (n.strip() for n in item.split(","))):
            if name == "all":
                out.add("all")
                continue
            cls = resolve_pass_name(name, PASSES)
            if not any(type(p) is cls for p in pipeline):
                raise SpecError(
                    f"{flag} {name}: {cls.name} is not in the pipeline "
                    f"({', '.join(p.name for p in pipeline) or 'empty'})"
                )
            out.add(cls.name)
    return frozenset(out)


__all__ = ["PipelineContext", "assemble_pipeline", "kebab", "named_pipeline", "resolve_dump_names"]
