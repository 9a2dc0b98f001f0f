"""ONNX in one step: build, report, run, check and passes take an .onnx and import it in
memory (with import's --shape/--bound), giving what import-then-build gives; misuse points
to the right command."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from relaxc.cli.main import cli  # noqa: E402
from relaxc.frontend.weights import npz_bytes  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def invoke(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def dynamic(tmp_path: Path) -> Path:
    """x[batch, 4] @ W + b, relu: a symbolic batch and two real weights."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal((3,)).astype(np.float32), "B")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["m"]),
            helper.make_node("Add", ["m", "B"], ["a"]),
            helper.make_node("Relu", ["a"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [w, b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "dyn.onnx"
    onnx.save(model, str(path))
    return path


def test_build_onnx_equals_import_then_build(dynamic: Path, tmp_path: Path) -> None:
    direct = invoke("build", dynamic, "--bound", "batch=8", "-t", "ir", "-o", tmp_path / "a.rx")
    assert direct.exit_code == 0, direct.output
    assert not dynamic.with_suffix(".rx").exists() and not dynamic.with_suffix(".npz").exists()
    imported = invoke("import", dynamic, "--bound", "batch=8", "-o", tmp_path / "m.rx", "-q")
    assert imported.exit_code == 0, imported.output
    two_step = invoke("build", tmp_path / "m.rx", "-t", "ir", "-o", tmp_path / "b.rx")
    assert two_step.exit_code == 0, two_step.output
    assert (tmp_path / "a.rx").read_text() == (tmp_path / "b.rx").read_text()
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "m.npz").read_bytes()
    assert direct.stderr.splitlines()[0] == two_step.stderr.splitlines()[0]  # the summary


def test_build_onnx_to_bytecode_and_run_it(dynamic: Path, tmp_path: Path) -> None:
    rxb = tmp_path / "dyn.rxb"
    assert invoke("build", dynamic, "--shape", "x=2,4", "-o", rxb, "-q").exit_code == 0
    run = invoke("run", rxb, "-o", tmp_path / "out.npz", "-q")
    assert run.exit_code == 0, run.output
    direct = invoke("run", dynamic, "--shape", "x=2,4", "--check", "-o", tmp_path / "d.npz")
    assert direct.exit_code == 0, direct.output
    assert "match" in direct.stdout
    with np.load(tmp_path / "out.npz") as a, np.load(tmp_path / "d.npz") as b:
        assert list(a) == list(b) == ["y"]  # the model's output name
        assert a["y"].shape == (2, 3)
        assert a["y"].tobytes() == b["y"].tobytes()


def test_report_onnx_json_is_that_of_the_imported_program(dynamic: Path, tmp_path: Path) -> None:
    direct = invoke("report", dynamic, "--bound", "batch=8", "--json")
    assert direct.exit_code == 0, direct.output
    invoke("import", dynamic, "--bound", "batch=8", "-o", tmp_path / "m.rx", "-q")
    two_step = invoke("report", tmp_path / "m.rx", "--json")
    a, b = json.loads(direct.stdout), json.loads(two_step.stdout)
    assert a["functions"] == b["functions"]


def test_check_and_passes_take_onnx(dynamic: Path) -> None:
    check = invoke("check", dynamic)
    assert check.exit_code == 0 and check.stdout.startswith(f"{dynamic}: ok (1 function(s)")
    passes = invoke("passes", dynamic, "--bound", "batch=8")
    assert passes.exit_code == 0 and "memory.alloc_storage" in passes.stdout


@pytest.mark.skipif(not (LIGHT / "light_squeezenet.onnx").exists(), reason="no model zoo")
def test_a_model_zoo_network_in_one_step(tmp_path: Path) -> None:
    model = LIGHT / "light_squeezenet.onnx"
    report = invoke("report", model, "-q", "--max-arena", "64MiB")
    assert report.exit_code == 0, report.output
    build = invoke("build", model, "-t", "c", "-o", tmp_path / "c")
    assert build.exit_code == 0, build.output
    assert build.stderr.startswith("@main: arena ")
    assert (tmp_path / "c" / "light_squeezenet.c").exists()


def test_shape_and_bound_are_for_onnx_only(tmp_path: Path) -> None:
    rx = Path(__file__).resolve().parents[2] / "samples" / "mlp.rx"
    for command in ("build", "report", "run", "passes"):
        result = invoke(command, rx, "--bound", "n=4")
        assert result.exit_code == 2, command
        assert "--bound is for an ONNX model (FILE.onnx)" in result.stderr, command
    result = invoke("report", rx, "--no-fold-batch-norm")
    assert result.exit_code == 2
    assert "--[no-]fold-batch-norm is for an ONNX model" in result.stderr


def test_fold_batch_norm_is_passed_to_the_importer(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W"),
        *(
            numpy_helper.from_array(rng.uniform(0.5, 1.5, 4).astype(np.float32), name)
            for name in ("scale", "bias", "mean", "var")
        ),
    ]
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        inits,
    )
    model = tmp_path / "cbn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    kept = invoke("passes", model, "--no-fold-batch-norm", "-p", "none")
    folded = invoke("passes", model, "-p", "none")
    assert kept.exit_code == folded.exit_code == 0
    assert "batch_norm(" in kept.stdout
    assert "batch_norm(" not in folded.stdout and "conv2d(" in folded.stdout


def test_params_is_not_for_onnx(dynamic: Path, tmp_path: Path) -> None:
    result = invoke("build", dynamic, "--params", tmp_path / "w.npz")
    assert result.exit_code == 2
    assert "is an ONNX model, which holds its own" in result.stderr


def test_onnx_errors_are_import_errors(dynamic: Path) -> None:
    result = invoke("build", dynamic, "--shape", "nope=1,4")
    assert result.exit_code == 1
    assert "--shape names 'nope', but the model's inputs are x" in result.stderr


def test_import_of_an_rx_says_it_is_not_onnx(tmp_path: Path) -> None:
    rx = tmp_path / "m.rx"
    rx.write_text("fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {\n  return %x\n}\n")
    result = invoke("import", rx)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {rx} is not an ONNX model: it is text: an .rx program")
    assert "relaxc build" in result.stderr and "refusing" not in result.stderr


def test_import_judges_by_content_not_suffix(tmp_path: Path) -> None:
    weights = tmp_path / "w.onnx"
    weights.write_bytes(npz_bytes({"a": np.arange(3.0)}))
    result = invoke("import", weights)
    assert result.exit_code == 1
    assert "is not an ONNX model: it is a zip archive (an .npz of weights?)" in result.stderr
    rxb = tmp_path / "m.rxb"
    assert (
        invoke(
            "build", Path(__file__).resolve().parents[2] / "samples" / "mlp.rx", "-o", rxb, "-q"
        ).exit_code
        == 0
    )
    result = invoke("import", rxb)
    assert "it is relaxc bytecode: relaxc run and relaxc disasm read it" in result.stderr


@pytest.mark.parametrize("command", ["fmt"])
def test_an_rx_only_command_given_onnx_points_to_the_right_one(dynamic: Path, command: str) -> None:
    result = invoke(command, dynamic)
    assert result.exit_code == 1
    assert "is a binary file, not .rx text" in result.stderr
    assert "relaxc build, report, run, check and passes take it directly" in result.stderr
    assert f"relaxc import {dynamic.name} writes it as .rx" in result.stderr


def test_rx_commands_given_bytecode_point_to_run(tmp_path: Path) -> None:
    rx = Path(__file__).resolve().parents[2] / "samples" / "mlp.rx"
    rxb = tmp_path / "m.rxb"
    assert invoke("build", rx, "-o", rxb, "-q").exit_code == 0
    result = invoke("report", rxb)
    assert result.exit_code == 1
    assert "m.rxb is VM bytecode: relaxc run and relaxc disasm read it" in result.stderr


def test_imported_splat_weights_stay_small_and_exact(tmp_path: Path) -> None:
    """A ConstantOfShape weight of 64 MiB (as in the model zoo's light_*.onnx) and one folded
    from it by an elementwise op are both written as a splat: the archive is a few hundred
    bytes, and the program loads the exact values."""
    shape = numpy_helper.from_array(np.array([4096, 4096], np.int64), "shape")
    fill = numpy_helper.from_array(np.array([0.25], np.float32))
    graph = helper.make_graph(
        [
            helper.make_node("ConstantOfShape", ["shape"], ["w"], value=fill),
            helper.make_node("Mul", ["w", "w"], ["w2"]),  # folded at import: a full array
            helper.make_node("Add", ["x", "w"], ["a"]),
            helper.make_node("Add", ["a", "w2"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4096, 4096])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4096, 4096])],
        [shape],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "splat.onnx"
    onnx.save(model, str(path))
    result = invoke("import", path)
    assert result.exit_code == 0, result.output
    npz = tmp_path / "splat.npz"
    assert npz.stat().st_size < 2048
    from relaxc.frontend.weights import load_npz

    weights = load_npz(npz)
    values = sorted(float(a.reshape(-1)[0]) for a in weights.values())
    assert values == [0.0625, 0.25]
    assert all(a.shape == (4096, 4096) and (a == a.reshape(-1)[0]).all() for a in weights.values())


def test_build_ir_of_onnx_writes_the_weights_beside_the_program(
    dynamic: Path, tmp_path: Path
) -> None:
    out = tmp_path / "low.rx"
    result = invoke("build", dynamic, "--bound", "batch=8", "-t", "ir", "-o", out)
    assert result.exit_code == 0, result.output
    assert re.search(
        rf"wrote {re.escape(str(out))} \([^)]+\), {re.escape(str(out.with_suffix('.npz')))} \(",
        result.stderr,
    ), result.stderr
    check = invoke("run", out, "--check", "-q")  # the lowered program finds its weights
    assert check.exit_code == 0, check.output
    to_stdout = invoke("build", dynamic, "--bound", "batch=8", "-t", "ir", "-o", "-")
    assert to_stdout.exit_code == 1 and to_stdout.stdout == ""
    assert "need a file beside the program; give -o FILE.rx" in to_stdout.stderr


def test_report_of_an_onnx_names_its_nodes_in_the_pictures(dynamic: Path, tmp_path: Path) -> None:
    # imported in memory: a program point is named by its ONNX node, not by a line of text
    # that exists nowhere; after relaxc import, by its line of the .rx and the node
    svg = tmp_path / "m.svg"
    r = invoke("report", dynamic, "--bound", "batch=8", "--svg", svg, "-q")
    assert r.exit_code == 0, r.output
    text = svg.read_text()
    assert f"{dynamic.name}: node #0 (MatMul) -&gt; m" in text
    assert re.search(re.escape(dynamic.name) + r":\d", text) is None
    imported = invoke("import", dynamic, "--bound", "batch=8", "-o", tmp_path / "m.rx", "-q")
    assert imported.exit_code == 0, imported.output
    lines = (tmp_path / "m.rx").read_text().split("\n")
    line = 1 + next(k for k, t in enumerate(lines) if t.endswith("# onnx: #0 (MatMul) -> m"))
    two_step = tmp_path / "two.svg"
    assert invoke("report", tmp_path / "m.rx", "--svg", two_step, "-q").exit_code == 0
    assert f"m.rx:{line}, onnx #0 (MatMul) -&gt; m" in two_step.read_text()
