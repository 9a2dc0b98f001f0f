"""The report's totals (issue 28, item 3): the saving is against one baseline no pass can
move (one buffer per tensor), RAM and ROM are given in full with callees counted, the JSON
names each buffer's op, source line and ONNX node and the peak point, and a joined value
(an elided concat) is labelled by its concat."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.backend.vm import VirtualMachine, compile_module, load_bytes, predict_memory
from relaxc.cli.main import cli
from relaxc.cli.report.picture.layout import layout
from relaxc.frontend.parser import parse_module
from relaxc.passes.assemble import assemble_pipeline
from relaxc.cli.report.analysis import memory_report
from relaxc.passes.pipeline import Pipeline

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"

CALLS = """
fn @inner(%x: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32]
    attrs {upper_bounds = {n = 8}} {
  %a = relu(%x)
  %b = exp(%a)
  %c = add(%a, %b)
  return %c
}

fn @main(%x: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32]
    attrs {upper_bounds = {n = 8}} {
  %y = relu(%x)
  %z = call @inner(%y)
  %w = add(%z, %y)
  return %w
}
"""

RETURNS_CALLEE = """
fn @inner(%x: Tensor[(4, 4), f32]) -> Tensor[(4, 4), f32] {
  %a = relu(%x)
  return %a
}

fn @main(%x: Tensor[(4, 4), f32]) -> Tensor[(4, 4), f32] {
  %z = call @inner(%x)
  return %z
}
"""


def invoke(*args: object):
    return CliRunner().invoke(
        cli, [str(a) for a in args], env={"RELAXC_DEBUG": None}, catch_exceptions=False
    )


def report_json(*args: object) -> dict[str, Any]:
    r = invoke("report", *args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def main_of(doc: dict[str, Any]) -> dict[str, Any]:
    return next(f for f in doc["functions"] if f["name"] == "main")


@pytest.mark.parametrize("sample", ["mlp", "cnn", "transformer"])
def test_the_baseline_does_not_move_with_the_passes(sample: str) -> None:
    """Disabling a pass that saves memory never changes the baseline, and never makes the
    printed saving better."""
    src = SAMPLES / f"{sample}.rx"
    full = main_of(report_json(src))
    for disabled in ("ComputeInPlace", "ElideConcatSplit", "ComputeInPlace,ElideConcatSplit"):
        less = main_of(report_json(src, "--disable-pass", disabled))
        assert less["baseline_bytes"] == full["baseline_bytes"]
        assert less["saving"] <= full["saving"] + 1e-12
    no_reorder = main_of(report_json(src, "--disable-pass", "ReorderForMemory"))
    assert no_reorder["baseline_bytes"] == full["baseline_bytes"]


def test_mlp_baseline_is_every_value_it_computes() -> None:
    """mlp computes four (8, 128) f32 values and two (8, 10) ones: each its own buffer."""
    f = main_of(report_json(SAMPLES / "mlp.rx"))
    assert f["baseline_bytes"] == 4 * 8 * 128 * 4 + 2 * 8 * 10 * 4
    assert 0 < f["saving"] < 1
    r = invoke("build", SAMPLES / "mlp.rx", "-t", "ir", "-o", "-")
    assert "less than one buffer per tensor (16.6 KiB)" in r.stderr
    assert " 0% less" not in r.stderr


def test_ram_and_rom_are_the_whole_footprint() -> None:
    f = main_of(report_json(SAMPLES / "mlp.rx"))
    ram, rom = f["ram"], f["rom"]
    assert ram["inputs"] == 8 * 64 * 4 and ram["outputs"] == 8 * 10 * 4
    assert ram["total"] == ram["arena"] + ram["inputs"] + ram["outputs"]
    with np.load(SAMPLES / "mlp.npz") as z:
        weights = sum(z[k].nbytes for k in z.files)
    assert rom["constants"] == rom["total"] == weights and rom["code"] is None
    text = invoke("report", SAMPLES / "mlp.rx").stdout
    assert re.search(r"│ RAM +10\.3 KiB \(10,560 B\)", text)
    assert "│ ROM " in text and "baseline" in text


def test_io_in_arena_counts_the_inputs_in_the_arena_once() -> None:
    f = main_of(report_json(SAMPLES / "relay_memory.rx", "--io-in-arena"))
    assert f["ram"]["inputs"] == f["ram"]["outputs"] == 0
    assert f["ram"]["total"] == f["arena_bytes"]
    plain = main_of(report_json(SAMPLES / "relay_memory.rx"))
    assert f["baseline_bytes"] == plain["baseline_bytes"] + f["inputs_in_arena_bytes"]


def test_a_joined_value_is_labelled_by_its_concat(tmp_path: Path) -> None:
    lines = (SAMPLES / "cnn.rx").read_text().splitlines()
    concat_line = next(i + 1 for i, s in enumerate(lines) if "%cat = concat(" in s)
    for args in ((), ("-p", "none")):
        src = SAMPLES / "cnn.rx"
        if args:
            src = tmp_path / "low.rx"
            shutil.copy(SAMPLES / "cnn.npz", tmp_path / "low.npz")
            assert invoke("build", SAMPLES / "cnn.rx", "-t", "ir", "-o", src).exit_code == 0
        cat = next(b for b in main_of(report_json(src, *args))["buffers"] if b["name"] == "cat")
        assert cat["op"] == "concat"
        if not args:
            assert cat["line"] == concat_line


@pytest.mark.parametrize("sample", ["mlp", "cnn", "transformer"])
def test_the_peak_point_is_the_pictures_peak(sample: str) -> None:
    doc = report_json(SAMPLES / f"{sample}.rx")
    module = Pipeline(assemble_pipeline("vm")).run(
        parse_module((SAMPLES / f"{sample}.rx").read_text(), str(SAMPLES / f"{sample}.rx"))
    )
    reps = {r.name: r for r in memory_report(module)}
    for f in doc["functions"]:
        peak = f["peak"]
        if peak is None:
            assert not f["buffers"]
            continue
        lay = layout(reps[f["name"]])
        assert peak["point"] == lay.cuts[lay.peak]
        assert peak["bytes"] == f["lower_bound"] == lay.live[lay.peak]
        live = {b["name"] for b in f["buffers"] if b["first"] <= peak["point"] <= b["last"]}
        assert set(peak["buffers"]) == live


def test_an_imported_model_names_the_onnx_node_of_each_buffer(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="left"),
        helper.make_node("Sigmoid", ["x"], ["b"], name="right"),
        helper.make_node("Concat", ["a", "b"], ["c"], name="join", axis=1),
        helper.make_node("Relu", ["c"], ["d"], name="after"),
        helper.make_node("Add", ["d", "c"], ["y"], name="out"),
    ]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]))
    model.opset_import[0].version = 13
    onnx.save(model, tmp_path / "m.onnx")
    f = main_of(report_json(tmp_path / "m.onnx"))
    nodes_of = {b["name"]: b["onnx_node"] for b in f["buffers"]}
    assert f["buffers"] and all(n is not None for n in nodes_of.values())
    joined = [b for b in f["buffers"] if b["op"] == "concat"]
    assert joined and joined[0]["onnx_node"] == {"name": "join", "op_type": "Concat"}
    assert f["peak"]["onnx_node"] is not None
    # build --json gives the same document, ONNX nodes included
    r = invoke("build", tmp_path / "m.onnx", "--json", "-t", "ir", "-o", tmp_path / "m.rx")
    assert r.exit_code == 0, r.output
    assert main_of(json.loads(r.stdout)) == f


def _stats_rows(text: str) -> tuple[list[str], list[str]]:
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\s*(measured|promised)\s*│(.*)", line)
        if m:
            rows[m.group(1)] = [c.strip() for c in m.group(2).split("│")]
    return rows["measured"], rows["promised"]


@pytest.mark.parametrize("program, dims", [(CALLS, ("--dim", "n=3")), (RETURNS_CALLEE, ())])
def test_run_stats_count_what_callees_hold(tmp_path: Path, program: str, dims) -> None:
    """Defect 5: a call of a non-primitive function; the promise and the measurement agree
    in every column, and the callee's memory is in them (not 0 B)."""
    path = tmp_path / "p.rx"
    path.write_text(program)
    r = invoke("run", path, "--stats", "-q", *dims)
    assert r.exit_code == 0, r.output
    measured, promised = _stats_rows(r.stdout)
    assert measured == promised
    assert promised[-1] != "0 B"  # the callee's output is counted
    assert "exactly the memory the plan promised" in r.stdout
    assert "not calls of non-primitive functions" not in r.stdout


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 8))
def test_the_promise_of_a_call_is_what_the_vm_holds(n: int) -> None:
    module = Pipeline(assemble_pipeline("vm")).run(parse_module(CALLS, "calls.rx"))
    vm = VirtualMachine(load_bytes(compile_module(module, {}), "calls.rxb"))
    vm.run("main", [np.ones((n, 4), np.float32)])
    pred = predict_memory(module, "main", {"n": n})
    s = vm.stats
    assert pred.complete
    assert (pred.peak, pred.arena_peak, pred.dynamic_peak, pred.output_bytes) == (
        s.working_peak,
        s.kind_peak["arena"],
        s.kind_peak["dynamic"],
        s.kind_peak["external"],
    )


def test_the_report_counts_what_callees_hold(tmp_path: Path) -> None:
    """@main's RAM holds @inner's RAM during the call and its result until the add."""
    (tmp_path / "p.rx").write_text(CALLS)
    doc = report_json(tmp_path / "p.rx")
    inner, main = (next(f for f in doc["functions"] if f["name"] == k) for k in ("inner", "main"))
    assert main["calls"] == 1 and inner["calls"] == 0
    assert main["ram"]["callees"] == inner["ram"]["arena"] + inner["ram"]["outputs"] > 0
    assert main["ram"]["total"] == sum(
        main["ram"][k] for k in ("arena", "unplanned", "callees", "inputs", "outputs")
    )
    # the callee's values are the caller's too: each call counts them again
    assert main["baseline_bytes"] == inner["baseline_bytes"] + 2 * 8 * 4 * 4
