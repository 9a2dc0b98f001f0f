"""--print-pipeline (the resolved pipeline, a spec -p reads back), --disabled-pass (tvmc's
spelling of --disable-pass) and --time-passes over every step of a command."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.cli.main import cli
from relaxc.cli.pipeline_opts import pipeline_spec
from relaxc.passes.assemble import assemble_pipeline

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def invoke(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def printed(*args: object) -> str:
    result = invoke("passes", "--print-pipeline", *args)
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("\n") and result.stdout.count("\n") == 1
    return result.stdout.strip()


def test_print_pipeline_names_every_pass_with_every_option() -> None:
    spec = printed("-t", "c")
    names = [p.name for p in assemble_pipeline("c")]
    assert [part.split("{")[0] for part in re.split(r",(?![^{]*\})", spec)] == names
    plan_memory = "PlanMemory{planner=best time_limit=2.0 check=false io_in_arena=false capacity=0}"
    assert plan_memory in spec
    assert spec.endswith("LegalizePackedCalls")


def test_print_pipeline_applies_the_options() -> None:
    spec = printed(
        "--disable-pass",
        "ReorderForMemory",
        "--pass-config",
        "PlanMemory.planner=greedy-size",
        "--io-in-arena",
    )
    assert not spec.startswith("ReorderForMemory")
    assert (
        "PlanMemory{planner=greedy-size time_limit=2.0 check=false io_in_arena=true capacity=0}"
        in spec
    )
    assert printed("-p", "none") == "none"


def test_print_pipeline_in_build_and_report_reads_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "absent.rx"  # never opened: only the pipeline is printed
    for command in ("build", "report"):
        result = invoke(command, missing, "--print-pipeline", "-t", "c")
        assert result.exit_code == 0, result.output
        assert result.stdout.strip() == printed("-t", "c")
    assert not list(tmp_path.iterdir())


def test_build_unpacked_prints_the_pipeline_without_legalize(tmp_path: Path) -> None:
    result = invoke("build", tmp_path / "m.rx", "-t", "c", "--unpacked", "--print-pipeline")
    assert result.exit_code == 0, result.output
    assert "LegalizePackedCalls" not in result.stdout


@settings(max_examples=25, deadline=None)
@given(
    target=st.sampled_from(["vm", "c"]),
    planner=st.sampled_from(["none", "greedy-size", "greedy-conflict", "best"]),
    check=st.booleans(),
    align=st.sampled_from([16, 64, 256]),
    drop=st.sets(st.sampled_from(["ReorderForMemory", "ComputeInPlace", "ElideConcatSplit"])),
)
def test_the_printed_spec_reads_back_to_the_same_pipeline(
    target: str, planner: str, check: bool, align: int, drop: set[str]
) -> None:
    configs = (
        f"PlanMemory.planner={planner}",
        f"PlanMemory.check={str(check).lower()}",
        f"ManifestAlloc.align={align}",
    )
    passes = assemble_pipeline(target, None, tuple(sorted(drop)), configs)
    spec = pipeline_spec(passes)
    assert assemble_pipeline(target, spec) == passes
    assert pipeline_spec(assemble_pipeline(target, spec)) == spec


def test_disabled_pass_is_an_alias_of_disable_pass() -> None:
    a = invoke("passes", SAMPLES / "mlp.rx", "--disable-pass", "ReorderForMemory,ComputeInPlace")
    b = invoke("passes", SAMPLES / "mlp.rx", "--disabled-pass", "ReorderForMemory,ComputeInPlace")
    assert a.exit_code == b.exit_code == 0
    assert a.stdout == b.stdout
    assert a.stdout != invoke("passes", SAMPLES / "mlp.rx").stdout  # it did disable something
    assert "--disabled-pass" in invoke("build", "--help").stdout


def test_disabled_pass_errors_like_disable_pass() -> None:
    result = invoke("passes", SAMPLES / "mlp.rx", "--disabled-pass", "LegalizePackedCalls")
    assert result.exit_code == 1
    assert "LegalizePackedCalls is not in the pipeline" in result.stderr


def _steps(stderr: str) -> list[tuple[str, str]]:
    rows = re.findall(r"^\s*\d+\s*│\s*(\w+)\s*│\s*([^│]*?)\s*│\s*[0-9.]+\s*$", stderr, re.M)
    return [(k, n) for k, n in rows]


def test_time_passes_covers_codegen_and_writing(tmp_path: Path) -> None:
    out = tmp_path / "m.rxb"
    result = invoke("build", SAMPLES / "mlp.rx", "-o", out, "--time-passes", "-q")
    assert result.exit_code == 0, result.output
    kinds = [k for k, _ in _steps(result.stderr)]
    assert kinds[:3] == ["parse", "verify", "weights"]
    assert kinds[-3:] == ["report", "codegen", "write"]
    assert ("write", out.name) in _steps(result.stderr)
    c = invoke("build", SAMPLES / "mlp.rx", "-t", "c", "-o", tmp_path / "c", "--time-passes")
    assert ("codegen", "C code") in _steps(c.stderr)


def test_time_passes_shows_the_import_of_an_onnx_model(tmp_path: Path) -> None:
    import pytest

    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    path = tmp_path / "r.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    result = invoke("report", path, "--time-passes", "-q")
    assert result.exit_code == 0, result.output
    # the imported IR's locations name its ONNX nodes: nothing is printed and parsed back
    assert _steps(result.stderr)[:2] == [("import", "r.onnx"), ("verify", "")]
    built = invoke("build", path, "-t", "ir", "-o", tmp_path / "r.rx", "--time-passes", "-q")
    assert _steps(built.stderr)[:2] == [("import", "r.onnx"), ("verify", "")]


def test_report_reads_only_the_weight_headers(tmp_path: Path) -> None:
    result = invoke("report", SAMPLES / "mlp.rx", "--time-passes", "-q")
    assert ("weights", "headers") in _steps(result.stderr)


def test_max_arena_asks_plan_memory_for_that_capacity(tmp_path: Path) -> None:
    # --max-arena is a check, and the capacity PlanMemory's planner is asked to fit first;
    # --pass-config PlanMemory.capacity wins over it; without PlanMemory it sets nothing.
    def spec(*args: object) -> str:
        result = invoke("build", SAMPLES / "mlp.rx", "--print-pipeline", *args)
        assert result.exit_code == 0, result.output
        return result.stdout.strip()

    assert "io_in_arena=false capacity=0}" in spec()
    assert "io_in_arena=false capacity=8192}" in spec("--max-arena", "8KiB")
    assert "capacity=4096}" in spec(
        "--max-arena", "8KiB", "--pass-config", "PlanMemory.capacity=4096"
    )
    assert spec("--max-arena", "8KiB", "-p", "ManifestAlloc") == "ManifestAlloc{align=64}"
    report = invoke("report", SAMPLES / "mlp.rx", "--max-arena", "8KiB", "--print-pipeline")
    assert report.exit_code == 0 and "capacity=8192}" in report.stdout


def test_a_negative_capacity_is_a_clear_error() -> None:
    result = CliRunner().invoke(
        cli, ["build", str(SAMPLES / "mlp.rx"), "--pass-config", "PlanMemory.capacity=-1"]
    )
    assert result.exit_code == 1
    assert "capacity=-1 must be a number of bytes, 0 or more" in result.stderr
    assert "Traceback" not in result.output
