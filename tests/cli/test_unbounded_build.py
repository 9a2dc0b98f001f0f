"""Memory a dim without an upper bound leaves unplanned is an error at ``relaxc build``
(issue 28, item 2): exit 1, nothing written, naming the dim, where it comes from (the ONNX
input and axis, or the parameter of an .rx) and the exact way to bound it (``--bound N=...``
for an ONNX model, ``attrs {upper_bounds = ...}`` for an .rx); ``--allow-unbounded`` asks for
the build with a warning (not for -t c); ``relaxc report`` says such totals are unbounded."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from click.testing import CliRunner

from relaxc.cli.main import cli

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from relaxc.frontend.onnx import import_onnx  # noqa: E402


def invoke(*args: object):
    return CliRunner().invoke(
        cli, [str(a) for a in args], env={"RELAXC_DEBUG": None}, catch_exceptions=False
    )


def rx_program(tmp_path: Path, bounds: dict[str, int]) -> Path:
    """relu of x[a, b], then exp and an add: allocations of 4 * a * b bytes."""
    attrs = ""
    if bounds:
        items = ", ".join(f"{k} = {v}" for k, v in sorted(bounds.items()))
        attrs = f"\n    attrs {{upper_bounds = {{{items}}}}}"
    path = tmp_path / "two_dims.rx"
    path.write_text(
        f"fn @main(%x: Tensor[(a, b), f32]) -> Tensor[(a, b), f32]{attrs} {{\n"
        "  %r = relu(%x)\n  %e = exp(%r)\n  %y = add(%r, %e)\n  return %y\n}\n"
    )
    return path


def onnx_model(tmp_path: Path) -> Path:
    """Two inputs with the dim 'batch', each through Relu and Exp (its own outputs)."""
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["rx"]),
            helper.make_node("Exp", ["rx"], ["y"]),
            helper.make_node("Relu", ["z"], ["rz"]),
            helper.make_node("Exp", ["rz"], ["w"]),
        ],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 4]),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("w", TensorProto.FLOAT, ["batch", 4]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "dyn.onnx"
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize(
    "bounded", [set(c) for n in range(3) for c in itertools.combinations("ab", n)]
)
@pytest.mark.parametrize("target", ["vm", "c", "ir"])
def test_rx_build_fails_exactly_when_a_dim_is_unbounded(
    tmp_path: Path, bounded: set[str], target: str
) -> None:
    src = rx_program(tmp_path, {d: 8 for d in bounded})
    out = tmp_path / ("out" if target == "c" else "out.rx" if target == "ir" else "out.rxb")
    r = invoke("build", src, "-t", target, "-o", out)
    missing = sorted({"a", "b"} - bounded)
    if not missing:
        assert r.exit_code == 0, r.output
        assert out.exists()
        return
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output and not out.exists()  # nothing written
    assert "error: @main's memory cannot be planned" in r.stderr
    for d in missing:  # each unbounded dim, where it comes from, and how to bound it
        axis = "ab".index(d)
        assert f"{d} (axis {axis} of %x)" in r.stderr
        assert f"{d} = ..." in r.stderr
    for d in bounded:
        assert f"{d} (axis" not in r.stderr
    assert "attrs {upper_bounds = {" in r.stderr and "--bound" not in r.stderr
    assert ("--allow-unbounded" in r.stderr) is (target != "c")  # no way around it for C


def test_allow_unbounded_builds_with_a_warning(tmp_path: Path) -> None:
    src = rx_program(tmp_path, {"a": 8})
    out = tmp_path / "out.rxb"
    r = invoke("build", src, "-o", out, "--allow-unbounded")
    assert r.exit_code == 0, r.output
    assert out.exists()
    assert "warning: @main: the dim b (axis 1 of %x) has no upper bound" in r.stderr
    quiet = invoke("build", src, "-o", out, "--allow-unbounded", "-q")
    assert quiet.exit_code == 0 and quiet.output == ""
    c = invoke("build", src, "-t", "c", "-o", tmp_path / "c", "--allow-unbounded")
    assert c.exit_code == 1 and not (tmp_path / "c").exists()
    assert "the C target needs every allocation in static memory" in c.stderr


def test_onnx_build_names_the_input_and_the_flag(tmp_path: Path) -> None:
    model = onnx_model(tmp_path)
    for target, out in (("vm", tmp_path / "m.rxb"), ("c", tmp_path / "c")):
        r = invoke("build", model, "-t", target, "-o", out)
        assert r.exit_code == 1, r.output
        assert not out.exists()
        assert "the dim batch (axis 0 of the ONNX input 'x') has no upper bound" in r.stderr
        assert "--bound batch=..." in r.stderr and "upper_bounds" not in r.stderr
    ok = invoke("build", model, "-o", tmp_path / "m.rxb", "--bound", "batch=4")
    assert ok.exit_code == 0, ok.output
    c = invoke("build", model, "-t", "c", "-o", tmp_path / "c", "--allow-unbounded")
    assert c.exit_code == 1 and "--bound batch=..." in c.stderr


def test_onnx_shape_override_is_traced_to_its_input(tmp_path: Path) -> None:
    """A dim made by --shape comes from the first input given it: 'x', axis 1."""
    r = invoke(
        "build", onnx_model(tmp_path), "-o", tmp_path / "m.rxb",
        "--shape", "x=2,n", "--shape", "z=2,n",
    )  # fmt: skip
    assert r.exit_code == 1, r.output
    assert "the dim n (axis 1 of the ONNX input 'x')" in r.stderr and "--bound n=..." in r.stderr


def test_the_importer_keeps_where_each_dim_comes_from(tmp_path: Path) -> None:
    result = import_onnx(onnx_model(tmp_path), input_shapes={"z": ["batch", "seq"]})
    assert result.dim_origins == {"batch": ("x", 0), "seq": ("z", 1)}


def test_report_says_the_totals_are_unbounded(tmp_path: Path) -> None:
    src = rx_program(tmp_path, {"a": 8})
    r = invoke("report", src)
    assert r.exit_code == 0, r.output
    assert "note: @main's totals are unbounded, not the bytes shown" in r.stderr
    assert "the dim b (axis 1 of %x)" in r.stderr
    as_json = invoke("report", src, "--json")  # the JSON's "dynamic" says it; stderr is quiet
    assert as_json.exit_code == 0 and as_json.stderr == ""
    bounded = invoke("report", rx_program(tmp_path, {"a": 8, "b": 4}))
    assert bounded.exit_code == 0 and "unbounded" not in bounded.stderr
    onnx_report = invoke("report", onnx_model(tmp_path))
    assert "--bound batch=..." in onnx_report.stderr


def test_the_budget_hint_names_the_programs_own_dims(tmp_path: Path) -> None:
    """The --max-arena note named a dim 'n' the model does not have (issue 28)."""
    r = invoke("report", onnx_model(tmp_path), "--max-arena", "1MiB")
    assert r.exit_code == 1
    assert "--bound batch=..." in r.stderr and "n=64" not in r.stderr
