"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: against onnxruntime on the
interpreter, the VM and C, a property over random shapes and targets, and the onnx
package's node tests."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaxc.frontend.onnx import import_onnx
from relaxc.ir.diagnostics import RxError

from .node_cases import TIERS, _c, _interp, _vm, all_cases, run_case, select
from .util import ORT_TOLERANCE, helper, make_model, onnx, rng, run_ort

F32 = np.float32
NLL, SCE = "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"


def _loss_model(
    op: str,
    x_shape: tuple[int | str, ...],
    *,
    dtype: Any = F32,
    target_dtype: Any = np.int64,
    weight: bool = False,
    log_prob: bool = False,
    opset: int = 13,
    name: str = "loss",
    **attrs: Any,
) -> Any:
    ins = [("x", dtype, list(x_shape)), ("t", target_dtype, [x_shape[0], *x_shape[2:]])]
    if weight:
        ins.append(("w", dtype, [x_shape[1]]))
    outs = [("y", dtype, None)] + ([("lp", dtype, None)] if log_prob else [])
    node = helper.make_node(op, [i[0] for i in ins], [o[0] for o in outs], name=name, **attrs)
    return make_model([node], ins, outs, opset=opset)


def _feeds(
    x_shape: tuple[int, ...],
    weight: bool,
    ignore_index: int | None,
    seed: int = 0,
    dtype: Any = F32,
    target_dtype: Any = np.int64,
) -> dict[str, np.ndarray]:
    """Scores, targets in [0, C) with about a third of them the ignore_index (when given),
    and positive weights."""
    g = rng(seed)
    n, c, rest = x_shape[0], x_shape[1], x_shape[2:]
    t = g.integers(0, c, (n, *rest))
    if ignore_index is not None:
        t = np.where(g.random(t.shape) < 0.35, ignore_index, t)
    feeds = {
        "x": g.standard_normal(x_shape).astype(dtype),
        "t": t.astype(target_dtype),
    }
    if weight:
        feeds["w"] = g.uniform(0.2, 2.0, c).astype(dtype)
    return feeds


def _everywhere(
    model: Any, feeds: dict[str, np.ndarray], dims: dict[str, int] | None = None, c: bool = True
) -> None:
    """``model`` on the interpreter, the VM and (with ``c``) C equals onnxruntime (C with
    the dims of this run as the upper bounds of the symbolic ones)."""
    result = import_onnx(model, upper_bounds=dims or None)
    want = run_ort(model, feeds)
    args = list(feeds.values())
    for run in (_interp, _vm, _c) if c else (_interp, _vm):
        got = run(result, args, dims or {})
        assert len(got) == len(want), run.__name__
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, run.__name__
            rtol, atol = ORT_TOLERANCE[w.dtype.name]
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=run.__name__)


@pytest.mark.parametrize("op", [NLL, SCE])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weight", [False, True])
@pytest.mark.parametrize("ignore_index", [None, 1, -3, 9])
@pytest.mark.parametrize("x_shape", [(4, 5), (2, 3, 4, 2)])
def test_losses_match_onnxruntime(
    op: str, reduction: str, weight: bool, ignore_index: int | None, x_shape: tuple[int, ...]
) -> None:
    """Every reduction, with and without a weight, an ignore_index inside [0, C) and two
    outside it, on 2-D and 4-D scores (C for the 4-D ones with an ignore_index)."""
    attrs: dict[str, Any] = {"reduction": reduction}
    if ignore_index is not None:
        attrs["ignore_index"] = ignore_index
    model = _loss_model(op, x_shape, weight=weight, **attrs)
    feeds = _feeds(x_shape, weight, ignore_index)
    _everywhere(model, feeds, c=len(x_shape) == 4 and ignore_index == -3)  # C: 12 of them


@pytest.mark.parametrize("reduction", ["none", "mean"])
@pytest.mark.parametrize("weight", [False, True])
def test_softmax_cross_entropy_log_prob_output(reduction: str, weight: bool) -> None:
    x_shape = (3, 4, 5)
    model = _loss_model(
        SCE, x_shape, weight=weight, log_prob=True, reduction=reduction, ignore_index=2
    )
    _everywhere(model, _feeds(x_shape, weight, 2))


@pytest.mark.parametrize("op", [NLL, SCE])
@pytest.mark.parametrize(
    ("dtype", "target_dtype"), [(np.float64, np.int32), (F32, np.int32), (np.float16, np.int64)]
)
def test_other_types_match_onnxruntime(op: str, dtype: Any, target_dtype: Any) -> None:
    x_shape = (3, 4, 2)
    model = _loss_model(
        op,
        x_shape,
        dtype=dtype,
        target_dtype=target_dtype,
        weight=True,
        reduction="mean",
        ignore_index=0,
    )
    _everywhere(model, _feeds(x_shape, True, 0, dtype=dtype, target_dtype=target_dtype))


def test_bf16_matches_the_onnx_reference_on_the_interpreter_and_the_vm() -> None:
    """onnxruntime has no bf16 loss and C no bf16: the interpreter and the VM compute it
    through float32, rounding to bf16 after each op (so within a few bf16 epsilons)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from onnx.reference.ops.op_softmax_cross_entropy_loss import softmaxcrossentropy

    bf16 = np.dtype(ml_dtypes.bfloat16)
    b, i64 = onnx.TensorProto.BFLOAT16, onnx.TensorProto.INT64
    ins = [("x", b, [3, 4, 2]), ("t", i64, [3, 2]), ("w", b, [4])]
    node = helper.make_node(SCE, ["x", "t", "w"], ["y", "lp"], ignore_index=1)
    graph = helper.make_graph(
        [node],
        "loss",
        [helper.make_tensor_value_info(*i) for i in ins],
        [helper.make_tensor_value_info(o, b, None) for o in ("y", "lp")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    feeds = _feeds((3, 4, 2), True, 1)
    args = [feeds["x"].astype(bf16), feeds["t"], feeds["w"].astype(bf16)]
    wide = [a.astype(F32) if a.dtype == bf16 else a for a in args]
    want = softmaxcrossentropy(*wide, reduction="mean", ignore_index=1, get_log_prob=True)
    result = import_onnx(model)
    for run in (_interp, _vm):
        got = run(result, args, {})
        for g, w in zip(got, want):
            assert g.dtype == bf16 and g.shape == w.shape, run.__name__
            np.testing.assert_allclose(g.astype(F32), w, rtol=2**-6, atol=2**-8)


def test_opset_12_and_22_are_read_as_13() -> None:
    for op, opset in ((SCE, 12), (NLL, 12), (NLL, 22)):
        model = _loss_model(op, (3, 4), weight=True, opset=opset, ignore_index=1)
        _everywhere(model, _feeds((3, 4), True, 1), c=False)


def test_the_default_reduction_is_mean() -> None:
    model = _loss_model(SCE, (3, 4, 2), weight=True)
    _everywhere(model, _feeds((3, 4, 2), True, None), c=False)


def test_a_symbolic_batch_dimension() -> None:
    model = _loss_model(SCE, ("N", 4, 3), weight=True, log_prob=True, ignore_index=1)
    for n in (1, 5):
        _everywhere(model, _feeds((n, 4, 3), True, 1, seed=n), {"N": n}, c=n == 5)


@pytest.mark.parametrize("weight", [False, True])
def test_mean_of_only_ignored_targets_is_nan(weight: bool) -> None:
    """0 / 0 as onnxruntime: no target counts."""
    model = _loss_model(NLL, (3, 4), weight=weight, ignore_index=2)
    feeds = _feeds((3, 4), weight, None)
    feeds["t"][:] = 2
    assert np.isnan(run_ort(model, feeds)[0])
    result = import_onnx(model)
    for run in (_interp, _vm, _c):
        (got,) = run(result, list(feeds.values()), {})
        assert got.shape == () and np.isnan(got), run.__name__


def test_an_ignore_index_beyond_int32_ignores_nothing_of_an_int32_target() -> None:
    model = _loss_model(
        NLL, (3, 4), target_dtype=np.int32, weight=True, reduction="mean", ignore_index=2**40
    )
    _everywhere(model, _feeds((3, 4), True, None, target_dtype=np.int32), c=False)


def test_an_unknown_reduction_is_refused_naming_the_node() -> None:
    node = helper.make_node(NLL, ["x", "t"], ["y"], name="nll", reduction="avg")
    ins = [("x", F32, [3, 4]), ("t", np.int64, [3])]
    model = make_model([node], ins, [("y", F32, None)], opset=13)
    with pytest.raises(
        RxError, match=r"node 'nll' \(NegativeLogLikelihoodLoss\): reduction 'avg' is not one of"
    ):
        import_onnx(model)


def test_a_target_of_the_wrong_shape_is_refused_naming_the_node() -> None:
    node = helper.make_node(SCE, ["x", "t"], ["y"], name="ce", reduction="none")
    ins = [("x", F32, [3, 4, 2]), ("t", np.int64, [3, 4])]
    model = make_model([node], ins, [("y", F32, None)], opset=13)
    with pytest.raises(
        RxError,
        match=r"node 'ce' \(SoftmaxCrossEntropyLoss\): its target has shape \(3, 4\); "
        r"the input \(3, 4, 2\) needs \(3, 2\)",
    ):
        import_onnx(model)


# -- a property over random shapes and targets --------------------------------------------


@st.composite
def loss_cases(draw: Any) -> tuple[Any, ...]:
    n, c = draw(st.integers(1, 3)), draw(st.integers(1, 5))
    rest = tuple(draw(st.lists(st.integers(1, 3), max_size=3)))
    op = draw(st.sampled_from([NLL, SCE]))
    reduction = draw(st.sampled_from(["none", "sum", "mean"]))
    weight = draw(st.booleans())
    ignore_index = draw(st.one_of(st.none(), st.integers(-2, c + 1)))
    seed = draw(st.integers(0, 2**16))
    return op, (n, c, *rest), reduction, weight, ignore_index, seed


@settings(
    max_examples=40,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(loss_cases())
def test_losses_agree_with_onnxruntime_on_random_shapes_and_targets(case: tuple) -> None:
    op, x_shape, reduction, weight, ignore_index, seed = case
    attrs: dict[str, Any] = {"reduction": reduction}
    if ignore_index is not None:
        attrs["ignore_index"] = ignore_index
    model = _loss_model(op, x_shape, weight=weight, log_prob=op == SCE, **attrs)
    feeds = _feeds(x_shape, weight, ignore_index, seed=seed)
    want = run_ort(model, feeds)  # a mean of only ignored targets: nan on both sides
    result = import_onnx(model)
    for run in (_interp, _vm):
        got = run(result, list(feeds.values()), {})
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, run.__name__
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=run.__name__)


# -- the onnx package's node tests --------------------------------------------------------

NODE_OPS = [NLL, SCE]
C_SAMPLE = (
    "test_nllloss_NCd1d2d3_none_no_weight_negative_ii",
    "test_nllloss_NCd1d2d3_sum_weight_high_ii",
    "test_nllloss_NCd1_mean_weight_negative_ii",
    "test_sce_mean_weight_ii_4d_log_prob",
    "test_sce_NCd1d2d3d4d5_mean_weight",
    "test_sce_mean_no_weight_ii_3d_expanded",
)


@functools.lru_cache(maxsize=1)
def _cases() -> dict[str, Any]:
    return {c.name: c for c in select(all_cases(), NODE_OPS)}


@pytest.mark.parametrize("k", TIERS)
def test_node_tests_pass_on_the_interpreter_and_the_vm(k: int) -> None:
    outcomes = [run_case(c) for c in list(_cases().values())[::k]]
    assert [o for o in outcomes if o.status != "passed"] == []
    assert k != 1 or len(outcomes) >= 36 + 68


@pytest.mark.parametrize("name", C_SAMPLE)
def test_node_tests_pass_in_c(name: str) -> None:
    case = _cases().get(name)
    if case is None:
        pytest.skip(f"the installed onnx has no {name}")
    outcome = run_case(case, ("interp", "vm", "c"))
    assert outcome.status == "passed", outcome
