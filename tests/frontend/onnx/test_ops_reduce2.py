"""LogSoftmax, Hardmax, CumSum, CumProd, LpNormalization and TopK: against onnxruntime, and
the onnx package's node tests through the interpreter and the VM (C for a sample)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from relaxc.frontend.onnx import import_onnx
from relaxc.ir.diagnostics import RxError

from .node_cases import TIERS, all_cases, run_case, select
from .test_ops_reduce import _everywhere
from .util import helper, make_model, randn

F32 = np.float32


def _axis_model(op: str, shape: tuple[int, ...], opset: int, **attrs: Any) -> Any:
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    return make_model([node], [("x", F32, list(shape))], [("y", F32, None)], opset=opset)


@pytest.mark.parametrize("op", ["LogSoftmax", "Hardmax"])
@pytest.mark.parametrize(("opset", "axis"), [(11, 1), (11, 0), (11, None), (13, 1), (13, None)])
def test_axis_ops_match_onnxruntime(op: str, opset: int, axis: int | None) -> None:
    attrs = {} if axis is None else {"axis": axis}
    x = randn(2, 3, 4)
    if op == "Hardmax":  # a tie: the first max wins
        x[0, 0, :2] = 5.0
        x[0, 1:, :] = 5.0
    _everywhere(_axis_model(op, x.shape, opset, **attrs), {"x": x}, {}, c=opset == 11)


def test_hardmax_over_a_symbolic_axis_is_refused_naming_the_node() -> None:
    node = helper.make_node("Hardmax", ["x"], ["y"], name="hm", axis=-1)
    model = make_model([node], [("x", F32, [2, "W"])], [("y", F32, None)], opset=13)
    with pytest.raises(RxError, match=r"node 'hm' \(Hardmax\): the length of its axis \(W\)"):
        import_onnx(model)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize(("exclusive", "reverse"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum_matches_onnxruntime(dtype: Any, exclusive: int, reverse: int) -> None:
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    init = {"axis": np.array(-2, np.int64)}
    model = make_model([node], [("x", dtype, [2, 3, 4])], [("y", dtype, None)], init, opset=14)
    x = (randn(2, 3, 4) * 5).astype(dtype)
    _everywhere(model, {"x": x}, {}, c=exclusive == reverse)


def test_cumsum_with_a_runtime_axis_is_refused_naming_the_node() -> None:
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], name="cs")
    ins = [("x", F32, [2, 3]), ("axis", np.int64, [])]
    model = make_model([node], ins, [("y", F32, None)], opset=14)
    with pytest.raises(RxError, match=r"node 'cs' \(CumSum\): the axis input must be known"):
        import_onnx(model)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [0, -1])
def test_lp_normalization_matches_onnxruntime(p: int, axis: int) -> None:
    model = _axis_model("LpNormalization", (3, 4), 17, p=p, axis=axis)
    _everywhere(model, {"x": randn(3, 4)}, {}, c=axis == 0)


def test_lp_normalization_of_zeros_is_zero() -> None:
    model = _axis_model("LpNormalization", (2, 3), 17, p=2, axis=1)
    x = randn(2, 3)
    x[1] = 0.0
    _everywhere(model, {"x": x}, {})


def test_lp_normalization_with_p_3_is_refused_naming_the_node() -> None:
    node = helper.make_node("LpNormalization", ["x"], ["y"], name="lp", p=3)
    model = make_model([node], [("x", F32, [2, 3])], [("y", F32, None)], opset=17)
    with pytest.raises(RxError, match=r"node 'lp' \(LpNormalization\): p must be 1 or 2, got 3"):
        import_onnx(model)


@pytest.mark.parametrize(("opset", "largest"), [(1, 1), (10, 1), (11, 0), (11, 1)])
def test_topk_matches_onnxruntime(opset: int, largest: int) -> None:
    attrs: dict[str, Any] = {"axis": 1}
    ins = ["x"]
    init = {}
    if opset < 10:
        attrs["k"] = 2
    else:
        ins.append("k")
        init = {"k": np.array([2], np.int64)}
    if opset >= 11:
        attrs["largest"] = largest
    node = helper.make_node("TopK", ins, ["v", "i"], **attrs)
    outs = [("v", F32, None), ("i", np.int64, None)]
    model = make_model([node], [("x", F32, [2, 4, 3])], outs, init, opset=opset)
    _everywhere(model, {"x": randn(2, 4, 3)}, {}, c=opset == 11)


def test_topk_with_a_negative_k_is_refused_naming_the_node() -> None:
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], name="tk")
    outs = [("v", F32, None), ("i", np.int64, None)]
    init = {"k": np.array([-1], np.int64)}
    model = make_model([node], [("x", F32, [2, 3])], outs, init, opset=11)
    with pytest.raises(RxError, match=r"node 'tk' \(TopK\): k is -1; it must be in \[0, the axis"):
        import_onnx(model)


# -- the onnx package's node tests --------------------------------------------------------

NODE_OPS = ["LogSoftmax", "Hardmax", "CumSum", "CumProd", "LpNormalization", "TopK"]
OUT_OF_SCOPE: tuple[str, ...] = ()
"""Refusals that are not this family's (none since u64 is a dtype)."""
C_SAMPLE = (
    "test_logsoftmax_axis_0",
    "test_logsoftmax_large_number",
    "test_logsoftmax_default_axis_expanded",
    "test_hardmax_one_hot",
    "test_hardmax_axis_1",
    "test_cumsum_2d_axis_1",
    "test_cumsum_1d_reverse_exclusive",
    "test_cumprod_1d_int32_exclusive",
    "test_cumprod_2d_axis_0",
    "test_l2normalization_axis_0",
    "test_l1normalization_axis_last",
    "test_top_k_same_values_2d",
    "test_top_k_smallest",
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
    assert k != 1 or sum(o.status == "passed" for o in outcomes) >= 28 + 18 + 6 + 6


@pytest.mark.parametrize("name", C_SAMPLE)
def test_node_tests_pass_in_c(name: str) -> None:
    case = _cases().get(name)
    if case is None:
        pytest.skip(f"the installed onnx has no {name}")
    outcome = run_case(case, ("interp", "vm", "c"))
    assert outcome.status == "passed", outcome
