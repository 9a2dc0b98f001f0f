"""ONNX names end to end: the model's input and output names (which may hold any character)
are kept in the program (``onnx_inputs``/``onnx_outputs``), in the .rxb and in the C header;
``relaxc run`` reads an onnxruntime user's feeds and writes outputs under the model's names;
an imported model's locations name its ONNX nodes; an .onnx is recognised by parsing it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.backend.vm import compile_module, load_bytes
from relaxc.cli.main import cli
from relaxc.frontend.parser import parse_module
from relaxc.frontend.printer import print_module
from relaxc.ir.diagnostics import RxError, render_error
from relaxc.ir.io_names import dim_sources, onnx_input_names, onnx_output_names
from relaxc.ir.verifier import verify_module

from .util import helper, import_onnx, make_model, onnx, run_ort, save

INPUTS = ("in/put:0", "b.bias")
OUTPUTS = ("out/relu:0", "out.sum")


def invoke(*args: object):
    return CliRunner().invoke(
        cli, [str(a) for a in args], env={"RELAXC_DEBUG": None}, prog_name="relaxc"
    )


def names_model():
    """relu(x + b) and (that + x), its names full of '/', ':' and '.', one node unnamed."""
    return make_model(
        [
            helper.make_node("Add", ["in/put:0", "b.bias"], ["mid/add:0"], name="block/add"),
            helper.make_node("Relu", ["mid/add:0"], ["out/relu:0"], name="block/relu"),
            helper.make_node("Add", ["out/relu:0", "in/put:0"], ["out.sum"]),
        ],
        [("in/put:0", np.float32, ["N", 3]), ("b.bias", np.float32, [1, 3])],
        [("out/relu:0", np.float32, None), ("out.sum", np.float32, None)],
        name="tiny/graph",
    )


def feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "in/put:0": rng.standard_normal((2, 3)).astype(np.float32),
        "b.bias": rng.standard_normal((1, 3)).astype(np.float32),
    }


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    return save(names_model(), tmp_path, "names.onnx")


def test_the_program_keeps_the_names_and_fmt_keeps_them(model_file: Path) -> None:
    rx = model_file.with_suffix(".rx")
    assert invoke("import", model_file, "-q").exit_code == 0
    fn = parse_module(rx.read_text()).functions[0]
    assert [p.name for p in fn.params] == ["in_put_0", "b_bias"]  # IR names are identifiers
    assert onnx_input_names(fn) == INPUTS and onnx_output_names(fn) == OUTPUTS
    assert invoke("fmt", "--check", rx).exit_code == 0  # the canonical form holds them


@pytest.mark.parametrize("form", ["onnx", "rx", "rxb"])
def test_run_takes_onnxruntime_feeds_and_writes_the_model_output_names(
    model_file: Path, tmp_path: Path, form: str
) -> None:
    np.savez(tmp_path / "feeds.npz", **feeds())  # as an onnxruntime user has them
    target = model_file
    if form != "onnx":
        assert invoke("import", model_file, "--bound", "N=4", "-q").exit_code == 0
        target = model_file.with_suffix(".rx")
    if form == "rxb":
        assert invoke("build", target, "-q").exit_code == 0
        target = target.with_suffix(".rxb")
    bound = ("--bound", "N=4") if form == "onnx" else ()
    out = tmp_path / f"out_{form}.npz"
    r = invoke("run", target, *bound, "--inputs", tmp_path / "feeds.npz", "-o", out, "-q")
    assert r.exit_code == 0, r.output
    want = run_ort(names_model(), feeds())
    with np.load(out) as got:
        assert sorted(got) == sorted(OUTPUTS)  # (an .npz lists its members sorted)
        for name, w in zip(OUTPUTS, want):
            np.testing.assert_array_equal(got[name], w)  # add and relu are exact


def test_the_ir_names_still_work_and_mistakes_are_named_both_ways(
    model_file: Path, tmp_path: Path
) -> None:
    f = feeds()
    np.savez(tmp_path / "ir.npz", in_put_0=f["in/put:0"], b_bias=f["b.bias"])
    np.savez(tmp_path / "mixed.npz", in_put_0=f["in/put:0"], **{"b.bias": f["b.bias"]})
    for npz in ("ir.npz", "mixed.npz"):
        r = invoke("run", model_file, "--inputs", tmp_path / npz, "-o", tmp_path / "o.npz", "-q")
        assert r.exit_code == 0, r.output
    np.savez(tmp_path / "bad.npz", in_put_0=f["in/put:0"], **{"in/put:0": f["in/put:0"]})
    r = invoke("run", model_file, "--inputs", tmp_path / "bad.npz")
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert "missing 'b.bias' (%b_bias)" in r.stderr
    assert "given 'in/put:0' (%in_put_0) twice (as 'in/put:0' and in_put_0)" in r.stderr
    assert "note: @main takes: 'in/put:0' (%in_put_0), 'b.bias' (%b_bias)" in r.stderr


def test_an_onnx_name_that_is_another_inputs_ir_name_means_the_onnx_input(
    tmp_path: Path,
) -> None:
    # 'a.b' and 'a_b' both sanitize to a_b: the IR names are a_b and a_b_2, and the key
    # 'a_b' of an onnxruntime feed is the ONNX input a_b (the second), not %a_b
    model = make_model(
        [helper.make_node("Sub", ["a.b", "a_b"], ["d"])],
        [("a.b", np.float32, [2]), ("a_b", np.float32, [2])],
        [("d", np.float32, None)],
    )
    path = save(model, tmp_path, "clash.onnx")
    fn = import_onnx(path).module.functions[0]
    assert [p.name for p in fn.params] == ["a_b", "a_b_2"]
    x = {"a.b": np.array([5, 7], np.float32), "a_b": np.array([1, 2], np.float32)}
    np.savez(tmp_path / "x.npz", **x)
    r = invoke("run", path, "--inputs", tmp_path / "x.npz", "-o", tmp_path / "d.npz", "-q")
    assert r.exit_code == 0, r.output
    with np.load(tmp_path / "d.npz") as got:
        np.testing.assert_array_equal(got["d"], run_ort(model, x)[0])


NAME = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(names=st.lists(NAME, min_size=3, max_size=3, unique=True))
def test_any_names_survive_the_text_and_the_bytecode(names: list[str]) -> None:
    a, b, out = names
    graph = helper.make_graph(
        [helper.make_node("Add", [a, b], [out])],
        "g",
        [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2]) for n in (a, b)],
        [helper.make_tensor_value_info(out, onnx.TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    module = import_onnx(model).module
    again = parse_module(print_module(module))
    assert again == module
    exe = load_bytes(compile_module(module, {}), "names.rxb")
    for fn in (again.functions[0], exe.module.functions[0]):
        assert onnx_input_names(fn) == (a, b) and onnx_output_names(fn) == (out,)


@pytest.mark.parametrize(
    "attrs, message",
    [
        ('onnx_inputs = ["x"]', "attribute 'onnx_inputs' names 1 parameters, but the function"),
        ('onnx_inputs = ["x", "x"]', "attribute 'onnx_inputs' names 'x' twice"),
        ("onnx_inputs = [1, 2]", "attribute 'onnx_inputs' must be a list of strings"),
        ('onnx_outputs = ["y", "z"]', "attribute 'onnx_outputs' names 2 outputs, but the"),
        ('onnx_outputs = [""]', "attribute 'onnx_outputs' has an empty name"),
    ],
)  # fmt: skip
def test_wrong_name_attributes_are_located_errors(attrs: str, message: str) -> None:
    text = (
        "fn @main(%a: Tensor[(2,), f32], %b: Tensor[(2,), f32]) -> Tensor[(2,), f32]\n"
        f"    attrs {{{attrs}}} {{\n  %c = add(%a, %b)\n  return %c\n}}\n"
    )
    with pytest.raises(RxError) as e:
        verify_module(parse_module(text, "m.rx"))
    assert e.value.message.startswith(message)
    assert (e.value.loc.file, e.value.loc.line, e.value.loc.col) == ("m.rx", 2, 12)


def test_imported_locations_name_the_node_at_the_line_import_writes(model_file: Path) -> None:
    result = import_onnx(model_file, source_name="names.onnx")
    fn = result.module.functions[0]
    lines = result.text("names.onnx").split("\n")
    assert [str(s.loc) for s in fn.body] == [
        "names.onnx: node 'block/add' (Add)",
        "names.onnx: node 'block/relu' (Relu)",
        "names.onnx: node #2 (Add) -> out.sum",
    ]
    for s in fn.body:  # the line it has in the .rx that relaxc import writes
        assert lines[s.loc.line - 1].endswith(f"# onnx: {s.loc.origin.removeprefix('node ')}")
    assert [str(p.loc) for p in fn.params] == [
        "names.onnx: input 'in/put:0'",
        "names.onnx: input 'b.bias'",
    ]
    # an error there names the node, with no caret under a line of text that exists nowhere
    err = RxError("something about it", fn.body[1].loc)
    text = render_error(err, {"names.onnx": "\n".join(lines)})
    assert text == "names.onnx: node 'block/relu' (Relu): error: something about it"


def test_the_report_of_an_imported_model_names_the_node_of_the_peak(model_file: Path) -> None:
    r = invoke("report", model_file, "--bound", "N=4")
    assert r.exit_code == 0, r.output
    flat = " ".join(r.stdout.replace("│", " ").split())
    assert "(names.onnx: node 'block/" in flat
    assert "names.onnx:" not in flat.replace("names.onnx: ", "")  # no line numbers


def test_a_model_of_printable_bytes_is_an_onnx_model(tmp_path: Path) -> None:
    # The onnx package's pytorch-converted test_ReLU/model.onnx and ten others are like this
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3])],
    )
    model = onnx.ModelProto(ir_version=8, graph=graph)
    model.opset_import.add().version = 13  # the default domain left out, as exporters do
    onnx.checker.check_model(model)
    data = model.SerializeToString()
    assert b"\x00" not in data and data.decode("utf-8")  # it looks like text
    for name in ("relu.onnx", "relu.pb"):
        (tmp_path / name).write_bytes(data)
        r = invoke("import", tmp_path / name, "-o", tmp_path / f"{name}.rx", "-q")
        assert r.exit_code == 0, r.output
        r = invoke("build", tmp_path / name, "-o", tmp_path / f"{name}.rxb", "-q")
        assert r.exit_code == 0, r.output
    (tmp_path / "text.onnx").write_text((tmp_path / "relu.onnx.rx").read_text())
    for command in ("import", "build"):
        r = invoke(command, tmp_path / "text.onnx", "-o", tmp_path / "never.rx")
        assert r.exit_code == 1 and "Traceback" not in r.output
        assert f"{tmp_path / 'text.onnx'} is not an ONNX model: it is text: an .rx program" in (
            r.stderr
        )


ONNX_TESTS = Path(onnx.__file__).parent / "backend" / "test" / "data" / "pytorch-converted"


@pytest.mark.skipif(not (ONNX_TESTS / "test_ReLU").is_dir(), reason="no onnx test data")
def test_the_onnx_packages_printable_relu_is_read_as_a_model(tmp_path: Path) -> None:
    r = invoke("import", ONNX_TESTS / "test_ReLU" / "model.onnx", "-o", tmp_path / "r.rx")
    # it is a model (of opset 6, whose Relu is Relu-6, the version of opset 7 too)
    assert r.exit_code == 0, r.output
    assert "text" not in r.stderr and (tmp_path / "r.rx").exists()


CC = __import__("shutil").which("cc")


@pytest.mark.skipif(CC is None, reason="no C compiler (cc) on this machine")
def test_the_c_header_gives_the_onnx_names(tmp_path: Path) -> None:
    # a name that would end a C comment, and one that needs escapes in a C string
    model = make_model(
        [helper.make_node("Neg", ["x/*in*/"], ['y?"\\é'])],
        [("x/*in*/", np.float32, [2])],
        [('y?"\\é', np.float32, [2])],
    )
    path = save(model, tmp_path, "n.onnx")
    out = tmp_path / "c"
    r = invoke("build", path, "-t", "c", "-o", out, "-q")
    assert r.exit_code == 0, r.output
    (tmp_path / "show.c").write_text(
        '#include <stdio.h>\n#include "n.h"\nint main(void) {\n'
        '    printf("%s\\n%s\\n", N_IN_X_IN_ONNX_NAME, N_OUT_Y_ONNX_NAME);\n    return 0;\n}\n'
    )
    exe = tmp_path / "show"
    subprocess.run(
        [CC, "-std=c99", "-Wall", "-Werror", "-I", out, tmp_path / "show.c", "-o", exe], check=True
    )
    shown = subprocess.run([exe], capture_output=True, check=True).stdout.decode("utf-8")
    assert shown.split("\n")[:2] == ["x/*in*/", 'y?"\\é']


def test_each_symbolic_dim_is_traced_to_the_onnx_input_it_is_read_from() -> None:
    fn = import_onnx(names_model()).module.functions[0]
    assert dim_sources(fn) == {"N": ("in_put_0", "in/put:0")}
    plain = parse_module(
        "fn @f(%a: Tensor[(2,), f32], %b: Tensor[(n, 2), f32]) -> Tensor[(n, 2), f32] {\n"
        "  return %b\n}\n"
    ).functions[0]
    assert dim_sources(plain) == {"n": ("b", None)}
