"""``relaxc run``: run a program on inputs and show or save its outputs."""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np
from rich.console import Console
from rich.table import Table

from relaxc.backend.inputs import bind_dims, check_ranks, random_inputs, resolve_dims
from relaxc.backend.interpreter import Interpreter
from relaxc.backend.vm import VirtualMachine, compile_module, load_bytes, load_file, predict_memory
from relaxc.backend.vm.compare import compare_outputs
from relaxc.backend.vm.format import MAGIC
from relaxc.frontend.weights import default_weights_path
from relaxc.ir.diagnostics import RxError

from .errors import Sources, reported_errors
from .files import (
    check_outputs,
    wrote_line,
)
from .loading import load_program
from .onnx_input import load_input, onnx_options
from .options import dim_option, parse_dims, quiet_option
from .progress import make_progress
from .tensors_io import inputs_from_npz, named_outputs, write_npz
from .units import format_bytes


def entry_function(module, name: str):
    fn = module.get(name)
    if fn is None:
        names = ", ".join("@" + f.name for f in module.functions) or "none"
        raise RxError(
            f"the module has no function @{name} (functions: {names}); choose one with --entry"
        )
    return fn


def outputs_table(named: list[tuple[str, np.ndarray]]) -> Table:
    table = Table(title="outputs", show_edge=False)
    for col in ("name", "shape", "dtype", "min", "max", "mean", "first values"):
        table.add_column(col, justify="right" if col in ("min", "max", "mean") else "left")
    for name, arr in named:
        flat = arr.reshape(-1)
        if flat.size and arr.dtype.kind in "biuf":
            stats = [
                f"{flat.min():.6g}",
                f"{flat.max():.6g}",
                f"{flat.astype(np.float64).mean():.6g}",
            ]
        else:
            stats = ["-", "-", "-"]
        head = ", ".join(f"{x:.4g}" if arr.dtype.kind == "f" else str(x) for x in flat[:4])
        table.add_row(
            name,
            str(tuple(arr.shape)),
            str(arr.dtype),
            *stats,
            head + (" ..." if flat.size > 4 else ""),
        )
    return table


def is_bytecode(path: Path) -> bool:
    """An .rxb file: by its suffix, or by its first bytes whatever its name."""
    if path.suffix == ".rxb":
        return True
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def stats_table(fn_name: str, env: dict, stats, pred) -> Table:
    """What the VM measured next to what PlanMemory promised."""
    where = ", ".join(f"{k}={v}" for k, v in sorted(env.items()))
    table = Table(
        title=f"memory of @{fn_name} on the VM" + (f" ({where})" if where else ""), show_edge=False
    )
    for col in ("", "peak", "arena", "dynamic peak", "outputs"):
        table.add_column(col, justify="left" if not col else "right")

    def b(n: int) -> str:
        return f"{n:,} B"

    table.add_row(
        "measured",
        b(stats.working_peak),
        b(stats.kind_peak["arena"]),
        b(stats.kind_peak["dynamic"]),
        b(stats.kind_peak["external"]),
    )
    table.add_row(
        "promised", b(pred.peak), b(pred.arena_peak), b(pred.dynamic_peak), b(pred.output_bytes)
    )
    return table


def stats_verdict(stats, pred) -> list[str]:
    lines = [
        f"allocator: {stats.allocations} allocation(s), {stats.reuses} from the pool, "
        f"{stats.frees} freed; {format_bytes(stats.handed_over)} handed over with the outputs"
    ]
    if stats.kind_peak["result"]:
        lines.append(
            "kernel results without destination passing: peak "
            f"{format_bytes(stats.kind_peak['result'])}"
        )
    if pred.io_in_arena:
        lines.append(
            "inputs and outputs are in the arena: copied in at the start, read out at the end"
        )
    measured = (
        stats.working_peak,
        stats.kind_peak["arena"],
        stats.kind_peak["dynamic"],
        stats.kind_peak["external"],
    )
    promised = (pred.peak, pred.arena_peak, pred.dynamic_peak, pred.output_bytes)
    diff = stats.working_peak - pred.peak
    if diff == 0 and measured != promised:
        lines.append(
            "the run held the peak the plan promised, but not in the same parts (see the table)"
        )
    elif diff == 0:
        lines.append("the run held exactly the memory the plan promised")
    elif diff > 0:
        lines.append(f"the run held {format_bytes(diff)} more than the plan promised")
    else:
        lines.append(f"the run held {format_bytes(-diff)} less than the plan promised")
    if not pred.complete:
        lines.append(
            "note: the promise covers the function's own storages only, not "
            + " or ".join(pred.missing)
        )
    return lines


@click.command("run")
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--inputs",
    "inputs_path",
    type=click.Path(path_type=Path),
    help="An .npz with one array per parameter, named after it or, for an imported model, "
    "after its ONNX input (default: random inputs).",
)
@click.option(
    "-o",
    "--output",
    "output_path",
    type=click.Path(path_type=Path),
    help="Write the outputs to this .npz: under the ONNX output names of an imported model, "
    "else output (or output_0, output_1 ... for tuples).",
)
@click.option(
    "--params",
    type=click.Path(path_type=Path),
    help="Weights .npz of an .rx FILE or of --source (default: its .npz beside it).",
)
@click.option("--entry", default="main", show_default=True, help="The function to run.")
@click.option(
    "--seed",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="Seed of the random inputs.",
)
@dim_option
@click.option(
    "--stats",
    is_flag=True,
    help="Print the peak memory the VM measured next to what PlanMemory promised (an .rx FILE "
    "is compiled with the vm pipeline and run on the VM too).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Also run the reference interpreter on the same inputs and compare the outputs; a "
    "difference beyond the dtype's tolerance is an error.",
)
@click.option(
    "--source",
    type=click.Path(path_type=Path),
    help=(
        "With an .rxb FILE and --check: also compare with the interpreter running "
        "this original .rx."
    ),
)
@click.option(
    "--poison", is_flag=True, help="VM: overwrite freed and killed memory with 0xFF bytes."
)
@click.option(
    "--io-in-arena",
    is_flag=True,
    help="With an .rx FILE and --stats or --check: compile it with the inputs and outputs "
    "planned into the arena (PlanMemory.io_in_arena=true), as relaxc build --io-in-arena does.",
)
@onnx_options
@quiet_option
@click.pass_obj
def run_cmd(
    obj: dict,
    file: Path,
    inputs_path: Path | None,
    output_path: Path | None,
    params: Path | None,
    entry: str,
    seed: int,
    dims: tuple[str, ...],
    stats: bool,
    check: bool,
    source: Path | None,
    poison: bool,
    io_in_arena: bool,
    shapes: tuple[str, ...],
    bounds: tuple[str, ...],
    fold_batch_norm: bool | None,
    quiet: bool,
) -> None:
    """Run FILE: an .rx program (or an ONNX model, imported in memory with --shape and
    --bound as in relaxc import) with the reference interpreter, or an .rxb (made by relaxc
    build) with the VM.

    Without --inputs, inputs are random (seeded) with the declared shapes; a symbolic dim
    takes its --dim value, else its upper bound, and an unbounded dim without --dim is an
    error. On a terminal, a step that takes more than a second (loading, running, checking)
    shows its progress on stderr (not with -q).
    """
    dim_values = parse_dims(dims)
    bytecode = is_bytecode(file)
    if bytecode and (shapes or bounds or fold_batch_norm is not None):
        raise click.UsageError(
            f"{'--shape' if shapes else '--bound' if bounds else '--[no-]fold-batch-norm'} is "
            "for an ONNX model (FILE.onnx); an .rxb "
            "was compiled for its shapes"
        )
    if source is not None and not (bytecode and check):
        raise click.UsageError("--source needs an .rxb FILE and --check")
    if io_in_arena and (bytecode or not (stats or check)):
        raise click.UsageError(
            "--io-in-arena plans the program compiled from an .rx FILE for --stats or --check "
            "(an .rxb was planned when it was built: relaxc build --io-in-arena)"
        )
    if bytecode and params is not None and source is None:
        raise click.UsageError(
            "--params gives the weights of an .rx file; an .rxb holds its own "
            "(with --source, --params gives the weights of the source)"
        )
    sources = Sources()
    with reported_errors(sources, obj["debug"]), make_progress(obj, quiet) as progress:
        if output_path is not None:
            guarded = [file, inputs_path, params, source]
            if params is None:  # then the weights are the .npz beside the .rx (FILE, or --source)
                guarded += [
                    default_weights_path(p)
                    for p in ([source] if bytecode else [file])
                    if p is not None
                ]
            check_outputs([output_path], guarded)  # before the run, not after it
        with progress.step(f"loading {file.name}"):
            if bytecode:
                exe = load_file(file)
                module, weights, types = exe.module, exe.weights(), exe.types
            else:
                prog = load_input(
                    file, sources, params, shapes, bounds, fold_batch_norm=fold_batch_norm
                )
                module, weights, types = prog.module, prog.weights, prog.types
                check_ranks(module, types)
        fn = entry_function(module, entry)
        if inputs_path is not None:
            args = inputs_from_npz(fn, inputs_path)
        else:
            args = random_inputs(fn, resolve_dims(fn, dim_values), seed)
        env = bind_dims(fn, args, dim_values or None)
        vm = None
        if bytecode:
            vm = VirtualMachine(exe, poison=poison)
            with progress.step(f"running @{fn.name} on the VM"):
                result = vm.run(fn.name, args, dim_values or None)
        else:
            with progress.step(f"running @{fn.name} with the reference interpreter"):
                result = Interpreter(module, weights, types=types).run(
                    fn.name, args, dim_values or None
                )
        named = named_outputs(fn, result)
        console = Console(soft_wrap=True)
        if not quiet:
            console.print(outputs_table(named))
        if not bytecode and (stats or check):
            from relaxc.passes.assemble import assemble_pipeline
            from relaxc.passes.pipeline import Pipeline

            from .target_facts import pipeline_context

            configs = ("PlanMemory.io_in_arena=true",) if io_in_arena else ()
            passes = assemble_pipeline("vm", None, (), configs, pipeline_context())
            with progress.step("compiling for the VM"):
                compiled = Pipeline(passes).run(module, types)
                exe = load_bytes(compile_module(compiled, weights), f"{file} (compiled)")
            vm = VirtualMachine(exe, poison=poison)
            with progress.step(f"running @{fn.name} on the VM"):
                vm_result = vm.run(fn.name, args, dim_values or None)
            if check:
                report_check(
                    console,
                    vm_result,
                    result,
                    "the VM running the compiled program",
                    "the reference interpreter",
                    quiet,
                )
        elif check:
            with progress.step(f"running @{fn.name} with the reference interpreter"):
                ref = Interpreter(module, weights, types=types).run(
                    fn.name, args, dim_values or None
                )
            report_check(
                console,
                result,
                ref,
                "the VM",
                f"the reference interpreter running the program in {file}",
                quiet,
            )
            if source is not None:
                with progress.step(f"running @{fn.name} of {source.name} with the interpreter"):
                    src = load_program(source, sources, params)
                    entry_function(src.module, entry)
                    ref = Interpreter(src.module, src.weights, types=src.types).run(
                        fn.name, args, dim_values or None
                    )
                report_check(
                    console,
                    result,
                    ref,
                    "the VM",
                    f"the reference interpreter running {source}",
                    quiet,
                )
        if stats:
            assert vm is not None
            pred = predict_memory(vm.exe.module, fn.name, env)
            console.print(stats_table(fn.name, env, vm.stats, pred))
            for line in stats_verdict(vm.stats, pred):
                console.print(line, highlight=False)
        if output_path is not None:  # last: a run that fails (--check, --stats) writes nothing
            write_npz(output_path, named)
            if not quiet:
                click.echo(wrote_line([(output_path, f"{len(named)} output(s)")]), err=True)


def report_check(
    console: Console, got, want, who: str, reference: str, quiet: bool = False
) -> None:
    """Print the agreement of ``got`` with ``want``, or raise RxError naming the first
    difference."""
    cmp = compare_outputs(got, want)
    if cmp.problem is not None:
        raise RxError(f"check failed: {who} and {reference} disagree: {cmp.problem}")
    how = (
        "bit-identical"
        if cmp.identical
        else f"within tolerance, max abs difference {cmp.max_abs_diff:.3g}"
    )
    if not quiet:
        console.print(
            f"check: {cmp.outputs} output(s) of {who} match {reference} ({how})", highlight=False
        )
