"""The memory report as JSON for machines: a versioned document that ``docs/report.schema.json``
describes (``relaxc report --json``, ``relaxc build --json``).

The document is built field by field, never by dumping the report's dataclasses, so a field
added to the report reaches the JSON only when the schema (and its version) says so. Types
are stable: byte counts are integers, shapes lists of dims (an integer, or a string holding
a symbolic expression), and a size that may depend on symbolic dims is always the object
``{"expr": "16 * n", "bound": 2048}`` (``bound`` null when unbounded). The output is
byte-identical across runs: fixed key order, no timestamps, no paths but the one given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from relaxc.ir import dims as D
from relaxc.passes.base import Pass

from ..version import relaxc_version
from .analysis import BufferRow, DynamicRow, FunctionReport, Size
from .origins import Origins, onnx_node

SCHEMA_VERSION = 2
"""Raised whenever a field changes meaning or type, or one is added or removed."""

Json = dict[str, Any]


def pass_json(p: Pass) -> Json:
    """A pass as it ran: its canonical name and every option with its value."""
    return {"name": p.name, "options": {f.name: getattr(p, f.name) for f in p.option_fields()}}


def planner_json(passes: Sequence[Pass]) -> Json | None:
    """The planner of the pipeline (its last PlanMemory): the algorithm and its other
    options, or None when no PlanMemory ran."""
    plans = [p for p in passes if p.name == "PlanMemory"]
    if not plans:
        return None
    opts = pass_json(plans[-1])["options"]
    return {"name": opts.pop("planner"), "options": opts}


def size_json(s: Size) -> Json:
    return {"expr": s.expr, "bound": s.bound}


def dim_json(d: D.Dim) -> int | str:
    return d if isinstance(d, int) else D.dim_to_str(d)


def onnx_json(origins: Origins, line: int) -> Json | None:
    """The ONNX node the statement at ``line`` was imported from (None: not imported)."""
    label = origins.onnx_nodes.get(line) if line > 0 else None
    return onnx_node(label) if label else None


def buffer_json(b: BufferRow, origins: Origins = Origins()) -> Json:
    return {
        "name": b.name,
        "shape": [dim_json(d) for d in b.shape],
        "dtype": b.dtype,
        "bytes": b.bytes,
        "offset": b.offset,
        "first": b.first,
        "last": b.last,
        "arena": b.arena,
        "op": b.op or None,
        "line": b.line or None,
        "onnx_node": onnx_json(origins, b.line),
    }


def dynamic_json(d: DynamicRow, origins: Origins = Origins()) -> Json:
    return {
        "name": d.name,
        "size": size_json(d.size),
        "scope": d.scope,
        "first": d.first,
        "last": d.last,
        "op": d.op or None,
        "line": d.line or None,
        "onnx_node": onnx_json(origins, d.line),
    }


def ram_json(r: FunctionReport) -> Json:
    return {
        "arena": r.arena_bytes,
        "unplanned": r.unplanned_static_bytes,
        "callees": r.callee_bytes if r.callees_bounded else None,
        "inputs": r.ram_inputs,
        "outputs": r.ram_outputs,
        "total": r.ram_bytes,
    }


def rom_json(r: FunctionReport) -> Json:
    return {"constants": r.constant_bytes, "code": None, "total": r.rom_bytes}


def peak_json(r: FunctionReport, origins: Origins) -> Json | None:
    if r.peak_point < 0:
        return None
    line = r.point_lines[r.peak_point] if r.peak_point < len(r.point_lines) else 0
    return {
        "point": r.peak_point,
        "bytes": r.peak_bytes,
        "binding": r.peak_binding or None,
        "line": line or None,
        "onnx_node": onnx_json(origins, line),
        "buffers": list(r.peak_buffers),
    }


def function_json(r: FunctionReport, origins: Origins = Origins()) -> Json:
    return {
        "name": r.name,
        "planned": r.planned,
        "explicit_memory": r.explicit,
        "program_points": r.program_points,
        "arena_bytes": r.arena_bytes,
        "workspace_bytes": r.workspace_bytes,
        "lower_bound": r.lower_bound,
        "ratio": r.ratio,
        "optimal": r.optimal,
        "proven_bound": r.proven_bound,
        "clock_stopped": r.clock_stopped,
        "baseline_bytes": r.baseline_bytes,
        "saving": r.saving,
        "ram": ram_json(r),
        "rom": rom_json(r),
        "calls": r.calls,
        "peak": peak_json(r, origins),
        "arenas": [
            {
                "name": a["name"],
                "scope": a["scope"],
                "bytes": a["bytes"],
                "align": a["align"],
                "proven_bound": a["proven_bound"],
            }
            for a in r.arenas
        ],
        "input_bytes": size_json(r.input_bytes),
        "output_bytes": size_json(r.output_bytes),
        "io_in_arena": r.io_in_arena,
        "inputs_in_arena_bytes": r.inputs_in_arena_bytes,
        "outputs_in_arena_bytes": r.outputs_in_arena_bytes,
        "constant_bytes": r.constant_bytes,
        "unplanned_static_bytes": r.unplanned_static_bytes,
        "order_peak_written": r.order_peak_written,
        "order_peak_chosen": r.order_peak_chosen,
        "written_into_views": r.written_into_views,
        "kernel_scratch_calls": r.kernel_scratch_calls,
        "kernel_scratch_max_bytes": r.kernel_scratch_max_bytes,
        "buffers": [buffer_json(b, origins) for b in r.buffers],
        "dynamic": [dynamic_json(d, origins) for d in r.dynamic],
    }


def report_document(
    path: Path,
    reports: Sequence[FunctionReport],
    passes: Sequence[Pass],
    origins: Origins = Origins(),
) -> Json:
    """The whole JSON document for the reports of ``path`` planned by ``passes``
    (``origins``: the ONNX node of each source line, for an imported model)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "relaxc_version": relaxc_version(),
        "file": str(path),
        "pipeline": [pass_json(p) for p in passes],
        "planner": planner_json(passes),
        "functions": [function_json(r, origins) for r in reports],
    }


def reports_json(
    path: Path,
    reports: Sequence[FunctionReport],
    passes: Sequence[Pass],
    origins: Origins = Origins(),
) -> str:
    """:func:`report_document` as text (two-space indent, a final newline)."""
    return json.dumps(report_document(path, reports, passes, origins), indent=2) + "\n"
