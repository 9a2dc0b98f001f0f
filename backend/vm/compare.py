"""Comparing two runs' outputs (the VM against the reference interpreter) with per-dtype tolerances.

The VM runs the interpreter's own numpy kernels, so bit-identical outputs are expected;
the tolerances only keep a comparison against another program (the source before the
passes) meaningful if a pass ever reorders arithmetic. Integers and bools must be equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

TOLERANCES: dict[str, tuple[float, float]] = {
    # numpy dtype name: (rtol, atol)
    "float16": (1e-3, 1e-3),
    "float32": (1e-5, 1e-6),
    "float64": (1e-12, 1e-12),
}


@dataclass
class Comparison:
    outputs: int = 0
    identical: bool = True  # every output bit-identical
    max_abs_diff: float = 0.0
    problem: str | None = None  # the first mismatch, as a sentence


def _named(v: Any, prefix: str = "output") -> list[tuple[str, Any]]:
    if isinstance(v, tuple):
        out = []
        for i, x in enumerate(v):
            out += _named(x, f"{prefix}_{i}")
        return out
    return [(prefix, v)]


def compare_outputs(got: Any, want: Any) -> Comparison:
    """Compare ``got`` with ``want`` (arrays or nested tuples of them)."""
    res = Comparison()
    a, b = _named(got), _named(want)
    if [n for n, _ in a] != [n for n, _ in b]:
        res.identical = False
        res.problem = f"the outputs differ in structure ({len(a)} against {len(b)} arrays)"
        return res
    res.outputs = len(a)
    for (name, x), (_, y) in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            res.identical = False
            res.problem = f"{name} is {x.dtype}{x.shape}, the reference {y.dtype}{y.shape}"
            return res
        if x.tobytes() == y.tobytes():
            continue
        res.identical = False
        if x.dtype.kind == "f":
            rtol, atol = TOLERANCES.get(x.dtype.name, (1e-5, 1e-6))
            with np.errstate(all="ignore"):
                diff = np.abs(x.astype(np.float64) - y.astype(np.float64))
            finite = diff[np.isfinite(diff)]
            if finite.size:
                res.max_abs_diff = max(res.max_abs_diff, float(finite.max()))
            close = np.isclose(x, y, rtol=rtol, atol=atol, equal_nan=True)
            if not close.all():
                idx = tuple(int(i) for i in np.argwhere(~close)[0])
                res.problem = (
                    f"{name} differs at index {idx}: {x[idx]!r} against {y[idx]!r} "
                    f"(tolerance for {x.dtype.name}: rtol={rtol:g}, atol={atol:g})"
                )
                return res
        else:
            idx = tuple(int(i) for i in np.argwhere(x != y)[0])
            res.problem = (
                f"{name} differs at index {idx}: {x[idx]!r} against {y[idx]!r} "
                f"({x.dtype.name} must be equal)"
            )
            return res
    return res
