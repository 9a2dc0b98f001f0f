"""Options shared by ``relaxc build`` and ``relaxc passes``, and running the pipeline."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import click
from relaxc.frontend.printer import print_module
from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Module
from relaxc.ir.verifier import ModuleTypes
from relaxc.passes.base import Pass
from relaxc.passes.assemble import assemble_pipeline, resolve_dump_names
from relaxc.passes.pipeline import DumpInstrument, Pipeline, TimingInstrument, VerifyInstrument

from .files import refuse_overwriting_inputs, write_atomic
from .gc_pause import gc_paused
from .progress import Progress, Step
from .target_facts import pipeline_context

TARGETS = ("vm", "c", "ir")


def pipeline_options(f: Callable) -> Callable:
    """Decorate a command with the pipeline, dump and timing options."""
    opts = [
        click.option(
            "-p",
            "--passes",
            "passes",
            metavar="LIST",
            help="Passes to run, e.g. 'ManifestAlloc,PlanMemory{planner=greedy-size}', "
            "or a named pipeline: vm, c, none (default: the target's pipeline).",
        ),
        click.option(
            "--disable-pass",
            "--disabled-pass",
            "disable",
            multiple=True,
            metavar="LIST",
            help="Remove these passes from the pipeline (comma list, repeatable; "
            "--disabled-pass is tvmc's spelling).",
        ),
        click.option(
            "--pass-config",
            "configs",
            multiple=True,
            metavar="NAME.KEY=VALUE",
            help=(
                "Set a pass option, e.g. --pass-config PlanMemory.planner=greedy-size (repeatable)."
            ),
        ),
        click.option(
            "--dump-before",
            multiple=True,
            metavar="P|all",
            help="Print the IR before these passes (comma list or 'all').",
        ),
        click.option(
            "--dump-after",
            multiple=True,
            metavar="P|all",
            help="Print the IR after these passes (comma list or 'all').",
        ),
        click.option(
            "--dump-dir",
            type=click.Path(path_type=Path),
            help="Write dumps as numbered .rx files in this folder instead of printing them.",
        ),
        click.option(
            "--time-passes",
            is_flag=True,
            help="Print the time of each step (parsing or importing, weights, each pass, "
            "code generation, writing) to stderr.",
        ),
        click.option(
            "--print-pipeline",
            is_flag=True,
            help="Print the pipeline that would run, every pass with all its options resolved "
            "(a spec -p accepts), and stop.",
        ),
        click.option("--no-verify", is_flag=True, help="Do not verify the IR after every pass."),
        click.option(
            "--io-in-arena",
            is_flag=True,
            help="Plan the inputs and outputs of the entry function into the arena (as "
            "TFLite Micro does): the same as --pass-config PlanMemory.io_in_arena=true.",
        ),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


@dataclass
class PipelineRequest:
    target: str
    passes: str | None
    disable: tuple[str, ...]
    configs: tuple[str, ...]
    dump_before: tuple[str, ...]
    dump_after: tuple[str, ...]
    dump_dir: Path | None
    time_passes: bool
    no_verify: bool
    io_in_arena: bool = False
    print_pipeline: bool = False
    # --max-arena: the bytes PlanMemory's planner is asked to fit (0: none).
    capacity: int = 0


class _Dumps:
    """Receives dumps and prints them (headed, each parseable) or writes numbered files."""

    def __init__(self, folder: Path | None, stem: str):
        self.folder = folder
        self.stem = stem
        self.count = 0
        self.written: list[Path] = []

    def planned_paths(
        self, passes: Sequence[Pass], before: frozenset[str], after: frozenset[str]
    ) -> list[Path]:
        """The files a run of ``passes`` will write, in order (none when dumps are printed)."""
        if self.folder is None:
            return []
        out: list[Path] = []
        for p in passes:
            for when, names in (("before", before), ("after", after)):
                if "all" in names or p.name in names:
                    out.append(self.folder / f"{len(out) + 1:03d}_{when}_{p.name}.rx")
        return out

    def __call__(self, when: str, index: int, pass_name: str, module: Module) -> None:
        self.count += 1
        text = print_module(module)
        if self.folder is None:
            click.echo(f"# ===== IR {when} {pass_name} (pass {index + 1}) =====")
            click.echo(text, nl=False)
            click.echo()
        else:
            path = self.folder / f"{self.count:03d}_{when}_{pass_name}.rx"
            write_atomic(path, text)
            self.written.append(path)


IO_IN_ARENA_CONFIG = "PlanMemory.io_in_arena=true"


def implied_configs(configs: Sequence[str], req: "PipelineRequest") -> tuple[str, ...]:
    """``configs`` plus the settings ``--io-in-arena`` and ``--max-arena`` stand for (a clear
    error when ``--io-in-arena`` finds no PlanMemory to set it on; ``--max-arena`` is a check
    first, so without PlanMemory it sets nothing). They come first: ``--pass-config`` wins."""
    if not req.io_in_arena and not req.capacity:
        return tuple(configs)
    probe = assemble_pipeline(req.target, req.passes, req.disable, ())
    planned = any(p.name == "PlanMemory" for p in probe)
    if req.io_in_arena and not planned:
        raise RxError(
            "--io-in-arena plans the inputs and outputs with PlanMemory, which is not in the "
            f"pipeline ({', '.join(p.name for p in probe) or 'empty'})"
        )
    implied = [IO_IN_ARENA_CONFIG] if req.io_in_arena else []
    if req.capacity and planned:
        implied.append(f"PlanMemory.capacity={req.capacity}")
    return (*implied, *configs)


@dataclass
class PipelineRun:
    """What running the pipeline gives: the module, the instruments' findings, and the
    verified types of the module (None when nothing verified it, with --no-verify)."""

    module: Module
    timing: TimingInstrument
    dumps: _Dumps
    types: ModuleTypes | None


class _ProgressInstrument:
    """Moves a progress step along the passes (after each pass and its verification)."""

    def __init__(self, step: Step, passes: Sequence[Pass]):
        self.step = step
        self.n = len(passes)

    def before_pass(self, index: int, p: Pass, module: Module) -> None:
        self.step.update(index, self.n, f"pass {index + 1}/{self.n}: {p.name}")

    def after_pass(self, index: int, p: Pass, module: Module) -> None:
        self.step.update(index + 1, self.n)


def run_pipeline(
    module: Module,
    req: PipelineRequest,
    stem: str,
    types: "ModuleTypes | None" = None,
    inputs: Sequence[Path | None] = (),
) -> tuple[Module, TimingInstrument, _Dumps]:
    """Assemble the requested pipeline and run it with the requested instruments.

    A dump that would land on one of ``inputs`` is refused before any pass runs."""
    run = execute_pipeline(module, req, stem, types, inputs)
    return run.module, run.timing, run.dumps


def execute_pipeline(
    module: Module,
    req: PipelineRequest,
    stem: str,
    types: "ModuleTypes | None" = None,
    inputs: Sequence[Path | None] = (),
    progress: Progress | None = None,
) -> PipelineRun:
    """:func:`run_pipeline`, also giving the verified types of the result, with the passes
    shown on ``progress``."""
    passes = resolved_pipeline(req)
    before = resolve_dump_names(req.dump_before, passes, "--dump-before")
    after = resolve_dump_names(req.dump_after, passes, "--dump-after")
    if req.dump_dir is not None:
        if not (before or after):
            raise RxError(
                "--dump-dir needs --dump-before or --dump-after to say which passes to dump"
            )
        if req.dump_dir.exists() and not req.dump_dir.is_dir():
            raise RxError(f"--dump-dir {req.dump_dir}: it exists and is not a folder")
        try:
            req.dump_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RxError(
                f"--dump-dir {req.dump_dir}: cannot create it ({e.strerror or e})"
            ) from None
    dumps = _Dumps(req.dump_dir, stem)
    for path in dumps.planned_paths(passes, before, after):
        refuse_overwriting_inputs(path, inputs)
    timing = TimingInstrument()
    instruments: list = [timing]
    verify = None
    if not req.no_verify:
        verify = VerifyInstrument()
        instruments.append(verify)
    if before or after:
        instruments.append(DumpInstrument(dumps, before, after))
    if progress is None or (req.dump_dir is None and (before or after)):
        progress = Progress(None)  # dumps printed on stdout: no display in between
    with progress.step("passes", len(passes)) as step, gc_paused():
        instruments.append(_ProgressInstrument(step, passes))
        result = Pipeline(passes, instruments).run(module, types)
    out_types = verify.types_for(result) if verify is not None else None
    if out_types is None and result is module:
        out_types = types  # no pass changed it
    return PipelineRun(result, timing, dumps, out_types)


def resolved_pipeline(req: PipelineRequest) -> list[Pass]:
    """The passes ``req`` runs, with --disable-pass, --pass-config and --io-in-arena applied."""
    configs = implied_configs(req.configs, req)
    return assemble_pipeline(req.target, req.passes, req.disable, configs, pipeline_context())


def pipeline_spec(passes: Sequence[Pass]) -> str:
    """``passes`` as a spec that ``-p`` reads back to the same passes: each pass with every
    option spelled out (``none`` for an empty pipeline)."""
    if not passes:
        return "none"
    parts = []
    for p in passes:
        opts = " ".join(f"{f.name}={_option_text(getattr(p, f.name))}" for f in p.option_fields())
        parts.append(f"{p.name}{{{opts}}}" if opts else p.name)
    return ",".join(parts)


def _option_text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def echo_pipeline(req: PipelineRequest) -> None:
    """``--print-pipeline``: the resolved spec on stdout, one line."""
    click.echo(pipeline_spec(resolved_pipeline(req)))
