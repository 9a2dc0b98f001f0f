"""Memory that could not be planned because a symbolic dim has no upper bound.

PlanMemory plans a tensor into the arena only when its size has an upper bound; a size that
depends on a dim without one is left to a run-time allocation, which no arena, report total
or ``--max-arena`` counts. ``relaxc build`` refuses such a program (``--allow-unbounded``
asks for it, with a warning), naming each dim, where it comes from (the ONNX input and axis
of an imported model, the parameter of an ``.rx``), and how to bound it: ``--bound N=...``
for an ONNX model, ``attrs {upper_bounds = {N = ...}}`` for an ``.rx``. ``relaxc report``
says that such totals are unbounded rather than let them read as 0 B.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from relaxc.ir import dims as D
from relaxc.ir.nodes import Function, Module
from relaxc.ir.types import TensorType, TupleType, Type

from .report.analysis import FunctionReport

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class UnboundedDim:
    """A symbolic dim without an upper bound that sizes some allocation of ``function``."""

    function: str
    dim: str
    origin: str  # "axis 0 of the ONNX input 'data_0'", "axis 0 of %x", or ""


@dataclass(frozen=True)
class Unbounded:
    """What a function's report leaves unplanned for want of upper bounds."""

    report: FunctionReport
    dims: tuple[UnboundedDim, ...]


def _axes(t: Type, path: str = "") -> list[tuple[str, str]]:
    """(dim name, where) for each symbolic dim of a parameter type, in order."""
    out: list[tuple[str, str]] = []
    if isinstance(t, TensorType):
        for axis, d in enumerate(t.shape):
            if not isinstance(d, int):
                out += [(s, f"axis {axis}{path}") for s in sorted(D.free_vars(d))]
    elif isinstance(t, TupleType):
        for i, f in enumerate(t.fields):
            out += _axes(f, f"{path} of field {i}")
    return out


def _origins(fn: Function, onnx_origins: Mapping[str, tuple[str, int]]) -> dict[str, str]:
    """Where each symbolic dim of ``fn``'s parameters comes from."""
    out: dict[str, str] = {}
    for dim, (name, axis) in onnx_origins.items():
        out[dim] = f"axis {axis} of the ONNX input '{name}'"
    for p in fn.params:
        for dim, where in _axes(p.type):
            out.setdefault(dim, f"{where} of %{p.name}")
    return out


def unbounded(
    module: Module,
    reports: Sequence[FunctionReport],
    onnx_origins: Mapping[str, tuple[str, int]] | None = None,
) -> list[Unbounded]:
    """The functions whose report has allocations sized at run time, with the dims without an
    upper bound that size them (from their size expressions; the parameters' unbounded dims
    when none can be read there)."""
    out = []
    for r in reports:
        if not r.explicit or not r.dynamic:
            continue
        fn = module.get(r.name)
        if fn is None:
            continue
        bounds = fn.upper_bounds()
        origins = _origins(fn, onnx_origins or {}) if fn.name == "main" else _origins(fn, {})
        free = {n for d in r.dynamic for n in _NAME.findall(d.size.expr)} - set(bounds)
        named = sorted(free & set(origins)) or sorted(set(origins) - set(bounds))
        if not named:
            named = sorted(free - {"max", "min"})
        out.append(Unbounded(r, tuple(UnboundedDim(r.name, d, origins.get(d, "")) for d in named)))
    return out


def bound_hint(found: Sequence[Unbounded], onnx: bool) -> str:
    """How to give the dims of ``found`` upper bounds: the flag for an ONNX model, the
    attribute for an ``.rx`` (``...`` for the value: only the user knows it)."""
    by_fn: dict[str, list[str]] = {}
    for u in found:
        for d in u.dims:
            if d.dim not in by_fn.setdefault(d.function, []):
                by_fn[d.function].append(d.dim)
    if onnx:
        dims = sorted({d for ds in by_fn.values() for d in ds})
        return " ".join(f"--bound {d}=..." for d in dims) or "--bound NAME=..."
    parts = [
        f"@{fn} attrs {{upper_bounds = {{{', '.join(f'{d} = ...' for d in ds)}}}}}"
        for fn, ds in by_fn.items()
        if ds
    ]
    return "; ".join(parts) or "attrs {upper_bounds = {NAME = ...}}"


def _dims_text(u: Unbounded) -> str:
    parts = [f"{d.dim} ({d.origin})" if d.origin else d.dim for d in u.dims]
    if not parts:
        return "a dim has no upper bound"
    if len(parts) == 1:
        return f"the dim {parts[0]} has no upper bound"
    return f"the dims {', '.join(parts)} have no upper bound"


def _allocations(u: Unbounded) -> str:
    """``1 allocation(s) (%a_storage: 64 * n bytes)``."""
    dyn = u.report.dynamic
    shown = ", ".join(f"%{d.name}: {d.size.expr} bytes" for d in dyn[:3])
    more = f" and {len(dyn) - 3} more" if len(dyn) > 3 else ""
    return f"{len(dyn)} allocation(s) ({shown}{more})"


def _bound_them(found: Sequence[Unbounded], onnx: bool) -> str:
    """``give n an upper bound (the largest n ...) with --bound n=...``."""
    dims = sorted({d.dim for u in found for d in u.dims})
    what = f"give {dims[0]} an upper bound" if len(dims) == 1 else "give the dims upper bounds"
    return f"{what} (the largest value the program will be run with): {bound_hint(found, onnx)}"


def unbounded_error(found: Sequence[Unbounded], onnx: bool, target: str) -> tuple[str, str]:
    """(message, note) of ``relaxc build``'s refusal."""
    what = "; ".join(
        f"@{u.report.name}'s memory cannot be planned: {_dims_text(u)}, so "
        f"{_allocations(u)} are sized at run time, counted by no arena, total or budget"
        for u in found
    )
    if target == "c":
        return what, (
            f"the C target needs every allocation in static memory: {_bound_them(found, onnx)}"
        )
    return what, (
        f"{_bound_them(found, onnx)}; or pass --allow-unbounded to build it with these "
        "allocations made at run time"
    )


def unbounded_warning(u: Unbounded, onnx: bool) -> str:
    """What ``--allow-unbounded`` lets through, one line per function."""
    return (
        f"@{u.report.name}: {_dims_text(u)}: --allow-unbounded builds it with "
        f"{_allocations(u)} made at run time, counted by no arena, total or budget "
        f"(to plan them: {bound_hint([u], onnx)})"
    )


def unbounded_note(u: Unbounded, onnx: bool) -> str:
    """``relaxc report``'s note under a function whose totals leave allocations out."""
    return (
        f"@{u.report.name}'s totals are unbounded, not the bytes shown: {_dims_text(u)}, so "
        f"{_allocations(u)} are sized at run time and in no total "
        f"(to plan them: {bound_hint([u], onnx)})"
    )
