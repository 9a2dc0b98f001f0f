"""``relaxc passes``: list the passes, or run a pipeline and show the IR between passes."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from relaxc.frontend.printer import print_module
from relaxc.passes.properties import PROPERTIES
from relaxc.passes.registry import PASSES, PIPELINE_DOCS, PIPELINES
from relaxc.passes.spec import describe_options, kebab

from .errors import Sources, reported_errors
from .files import total_size
from .onnx_input import load_input, onnx_options
from .pipeline_opts import TARGETS, PipelineRequest, echo_pipeline, pipeline_options, run_pipeline
from .options import quiet_option
from .timing import Stopwatch, print_steps
from .units import short_bytes


def list_passes() -> None:
    console = Console(soft_wrap=False)
    # No outer border (like the other tables): at 80 columns that leaves the options and the
    # properties wide enough for their longest words (greedy-conflict, explicit-memory).
    table = Table(title="passes", show_lines=True, show_edge=False)
    table.add_column("pass", no_wrap=True)
    table.add_column("what it does", ratio=2)
    table.add_column("options", ratio=3, overflow="fold")
    table.add_column("needs / gives", ratio=2, overflow="fold")
    for name, cls in PASSES.items():
        opts = (
            "\n".join(f"{o} = {d}  ({t.replace('|', ' | ')})" for o, t, d in describe_options(cls))
            or "-"
        )
        conds = []
        conds += [f"needs {r}" for r in sorted(cls.requires)]
        conds += [f"refuses {r}" for r in sorted(cls.forbids)]
        conds += [f"gives {r}" for r in sorted(cls.provides)]
        table.add_row(f"{name}\n({kebab(name)})", cls.summary, opts, "\n".join(conds) or "-")
    console.print(table)
    pipes = Table(title="named pipelines (-p NAME)")
    pipes.add_column("name")
    pipes.add_column("passes")
    pipes.add_column("use")
    for name, seq in PIPELINES.items():
        pipes.add_row(name, ", ".join(seq) or "(none)", PIPELINE_DOCS[name])
    console.print(pipes)
    console.print("properties: " + "; ".join(f"{k}: {v}" for k, v in PROPERTIES.items()))


@click.command("passes")
@click.argument("file", required=False, type=click.Path(path_type=Path))
@click.option(
    "-t",
    "--target",
    type=click.Choice(TARGETS),
    default="vm",
    show_default=True,
    help="Whose default pipeline to run.",
)
@click.option(
    "--params",
    type=click.Path(path_type=Path),
    help="Weights .npz (default: FILE with .npz suffix).",
)
@onnx_options
@quiet_option
@pipeline_options
@click.pass_obj
def passes_cmd(
    obj: dict,
    file: Path | None,
    target: str,
    params: Path | None,
    shapes: tuple[str, ...],
    bounds: tuple[str, ...],
    fold_batch_norm: bool | None,
    quiet: bool,
    **kw,
) -> None:
    """Without FILE, list every pass with its options and the named pipelines.

    With FILE, run the pipeline and print the IR at the requested points (--dump-before,
    --dump-after; each dump is headed by the pass name and parses again as .rx), or the
    final IR when no dump is asked for.
    """
    req = PipelineRequest(target=target, **kw)
    if req.print_pipeline:  # FILE, if given, is not read: the pipeline does not depend on it
        with reported_errors(Sources(), obj["debug"]):
            echo_pipeline(req)
        return
    if file is None:
        list_passes()
        return
    sources = Sources()
    with reported_errors(sources, obj["debug"]):
        watch = Stopwatch(enabled=req.time_passes)
        prog = load_input(
            file, sources, params, shapes, bounds, False, False, watch, fold_batch_norm
        )
        module, timing, dumps = run_pipeline(
            prog.module, req, file.stem, prog.types, [file, prog.weights_path]
        )
        watch.add_passes(timing.times)
        if not kw["dump_before"] and not kw["dump_after"]:
            with watch.step("codegen", "print .rx"):
                text = print_module(module)
            click.echo(text, nl=False)
        elif dumps.written and not quiet:
            size = short_bytes(total_size(dumps.written))
            click.echo(
                f"wrote {len(dumps.written)} dump(s) to {req.dump_dir} ({size} in all)", err=True
            )
        if req.time_passes:
            print_steps(watch)
