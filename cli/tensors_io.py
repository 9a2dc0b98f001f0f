"""Reading inputs from and writing outputs to .npz files for ``relaxc run``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from relaxc.frontend.weights import load_npz, npz_bytes
from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Function

from .files import write_atomic


def inputs_from_npz(fn: Function, path: Path) -> list[np.ndarray]:
    """The arrays of ``path`` in ``fn``'s parameter order, matched by parameter name."""
    arrays = load_npz(path, "inputs")
    names = [p.name for p in fn.params]
    missing = [n for n in names if n not in arrays]
    extra = sorted(set(arrays) - set(names))
    if missing or extra:
        parts = []
        if missing:
            parts.append("missing " + ", ".join(missing))
        if extra:  # an array name may be anything, even empty
            parts.append(
                "unexpected " + ", ".join(n if n.isidentifier() else repr(n) for n in extra)
            )
        raise RxError(
            f"inputs file {path} does not match @{fn.name}: " + "; ".join(parts),
            notes=(f"@{fn.name} takes: " + (", ".join(names) or "nothing"),),
        )
    return [arrays[n] for n in names]


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
