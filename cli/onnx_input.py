"""An ONNX model given where an .rx program is expected: imported in memory, in one step.

``relaxc build model.onnx``, ``relaxc report model.onnx`` and ``relaxc run model.onnx`` import
the model as ``relaxc import`` would (with the same ``--shape`` and ``--bound`` options) and
go on with the program, writing no .rx or .npz (as ``tvmc compile model.onnx`` does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import click

from relaxc.ir.diagnostics import RxError
from relaxc.ir.verifier import verify_module

from .errors import Sources
from .loading import Program, load_program
from .options import parse_dims
from .timing import Stopwatch

ONNX_SUFFIX = ".onnx"


def is_onnx(path: Path) -> bool:
    """An ONNX model: by its suffix (an ONNX file has no magic number to look for)."""
    return path.suffix.lower() == ONNX_SUFFIX


def onnx_options(f: Callable) -> Callable:
    """Decorate a command with ``relaxc import``'s ``--shape`` and ``--bound``."""
    f = click.option(
        "--fold-batch-norm/--no-fold-batch-norm",
        default=None,
        help="With an .onnx FILE: fold a BatchNormalization into the Conv it alone reads "
        "(the default), as in relaxc import.",
    )(f)
    f = click.option(
        "--bound",
        "bounds",
        multiple=True,
        metavar="NAME=N",
        help="With an .onnx FILE: upper bound of a symbolic dim (repeatable), as in relaxc import.",
    )(f)
    return click.option(
        "--shape",
        "shapes",
        multiple=True,
        metavar="NAME=D1,D2,...",
        help="With an .onnx FILE: shape of an input (repeatable), as in relaxc import.",
    )(f)


def load_input(
    path: Path,
    sources: Sources,
    params: Path | None,
    shapes: tuple[str, ...],
    bounds: tuple[str, ...],
    need_weights: bool = True,
    weight_data: bool = True,
    watch: Stopwatch | None = None,
    fold_batch_norm: bool | None = None,
    source_text: bool = False,
) -> Program:
    """The program in ``path``: an .rx file (and its weights) or an ONNX model imported in
    memory; ``--shape``/``--bound``/``--[no-]fold-batch-norm`` (None: not given) are for a
    model, ``--params`` for an .rx file. With ``source_text``, an imported model is printed
    as ``relaxc import`` writes it (each statement's ONNX node in a comment) and parsed back,
    so that its statements have lines: the text is in ``sources`` under
    :func:`imported_name` (what the report's pictures map program points to)."""
    if not is_onnx(path):
        if shapes or bounds or fold_batch_norm is not None:
            flag = "--shape" if shapes else "--bound" if bounds else "--[no-]fold-batch-norm"
            raise click.UsageError(
                f"{flag} is for an ONNX model (FILE.onnx); {path} is read as .rx, whose input "
                "shapes and bounds are written in it"
            )
        return load_program(path, sources, params, need_weights, weight_data, watch)
    if params is not None:
        raise click.UsageError(
            f"--params gives the weights of an .rx file; {path} is an ONNX model, which holds "
            "its own"
        )
    from relaxc.frontend.onnx import import_onnx  # onnx is an optional extra

    from .cmd_import import parse_shapes

    watch = watch if watch is not None else Stopwatch(enabled=False)
    input_shapes, upper = parse_shapes(shapes), parse_dims(bounds, "--bound")
    with watch.step("import", path.name):
        result = import_onnx(
            path,
            input_shapes=input_shapes,
            upper_bounds=upper,
            fold_batch_norm=fold_batch_norm is not False,
        )
    module = result.module
    if source_text:
        from relaxc.frontend.parser import parse_module

        with watch.step("parse", "the imported program"):
            name = imported_name(path)
            sources[name] = result.text(path.name)
            module = parse_module(sources[name], name)
    with watch.step("verify"):
        types = verify_module(module)
    return Program(path, module, types, result.weights, None, result.dim_origins)


def imported_name(path: Path) -> str:
    """The name an ONNX model's imported text goes by in errors and pictures."""
    return f"{path} (imported)"


def check_onnx_file(path: Path) -> None:
    """RxError when ``relaxc import`` is given something that is not an ONNX model, judged by
    its first bytes (an ONNX file is binary protobuf, with no magic number of its own): a zip
    archive (weights), relaxc bytecode, or text (an .rx program)."""
    from relaxc.backend.vm.format import MAGIC

    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return  # the importer reports a missing or unreadable file
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        what = "a zip archive (an .npz of weights?)"
    elif head.startswith(MAGIC):
        what = "relaxc bytecode: relaxc run and relaxc disasm read it"
    elif head and b"\x00" not in head and _is_text(head):
        what = (
            "text: an .rx program, which relaxc build, report, run and check read directly "
            "(nothing to import)"
        )
    else:
        return
    raise RxError(f"{path} is not an ONNX model: it is {what}")


def _is_text(head: bytes) -> bool:
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start >= len(head) - 3  # a character cut at the end of the sample
    return True
