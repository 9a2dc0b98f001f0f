"""Reading inputs from and writing outputs to .npz files for ``relaxc run``.

A function imported from ONNX keeps the model's input and output names
(:mod:`relaxc.ir.io_names`): an inputs file may name each input by its ONNX name (as an
onnxruntime user's feed does: ``gpu_0/data_0``) or by its IR name (``gpu_0_data_0``), and
the outputs are written under the ONNX output names. A function without them reads its
parameters' names and writes ``output`` (or ``output_0``, ``output_1`` ... for a tuple).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from relaxc.frontend.weights import load_npz, npz_bytes
from relaxc.ir.diagnostics import RxError
from relaxc.ir.io_names import onnx_input_names, onnx_output_names
from relaxc.ir.nodes import Function

from .files import write_atomic


def _shown(name: str) -> str:
    """An array name as a message shows it (an archive's names may be anything, even empty)."""
    return name if name.isidentifier() else repr(name)


def input_labels(fn: Function) -> list[str]:
    """How a message names each parameter: ``'in/put:0' (%in_put_0)``, or ``in_put_0``."""
    onnx = onnx_input_names(fn)
    if onnx is None:
        return [p.name for p in fn.params]
    return [p.name if o == p.name else f"{_shown(o)} (%{p.name})" for p, o in zip(fn.params, onnx)]


def inputs_from_npz(fn: Function, path: Path) -> list[np.ndarray]:
    """The arrays of ``path`` in ``fn``'s parameter order, matched by parameter name, or by
    ONNX input name for an imported function (an ONNX name is looked up first)."""
    arrays = load_npz(path, "inputs")
    names = [p.name for p in fn.params]
    by_onnx = {o: k for k, o in enumerate(onnx_input_names(fn) or ())}
    by_ir = {n: k for k, n in enumerate(names)}
    given: dict[int, list[str]] = {}
    extra = []
    for key in arrays:
        k = by_onnx.get(key, by_ir.get(key))
        if k is None:
            extra.append(key)
        else:
            given.setdefault(k, []).append(key)
    labels = input_labels(fn)
    missing = [labels[k] for k in range(len(names)) if k not in given]
    twice = [
        f"{labels[k]} twice (as {' and '.join(_shown(n) for n in sorted(keys))})"
        for k, keys in sorted(given.items())
        if len(keys) > 1
    ]
    if missing or extra or twice:
        parts = []
        if missing:
            parts.append("missing " + ", ".join(missing))
        if extra:
            parts.append("unexpected " + ", ".join(_shown(n) for n in sorted(extra)))
        if twice:
            parts.append("given " + ", ".join(twice))
        raise RxError(
            f"inputs file {path} does not match @{fn.name}: " + "; ".join(parts),
            notes=(f"@{fn.name} takes: " + (", ".join(labels) or "nothing"),),
        )
    return [arrays[given[k][0]] for k in range(len(names))]


def named_outputs(fn: Function, result: Any) -> list[tuple[str, np.ndarray]]:
    """The arrays of ``result`` (a run of ``fn``), depth first, under the ONNX output names of
    an imported function, else as :func:`flatten_outputs` names them."""
    named = flatten_outputs(result)
    onnx = onnx_output_names(fn)
    if onnx is None or len(onnx) != len(named):
        return named
    return [(name, array) for name, (_, array) in zip(onnx, named)]


def flatten_outputs(result: Any, prefix: str = "output") -> list[tuple[str, np.ndarray]]:
    """Name every array of a (possibly nested tuple) result: output, or output_0, output_1_0 ..."""
    if isinstance(result, tuple):
        out = []
        for i, r in enumerate(result):
            out += flatten_outputs(r, f"{prefix}_{i}")
        return out
    return [(prefix, np.asarray(result))]


def write_npz(path: Path, named: Sequence[tuple[str, np.ndarray]]) -> None:
    """Write arrays to ``path`` atomically as a plain .npz (every array a ``.npy`` member
    that ``numpy.load`` reads; no splats record)."""
    write_atomic(path, npz_bytes(dict(named), splats=False))
