"""Loading a program: read, parse, verify, and attach its weights."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from relaxc.frontend.parser import parse_module
from relaxc.frontend.weights import check_weights, default_weights_path, load_npz, named_constants
from relaxc.ir.nodes import Module
from relaxc.ir.verifier import ModuleTypes, verify_module

from .errors import Sources
from .files import read_source
from .gc_pause import gc_paused


@dataclass(frozen=True)
class Program:
    """A verified module with its types and weights, and where they came from."""

    path: Path
    module: Module
    types: ModuleTypes
    weights: Mapping[str, np.ndarray]
    weights_path: Path | None


def parse_file(path: Path, sources: Sources) -> Module:
    """Read and parse one .rx file (its text is kept in ``sources`` for error carets)."""
    text = read_source(path)
    sources[str(path)] = text
    return parse_module(text, str(path))


def load_program(
    path: Path, sources: Sources, params: Path | None = None, need_weights: bool = True
) -> Program:
    """Parse and verify ``path`` and load its weights (``--params`` or the same-stem .npz)."""
    with gc_paused():
        module = parse_file(path, sources)
        types = verify_module(module)
    weights_path = params if params is not None else default_weights_path(path)
    weights: Mapping[str, np.ndarray] = {}
    if weights_path is not None:
        weights = load_npz(weights_path, "weights")
    if need_weights and named_constants(module):
        source = (
            str(weights_path)
            if weights_path
            else f"the weights (no {path.with_suffix('.npz').name} beside the model; use --params)"
        )
        check_weights(module, weights, source)
    return Program(path, module, types, weights, weights_path)
