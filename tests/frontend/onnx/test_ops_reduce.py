"""The ONNX reductions, index-producing ops and Range: against onnxruntime, and the onnx
package's node tests through the interpreter and the VM (C for a sample)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from relaxc.frontend.onnx import import_onnx
from relaxc.ir import dims as D
from relaxc.ir.diagnostics import RxError

from .node_cases import TIERS, _c, _interp, _vm, all_cases, run_case, select
from .util import helper, make_model, randn, run_ort

F32 = np.float32


def _everywhere(
    model: Any, feeds: dict[str, np.ndarray], dims: dict[str, int], c: bool = True
) -> None:
    """``model`` on the interpreter, the VM and (with ``c``) C equals onnxruntime."""
    result = import_onnx(model)
    want = run_ort(model, feeds)
    args = list(feeds.values())
    for run in (_interp, _vm, _c) if c else (_interp, _vm):
        got = run(result, args, dims)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, run.__name__
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=run.__name__)


# -- Range -------------------------------------------------------------------------------


def _range_of_width(start: int, delta: int, dtype: Any = np.int64) -> Any:
    """Range(start, Shape(x)[2], delta), as YOLOv8's exporter writes the anchor grid."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "two"], ["n"], axis=0),
        helper.make_node("Cast", ["n"], ["nc"], to=6 if dtype == np.int32 else 7),
        helper.make_node("Range", ["start", "nc", "delta"], ["r"]),
        helper.make_node("Relu", ["x"], ["y"]),
    ]
    init = {
        "two": np.array(2, np.int64),
        "start": np.array(start, dtype),
        "delta": np.array(delta, dtype),
    }
    outs = [("y", F32, None), ("r", dtype, None)]
    return make_model(nodes, [("x", F32, ["N", 3, "W"])], outs, init)


@pytest.mark.parametrize("start, delta", [(0, 1), (1, 2), (2, 3), (9, -2)])
def test_range_of_a_symbolic_dim_has_a_symbolic_length(start: int, delta: int) -> None:
    model = _range_of_width(start, delta)
    for w in (1, 7, 12):
        _everywhere(model, {"x": randn(2, 3, w)}, {"N": 2, "W": w})


def test_range_from_zero_by_one_is_as_long_as_the_dim() -> None:
    """Range(0, W, 1) has length W itself, so it broadcasts against tensors of width W."""
    result = import_onnx(_range_of_width(0, 1, np.int32))
    t = result.module.functions[0].ret_type.fields[1]
    assert t.shape == (D.Sym("W"),) and t.dtype == "i32"


@pytest.mark.parametrize(
    "start, limit, delta, dtype",
    [(0, 5, 1, np.int64), (10, 1, -3, np.int32), (1.0, 2.0, 0.25, np.float32), (3, 3, 1, np.int64)],
)
def test_constant_range_folds(start: Any, limit: Any, delta: Any, dtype: Any) -> None:
    nodes = [
        helper.make_node("Range", ["s", "l", "d"], ["r"]),
        helper.make_node("Add", ["x", "r"], ["y"]),
    ]
    init = {k: np.array(v, dtype) for k, v in (("s", start), ("l", limit), ("d", delta))}
    n = len(np.arange(start, limit, delta))
    model = make_model(nodes, [("x", dtype, [n])], [("y", dtype, None)], init, opset=11)
    result = import_onnx(model)
    assert "arange" not in str(result.module)  # folded into a constant
    _everywhere(model, {"x": np.arange(n).astype(dtype)}, {})


def test_range_of_runtime_values_is_refused_naming_the_node() -> None:
    node = helper.make_node("Range", ["s", "l", "d"], ["r"], name="grid")
    ins = [("s", np.int64, []), ("l", np.int64, []), ("d", np.int64, [])]
    model = make_model([node], ins, [("r", np.int64, None)], opset=11)
    with pytest.raises(
        RxError,
        match=r"node 'grid' \(Range\): its output shape depends on tensor values: its start",
    ):
        import_onnx(model)


def test_range_with_zero_delta_is_refused() -> None:
    nodes = [helper.make_node("Range", ["s", "l", "d"], ["r"])]
    init = {"s": np.array(0, np.int64), "l": np.array(4, np.int64), "d": np.array(0, np.int64)}
    model = make_model(nodes, [], [("r", np.int64, None)], init, opset=11)
    with pytest.raises(RxError, match="delta input is 0"):
        import_onnx(model)


# -- reductions --------------------------------------------------------------------------


def _reduce_model(op: str, x: np.ndarray, opset: int, axes: Any = None, **attrs: Any) -> Any:
    ins = ["x"]
    init = {}
    if axes is not None and opset >= 18:
        ins.append("axes")
        init["axes"] = np.array(axes, np.int64)
    elif axes is not None:
        attrs["axes"] = axes
    node = helper.make_node(op, ins, ["y"], **attrs)
    return make_model([node], [("x", x.dtype, x.shape)], [("y", x.dtype, None)], init, opset)


REDUCE_OPS = [
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
]


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("opset", [11, 13, 18])
def test_reduction_matches_onnxruntime(op: str, opset: int) -> None:
    x = np.random.default_rng(1).uniform(0.5, 1.5, size=(2, 3, 4)).astype(F32)
    for axes, keep in (([1], 1), ([-1, 0], 0), (None, 1)):
        model = _reduce_model(op, x, opset, axes, keepdims=keep)
        _everywhere(model, {"x": x}, {}, c=opset == 18 and axes == [1])


@pytest.mark.parametrize("op", ["ReduceL1", "ReduceSumSquare", "ReduceMin", "ReduceProd"])
def test_integer_reduction_matches_onnxruntime(op: str) -> None:
    x = np.random.default_rng(2).integers(-5, 6, size=(3, 4)).astype(np.int32)
    _everywhere(_reduce_model(op, x, 18, [1], keepdims=0), {"x": x}, {})


def test_integer_l2_is_computed_in_f64_and_truncated() -> None:
    x = np.array([[3, 4], [1, 1]], np.int64)
    result = import_onnx(_reduce_model("ReduceL2", x, 18, [1], keepdims=0))
    assert _interp(result, [x], {})[0].tolist() == [5, 1]


def test_noop_with_empty_axes_reduces_each_element_alone() -> None:
    x = np.array([[-2.0, 3.0]], F32)
    model = _reduce_model("ReduceSumSquare", x, 18, noop_with_empty_axes=1)
    _everywhere(model, {"x": x}, {})


def test_reduction_axes_at_run_time_are_refused_naming_the_node() -> None:
    node = helper.make_node("ReduceL1", ["x", "axes"], ["y"], name="r", keepdims=0)
    ins = [("x", F32, [2, 3]), ("axes", np.int64, [1])]
    model = make_model([node], ins, [("y", F32, [2])], opset=18)
    with pytest.raises(RxError, match=r"node 'r' \(ReduceL1\): the axes input must be known"):
        import_onnx(model)


# -- the onnx package's node tests --------------------------------------------------------

NODE_OPS = REDUCE_OPS + ["ArgMax", "ArgMin"]
OUT_OF_SCOPE = ("relaxc imports opsets 7 to", "CastLike", "(MaxPool)")
"""Refusals that are not this family's: opsets above 24 (onnx writes its newest), and an
operator of another family that an expanded function uses."""
C_SAMPLE = (
    "test_reduce_min_empty_set",
    "test_reduce_prod_keepdims_random",
    "test_reduce_l2_do_not_keepdims_example",
    "test_reduce_log_sum_exp_empty_set",
    "test_reduce_sum_square_negative_axes_keepdims_random",
    "test_reduce_l1_default_axes_keepdims_example",
    "test_argmax_negative_axis_keepdims_random_select_last_index",
    "test_argmin_no_keepdims_example",
)


@functools.lru_cache(maxsize=1)
def _cases() -> dict[str, Any]:
    return {c.name: c for c in select(all_cases(), NODE_OPS)}  # run_case binds import-time inputs


@pytest.mark.parametrize("k", TIERS)
def test_node_tests_pass_on_the_interpreter_and_the_vm(k: int) -> None:
    outcomes = [run_case(c) for c in list(_cases().values())[::k]]
    bad = [
        o
        for o in outcomes
        if o.status != "passed" and not any(r in o.message for r in OUT_OF_SCOPE)
    ]
    assert bad == []
    assert k != 1 or sum(o.status == "passed" for o in outcomes) >= 64 + ARG_CASES_PASSED


@pytest.mark.parametrize("name", C_SAMPLE)
def test_node_tests_pass_in_c(name: str) -> None:
    case = _cases().get(name)
    if case is None:
        pytest.skip(f"the installed onnx has no {name}")
    outcome = run_case(case, ("interp", "vm", "c"))
    assert outcome.status == "passed" or any(r in outcome.message for r in OUT_OF_SCOPE), outcome


# -- ArgMax / ArgMin -----------------------------------------------------------------------


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("opset", [11, 13])
def test_arg_matches_onnxruntime(op: str, opset: int) -> None:
    x = np.random.default_rng(4).integers(0, 3, size=(3, 4, 5)).astype(F32)  # ties
    for attrs in ({}, {"axis": -1, "keepdims": 0}, {"axis": 1, "select_last_index": 1}):
        if opset < 12 and "select_last_index" in attrs:
            continue
        node = helper.make_node(op, ["x"], ["y"], **attrs)
        model = make_model([node], [("x", F32, x.shape)], [("y", np.int64, None)], opset=opset)
        _everywhere(model, {"x": x}, {}, c=opset == 13)


ARG_CASES_PASSED = 32
