"""The JSON memory report is an interface: every document ``relaxc report --json`` or
``relaxc build --json`` prints follows docs/report.schema.json, with stable types (sizes
integers, symbolic sizes ``{"expr", "bound"}`` objects, shapes lists), the pipeline and the
planner that produced it, and the same bytes on every run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings

from relaxc.cli.main import cli
from relaxc.cli.report.json import SCHEMA_VERSION
from relaxc.frontend.parser import parse_module
from relaxc.ir import dims as D
from relaxc.ir.types import dtype_nbytes
from relaxc.passes.registry import PIPELINES

from tests.strategies import GeneratedProgram, programs

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "samples").glob("*.rx"))
SCHEMA = json.loads((ROOT / "docs" / "report.schema.json").read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def invoke(*args: object):
    return CliRunner().invoke(
        cli, [str(a) for a in args], env={"RELAXC_DEBUG": None}, catch_exceptions=False
    )


def report_json(*args: object) -> dict[str, Any]:
    r = invoke("report", *args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def assert_valid(doc: dict[str, Any]) -> None:
    errors = sorted(VALIDATOR.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])


def copy(src: Path, folder: Path) -> Path:
    shutil.copy(src, folder / src.name)
    if src.with_suffix(".npz").exists():
        shutil.copy(src.with_suffix(".npz"), folder / src.with_suffix(".npz").name)
    return folder / src.name


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["properties"]["schema_version"]["const"] == SCHEMA_VERSION


def test_the_schema_rejects_the_old_loose_types() -> None:
    """A document with a shape string or a size string (what --json printed before schema
    version 1) does not validate: the schema pins the types."""
    doc = report_json(ROOT / "samples" / "mlp.rx")
    bad_shape = json.loads(json.dumps(doc))
    bad_shape["functions"][0]["buffers"][0]["shape"] = "(8, 128)"
    bad_size = json.loads(json.dumps(doc))
    bad_size["functions"][0]["input_bytes"] = "16 * n"
    unknown = json.loads(json.dumps(doc))
    unknown["functions"][0]["surprise"] = 1
    for d in (bad_shape, bad_size, unknown):
        assert not VALIDATOR.is_valid(d)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("target", ["vm", "c"])
def test_every_sample_report_follows_the_schema(sample: Path, target: str) -> None:
    doc = report_json(sample, "-t", target)
    assert_valid(doc)
    assert doc["schema_version"] == SCHEMA_VERSION
    assert [p["name"] for p in doc["pipeline"]] == list(PIPELINES[target])
    assert doc["planner"]["name"] == "best"
    assert all(f["planned"] for f in doc["functions"])


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.stem)
def test_build_json_follows_the_schema_and_is_the_report(sample: Path, tmp_path: Path) -> None:
    src = copy(sample, tmp_path)
    r = invoke("build", src, "-o", tmp_path / "out.rxb", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert_valid(doc)
    assert doc == report_json(src)


def test_the_pipeline_and_planner_say_what_ran(tmp_path: Path) -> None:
    sample = ROOT / "samples" / "cnn.rx"
    doc = report_json(
        sample,
        "--pass-config",
        "PlanMemory.planner=greedy-size",
        "--pass-config",
        "PlanMemory.time_limit=0.5",
        "--disable-pass",
        "ReorderForMemory",
    )
    assert_valid(doc)
    assert "ReorderForMemory" not in [p["name"] for p in doc["pipeline"]]
    plan = next(p for p in doc["pipeline"] if p["name"] == "PlanMemory")
    assert plan["options"]["planner"] == "greedy-size" and plan["options"]["time_limit"] == 0.5
    assert doc["planner"] == {
        "name": "greedy-size",
        "options": {"time_limit": 0.5, "check": False, "io_in_arena": False, "capacity": 0},
    }
    io = report_json(sample, "--io-in-arena")
    assert io["planner"]["options"]["io_in_arena"] is True


def test_an_unplanned_report_says_so_in_json_and_text(tmp_path: Path) -> None:
    src = copy(ROOT / "samples" / "mlp.rx", tmp_path)
    doc = report_json(src, "-p", "none")
    assert_valid(doc)
    assert doc["pipeline"] == [] and doc["planner"] is None
    assert [(f["planned"], f["explicit_memory"]) for f in doc["functions"]] == [(False, False)]
    text = invoke("report", src, "-p", "none").stdout
    assert "planned      NO: no pass made this function's memory explicit" in text
    assert "arena        none (not planned)" in text
    summary = invoke("build", src, "-p", "none", "-t", "ir", "-o", tmp_path / "o.rx").stderr
    assert "@main: not planned" in summary


def test_explicit_memory_that_no_planmemory_planned_is_counted_in_full(tmp_path: Path) -> None:
    """After ManifestAlloc alone every allocation is explicit but none is in an arena: the
    report says it is not planned, and counts every storage in full."""
    src = copy(ROOT / "samples" / "cnn.rx", tmp_path)
    doc = report_json(src, "-p", "ManifestAlloc")
    assert_valid(doc)
    (fn,) = doc["functions"]
    assert (fn["planned"], fn["explicit_memory"], fn["arena_bytes"]) == (False, True, 0)
    planned = report_json(src, "--pass-config", "PlanMemory.planner=none")["functions"][0]
    assert fn["workspace_bytes"] == fn["unplanned_static_bytes"] > planned["arena_bytes"]
    text = invoke("report", src, "-p", "ManifestAlloc").stdout
    assert "planned      no: no PlanMemory ran on this function" in text


def test_planned_ir_reported_again_with_no_passes_is_still_planned(tmp_path: Path) -> None:
    src = copy(ROOT / "samples" / "cnn.rx", tmp_path)
    assert invoke("build", src, "-t", "ir", "-o", tmp_path / "low.rx").exit_code == 0
    again = report_json(tmp_path / "low.rx", "-p", "none")
    assert_valid(again)
    assert again["planner"] is None and all(f["planned"] for f in again["functions"])
    first = report_json(src)
    # the same figures, baseline and labels (the joined value of the elided concat is still
    # a concat); only the source lines are those of the other text
    assert without_lines(again["functions"]) == without_lines(first["functions"])
    assert any(b["op"] == "concat" for b in again["functions"][0]["buffers"])


def without_lines(doc: Any) -> Any:
    """``doc`` without its ``line`` fields."""
    if isinstance(doc, dict):
        return {k: without_lines(v) for k, v in doc.items() if k != "line"}
    if isinstance(doc, list):
        return [without_lines(v) for v in doc]
    return doc


@pytest.mark.parametrize(
    "dims",
    [
        (),
        ("--shape", "data_0=batch,3,224,224", "--bound", "batch=2"),
        ("--shape", "data_0=batch,3,224,224"),
    ],
    ids=["static", "bounded", "unbounded"],
)
def test_an_imported_model_zoo_network_follows_the_schema(tmp_path: Path, dims: tuple) -> None:
    """squeezenet imported as it is, with a bounded batch and with an unbounded one."""
    pytest.importorskip("onnx")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from zoo_models import light_dir

    model = light_dir() / "light_squeezenet.onnx"
    out = tmp_path / "squeezenet.rx"
    r = invoke("import", model, "-o", out, "-q", *dims)
    assert r.exit_code == 0, r.output
    doc = report_json(out)
    assert_valid(doc)
    (fn,) = doc["functions"]
    assert fn["planned"] and fn["explicit_memory"]
    image = 3 * 224 * 224 * 4
    if not dims:
        assert fn["input_bytes"] == {"expr": str(image), "bound": image}
        assert all(isinstance(d, int) for b in fn["buffers"] for d in b["shape"])
    elif "--bound" in dims:
        assert fn["input_bytes"] == {"expr": f"{image} * batch", "bound": 2 * image}
        assert fn["dynamic"] == [] and fn["arena_bytes"] >= fn["lower_bound"] > 0
        assert all(b["shape"][0] == "batch" for b in fn["buffers"])
    else:
        assert fn["input_bytes"] == {"expr": f"{image} * batch", "bound": None}
        assert fn["buffers"] == [] and fn["dynamic"]
        assert all(d["size"]["bound"] is None for d in fn["dynamic"])


BOUNDED = """\
fn @main(%x: Tensor[(n, 16), f32]) -> Tensor[(n, 16), f32]
    attrs {upper_bounds = {n = 8}} {
  %a = relu(%x)
  %b = add(%a, %a)
  %c = relu(%b)
  return %c
}
"""


def test_bounded_and_unbounded_dims_have_the_same_types(tmp_path: Path) -> None:
    """The same program with and without an upper bound: both validate; the bounded one has
    integer bounds and its buffers placed with symbolic shapes, the unbounded one null bounds
    and dynamic storages whose sizes are objects."""
    (tmp_path / "b.rx").write_text(BOUNDED, encoding="utf-8")
    (tmp_path / "u.rx").write_text(
        BOUNDED.replace("\n    attrs {upper_bounds = {n = 8}}", ""), encoding="utf-8"
    )
    opts = ("--disable-pass", "ElideConcatSplit,ComputeInPlace")
    (b,) = report_json(tmp_path / "b.rx", *opts)["functions"]
    (u,) = report_json(tmp_path / "u.rx", *opts)["functions"]
    for f in (b, u):
        assert_valid({**report_json(tmp_path / "b.rx"), "functions": [f]})
    assert b["input_bytes"] == {"expr": "64 * n", "bound": 8 * 16 * 4}
    assert u["input_bytes"] == {"expr": "64 * n", "bound": None}
    assert b["dynamic"] == [] and b["buffers"]
    assert all(buf["shape"] == ["n", 16] and buf["bytes"] == 512 for buf in b["buffers"])
    assert u["buffers"] == [] and u["arena_bytes"] == 0 and u["dynamic"]
    assert all(d["size"] == {"expr": "64 * n", "bound": None} for d in u["dynamic"])


def _expected_input_bytes(text: str) -> tuple[set[str], int | None]:
    """The free dims of @main's parameters, and their bytes at @main's upper bounds (None
    when a dim has none), computed from the parsed program without the report."""
    fn = next(f for f in parse_module(text).functions if f.name == "main")
    bounds = fn.upper_bounds()
    names: set[str] = set()
    total = 0
    for p in fn.params:
        shape = p.type.shape
        for d in shape:
            names |= D.free_vars(d)
        if not names <= set(bounds):
            continue
        n = dtype_nbytes(p.type.dtype)
        for d in shape:
            n *= D.evaluate(d, bounds)
        total += n
    return names, (total if names <= set(bounds) else None)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(prog=programs(max_ops=8))
def test_random_programs_report_stable_types(prog: GeneratedProgram, tmp_path: Path) -> None:
    """For any program (static, bounded or unbounded dims), the document validates, every
    byte count is an integer, the input size's bound is the parameters' bytes at the upper
    bounds (null exactly when a dim is unbounded), and a static size's expression is its
    number."""
    path = tmp_path / "p.rx"
    path.write_text(prog.text, encoding="utf-8")
    doc = report_json(path)
    assert_valid(doc)
    main = next(f for f in doc["functions"] if f["name"] == "main")
    free, want = _expected_input_bytes(prog.text)
    assert main["input_bytes"]["bound"] == want
    if not free:
        assert main["input_bytes"]["expr"] == str(want)
    for f in doc["functions"]:
        for key in ("arena_bytes", "workspace_bytes", "lower_bound"):
            assert type(f[key]) is int
        assert f["workspace_bytes"] == f["arena_bytes"] + f["unplanned_static_bytes"]
        ram = f["ram"]
        parts = [ram[k] for k in ("arena", "unplanned", "callees", "inputs", "outputs")]
        if ram["total"] is not None:
            assert ram["total"] == sum(parts)
        if None in parts or f["dynamic"]:
            assert ram["total"] is None
        assert f["rom"]["total"] == f["rom"]["constants"] == f["constant_bytes"]
        if f["peak"] is not None:
            assert f["peak"]["bytes"] == f["lower_bound"]
        assert all(type(b["bytes"]) is int and type(b["offset"]) is int for b in f["buffers"])
        assert all(d["size"]["bound"] is None for d in f["dynamic"])
        for b in f["buffers"]:
            assert b["offset"] + b["bytes"] <= f["arena_bytes"]


def test_json_is_byte_identical_across_processes(tmp_path: Path) -> None:
    """Two processes with different hash seeds print the same bytes."""
    src = copy(ROOT / "samples" / "transformer.rx", tmp_path)
    outs = []
    for seed in ("1", "2"):
        r = subprocess.run(
            [sys.executable, "-m", "relaxc.cli.main", "report", str(src), "--json"],
            capture_output=True,
            env={**os.environ, "PYTHONHASHSEED": seed, "RELAXC_DEBUG": ""},
            cwd=tmp_path,
            check=True,
        )
        outs.append(r.stdout)
    assert outs[0] == outs[1] and outs[0].startswith(b'{\n  "schema_version": 2,')


def test_docs_name_every_key_of_the_schema() -> None:
    """docs/report.md's JSON section lists each key the schema defines, and no other."""
    text = (ROOT / "docs" / "report.md").read_text(encoding="utf-8")
    section = text[text.index("## JSON") : text.index("## The timeline")]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    documented = {k for line in rows for k in line.split("|")[1].replace("`", "").split(", ")}
    documented = {k.strip() for k in documented}
    keys = set(SCHEMA["properties"]) | set(SCHEMA["$defs"]["function"]["properties"])
    assert documented == keys
