"""``relaxc report``: how much memory a program needs, in full."""

from __future__ import annotations

from pathlib import Path

import click

from relaxc.frontend.weights import default_weights_path

from .budget import budget_options, check_budget, check_budget_options, warn_unbounded
from .errors import Sources, reported_errors
from .files import (
    check_outputs,
    refuse_overwriting_inputs,
    write_atomic,
    wrote_line,
)
from .onnx_input import is_onnx, load_input, onnx_options
from .options import quiet_option
from .pipeline_opts import (
    TARGETS,
    PipelineRequest,
    echo_pipeline,
    pipeline_options,
    resolved_pipeline,
    run_pipeline,
)
from .report.analysis import memory_report
from .report.formats import FORMATS, ReportInput
from .report.origins import program_origins
from .timing import Stopwatch, print_steps
from .unbounded import bound_hint, unbounded, unbounded_note


@click.command("report")
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "-t",
    "--target",
    type=click.Choice(TARGETS),
    default="vm",
    show_default=True,
    help="Whose default pipeline plans the memory.",
)
@click.option(
    "--params",
    type=click.Path(path_type=Path),
    help="Weights .npz (default: FILE with .npz suffix).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the report as JSON (for CI) instead of tables."
)
@click.option(
    "--svg", type=click.Path(path_type=Path), help="Also write the memory map as an SVG picture."
)
@click.option(
    "--html", type=click.Path(path_type=Path), help="Also write the report as an HTML page."
)
@click.option(
    "--trace",
    type=click.Path(path_type=Path),
    help="Also write the memory timeline as Chrome trace events (open it in ui.perfetto.dev).",
)
@budget_options(
    "Fail (exit 1) if a function's workspace is larger, e.g. 256KiB. "
    "PlanMemory's planner is asked to fit it (PlanMemory.capacity)."
)
@onnx_options
@quiet_option
@pipeline_options
@click.pass_obj
def report_cmd(
    obj: dict,
    file: Path,
    target: str,
    params: Path | None,
    as_json: bool,
    svg: Path | None,
    html: Path | None,
    trace: Path | None,
    max_arena: int | None,
    allow_unbounded: bool,
    shapes: tuple[str, ...],
    bounds: tuple[str, ...],
    fold_batch_norm: bool | None,
    quiet: bool,
    **kw,
) -> None:
    """Plan FILE's memory (an .rx program, or an ONNX model imported in memory) and report it
    per function: arena, lower bound, ratio, naive total and saving, inputs/outputs/constants,
    dynamic allocations, every placed buffer and a memory map. Run on already planned IR
    with -p none."""
    sources = Sources()
    with reported_errors(sources, obj["debug"]):
        check_budget_options(max_arena, allow_unbounded)
        req = PipelineRequest(target=target, capacity=max_arena or 0, **kw)
        if req.print_pipeline:
            return echo_pipeline(req)
        weights = params or default_weights_path(file)
        check_outputs([svg, html, trace], [file, weights])  # before planning, not after it
        watch = Stopwatch(enabled=req.time_passes)
        prog = load_input(
            file, sources, params, shapes, bounds, False, False, watch, fold_batch_norm
        )
        for out in (svg, html, trace):
            if out is not None:
                refuse_overwriting_inputs(out, [file, prog.weights_path])
        module, timing, _ = run_pipeline(
            prog.module, req, file.stem, prog.types, [file, prog.weights_path]
        )
        watch.add_passes(timing.times)
        reports = memory_report(module, prog.module)
        origins = program_origins(file.name, prog.module, prog.imported, sources.get(str(file), ""))
        doc = ReportInput(file, reports, resolved_pipeline(req), origins)
        if as_json:
            click.echo(FORMATS["json"](doc), nl=False)
        elif not quiet:  # the text as rich renders it for this terminal: never stripped
            click.echo(FORMATS["text"](doc), nl=False, color=True)
        written = []
        for fmt, path in (("svg", svg), ("html", html), ("trace", trace)):
            if path is not None:
                write_atomic(path, FORMATS[fmt](doc))
                written.append(path)
        if written and not quiet:
            click.echo(wrote_line(written), err=True)
        if req.time_passes:
            print_steps(watch)
        found = unbounded(module, reports, prog.dim_origins)
        hint = bound_hint(found, is_onnx(file)) if found else None
        if max_arena is None and not quiet and not as_json:  # JSON: its "dynamic" lists them
            for u in found:
                click.echo(f"note: {unbounded_note(u, is_onnx(file))}", err=True)
        warn_unbounded(reports, max_arena, allow_unbounded)
        check_budget(reports, max_arena, allow_unbounded, hint)
