"""``relaxc build``: run the pass pipeline and emit the result for a target."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import click

from relaxc.frontend.printer import print_module
from relaxc.frontend.weights import default_weights_path, named_constants, write_npz
from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Module

from .errors import Sources, reported_errors
from .files import (
    check_output_file,
    check_output_folder,
    refuse_overwriting_inputs,
    write_all_atomic,
    write_atomic,
    wrote_line,
)
from .loading import Program
from .onnx_input import load_input, onnx_options

from .budget import budget_options, check_budget
from .unbounded import unbounded, unbounded_error, unbounded_warning
from .report.analysis import memory_report
from .report.formats import FORMATS, ReportInput
from .report.origins import program_origins
from .report.text import summary_line
from .options import quiet_option
from .gc_pause import gc_paused
from .pipeline_opts import (
    TARGETS,
    PipelineRequest,
    execute_pipeline,
    echo_pipeline,
    pipeline_options,
    resolved_pipeline,
)
from .progress import Progress, make_progress
from .timing import Stopwatch, print_steps
from .static_limit import MAX_STATIC_BYTES, check_static_bytes
from .units import ByteSize, short_bytes


def default_output(path: Path, target: str) -> Path:
    """Where the output goes without -o: beside the input, never the input itself."""
    if target == "vm":
        return path.with_suffix(".rxb")
    if target == "c":
        return path.parent
    return path.with_name(path.stem + ".lowered.rx")


@click.command("build")
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help=(
        "Output file (--target ir: the transformed .rx, '-' for stdout; vm: the .rxb; c: a folder)."
    ),
)
@click.option(
    "-t",
    "--target",
    type=click.Choice(TARGETS),
    default="vm",
    show_default=True,
    help="vm: bytecode for relaxc's VM; c: C99 source; ir: the transformed .rx.",
)
@click.option(
    "--params",
    type=click.Path(path_type=Path),
    help="Weights .npz (default: FILE with .npz suffix).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the memory report as JSON instead of the summary.",
)
@budget_options(
    "Fail (exit 1, nothing written) if a function's workspace is larger, e.g. 256KiB. "
    "PlanMemory's planner is asked to fit it (PlanMemory.capacity).",
    "Build a program whose memory cannot all be planned because a symbolic dim has no upper "
    "bound (without it: an error naming the dim and how to bound it): those allocations are "
    "made at run time, with a warning, and --max-arena checks only the bounded memory. Not "
    "for --target c, which needs every allocation in static memory.",
)
@quiet_option
@click.option(
    "--unpacked",
    is_flag=True,
    help="--target c: call kernels directly with raw pointers (leaves out LegalizePackedCalls).",
)
@click.option(
    "--emit-main",
    is_flag=True,
    help=(
        "--target c: also write PREFIX_main.c, a main() that runs the model on raw "
        "little-endian files."
    ),
)
@click.option(
    "--prefix",
    metavar="NAME",
    help="--target c: prefix of the C names and files (default: FILE's stem).",
)
@click.option(
    "--constants",
    type=click.Choice(("auto", "inline", "file")),
    default=None,
    help="--target c: where the weights go. file: in PREFIX_weights.bin, linked by the "
    "assembler stub PREFIX_weights.S (GCC or Clang), so that the C compiler reads code only; "
    "inline: in PREFIX.c (portable C99, but a large model makes a C file of hundreds of MB); "
    "auto (the default): file, or inline when the weights are at most 64 KiB.",
)
@click.option(
    "--max-static-bytes",
    type=ByteSize(),
    metavar="BYTES",
    default=None,
    help="--target c: refuse (exit 1, nothing written) a program whose static memory (its "
    "arenas and other static arrays, PREFIX_STATIC_BYTES) is larger, e.g. 4GiB "
    f"(default {short_bytes(MAX_STATIC_BYTES)}: a static array much larger makes a binary "
    "that does not start).",
)
@onnx_options
@pipeline_options
@click.pass_obj
def build_cmd(
    obj: dict,
    file: Path,
    output: Path | None,
    target: str,
    params: Path | None,
    as_json: bool,
    max_arena: int | None,
    allow_unbounded: bool,
    quiet: bool,
    unpacked: bool,
    emit_main: bool,
    prefix: str | None,
    constants: str | None,
    max_static_bytes: int | None,
    shapes: tuple[str, ...],
    bounds: tuple[str, ...],
    fold_batch_norm: bool | None,
    **kw,
) -> None:
    """Compile FILE (an .rx program, or an ONNX model imported in memory with --shape and
    --bound as in relaxc import): run the pass pipeline of the target, check the memory
    budget, write the result and print a one-line memory summary per function (relaxc report
    shows it all).

    With --target c, -o names a folder (created if needed) that receives PREFIX.c and
    PREFIX.h (see docs/c.md).

    On a terminal, a step that takes more than a second (loading, the passes, code
    generation, writing) shows its progress on stderr; -q, or stderr not a terminal, hides it
    (RELAXC_PROGRESS=0/1 disables/forces it)."""
    sources = Sources()
    with reported_errors(sources, obj["debug"]), make_progress(obj, quiet) as progress:
        if as_json and output is not None and str(output) == "-":
            raise click.UsageError(
                "--json prints the report to stdout, so the program cannot go there too (-o -)"
            )
        prefix = _c_options(target, unpacked, emit_main, prefix, constants, file, kw)
        if max_static_bytes is not None and target != "c":
            raise click.UsageError("--max-static-bytes is only for --target c")
        req = PipelineRequest(target=target, capacity=max_arena or 0, **kw)
        if req.print_pipeline:
            echo_pipeline(req)
            return
        out_path = output if output is not None else default_output(file, target)
        if str(out_path) != "-":
            refuse_overwriting_inputs(out_path, [file, params or default_weights_path(file)])
        check_output(out_path, target)  # before the compile, not after it
        watch = Stopwatch(enabled=req.time_passes)
        with progress.step(f"loading {file.name}"):
            prog = load_input(
                file,
                sources,
                params,
                shapes,
                bounds,
                need_weights=target != "ir",
                weight_data=target != "ir",
                watch=watch,
                fold_batch_norm=fold_batch_norm,
            )
        check_entry(prog.module, file)
        if str(out_path) != "-":
            refuse_overwriting_inputs(out_path, [file, prog.weights_path])
        run = execute_pipeline(
            prog.module, req, file.stem, prog.types, [file, prog.weights_path], progress
        )
        module, types = run.module, run.types
        watch.add_passes(run.timing.times)
        with watch.step("report"):
            reports = memory_report(module, prog.module)
        if as_json:
            origins = program_origins(
                file.name, prog.module, prog.imported, sources.get(str(file), "")
            )
            doc = ReportInput(file, reports, resolved_pipeline(req), origins)
            click.echo(FORMATS["json"](doc), nl=False)
        elif not quiet:
            for rep in reports:
                click.echo(summary_line(rep), err=True)
        check_planned(module, reports, prog, target, allow_unbounded, quiet)
        check_budget(reports, max_arena, allow_unbounded)
        _emit(
            module,
            types,
            prog,
            target,
            out_path,
            prefix,
            emit_main,
            constants,
            quiet,
            watch,
            progress,
            max_static_bytes,
        )
        if req.time_passes:
            print_steps(watch)


def _imported_weights(prog: Program, module: Module) -> dict:
    """The named weights of a program imported from ONNX (they are in no file yet), or {}."""
    if prog.weights_path is not None or not prog.imported:
        return {}
    names = {name for name, _ in named_constants(module)}
    return {name: prog.weights[name] for name in sorted(names) if name in prog.weights}


def check_planned(
    module: Module,
    reports: list,
    prog: Program,
    target: str,
    allow_unbounded: bool,
    quiet: bool,
) -> None:
    """RxError when some memory could not be planned because a dim has no upper bound (the C
    target needs it planned whatever the flags); with --allow-unbounded, a warning instead."""
    found = unbounded(module, reports, prog.dim_origins)
    if not found:
        return
    onnx = prog.imported
    if target == "c" or not allow_unbounded:
        message, note = unbounded_error(found, onnx, target)
        raise RxError(message, notes=(note,))
    if not quiet:
        for u in found:
            click.echo(f"warning: {unbounded_warning(u, onnx)}", err=True)


def check_output(out_path: Path, target: str) -> None:
    """RxError unless the output of ``target`` can go to ``out_path``: a file (``-`` for
    stdout, --target ir only) whose folder exists, or for C a folder that is or can be made."""
    if str(out_path) == "-":
        if target == "vm":
            raise RxError("bytecode is binary and is not written to stdout; give a file with -o")
        if target == "c":
            raise RxError("--target c writes several files; give a folder with -o, not '-'")
        return
    if target != "c":
        check_output_file(out_path)
        return
    if out_path.exists() and not out_path.is_dir():
        raise RxError(f"-o {out_path}: --target c writes into a folder, and this is a file")
    check_output_folder(out_path)


def check_entry(module: Module, file: Path) -> None:
    """RxError unless the module has @main, the function relaxc run and the C target call."""
    if module.get("main") is None:
        names = ", ".join("@" + f.name for f in module.functions)
        raise RxError(
            f"{file} has no function @main to compile (functions: {names}); the entry point "
            "of a program is fn @main"
        )


def _emit(
    module: Module,
    types,
    prog: Program,
    target: str,
    out_path: Path,
    prefix: str,
    emit_main: bool,
    constants: str | None,
    quiet: bool,
    watch: Stopwatch,
    progress: Progress,
    max_static_bytes: int | None = None,
) -> None:
    """Write the program for ``target`` (the transformed .rx, the bytecode, or the C files)."""
    file = prog.path
    if target == "ir":
        with watch.step("codegen", "print .rx"):
            text = print_module(module)
        imported = _imported_weights(prog, module)
        if str(out_path) == "-":
            if imported:
                raise RxError(
                    f"the weights imported from {file.name} need a file beside the program; "
                    "give -o FILE.rx (they go to FILE.npz), or keep them with relaxc import"
                )
            click.echo(text, nl=False)
            return
        files: list = [(out_path, text)]
        if imported:
            npz = out_path.with_suffix(".npz")
            refuse_overwriting_inputs(npz, [file])
            files.insert(0, (npz, partial(write_npz, arrays=imported)))
        with watch.step("write", out_path.name):
            write_all_atomic(files)  # the program and its weights, or neither
        if not quiet:
            click.echo(wrote_line([p for p, _ in reversed(files)]), err=True)
        return
    if target == "vm":
        from relaxc.backend.vm import compile_module

        check_output(out_path, target)
        with progress.step("VM code", _statements(module)) as step, gc_paused():
            with watch.step("codegen", "VM code"):
                data = compile_module(module, prog.weights, types, progress=step.update)
        with progress.step(f"writing {out_path}"), watch.step("write", out_path.name):
            write_atomic(out_path, data)
        if not quiet:
            click.echo(wrote_line([out_path]), err=True)
        return
    if target == "c":
        _write_c(
            module,
            prog,
            out_path,
            prefix,
            emit_main,
            file,
            types,
            constants,
            progress,
            quiet,
            watch,
            max_static_bytes,
        )
        return
    raise RxError(
        f"the {target} backend is not built yet; use --target ir to write the transformed program"
    )


def _statements(module) -> int:
    return sum(len(f.body) for f in module.functions)


def _c_options(
    target: str,
    unpacked: bool,
    emit_main: bool,
    prefix: str | None,
    constants: str | None,
    file: Path,
    kw: dict,
) -> str:
    """Check the C-only options; with --unpacked, leave LegalizePackedCalls out of the pipeline."""
    from relaxc.backend.c import check_prefix, default_prefix
    from relaxc.passes.assemble import assemble_pipeline

    if target != "c":
        for flag, given in (
            ("--unpacked", unpacked),
            ("--emit-main", emit_main),
            ("--prefix", prefix is not None),
            ("--constants", constants is not None),
        ):
            if given:
                raise click.UsageError(f"{flag} is only for --target c")
        return ""
    if unpacked:
        passes = assemble_pipeline(target, kw["passes"], kw["disable"], kw["configs"])
        if any(p.name == "LegalizePackedCalls" for p in passes):
            kw["disable"] = tuple(kw["disable"]) + ("LegalizePackedCalls",)
    return check_prefix(prefix) if prefix is not None else default_prefix(file.stem)


def _write_c(
    module,
    prog,
    out_dir: Path,
    prefix: str,
    emit_main: bool,
    file: Path,
    types,
    constants: str | None,
    progress: Progress,
    quiet: bool = False,
    watch: Stopwatch | None = None,
    max_static_bytes: int | None = None,
) -> None:
    """Emit the C sources into the folder ``out_dir`` (nothing is written if anything fails)."""
    from relaxc.backend.c import emit_c

    check_output(out_dir, "c")
    watch = watch if watch is not None else Stopwatch(enabled=False)
    labels = {"statements": "C code: statements", "constant bytes": "C code: constant bytes"}
    with (
        progress.step("C code", _statements(module)) as step,
        gc_paused(),
        watch.step("codegen", "C code"),
    ):
        sources = emit_c(
            module,
            prog.weights,
            prefix=prefix,
            source=file.name,
            emit_main=emit_main,
            types=types,
            constants=constants or "auto",
            progress=progress.callback(step, labels),
        )
    check_static_bytes(sources.info, max_static_bytes)
    paths = [out_dir / name for name in sources.files]
    for path in paths:
        refuse_overwriting_inputs(path, [file, prog.weights_path])
    created = [p for p in (out_dir, *out_dir.parents) if not p.exists()]  # deepest first
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RxError(f"cannot create folder {out_dir}: {e.strerror or e}") from None
    try:
        with (
            progress.step(f"writing {len(paths)} files into {out_dir}"),
            watch.step("write", f"{len(paths)} files"),
        ):
            write_all_atomic(list(zip(paths, sources.files.values())))  # all the files, or none
    except BaseException:
        for folder in created:  # and no folder left behind that this run made
            try:
                folder.rmdir()
            except OSError:
                break
        raise
    if not quiet:
        click.echo(wrote_line(paths), err=True)
