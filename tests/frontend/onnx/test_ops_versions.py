"""The converters' per-version semantics (opsets 7 to 24, and later ones where an op only
gained types relaxc lacks) against onnxruntime: Clip's bounds
as attributes, constant inputs and run-time inputs; CastLike; Size; Dropout's mask; Expand
of bool; reductions over an empty axis; Gather's negative run-time indices; Identity's edge
cases; and the refusals of what relaxc does not do, each a sentence naming it."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from relaxc.frontend.onnx import import_onnx
from relaxc.ir.diagnostics import RxError

from .util import helper, import_and_compare, make_model, randn, run_interpreter

F32, I64 = np.float32, np.int64


def _clip(opset: int, inputs: list[str], **attrs: Any) -> Any:
    return helper.make_node("Clip", inputs, ["y"], **attrs)


def test_clip6_attributes_and_its_float_range_default() -> None:
    model = make_model(
        [_clip(7, ["x"], min=-0.5)], [("x", F32, [3, 4])], [("y", F32, None)], opset=7
    )
    x = randn(3, 4)
    x[0, 0] = np.inf  # Clip-6's default max is FLT_MAX, not infinity
    import_and_compare(model, {"x": x})


@pytest.mark.parametrize("bounds", ["runtime", "constant", "min-above-max"])
def test_clip13_bounds_as_inputs(bounds: str) -> None:
    init = {}
    if bounds == "constant":
        init = {"lo": np.array(-0.2, F32), "hi": np.array(0.3, F32)}
    elif bounds == "min-above-max":
        init = {"lo": np.array(0.5, F32), "hi": np.array(-0.5, F32)}
    inputs = [("x", F32, [3, 4])]
    if bounds == "runtime":
        inputs += [("lo", F32, []), ("hi", F32, [])]
    model = make_model([_clip(13, ["x", "lo", "hi"])], inputs, [("y", F32, None)], init, opset=13)
    feeds = {"x": randn(3, 4)}
    if bounds == "runtime":
        feeds |= {"lo": np.array(-0.1, F32), "hi": np.array(0.4, F32)}
    result = import_and_compare(model, feeds)
    ops = [b.value.op for b in result.module.functions[0].body if b.value.op != "const"]
    assert ops == (["clip"] if bounds == "constant" else ["maximum", "minimum"])


def test_clip12_integers_clip_exactly_and_a_missing_bound_is_open() -> None:
    big = np.array(2**62 + 1, I64)  # not a float32 (nor a float64 neighbour)
    model = make_model(
        [_clip(12, ["x", "", "hi"])], [("x", I64, [5])], [("y", I64, None)], {"hi": big}, opset=12
    )
    import_and_compare(model, {"x": np.array([-(2**62), 0, 2**62, 2**62 + 3, 7], I64)})


@pytest.mark.parametrize("opset", [15, 19, 21])
@pytest.mark.parametrize(("src", "dst"), [(F32, np.float16), (I64, F32), (F32, np.int32)])
def test_cast_like_casts_to_the_second_inputs_dtype(opset: int, src: Any, dst: Any) -> None:
    node = helper.make_node("CastLike", ["x", "like"], ["y"])
    model = make_model(
        [node],
        [("x", src, [2, 3])],
        [("y", dst, None)],
        {"like": np.zeros(1, dst)},
        opset=opset,
    )
    x = (randn(2, 3) * 10).astype(src)
    import_and_compare(model, {"x": x})


def test_size_of_a_static_and_of_a_symbolic_input() -> None:
    static = make_model(
        [helper.make_node("Size", ["x"], ["y"])], [("x", F32, [2, 3, 4])], [("y", I64, None)]
    )
    import_and_compare(static, {"x": randn(2, 3, 4)})
    nodes = [
        helper.make_node("Size", ["x"], ["n"]),
        helper.make_node("Unsqueeze", ["n", "zero"], ["shape"]),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    symbolic = make_model(
        nodes, [("x", F32, ["b", 3])], [("y", F32, None)], {"zero": np.array([0], I64)}
    )
    result = import_and_compare(symbolic, {"x": randn(5, 3)}, dims={"b": 5})
    assert [b.value.op for b in result.module.functions[0].body] == ["reshape"]


@pytest.mark.parametrize(("opset", "mask"), [(7, F32), (10, np.bool_)])
def test_dropout_mask_before_opset_12_is_refused_having_no_defined_value(
    opset: int, mask: Any
) -> None:
    node = helper.make_node("Dropout", ["x"], ["y", "m"], ratio=0.3)
    model = make_model(
        [node], [("x", F32, [2, 3])], [("y", F32, [2, 3]), ("m", mask, [2, 3])], opset=opset
    )
    with pytest.raises(RxError, match="the dropout mask, whose value before opset 12"):
        import_onnx(model)


@pytest.mark.parametrize("opset", [12, 13, 22])
def test_dropout_mask_is_all_true_in_inference(opset: int) -> None:
    mask = np.bool_
    node = helper.make_node("Dropout", ["x"], ["y", "m"], **({"ratio": 0.3} if opset < 12 else {}))
    model = make_model(
        [node], [("x", F32, [2, 3])], [("y", F32, [2, 3]), ("m", mask, [2, 3])], opset=opset
    )
    import_and_compare(model, {"x": randn(2, 3)})


def test_dropout_training_mode_true_is_refused_as_training() -> None:
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y"])
    init = {"r": np.array(0.5, F32), "t": np.array(True)}
    model = make_model([node], [("x", F32, [2, 3])], [("y", F32, None)], init, opset=13)
    with pytest.raises(RxError, match="training_mode=true .* relaxc compiles inference"):
        import_onnx(model)


def test_dropout_training_with_a_zero_ratio_is_the_identity_with_a_true_mask() -> None:
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "m"])
    init = {"r": np.array(0.0, F32), "t": np.array(True)}
    outs = [("y", F32, [2, 3]), ("m", np.bool_, [2, 3])]
    model = make_model([node], [("x", F32, [2, 3])], outs, init, opset=13)
    import_and_compare(model, {"x": randn(2, 3)})


def test_expand_of_a_bool_tensor() -> None:
    node = helper.make_node("Expand", ["x", "s"], ["y"])
    model = make_model(
        [node], [("x", np.bool_, [3, 1])], [("y", np.bool_, None)], {"s": np.array([2, 3, 4], I64)}
    )
    import_and_compare(model, {"x": np.array([[True], [False], [True]])})


@pytest.mark.parametrize(("op", "dtype"), [("ReduceSum", F32), ("ReduceMax", F32)])
def test_a_reduction_over_an_empty_axis_is_its_identity(op: str, dtype: Any) -> None:
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)
    model = make_model(
        [node],
        [("x", dtype, [2, 0, 4])],
        [("y", dtype, None)],
        {"axes": np.array([1], I64)},
        opset=18,
    )
    result = import_onnx(model)
    (y,) = run_interpreter(result, [np.zeros((2, 0, 4), dtype)])
    want = 0.0 if op == "ReduceSum" else -np.inf
    assert y.shape == (2, 1, 4) and (y == want).all()


def test_gather_wraps_negative_run_time_indices() -> None:
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=1)
    model = make_model([node], [("x", F32, [2, 5]), ("i", I64, [4])], [("y", F32, None)])
    import_and_compare(model, {"x": randn(2, 5), "i": np.array([0, -1, -5, 4], I64)})


@pytest.mark.parametrize("n", [3, 6])
def test_gather_run_time_indices_into_a_symbolic_dim_wrap_negatives(n: int) -> None:
    """where(i < 0, i + n, i) with n computed at run time: ONNX's reading of -1 and -3."""
    node = helper.make_node("Gather", ["x", "i"], ["y"])
    model = make_model([node], [("x", F32, ["n", 5]), ("i", I64, [4])], [("y", F32, None)])
    feeds = {"x": randn(n, 5), "i": np.array([-1, 0, -3, 2], I64)}
    import_and_compare(model, feeds, {"n": n})


def test_identity_of_an_input_of_a_constant_and_of_a_shape() -> None:
    nodes = [
        helper.make_node("Identity", ["x"], ["a"]),
        helper.make_node("Identity", ["w"], ["b"]),
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Identity", ["s"], ["c"]),
    ]
    model = make_model(
        nodes,
        [("x", F32, [2, 3])],
        [("a", F32, None), ("b", F32, None), ("c", I64, None)],
        {"w": randn(4, seed=2)},
        opset=16,
    )
    import_and_compare(model, {"x": randn(2, 3)})


@pytest.mark.parametrize(
    ("attr", "needle"),
    [
        (helper.make_attribute("value_string", "hi"), r"value_string\) is a string"),
        (helper.make_attribute("value_strings", ["a", "b"]), "strings are out of scope"),
    ],
)
def test_a_string_constant_is_refused_naming_the_attribute(attr: Any, needle: str) -> None:
    node = helper.make_node("Constant", [], ["c"])
    node.attribute.append(attr)
    graph = helper.make_graph(
        [node, helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", 1, [1])],
        [helper.make_tensor_value_info("y", 1, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(RxError, match=needle):
        import_onnx(model)


def test_an_unsupported_element_type_says_why() -> None:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", 14, [2])],
        [helper.make_tensor_value_info("y", 14, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(RxError, match=r"COMPLEX64, .* \(complex numbers are out of scope\)"):
        import_onnx(model)


def test_a_model_of_another_domain_is_refused_naming_it() -> None:
    graph = helper.make_graph(
        [helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml")],
        "g",
        [helper.make_tensor_value_info("x", 1, [2])],
        [helper.make_tensor_value_info("y", 1, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("ai.onnx.ml", 1)])
    with pytest.raises(RxError, match="domain ai.onnx.ml, .* out of scope"):
        import_onnx(model)


def test_dropout_mask_of_a_symbolic_input_is_computed_at_run_time() -> None:
    node = helper.make_node("Dropout", ["x"], ["y", "m"])
    model = make_model(
        [node],
        [("x", F32, ["b", 3])],
        [("y", F32, ["b", 3]), ("m", np.bool_, ["b", 3])],
        opset=13,
    )
    result = import_and_compare(model, {"x": randn(2, 3)}, dims={"b": 2})
    assert [b.value.op for b in result.module.functions[0].body] == ["full"]


def test_an_op_unchanged_since_opset_24_reads_at_a_later_opset() -> None:
    model = make_model(
        [helper.make_node("Relu", ["x"], ["y"])], [("x", F32, [3])], [("y", F32, None)]
    )
    model.opset_import[0].version = 28  # Relu is still version 14 there
    result = import_onnx(model)
    assert result.opset == 28


@pytest.mark.parametrize(
    ("op", "opset", "verdict"),
    [
        ("Reshape", 25, None),  # version 25 adds int2/uint2 only: relaxc has neither
        ("Cast", 28, None),  # version 28 adds the 6-bit floats only
        ("Range", 27, "changes its inputs, outputs or attributes"),  # stash_type
        ("Mod", 28, "changes its definition (with the same signature)"),
        ("Celu", 28, "adds the types tensor(double), tensor(float16)"),
    ],
)
def test_a_newer_version_reads_only_if_it_adds_nothing_relaxc_has(
    op: str, opset: int, verdict: str | None
) -> None:
    from relaxc.frontend.onnx.model import newer_version_problem

    problem = newer_version_problem(op, opset, {})
    if verdict is None:
        assert problem is None
    else:
        assert problem is not None and verdict in problem and f"{op} version {opset}" in problem
        assert newer_version_problem(op, opset, {op: opset}) is None  # reviewed: read


def test_a_node_whose_op_changed_after_opset_24_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from relaxc.frontend.onnx import converters, importer

    node = helper.make_node("Mod", ["x", "x"], ["y"], name="r")
    model = make_model([node], [("x", I64, [3])], [("y", I64, None)], opset=13)
    model.opset_import[0].version = 28
    # whatever converter Mod has (or a stand-in), as if it followed Mod only to version 13
    monkeypatch.setitem(converters.CONVERTERS, "Mod", converters.CONVERTERS["Add"])
    monkeypatch.setattr(importer, "REVIEWED_VERSIONS", {})
    with pytest.raises(RxError, match=r"node 'r' \(Mod\): opset 28 has Mod version 28"):
        import_onnx(model)


def _against_reference(model: Any, feeds: dict[str, np.ndarray]) -> Any:
    """Import ``model`` (of an opset onnxruntime may not have yet) and compare the
    interpreter with onnx's reference implementation."""
    from onnx.reference import ReferenceEvaluator

    want = [np.asarray(w) for w in ReferenceEvaluator(model).run(None, feeds)]
    result = import_onnx(model)
    got = run_interpreter(result, [feeds[i.name] for i in model.graph.input])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
    return result


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_mod28_fmod0_on_floats_is_pythons_remainder(dtype: Any) -> None:
    node = helper.make_node("Mod", ["a", "b"], ["y"])
    model = make_model([node], [("a", dtype, [8]), ("b", dtype, [8])], [("y", dtype, None)])
    model.opset_import[0].version = 28
    a = np.array([5.5, -5.5, 5.5, -5.5, 0.0, -0.0, 3.0, -1.0], dtype)
    b = np.array([2.0, 2.0, -2.0, -2.0, -3.0, 3.0, 3.0, np.inf], dtype)
    got = _against_reference(model, {"a": a, "b": b})
    assert got.opset == 28


def test_mod_fmod0_on_floats_before_version_28_is_refused() -> None:
    node = helper.make_node("Mod", ["a", "a"], ["y"])
    model = make_model([node], [("a", F32, [3])], [("y", F32, None)], opset=13)
    with pytest.raises(RxError, match="before version 28 takes floats only with fmod=1"):
        import_onnx(model)


@pytest.mark.parametrize("stash", [None, 1, 11])
@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
def test_range27_half_ranges_computed_in_their_stash_type(stash: int | None, dtype: Any) -> None:
    import ml_dtypes

    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    attrs = {} if stash is None else {"stash_type": stash}
    node = helper.make_node("Range", ["s", "l", "d"], ["y"], **attrs)
    vals = {"s": np.array(250.0, dt), "l": np.array(300.0, dt), "d": np.array(0.7, dt)}
    graph = helper.make_graph(
        [node],
        "r",
        [],
        [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(dt), None)],
        initializer=[numpy_helper.from_array(v, k) for k, v in vals.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 27)])
    _against_reference(model, {})


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth28_modes(mode: str) -> None:
    node = helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2, mode=mode)
    graph = helper.make_graph(
        [node],
        "s",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2, 4, 6])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28)])
    x = np.arange(48, dtype=F32).reshape(1, 2, 4, 6)
    _against_reference(model, {"x": x})
