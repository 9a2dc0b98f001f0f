"""Loading a program: read, parse, verify, and attach its weights."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from relaxc.frontend.parser import parse_module
from relaxc.frontend.weights import check_weights, default_weights_path, named_constants, open_npz
from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Module
from relaxc.ir.verifier import ModuleTypes, verify_module

from .errors import Sources
from .files import read_source
from .gc_pause import gc_paused
from .timing import Stopwatch


@dataclass(frozen=True)
class Program:
    """A verified module with its types and weights, and where they came from."""

    path: Path
    module: Module
    types: ModuleTypes
    weights: Mapping[str, np.ndarray]
    weights_path: Path | None
    dim_origins: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    """An imported ONNX model's symbolic dims: dim -> (graph input, axis) that introduced it."""
    imported: bool = False
    """An ONNX model imported in memory (its IR nodes' locations name ONNX nodes)."""


def parse_file(path: Path, sources: Sources) -> Module:
    """Read and parse one .rx file (its text is kept in ``sources`` for error carets)."""
    text = read_source(path)
    sources[str(path)] = text
    return parse_module(text, str(path))


def check_not_empty(module: Module, path: Path) -> None:
    """RxError for a program with no functions (an empty file, only comments): there is
    nothing to check, build, report or run, and saying ``ok`` would pass it silently."""
    if not module.functions:
        raise RxError(
            f"{path} defines no functions: a program needs at least fn @main (see docs/ir.md)"
        )


def load_program(
    path: Path,
    sources: Sources,
    params: Path | None = None,
    need_weights: bool = True,
    weight_data: bool = True,
    watch: Stopwatch | None = None,
) -> Program:
    """Parse and verify ``path`` and load its weights (``--params`` or the same-stem .npz).

    ``need_weights``: every named constant must be in the weights with its declared shape and
    dtype (a missing archive is an error). ``weight_data=False`` reads only the archive's
    headers: ``Program.weights`` is then a lazy :class:`WeightsArchive` that reads an array's
    data when it is looked up (for commands that need only the types). ``watch`` times the
    parsing, the verification and the weights as three steps."""
    watch = watch if watch is not None else Stopwatch(enabled=False)
    with gc_paused():
        with watch.step("parse", path.name):
            module = parse_file(path, sources)
        check_not_empty(module, path)
        with watch.step("verify"):
            types = verify_module(module)
    with watch.step("weights", "headers" if not weight_data else ""):
        return attach_weights(path, module, types, params, need_weights, weight_data)


def attach_weights(
    path: Path,
    module: Module,
    types: ModuleTypes,
    params: Path | None,
    need_weights: bool,
    weight_data: bool,
) -> Program:
    """:func:`load_program` after parsing: find, open and check the weights of ``module``."""
    weights_path = params if params is not None else default_weights_path(path)
    weights: Mapping[str, np.ndarray] = {}
    if weights_path is not None:
        archive = open_npz(weights_path, "weights")
        weights = archive.load_all() if weight_data else archive
    if need_weights and named_constants(module):
        source = (
            str(weights_path)
            if weights_path
            else f"the weights (no {path.with_suffix('.npz').name} beside the model; use --params)"
        )
        check_weights(module, weights, source)
    return Program(path, module, types, weights, weights_path)
