"""``relaxc import``: an ONNX model becomes an .rx program and its .npz weights."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import click

from relaxc.frontend.weights import write_npz
from relaxc.ir.diagnostics import RxError

from .errors import Sources, reported_errors
from .files import (
    check_outputs,
    write_all_atomic,
    wrote_line,
)
from .onnx_input import check_onnx_file, parse_shapes
from .options import parse_dims, quiet_option
from .progress import make_progress
from .units import short_bytes


@click.command("import")
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="The .rx to write (default: FILE with .rx suffix); the weights go beside it as .npz.",
)
@click.option(
    "--shape",
    "shapes",
    multiple=True,
    metavar="NAME=D1,D2,...",
    help="Shape of an input, overriding the model's (repeatable); a name is a symbolic dim, "
    "e.g. --shape input_ids=1,seq.",
)
@click.option(
    "--bound",
    "bounds",
    multiple=True,
    metavar="NAME=N",
    help="Upper bound of a symbolic dim (repeatable): PlanMemory then plans its tensors "
    "statically, e.g. --bound seq=512.",
)
@click.option(
    "--fold-batch-norm/--no-fold-batch-norm",
    default=True,
    show_default=True,
    help="Fold a BatchNormalization that alone reads a Conv's output into the Conv's "
    "weights and bias, as onnxruntime's graph optimizer does.",
)
@quiet_option
@click.pass_obj
def import_cmd(
    obj: dict,
    file: Path,
    output: Path | None,
    shapes: tuple[str, ...],
    bounds: tuple[str, ...],
    fold_batch_norm: bool,
    quiet: bool,
) -> None:
    """Import FILE, an ONNX model (opsets 7 to 28), as an .rx program with its weights.

    Initializers and everything computed only from constants are folded into named weights
    (FILE.npz beside the .rx); a symbolic input dim (an ONNX dim_param) stays symbolic.
    Unsupported operators are all listed in one error. Needs the onnx package
    (pip install 'relaxc[onnx]'). On a terminal, a step that takes more than a second shows
    its progress on stderr (not with -q)."""
    sources = Sources()
    with reported_errors(sources, obj["debug"]), make_progress(obj, quiet) as progress:
        from relaxc.frontend.onnx import import_onnx  # onnx is an optional extra: load it only here

        check_onnx_file(file)
        input_shapes = parse_shapes(shapes)
        upper = parse_dims(bounds, "--bound")
        rx_path = output if output is not None else file.with_suffix(".rx")
        if rx_path.suffix != ".rx":
            raise RxError(
                f"the output {rx_path} must end in .rx (the weights go beside it as .npz)"
            )
        npz_path = rx_path.with_suffix(".npz")
        check_outputs([rx_path, npz_path], [file])  # before the import, not after it
        with progress.step(f"importing {file.name}"):
            result = import_onnx(
                file,
                input_shapes=input_shapes,
                upper_bounds=upper,
                fold_batch_norm=fold_batch_norm,
            )
            text = result.text(file.name)
        with progress.step(f"writing {rx_path} and {npz_path}"):
            write_all_atomic(
                [(npz_path, partial(write_npz, arrays=result.weights)), (rx_path, text)]
            )  # both or neither
        if not quiet:
            fn = result.module.functions[0]
            nbytes = short_bytes(sum(int(a.nbytes) for a in result.weights.values()))
            click.echo(
                wrote_line(
                    [
                        (rx_path, f"{len(fn.body)} bindings"),
                        (npz_path, f"{len(result.weights)} weights, {nbytes} in memory"),
                    ]
                ),
                err=True,
            )
            for note in result.notes:
                click.echo(f"note: {note}", err=True)
