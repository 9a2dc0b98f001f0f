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
OTHER_SUFFIXES = (".rx", ".rxb", ".npz")
"""Suffixes of relaxc's own files, never read as ONNX."""
MAX_SNIFF_BYTES = 2 << 30
"""The largest file tried as an ONNX model by parsing it (protobuf's own limit)."""


def is_onnx(path: Path) -> bool:
    """An ONNX model: a file named ``.onnx``, or one with any other name but relaxc's own
    suffixes whose bytes parse as an ONNX model with a graph (an ONNX file has no magic number,
    and a small one may be all printable bytes: it is recognised by parsing it)."""
    suffix = path.suffix.lower()
    if suffix == ONNX_SUFFIX:
        return True
    if suffix in OTHER_SUFFIXES:
        return False
    return parses_as_onnx(path)


def parses_as_onnx(path: Path) -> bool:
    """True if ``path`` is a regular file that parses as an ONNX ``ModelProto`` with an IR
    version and a graph (False without the onnx package)."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_SNIFF_BYTES:
            return False
        import onnx
    except (OSError, ImportError):
        return False
    try:
        model = onnx.ModelProto()
        model.ParseFromString(path.read_bytes())
    except Exception:  # noqa: BLE001 - protobuf raises several kinds; not a model
        return False
    return model.ir_version > 0 and (len(model.graph.node) > 0 or len(model.graph.output) > 0)


def parse_shapes(values: tuple[str, ...]) -> dict[str, list[int | str]]:
    """``("x=1,3,224,224", "ids=batch,seq")`` → input name -> dims (ints or dim names)."""
    out: dict[str, list[int | str]] = {}
    for item in values:
        name, sep, dims = item.rpartition("=")
        if not sep or not name:
            raise click.BadParameter(
                f"'{item}' is not NAME=D1,D2,... (for example x=1,3,224,224)", param_hint="--shape"
            )
        parsed: list[int | str] = []
        for part in (p.strip() for p in dims.split(",")) if dims.strip() else ():
            if part.lstrip("-").isdigit():
                if int(part) < 0:
                    raise click.BadParameter(
                        f"'{item}': a dimension cannot be negative", param_hint="--shape"
                    )
                parsed.append(int(part))
            elif part.isidentifier():
                parsed.append(part)
            else:
                raise click.BadParameter(
                    f"'{item}': {part!r} is neither a size nor a dim name", param_hint="--shape"
                )
        if name in out:
            raise click.BadParameter(f"input '{name}' given twice", param_hint="--shape")
        out[name] = parsed
    return out


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
) -> Program:
    """The program in ``path``: an .rx file (and its weights) or an ONNX model imported in
    memory; ``--shape``/``--bound``/``--[no-]fold-batch-norm`` (None: not given) are for a
    model, ``--params`` for an .rx file. An imported model's IR nodes have locations naming
    the ONNX node, input or graph they come from (``Loc.origin``: errors and the report's
    pictures say ``model.onnx: node 'conv1' (Conv)``), and ``Program.imported`` is set."""
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

    watch = watch if watch is not None else Stopwatch(enabled=False)
    input_shapes, upper = parse_shapes(shapes), parse_dims(bounds, "--bound")
    with watch.step("import", path.name):
        result = import_onnx(
            path,
            input_shapes=input_shapes,
            upper_bounds=upper,
            fold_batch_norm=fold_batch_norm is not False,
            source_name=str(path),
        )
    with watch.step("verify"):
        types = verify_module(result.module)
    return Program(
        path, result.module, types, result.weights, None, result.dim_origins, imported=True
    )


def check_onnx_file(path: Path) -> None:
    """RxError when ``relaxc import`` is given a file that is not an ONNX model: a zip
    archive (weights) or relaxc bytecode, by their magic numbers, or text (an .rx program)
    that does not parse as a model (a small model may be all printable bytes: it is tried)."""
    from relaxc.frontend.onnx.detect import TEXT_PROGRAM, describe_non_onnx  # imports onnx

    what = describe_non_onnx(path)
    if what is None or (what == TEXT_PROGRAM and parses_as_onnx(path)):
        return
    raise RxError(f"{path} is not an ONNX model: it is {what}")
