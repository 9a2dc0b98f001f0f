"""relaxc import from the command line: what it writes, that the result builds and runs with
onnxruntime's numbers, and its usage errors."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from relaxc.cli.main import cli
from relaxc.frontend.weights import load_npz

from ..frontend.onnx.models import attention_block, conv_branches
from ..frontend.onnx.util import assert_matches, helper, make_model, run_ort, save


def invoke(*args: object):
    return CliRunner().invoke(
        cli,
        [str(a) for a in args],
        env={"RELAXC_DEBUG": None},
        prog_name="relaxc",
        catch_exceptions=False,
    )


def assert_user_error(result, *needles: str, code: int = 1) -> None:
    assert result.exit_code == code, f"exit {result.exit_code}:\n{result.output}"
    for n in needles:
        assert n in result.stderr, f"{n!r} not in:\n{result.stderr}"
    assert "Traceback" not in result.output and "internal error" not in result.output


def test_import_build_run_matches_onnxruntime(tmp_path: Path) -> None:
    model, feeds = conv_branches()
    onnx_path = save(model, tmp_path, "net.onnx")
    r = invoke("import", onnx_path)
    assert r.exit_code == 0, r.output
    rx, npz = tmp_path / "net.rx", tmp_path / "net.npz"
    assert f"wrote {rx}" in r.stderr and "weights" in r.stderr
    text = rx.read_text()
    assert text.startswith("# Imported from net.onnx (ONNX opset 13, made by relaxc-tests")
    # stem: Conv + BatchNormalization, folded into one convolution at import
    assert set(load_npz(npz)) >= {"stem.weight.bn_folded", "fc.w"}
    np.savez(tmp_path / "inputs.npz", image=feeds["image"])
    assert invoke("build", rx, "-q").exit_code == 0
    r = invoke(
        "run",
        tmp_path / "net.rxb",
        "--inputs",
        tmp_path / "inputs.npz",
        "-o",
        tmp_path / "out.npz",
        "--poison",
    )
    assert r.exit_code == 0, r.output
    with np.load(tmp_path / "out.npz") as out:  # under the model's output name
        assert list(out) == [o.name for o in model.graph.output]
        got = out[model.graph.output[0].name]
    assert_matches([got], run_ort(model, feeds), "relaxc run")
    # The written text is canonical: fmt leaves it alone.
    assert invoke("fmt", "--check", rx).exit_code == 0


def test_import_is_byte_identical_when_repeated(tmp_path: Path) -> None:
    model, _ = attention_block()
    onnx_path = save(model, tmp_path)
    outs = []
    for k in range(2):
        r = invoke("import", onnx_path, "-o", tmp_path / f"m{k}.rx", "--bound", "seq=64")
        assert r.exit_code == 0, r.output
        outs.append(((tmp_path / f"m{k}.rx").read_bytes(), (tmp_path / f"m{k}.npz").read_bytes()))
    assert outs[0] == outs[1]
    assert b"upper_bounds = {seq = 64}" in outs[0][0]


def test_symbolic_dims_are_noted_and_shapes_can_be_overridden(tmp_path: Path) -> None:
    model, _ = attention_block()
    onnx_path = save(model, tmp_path)
    r = invoke("import", onnx_path)
    assert r.exit_code == 0 and "note: Symbolic dims without an upper bound: seq" in r.stderr
    r = invoke("import", onnx_path, "-o", tmp_path / "fixed.rx", "--shape", "x=1,7,16", "-q")
    assert r.exit_code == 0 and r.stderr == ""
    assert "%x: Tensor[(1, 7, 16), f32]" in (tmp_path / "fixed.rx").read_text()


def test_outputs_never_overwrite_the_input(tmp_path: Path) -> None:
    model = make_model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [("x", np.float32, [2])],
        [("y", np.float32, None)],
    )
    weird = save(model, tmp_path, "model.npz")  # an ONNX file that happens to end in .npz
    before = weird.read_bytes()
    assert_user_error(
        invoke("import", weird, "-o", tmp_path / "model.rx"),
        "refusing to write",
        "one of the inputs",
    )
    assert weird.read_bytes() == before and not (tmp_path / "model.rx").exists()
    assert_user_error(invoke("import", weird, "-o", tmp_path / "out.txt"), "must end in .rx")


@pytest.mark.parametrize(
    "args, needles, code",
    [
        (["--shape", "x"], ["NAME=D1,D2"], 2),
        (["--shape", "x=1,-2"], ["cannot be negative"], 2),
        (["--shape", "x=1,a+b"], ["neither a size nor a dim name"], 2),
        (["--shape", "x=1", "--shape", "x=2"], ["given twice"], 2),
        (["--bound", "seq"], ["NAME=VALUE"], 2),
        (["--bound", "seq=big"], ["not an integer"], 2),
        (["--bound", "nope=4"], ["--bound names 'nope'"], 1),
        (["--shape", "nope=1"], ["--shape names 'nope'"], 1),
    ],
)
def test_bad_options(tmp_path: Path, args: list[str], needles: list[str], code: int) -> None:
    model, _ = attention_block()
    onnx_path = save(model, tmp_path)
    assert_user_error(invoke("import", onnx_path, *args), *needles, code=code)
    assert not (tmp_path / "model.rx").exists() and not (tmp_path / "model.npz").exists()


def test_bad_files(tmp_path: Path) -> None:
    assert_user_error(invoke("import", tmp_path / "missing.onnx"), "does not exist")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x08\x07garbage" * 50)
    assert_user_error(invoke("import", junk), "not an ONNX model")
    assert not (tmp_path / "junk.rx").exists()


def test_unsupported_operators_exit_1_without_traceback(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("NonZero", ["a"], ["y"], name="hs"),
    ]
    model = make_model(nodes, [("x", np.float32, [2, 2])], [("y", np.int64, None)], opset=14)
    r = subprocess.run(
        [sys.executable, "-m", "relaxc.cli.main", "import", str(save(model, tmp_path))],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1, r.stderr
    assert "NonZero (its output shape depends on tensor values" in r.stderr
    assert "node 'hs')" in r.stderr and "supported:" in r.stderr
    assert "Traceback" not in r.stderr


def test_dims_named_like_dtypes_or_keywords_stay_dims(tmp_path: Path) -> None:
    """Regression (found by tests/hostile): --shape x=f32,4 wrote an .rx that did not parse."""
    model = make_model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [("x", np.float32, ["inf", 4])],
        [("y", np.float32, None)],
    )
    onnx_path = save(model, tmp_path)
    r = invoke("import", onnx_path, "--shape", "x=f32,4", "--bound", "f32=8", "-q")
    assert r.exit_code == 0, r.output
    assert invoke("check", tmp_path / "model.rx").exit_code == 0
    assert "upper_bounds = {f32_ = 8}" in (tmp_path / "model.rx").read_text()
    assert (
        invoke("import", onnx_path, "-o", tmp_path / "b.rx", "-q").exit_code == 0
    )  # dim_param "inf"
    assert "Tensor[(inf_, 4), f32]" in (tmp_path / "b.rx").read_text()


def test_huge_sizes_are_user_errors(tmp_path: Path) -> None:
    """Regression (found by tests/hostile): they were reported as importer bugs."""
    model, _ = attention_block()
    onnx_path = save(model, tmp_path)
    assert_user_error(
        invoke("import", onnx_path, "--shape", "x=1,99999999999999999999,16"), "the model's inputs"
    )
    r = invoke("import", onnx_path, "--bound", "seq=99999999999999999999999")
    assert_user_error(r, "the model's inputs", "limit")
    assert "bug" not in r.stderr


def test_a_device_is_not_read(tmp_path: Path) -> None:
    """Regression (found by tests/hostile): relaxc import /dev/zero read forever."""
    assert_user_error(invoke("import", "/dev/zero", "-o", tmp_path / "z.rx"), "not a regular file")


def test_import_names_each_statement_s_onnx_node_and_the_report_maps_back(tmp_path: Path) -> None:
    model, _ = conv_branches()
    nodes = {n.name: n.op_type for n in model.graph.node}
    onnx_path = save(model, tmp_path, "net.onnx")
    assert invoke("import", onnx_path, "-q").exit_code == 0
    rx = tmp_path / "net.rx"
    lines = rx.read_text().splitlines()
    named = re.findall(r"  # onnx: '([^']+)' \((\w+)\)$", "\n".join(lines), re.M)
    assert named and all(nodes[name] == op for name, op in named)
    assert ("Conv_1", "Conv") in named and ("Relu_3", "Relu") in named
    assert not any("const(" in line and "# onnx:" in line for line in lines)  # weights: no node
    # the written file is already canonical, comments included: fmt changes nothing
    assert invoke("fmt", "--check", rx).exit_code == 0
    svg, page = tmp_path / "net.svg", tmp_path / "net.html"
    assert invoke("report", rx, "--svg", svg, "--html", page).exit_code == 0
    conv_line = next(k for k, line in enumerate(lines, 1) if "# onnx: 'Conv_1' (Conv)" in line)
    assert f"net.rx:{conv_line}, onnx 'Conv_1' (Conv)" in html.unescape(svg.read_text())
    assert f"net.rx:{conv_line}, onnx 'Conv_1' (Conv)" in html.unescape(page.read_text())


def test_nodes_without_names_are_named_by_index_and_output(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["h"]),
        helper.make_node("Exp", ["h"], ["y"], name=""),
    ]
    model = make_model(nodes, [("x", np.float32, [2, 3])], [("y", np.float32, [2, 3])])
    assert invoke("import", save(model, tmp_path, "m.onnx"), "-q").exit_code == 0
    text = (tmp_path / "m.rx").read_text()
    assert "  # onnx: #0 (Relu) -> h\n" in text and "  # onnx: #1 (Exp) -> y\n" in text


def test_node_comments_only_when_the_lines_match_the_statements() -> None:
    import dataclasses

    from relaxc.frontend.onnx import import_onnx
    from relaxc.frontend.parser import parse_module
    from relaxc.frontend.printer import print_module

    model, _ = conv_branches()
    result = import_onnx(model)
    text = result.text("net.onnx")
    body = [line for line in text.splitlines() if line.startswith("  %")]
    assert len(body) == len(result.module.functions[0].body)
    for line in body:  # every statement a node made says which; weights do not
        assert ("# onnx: '" in line) != (" = const(" in line), line
    assert parse_module(text, "net.rx") == result.module  # comments change nothing
    wrong = dataclasses.replace(result, origins=result.origins[:-1])
    assert wrong.text("net.onnx") == result.header("net.onnx") + print_module(result.module)
