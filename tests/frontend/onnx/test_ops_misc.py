"""The converters of frontend/onnx/convert_misc.py against onnxruntime (onnx's reference
implementation for SwiGLU, which onnxruntime does not have yet): BitCast, Det, Swish,
SwiGLU, EyeLike, the three windows, ReverseSequence and MaxUnpool; and their refusals."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from relaxc.frontend.onnx import import_onnx
from relaxc.ir.diagnostics import RxError

from .util import import_and_compare, make_model, randn, run_interpreter

F32, F64, F16, I32, I64 = np.float32, np.float64, np.float16, np.int32, np.int64


def _raw(
    nodes: list[Any],
    inputs: list[tuple[str, int, Any]],
    outputs: list[tuple[str, int, Any]],
    inits: dict[str, np.ndarray] | None = None,
    opset: int = 22,
) -> Any:
    """A model as it is (no checker, no shape inference): outputs of a shape only known at
    run time, refused models."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(*i) for i in inputs],
        [helper.make_tensor_value_info(*o) for o in outputs],
        initializer=[numpy_helper.from_array(v, k) for k, v in (inits or {}).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def _against_reference(model: Any, feeds: dict[str, np.ndarray], rtol: float = 1e-6) -> None:
    """The interpreter against onnx's reference implementation (exactly for integers)."""
    from onnx.reference import ReferenceEvaluator

    want = ReferenceEvaluator(model).run(None, feeds)
    names = [i.name for i in model.graph.input]
    got = run_interpreter(import_onnx(model), [feeds[n] for n in names])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-7)
        else:
            np.testing.assert_array_equal(g, w)


def _one(op: str, inputs: list[tuple[str, Any, Any]], out: Any, opset: int, **attrs: Any) -> Any:
    node = helper.make_node(op, [i[0] for i in inputs], ["y"], **attrs)
    return make_model([node], inputs, [("y", out, None)], opset=opset)


# -- BitCast -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("src", "to", "dst"),
    [
        (F32, TensorProto.INT32, I32),
        (I32, TensorProto.FLOAT, F32),
        (F64, TensorProto.INT64, I64),
        (np.int8, TensorProto.UINT8, np.uint8),
        (F16, TensorProto.INT16, np.int16),
    ],
)
def test_bitcast_reads_the_bits_as_onnxruntime(src: Any, to: int, dst: Any) -> None:
    onnx_src = helper.np_dtype_to_tensor_dtype(np.dtype(src))
    model = _raw(
        [helper.make_node("BitCast", ["x"], ["y"], to=to)],
        [("x", onnx_src, [2, 3])],
        [("y", to, [2, 3])],
        opset=26,
    )
    if np.dtype(src).kind == "f":
        x = np.array([[1.0, -2.5, 0.0], [-0.0, np.inf, 3e-5]], src)
    else:
        x = (np.arange(-3, 3).reshape(2, 3) * 37).astype(src)
    import_and_compare(model, {"x": x})


def test_bitcast_of_bool_reads_its_bytes() -> None:
    # onnxruntime has no BitCast of bool: onnx's reference instead
    model = _raw(
        [helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.UINT8)],
        [("x", TensorProto.BOOL, [4])],
        [("y", TensorProto.UINT8, [4])],
        opset=26,
    )
    _against_reference(model, {"x": np.array([True, False, False, True])})


def test_bitcast_of_another_width_or_to_bool_is_refused() -> None:
    for to, needle in [(TensorProto.INT64, "differ in width"), (TensorProto.BOOL, "no bool")]:
        node = helper.make_node("BitCast", ["x"], ["y"], to=to, name="b")
        graph = helper.make_graph(
            [node],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.UINT8 if to == 9 else 1, [2])],
            [helper.make_tensor_value_info("y", to, [2])],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
        with pytest.raises(RxError, match=rf"node 'b' \(BitCast\): .*{needle}"):
            import_onnx(model)


# -- Det ---------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [[1, 1], [3, 3], [2, 4, 4], [2, 1, 5, 5]])
def test_det_as_onnxruntime(shape: list[int]) -> None:
    model = _one("Det", [("x", F32, shape)], F32, 22)
    import_and_compare(model, {"x": randn(*shape, seed=len(shape))})


def test_det_of_singular_and_permutation_matrices() -> None:
    x = np.array([[[1, 2, 3], [2, 4, 6], [0, 1, 1]], [[0, 0, 1], [0, 1, 0], [1, 0, 0]]], F64)
    result = import_onnx(_one("Det", [("x", F64, [2, 3, 3])], F64, 22))
    got = run_interpreter(result, [x])[0]
    np.testing.assert_allclose(got, [0.0, -1.0], atol=1e-15)


def test_det_of_non_square_matrices_is_refused() -> None:
    node = helper.make_node("Det", ["x"], ["y"], name="d")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    with pytest.raises(RxError, match=r"node 'd' \(Det\): needs square matrices"):
        import_onnx(model)


# -- Swish / SwiGLU ----------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [1.0, 0.5, -2.0])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_swish_as_onnxruntime(alpha: float, dtype: Any) -> None:
    model = _one("Swish", [("x", dtype, [3, 4])], dtype, 24, alpha=alpha)
    import_and_compare(model, {"x": randn(3, 4, dtype=dtype) * 4})


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_swiglu_as_the_reference(alpha: float) -> None:
    node = helper.make_node("SwiGLU", ["a", "b"], ["y"], alpha=alpha)
    ab = [(n, TensorProto.FLOAT, [2, 5]) for n in "ab"]
    model = _raw([node], ab, [("y", TensorProto.FLOAT, [2, 5])], opset=28)
    _against_reference(model, {"a": randn(2, 5, seed=1) * 3, "b": randn(2, 5, seed=2)})


# -- EyeLike -----------------------------------------------------------------------------


@pytest.mark.parametrize("k", [0, 1, -2, 7])
@pytest.mark.parametrize(("dtype", "out"), [(None, I32), (TensorProto.DOUBLE, F64)])
def test_eye_like_as_onnxruntime(k: int, dtype: int | None, out: Any) -> None:
    attrs = {"k": k} | ({} if dtype is None else {"dtype": dtype})
    model = _one("EyeLike", [("x", I32, [3, 5])], out, 22, **attrs)
    import_and_compare(model, {"x": np.zeros((3, 5), I32)})


def test_eye_like_of_a_symbolic_shape() -> None:
    model = _one("EyeLike", [("x", F32, ["n", 4])], F32, 22, k=1)
    result = import_and_compare(model, {"x": np.zeros((3, 4), F32)}, {"n": 3})
    assert "arange" in str(result.module)  # computed at run time, not a constant


# -- windows -----------------------------------------------------------------------------


WINDOWS = ["HannWindow", "HammingWindow", "BlackmanWindow"]


def _window(op: str, size: int, out: int, **attrs: Any) -> Any:
    node = helper.make_node(op, ["n"], ["y"], output_datatype=out, **attrs)
    return _raw([node], [], [("y", out, [size])], {"n": np.array(size, I64)}, opset=17)


@pytest.mark.parametrize("op", WINDOWS)
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("size", [1, 10])
def test_windows_as_onnxruntime(op: str, periodic: int, size: int) -> None:
    if size == 1 and not periodic:
        pytest.skip("the symmetric window of 1 is 0 / 0: see test_windows_as_the_reference")
    result = import_and_compare(_window(op, size, TensorProto.FLOAT, periodic=periodic), {})
    assert not result.module.functions[0].params  # a constant of its size


@pytest.mark.parametrize("op", WINDOWS)
@pytest.mark.parametrize(("periodic", "size"), [(0, 7), (1, 7), (0, 1)])
def test_windows_as_the_reference(op: str, periodic: int, size: int) -> None:
    # onnxruntime computes a double window in float: onnx's definition instead
    _against_reference(_window(op, size, TensorProto.DOUBLE, periodic=periodic), {}, 1e-12)


@pytest.mark.parametrize("op", WINDOWS)
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows_of_an_integer_type_as_the_reference(op: str, periodic: int) -> None:
    # truncated, as onnx's reference casts: 1 where the window is exactly 1, else 0
    _against_reference(_window(op, 9, TensorProto.INT32, periodic=periodic), {})


def test_a_window_of_a_run_time_size_is_refused() -> None:
    node = helper.make_node("HannWindow", ["n"], ["y"], name="w")
    model = _raw([node], [("n", TensorProto.INT64, [])], [("y", TensorProto.FLOAT, None)], None, 17)
    with pytest.raises(RxError, match=r"node 'w' \(HannWindow\): the size input .* must be known"):
        import_onnx(model)


# -- ReverseSequence ---------------------------------------------------------------------


@pytest.mark.parametrize(("time", "batch"), [(0, 1), (1, 0)])
@pytest.mark.parametrize("tail", [[], [3]])
def test_reverse_sequence_as_onnxruntime(time: int, batch: int, tail: list[int]) -> None:
    shape = ([5, 4] if time == 0 else [4, 5]) + tail
    model = _one(
        "ReverseSequence",
        [("x", F32, shape), ("lens", I64, [4])],
        F32,
        10,
        time_axis=time,
        batch_axis=batch,
    )
    feeds = {"x": randn(*shape), "lens": np.array([5, 1, 3, 2], I64)}
    import_and_compare(model, feeds)


def test_reverse_sequence_of_a_symbolic_time_axis() -> None:
    model = _one(
        "ReverseSequence",
        [("x", F32, ["t", 3]), ("lens", I64, [3])],
        F32,
        10,
        time_axis=0,
        batch_axis=1,
    )
    feeds = {"x": randn(4, 3), "lens": np.array([4, 2, 1], I64)}
    import_and_compare(model, feeds, {"t": 4})
    # a length above the time axis's: the whole axis (onnx's reference; onnxruntime refuses)
    got = run_interpreter(import_onnx(model), [feeds["x"], np.array([9, 0, 3], I64)], {"t": 4})
    want = feeds["x"].copy()
    want[:, 0], want[:3, 2] = want[::-1, 0], want[2::-1, 2]
    np.testing.assert_array_equal(got[0], want)


@settings(max_examples=25, derandomize=True, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=3, max_size=3))
def test_reverse_sequence_reverses_each_prefix(lens: list[int]) -> None:
    """Each batch row's first L steps reversed, the rest kept (L above the time axis's
    length: the whole row, as onnx's reference has it)."""
    model = _one(
        "ReverseSequence",
        [("x", I64, [3, 5]), ("lens", I64, [3])],
        I64,
        10,
        time_axis=1,
        batch_axis=0,
    )
    x = np.arange(15, dtype=I64).reshape(3, 5)
    got = run_interpreter(import_onnx(model), [x, np.array(lens, I64)])[0]
    for row, length in enumerate(lens):
        k = min(length, 5)
        np.testing.assert_array_equal(got[row], np.r_[x[row, :k][::-1], x[row, k:]])


# -- MaxUnpool ---------------------------------------------------------------------------


@pytest.mark.parametrize("output_shape", [None, [1, 2, 4, 6], [1, 2, 5, 7]])
def test_max_unpool_of_max_pool(output_shape: list[int] | None) -> None:
    """Against onnxruntime where the output has the unpooled shape; a larger output_shape
    against onnx's reference (and its node test test_maxunpool_export_with_output_shape):
    the indices are into the unpooled shape, whose end is padded with zeros.
    onnxruntime reads them as indices into output_shape instead."""
    pool = helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2])
    ins = ["p", "i"] + (["s"] if output_shape is not None else [])
    unpool = helper.make_node("MaxUnpool", ins, ["y"], kernel_shape=[2, 2], strides=[2, 2])
    init = {} if output_shape is None else {"s": np.array(output_shape, I64)}
    model = _raw(
        [pool, unpool],
        [("x", TensorProto.FLOAT, [1, 2, 4, 6])],
        [("y", TensorProto.FLOAT, output_shape or [1, 2, 4, 6])],
        init,
    )
    feeds = {"x": randn(1, 2, 4, 6)}
    if output_shape is None or output_shape == [1, 2, 4, 6]:
        import_and_compare(model, feeds)
    else:
        _against_reference(model, feeds)


def test_max_unpool_to_a_smaller_output_shape_is_refused() -> None:
    unpool = helper.make_node(
        "MaxUnpool", ["p", "i", "s"], ["y"], kernel_shape=[2, 2], strides=[2, 2], name="u"
    )
    model = _raw(
        [unpool],
        [("p", TensorProto.FLOAT, [1, 1, 2, 2]), ("i", TensorProto.INT64, [1, 1, 2, 2])],
        [("y", TensorProto.FLOAT, None)],
        {"s": np.array([1, 1, 3, 3], I64)},
    )
    with pytest.raises(RxError, match=r"node 'u' \(MaxUnpool\): output_shape .* no smaller"):
        import_onnx(model)


# -- Pad of a run-time constant_value ----------------------------------------------------


@pytest.mark.parametrize("dtype", [F32, I64])
@pytest.mark.parametrize("pads", [[1, 0, 2, 3], [0, -1, 1, 2]])
def test_pad_with_a_run_time_constant_value_as_onnxruntime(dtype: Any, pads: list[int]) -> None:
    node = helper.make_node("Pad", ["x", "p", "v"], ["y"], mode="constant")
    model = make_model(
        [node],
        [("x", dtype, [3, 4]), ("v", dtype, [])],
        [("y", dtype, None)],
        {"p": np.array(pads, I64)},
        opset=18,
    )
    x = (randn(3, 4) * 5).astype(dtype)
    result = import_and_compare(model, {"x": x, "v": np.array(7, dtype)})
    assert "where" in str(result.module)  # the value is chosen at run time
