"""Options shared by ``relaxc build`` and ``relaxc passes``, and running the pipeline."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import click
from rich.console import Console
from rich.table import Table

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
            "disable",
            multiple=True,
            metavar="LIST",
            help="Remove these passes from the pipeline (comma list, repeatable).",
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
            "--time-passes", is_flag=True, help="Print the time each pass took (to stderr)."
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


def io_configs(configs: Sequence[str], req: "PipelineRequest") -> tuple[str, ...]:
    """``configs`` plus the setting ``--io-in-arena`` stands for (a clear error when the
    pipeline has no PlanMemory to set it on)."""
    if not req.io_in_arena:
        return tuple(configs)
    probe = assemble_pipeline(req.target, req.passes, req.disable, ())
    if not any(p.name == "PlanMemory" for p in probe):
        raise RxError(
            "--io-in-arena plans the inputs and outputs with PlanMemory, which is not in the "
            f"pipeline ({', '.join(p.name for p in probe) or 'empty'})"
        )
    return (IO_IN_ARENA_CONFIG, *configs)


def requested_passes(req: "PipelineRequest") -> list[Pass]:
    """The passes ``req`` asks for, with their options: the pipeline that runs."""
    return assemble_pipeline(req.target, req.passes, req.disable, io_configs(req.configs, req))


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
    passes = requested_passes(req)
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


def print_timings(timing: TimingInstrument) -> None:  # noqa: D103
    table = Table(title="pass times", show_edge=False)
    table.add_column("#", justify="right")
    table.add_column("pass")
    table.add_column("seconds", justify="right")
    total = 0.0
    for i, (name, secs) in enumerate(timing.times, start=1):
        table.add_row(str(i), name, f"{secs:.4f}")
        total += secs
    table.add_row("", "total", f"{total:.4f}")
    Console(stderr=True).print(table)
