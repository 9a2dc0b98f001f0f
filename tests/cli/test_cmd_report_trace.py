"""``relaxc report --trace``: the memory timeline as Chrome trace events that
ui.perfetto.dev and chrome://tracing open: valid structure, every buffer of the report on
it, a live-bytes counter whose peak is the lower bound, written atomically and never over an
input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaxc.cli.main import cli
from relaxc.cli.report.trace import _lanes
from tests.strategies import GeneratedProgram, programs

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "samples").glob("*.rx"))
PHASES = {"M", "X", "C"}


def invoke(*args: object):
    return CliRunner().invoke(
        cli, [str(a) for a in args], env={"RELAXC_DEBUG": None}, catch_exceptions=False
    )


def trace_and_report(src: Path, out: Path, *args: object) -> tuple[dict, dict]:
    r = invoke("report", src, "--trace", out, "--json", *args)
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text(encoding="utf-8")), json.loads(r.stdout)


def assert_trace_structure(trace: dict[str, Any]) -> None:
    """What the trace-event format asks of a JSON object file, and what relaxc promises on
    top: sorted timestamps, integer times, non-overlapping slices on each lane."""
    assert isinstance(trace["traceEvents"], list) and trace["displayTimeUnit"] in ("ms", "ns")
    last_ts = 0
    lanes: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for ev in trace["traceEvents"]:
        assert ev["ph"] in PHASES and isinstance(ev["name"], str) and isinstance(ev["pid"], int)
        assert type(ev["ts"]) is int and ev["ts"] >= last_ts
        last_ts = ev["ts"]
        assert isinstance(ev["args"], dict)
        if ev["ph"] == "X":
            assert type(ev["dur"]) is int and ev["dur"] >= 1 and isinstance(ev["tid"], int)
            lanes.setdefault((ev["pid"], ev["tid"]), []).append((ev["ts"], ev["ts"] + ev["dur"]))
        if ev["ph"] == "C":
            assert ev["args"] and all(type(v) is int for v in ev["args"].values())
        if ev["ph"] == "M":
            assert ev["name"] in ("process_name", "process_sort_index", "thread_name")
    for spans in lanes.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans


def check_covers_report(trace: dict[str, Any], report: dict[str, Any]) -> None:
    events = trace["traceEvents"]
    names = {ev["pid"]: ev["args"]["name"] for ev in events if ev["name"] == "process_name"}
    assert list(names.values()) == [f"@{f['name']}" for f in report["functions"]]
    for pid, fn in enumerate(report["functions"], start=1):
        slices = [ev for ev in events if ev["ph"] == "X" and ev["pid"] == pid]
        placed = {ev["name"]: ev for ev in slices if ev["cat"] == "placed"}
        assert sorted(placed) == sorted(f"%{b['name']}" for b in fn["buffers"])
        for b in fn["buffers"]:
            ev = placed[f"%{b['name']}"]
            assert (ev["ts"], ev["ts"] + ev["dur"] - 1) == (b["first"], b["last"])
            assert ev["args"]["offset"] == b["offset"] and ev["args"]["bytes"] == b["bytes"]
            assert ev["args"]["dtype"] == b["dtype"] and ev["args"]["arena"] == b["arena"]
        dynamic = sorted(ev["name"] for ev in slices if ev["cat"] == "dynamic")
        assert dynamic == sorted(f"%{d['name']}" for d in fn["dynamic"])
        live = [ev for ev in events if ev["pid"] == pid and ev["name"] == "live bytes"]
        peak = max((ev["args"]["live"] for ev in live), default=0)
        assert peak == fn["lower_bound"]
        if live:
            assert live[-1]["args"]["live"] == 0  # the counter ends at zero
        arena = [ev for ev in events if ev["pid"] == pid and ev["name"] == "arena"]
        assert arena and all(
            ev["args"] == {"arena": fn["arena_bytes"], "lower bound": fn["lower_bound"]}
            for ev in arena
        )
    data = trace["otherData"]["functions"]
    assert [(d["name"], d["arena_bytes"], d["buffers"]) for d in data] == [
        (f["name"], f["arena_bytes"], len(f["buffers"])) for f in report["functions"]
    ]


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.stem)
def test_every_sample_trace_is_valid_and_covers_the_report(sample: Path, tmp_path: Path) -> None:
    trace, report = trace_and_report(sample, tmp_path / "t.json")
    assert_trace_structure(trace)
    check_covers_report(trace, report)


def test_the_trace_is_byte_identical_across_runs(tmp_path: Path) -> None:
    src = ROOT / "samples" / "transformer.rx"
    assert invoke("report", src, "--trace", tmp_path / "a.json").exit_code == 0
    assert invoke("report", src, "--trace", tmp_path / "b.json").exit_code == 0
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_two_functions_are_two_processes(tmp_path: Path) -> None:
    src = tmp_path / "two.rx"
    src.write_text(
        "fn @helper(%x: Tensor[(16,), f32]) -> Tensor[(16,), f32] {\n"
        "  %a = relu(%x)\n  %b = exp(%a)\n  %c = add(%a, %b)\n  return %c\n}\n\n"
        "fn @main(%x: Tensor[(16,), f32]) -> Tensor[(16,), f32] {\n"
        "  %y = call @helper(%x)\n  %z = exp(%y)\n  %w = add(%y, %z)\n  return %w\n}\n",
        encoding="utf-8",
    )
    trace, report = trace_and_report(src, tmp_path / "t.json")
    assert_trace_structure(trace)
    check_covers_report(trace, report)
    assert {ev["pid"] for ev in trace["traceEvents"]} == {1, 2}


def test_unbounded_allocations_are_on_the_timeline(tmp_path: Path) -> None:
    src = tmp_path / "u.rx"
    src.write_text(
        "fn @main(%x: Tensor[(n, 16), f32]) -> Tensor[(n, 16), f32] {\n"
        "  %a = relu(%x)\n  %b = exp(%a)\n  %c = add(%a, %b)\n  return %c\n}\n",
        encoding="utf-8",
    )
    trace, report = trace_and_report(src, tmp_path / "t.json")
    assert_trace_structure(trace)
    check_covers_report(trace, report)
    dyn = [ev for ev in trace["traceEvents"] if ev.get("cat") == "dynamic"]
    assert dyn and all(ev["args"]["size"] == "64 * n" and ev["args"]["bound"] is None for ev in dyn)


def test_the_trace_is_never_written_over_an_input(tmp_path: Path) -> None:
    src = tmp_path / "mlp.rx"
    shutil.copy(ROOT / "samples" / "mlp.rx", src)
    shutil.copy(ROOT / "samples" / "mlp.npz", tmp_path / "mlp.npz")
    before = src.read_bytes(), (tmp_path / "mlp.npz").read_bytes()
    for target in (src, tmp_path / "mlp.npz"):
        r = invoke("report", src, "--trace", target)
        assert r.exit_code == 1 and "Traceback" not in r.output
        assert "refusing" in r.stderr or "input" in r.stderr
    assert (src.read_bytes(), (tmp_path / "mlp.npz").read_bytes()) == before


def test_a_failed_run_leaves_an_existing_trace_as_it_was(tmp_path: Path) -> None:
    """The trace is written whole or not at all: a run that fails before writing it (bad
    IR) leaves the old file untouched, and no temporary file behind."""
    out = tmp_path / "t.json"
    out.write_text("old", encoding="utf-8")
    bad = tmp_path / "bad.rx"
    bad.write_text("fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {\n  return %y\n}\n")
    r = invoke("report", bad, "--trace", out)
    assert r.exit_code == 1
    assert out.read_text(encoding="utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.rx", "t.json"]


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(prog=programs(max_ops=8))
def test_random_programs_give_valid_traces(prog: GeneratedProgram, tmp_path: Path) -> None:
    src = tmp_path / "p.rx"
    src.write_text(prog.text, encoding="utf-8")
    trace, report = trace_and_report(src, tmp_path / "t.json")
    assert_trace_structure(trace)
    check_covers_report(trace, report)


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 10)), max_size=30))
def test_lanes_never_overlap_and_are_few(spans: list[tuple[int, int]]) -> None:
    """Lanes hold disjoint spans, and there are exactly as many as spans live at once at
    the busiest point (greedy interval colouring in order of start is optimal)."""
    spans = [(a, a + d) for a, d in spans]
    lanes = _lanes(spans)
    for i, (a0, a1) in enumerate(spans):
        for j, (b0, b1) in enumerate(spans):
            if i < j and lanes[i] == lanes[j]:
                assert a1 < b0 or b1 < a0
    busiest = max((sum(a <= p <= b for a, b in spans) for p in range(42)), default=0)
    assert len(set(lanes)) == busiest
