"""Col2Im and TensorScatter (convert_blocks.py): against onnxruntime on the interpreter, the
VM and C, Col2Im against a direct sum as a property, TensorScatter updating the cache in
place, their refusals and the onnx package's node tests."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.frontend.onnx import import_onnx
from relaxc.frontend.printer import print_module
from relaxc.ir.diagnostics import RxError

from .node_cases import _interp, all_cases, run_case, select
from .test_ops_reduce import _everywhere
from .util import helper, make_model, onnx, randn

F32 = np.float32
I64 = np.int64


def _col2im_model(x_shape, image, block, **attrs: Any) -> Any:
    inits = {"image": np.array(image, I64), "block": np.array(block, I64)}
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], **attrs)
    return make_model(
        [node], [("x", F32, list(x_shape))], [("y", F32, None)], initializers=inits, opset=18
    )


def _blocks(image, block, strides, pads, dilations) -> int:
    k = len(image)
    out = 1
    for i in range(k):
        span = image[i] + pads[i] + pads[k + i] - dilations[i] * (block[i] - 1) - 1
        out *= span // strides[i] + 1
    return out


def _direct_col2im(x, image, block, strides, pads, dilations) -> np.ndarray:
    """The definition, one column entry at a time (2-D)."""
    n, cb, length = x.shape
    c = cb // (block[0] * block[1])
    ph, pw = image[0] + pads[0] + pads[2], image[1] + pads[1] + pads[3]
    nw = (pw - dilations[1] * (block[1] - 1) - 1) // strides[1] + 1
    out = np.zeros((n, c, ph, pw), np.float64)
    for ch in range(c):
        for bi in range(block[0]):
            for bj in range(block[1]):
                row = (ch * block[0] + bi) * block[1] + bj
                for li in range(length):
                    y = (li // nw) * strides[0] + bi * dilations[0]
                    xx = (li % nw) * strides[1] + bj * dilations[1]
                    out[:, ch, y, xx] += x[:, row, li]
    return out[:, :, pads[0] : ph - pads[2], pads[1] : pw - pads[3]]


@pytest.mark.parametrize(
    ("image", "block", "attrs"),
    [
        ((5, 5), (2, 2), {}),
        ((6, 7), (3, 2), {"strides": [2, 1], "pads": [1, 0, 1, 2]}),
        ((8, 6), (2, 3), {"dilations": [2, 1], "strides": [1, 2]}),
        ((4, 5, 3), (2, 2, 2), {"pads": [0, 1, 0, 1, 0, 1]}),
    ],
)
def test_col2im_matches_onnxruntime(image, block, attrs) -> None:
    k = len(image)
    strides = attrs.get("strides", [1] * k)
    pads = attrs.get("pads", [0] * (2 * k))
    dil = attrs.get("dilations", [1] * k)
    length = _blocks(image, block, strides, pads, dil)
    x = randn(2, 3 * int(np.prod(block)), length)
    _everywhere(_col2im_model(x.shape, image, block, **attrs), {"x": x}, {})


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.data())
def test_col2im_is_the_sum_of_each_block_at_its_place(data: Any) -> None:
    block = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    strides = [data.draw(st.integers(1, 3)) for _ in range(2)]
    dil = [data.draw(st.integers(1, 2)) for _ in range(2)]
    pads = [data.draw(st.integers(0, 2)) for _ in range(4)]
    image = tuple(
        data.draw(st.integers(max(1, dil[i] * (block[i] - 1) + 1 - pads[i] - pads[2 + i]), 7))
        for i in range(2)
    )
    length = _blocks(image, block, strides, pads, dil)
    x = randn(1, 2 * block[0] * block[1], length, seed=length)
    model = _col2im_model(x.shape, image, block, strides=strides, pads=pads, dilations=dil)
    got = _interp(import_onnx(model), [x], {})[0]
    want = _direct_col2im(x.astype(np.float64), image, block, strides, pads, dil)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_col2im_with_the_wrong_number_of_blocks_is_refused() -> None:
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], name="fold")
    inits = {"image": np.array([5, 5], I64), "block": np.array([2, 2], I64)}
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", 1, [1, 8, 15])],
        [helper.make_tensor_value_info("y", 1, None)],
        initializer=[onnx.numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(RxError, match="fold.*holds 15 blocks.*makes 16"):
        import_onnx(model)


# -- TensorScatter ---------------------------------------------------------------------------


def _scatter_model(past, upd, indices: bool, **attrs: Any) -> Any:
    names = ["past", "upd"] + (["w"] if indices else [])
    node = helper.make_node("TensorScatter", names, ["present"], **attrs)
    inputs = [("past", F32, list(past)), ("upd", F32, list(upd))]
    if indices:
        inputs.append(("w", I64, [past[0]]))
    return make_model([node], inputs, [("present", F32, None)], opset=24)


@pytest.mark.parametrize(
    ("past", "upd", "w", "attrs"),
    [
        ((2, 3, 6, 4), (2, 3, 2, 4), [0, 3], {}),
        ((2, 3, 6, 4), (2, 3, 3, 4), [4, 1], {"mode": "circular"}),
        ((3, 5, 2), (3, 1, 2), [4, 0, 2], {"axis": 1}),
        ((2, 6, 4), (2, 6, 4), [0, 0], {}),
        ((2, 4, 6), (2, 4, 4), [5, 3], {"axis": -1, "mode": "circular"}),
    ],
)
def test_tensor_scatter_matches_onnxruntime(past, upd, w, attrs) -> None:
    model = _scatter_model(past, upd, True, **attrs)
    feeds = {"past": randn(*past), "upd": randn(*upd, seed=1), "w": np.array(w, I64)}
    _everywhere(model, feeds, {})


@pytest.mark.parametrize("seq", [2, 6])
def test_tensor_scatter_without_write_indices_writes_at_zero(seq: int) -> None:
    model = _scatter_model((2, 3, 6, 4), (2, 3, seq, 4), False)
    feeds = {"past": randn(2, 3, 6, 4), "upd": randn(2, 3, seq, 4, seed=1)}
    _everywhere(model, feeds, {})
    assert "scatter" not in print_module(import_onnx(model).module)


def test_a_decode_step_updates_the_cache_in_place() -> None:
    """past = relu(x) dies at the TensorScatter: the present cache is written over it, so the
    plan holds one cache, not two."""
    from relaxc.cli.report.analysis import memory_report
    from relaxc.passes.assemble import assemble_pipeline
    from relaxc.passes.pipeline import Pipeline

    nodes = [
        helper.make_node("Relu", ["x"], ["past"]),
        helper.make_node("TensorScatter", ["past", "upd", "w"], ["present"]),
        helper.make_node("Neg", ["present"], ["y"]),
    ]
    inputs = [("x", F32, [1, 4, 64, 16]), ("upd", F32, [1, 4, 1, 16]), ("w", I64, [1])]
    model = make_model(nodes, inputs, [("y", F32, None)], opset=24)
    feeds = {"x": randn(1, 4, 64, 16), "upd": randn(1, 4, 1, 16, seed=2), "w": np.array([9], I64)}
    _everywhere(model, feeds, {})

    def arena(disable: list[str]) -> int:
        passes = assemble_pipeline("vm", disable=disable)
        module = Pipeline(passes).run(import_onnx(model).module)
        return sum(r.arena_bytes for r in memory_report(module))

    cache = 4 * 64 * 16 * 4
    assert arena([]) < cache  # the caches live in the caller's output: the indices remain
    assert arena(["ComputeInPlace"]) >= 2 * cache  # past and present, each of its own


def test_write_indices_of_another_type_are_refused() -> None:
    node = helper.make_node("TensorScatter", ["past", "upd", "w"], ["present"], name="kv")
    inputs = [("past", F32, [2, 4, 3]), ("upd", F32, [2, 1, 3]), ("w", np.int32, [2])]
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(np.dtype(t)), s)
            for n, t, s in inputs
        ],
        [helper.make_tensor_value_info("present", 1, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])
    with pytest.raises(RxError, match="kv.*int64 vector"):
        import_onnx(model)


NODE_OPS = ["Col2Im", "TensorScatter"]


def test_node_tests_pass_on_the_interpreter_and_the_vm() -> None:
    cases = select(all_cases(), NODE_OPS)
    assert len(cases) >= 8
    outcomes = {c.name: run_case(c) for c in cases}
    assert {n: o.status for n, o in outcomes.items() if o.status != "passed"} == {}


@pytest.mark.parametrize("name", ["test_col2im_pads", "test_tensorscatter_circular"])
def test_node_tests_pass_in_c(name: str) -> None:
    case = next(c for c in all_cases() if c.name == name)
    assert run_case(case, ("interp", "vm", "c")).status == "passed"
