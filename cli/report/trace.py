"""The memory timeline as Chrome trace events (``relaxc report --trace``), a format that
ui.perfetto.dev and chrome://tracing open, so zooming, searching and names come free.

Time is the program point: one point is one microsecond of trace time (``ts``). Each
function of the report is a process (``pid`` 1, 2, ... in report order, named ``@main``).
Each buffer is a complete event (``ph: "X"``) from its first to past its last program point,
named by its tensor, with its offset, bytes, shape, dtype and arena in ``args``; placed
buffers (``cat: "placed"``) and dynamic allocations (``cat: "dynamic"``) go on lanes
(threads) so that no two events on one lane overlap in time, as the viewers need. Counter
events (``ph: "C"``) draw the bytes of placed buffers live at each program point (rounded up
to their arena's alignment, as the lower bound counts them: the counter's peak is the lower
bound) and the arena and lower bound as flat lines. ``otherData`` holds the figures of each
function. Events are sorted by time and the file is byte-identical across runs.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from relaxc.ir.types import shape_to_str
from relaxc.ir.sizes import round_up

from .analysis import FunctionReport
from .json import SCHEMA_VERSION, relaxc_version

Event = dict[str, Any]

# Order of events that share a timestamp: names first, then counters, then slices.
_PHASE_ORDER = {"M": 0, "C": 1, "X": 2}


def _lanes(spans: Sequence[tuple[int, int]]) -> list[int]:
    """A lane for each ``(first, last)`` span (inclusive), lowest free lane first, such that
    spans on one lane never overlap."""
    order = sorted(range(len(spans)), key=lambda i: (spans[i][0], spans[i][1], i))
    ends: list[int] = []  # last point of the span each lane holds
    lane = [0] * len(spans)
    for i in order:
        first, last = spans[i]
        for k, end in enumerate(ends):
            if end < first:
                ends[k] = last
                lane[i] = k
                break
        else:
            lane[i] = len(ends)
            ends.append(last)
    return lane


def live_bytes(rep: FunctionReport) -> list[int]:
    """Bytes of the placed buffers live at each program point (each rounded up to its
    arena's alignment)."""
    align = {a["name"]: a["align"] for a in rep.arenas}
    points = max(rep.program_points, max((b.last + 1 for b in rep.buffers), default=0))
    delta = [0] * (points + 1)
    for b in rep.buffers:
        size = round_up(b.bytes, align.get(b.arena, 1))
        delta[b.first] += size
        delta[b.last + 1] -= size
    out, total = [], 0
    for d in delta[:points]:
        total += d
        out.append(total)
    return out


def _meta(pid: int, tid: int | None, name: str, value: str) -> Event:
    ev: Event = {"ph": "M", "pid": pid, "name": name, "ts": 0, "args": {"name": value}}
    if tid is not None:
        ev["tid"] = tid
    return ev


def function_events(rep: FunctionReport, pid: int) -> list[Event]:
    """The trace events of one function's report."""
    events: list[Event] = [
        _meta(pid, None, "process_name", f"@{rep.name}"),
        {"ph": "M", "pid": pid, "name": "process_sort_index", "ts": 0, "args": {"sort_index": pid}},
    ]
    spans = [(b.first, b.last) for b in rep.buffers] + [(d.first, d.last) for d in rep.dynamic]
    lanes = _lanes(spans)
    for lane in sorted(set(lanes)):
        events.append(_meta(pid, lane + 1, "thread_name", f"lane {lane + 1}"))
    for b, lane in zip(rep.buffers, lanes):
        events.append(
            {
                "ph": "X",
                "cat": "placed",
                "name": f"%{b.name}",
                "pid": pid,
                "tid": lane + 1,
                "ts": b.first,
                "dur": b.last - b.first + 1,
                "args": {
                    "offset": b.offset,
                    "bytes": b.bytes,
                    "end": b.offset + b.bytes,
                    "shape": shape_to_str(b.shape),
                    "dtype": b.dtype,
                    "arena": b.arena,
                    "first": b.first,
                    "last": b.last,
                },
            }
        )
    for d, lane in zip(rep.dynamic, lanes[len(rep.buffers) :]):
        events.append(
            {
                "ph": "X",
                "cat": "dynamic",
                "name": f"%{d.name}",
                "pid": pid,
                "tid": lane + 1,
                "ts": d.first,
                "dur": d.last - d.first + 1,
                "args": {
                    "size": d.size.expr,
                    "bound": d.size.bound,
                    "scope": d.scope,
                    "first": d.first,
                    "last": d.last,
                },
            }
        )
    live = live_bytes(rep)
    for t, n in enumerate(live):
        if t == 0 or n != live[t - 1]:
            events.append(
                {"ph": "C", "name": "live bytes", "pid": pid, "ts": t, "args": {"live": n}}
            )
    end = len(live)
    for t in sorted({0, end}):
        events.append(
            {
                "ph": "C",
                "name": "arena",
                "pid": pid,
                "ts": t,
                "args": {"arena": rep.arena_bytes, "lower bound": rep.lower_bound},
            }
        )
    if live and live[-1] != 0:
        events.append({"ph": "C", "name": "live bytes", "pid": pid, "ts": end, "args": {"live": 0}})
    return events


def _function_data(rep: FunctionReport) -> dict[str, Any]:
    return {
        "name": rep.name,
        "planned": rep.planned,
        "program_points": rep.program_points,
        "arena_bytes": rep.arena_bytes,
        "lower_bound": rep.lower_bound,
        "workspace_bytes": rep.workspace_bytes,
        "buffers": len(rep.buffers),
        "dynamic": len(rep.dynamic),
    }


def trace_document(reports: Sequence[FunctionReport], source: str) -> dict[str, Any]:
    """The trace of ``reports`` (of the program in ``source``) as a JSON object."""
    events: list[tuple[tuple[int, int, int, int], Event]] = []
    for pid, rep in enumerate(reports, start=1):
        for k, ev in enumerate(function_events(rep, pid)):
            events.append(((ev["ts"], _PHASE_ORDER[ev["ph"]], pid, k), ev))
    events.sort(key=lambda item: item[0])
    return {
        "traceEvents": [ev for _, ev in events],
        "displayTimeUnit": "ns",
        "otherData": {
            "generator": f"relaxc {relaxc_version()}",
            "report_schema_version": SCHEMA_VERSION,
            "source": source,
            "time_unit": "one microsecond of trace time is one program point",
            "functions": [_function_data(r) for r in reports],
        },
    }


def report_trace(reports: Sequence[FunctionReport], source: str) -> str:
    """:func:`trace_document` as text."""
    return json.dumps(trace_document(reports, source), indent=1) + "\n"
