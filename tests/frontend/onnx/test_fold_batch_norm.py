"""BatchNormalization folded into the Conv before it at import (frontend/onnx/fold_batch_norm.py):
the folded program has one convolution where the source had two ops, and computes what
onnxruntime computes; a pair whose Conv output is read elsewhere, is a graph output, or
whose weights are not known at import time is left alone."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.ir.nodes import Call

from .models import conv_branches
from .util import (
    assert_matches,
    helper,
    import_and_compare,
    make_model,
    randn,
    run_interpreter,
    run_ort,
)


def ops_of(result: Any) -> list[str]:
    return [b.value.op for b in result.module.functions[0].body if isinstance(b.value, Call)]


def computing_ops(result: Any) -> list[str]:
    return [op for op in ops_of(result) if op != "const"]


def conv_bn(
    cout: int = 4,
    bias: bool = True,
    extra_reader: bool = False,
    conv_is_output: bool = False,
    runtime_mean: bool = False,
    groups: int = 1,
    seed: int = 0,
) -> tuple[Any, dict]:
    cin = 2 * groups
    init = {
        "w": randn(cout, cin // groups, 3, 3, seed=seed),
        "s": randn(cout, seed=seed + 1),
        "b": randn(cout, seed=seed + 2),
        "v": np.abs(randn(cout, seed=seed + 3)) + 0.1,
    }
    inputs = [("x", np.float32, [1, cin, 6, 6])]
    if runtime_mean:
        inputs.append(("m", np.float32, [cout]))
    else:
        init["m"] = randn(cout, seed=seed + 4)
    if bias:
        init["cb"] = randn(cout, seed=seed + 5)
    nodes = [
        helper.make_node(
            "Conv", ["x", "w"] + (["cb"] if bias else []), ["c"], pads=[1, 1, 1, 1], group=groups
        ),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"], epsilon=1e-3),
    ]
    outputs = [("y", np.float32, None)]
    if extra_reader:
        nodes.append(helper.make_node("Relu", ["c"], ["r"]))
        outputs.append(("r", np.float32, None))
    if conv_is_output:
        outputs.append(("c", np.float32, None))
    feeds = {"x": randn(1, cin, 6, 6, seed=seed + 9)}
    if runtime_mean:
        feeds["m"] = randn(cout, seed=seed + 4)
    return make_model(nodes, inputs, outputs, init), feeds


@pytest.mark.parametrize("bias", [True, False])
def test_a_conv_and_its_batch_norm_become_one_convolution(bias: bool) -> None:
    model, feeds = conv_bn(bias=bias)
    result = import_and_compare(model, feeds)
    assert ops_of(result).count("conv2d") == 1 and "batch_norm" not in ops_of(result)
    assert any("folded into the Conv" in n for n in result.notes)
    # the normalization's four vectors are gone: the folded weight remains (the folded
    # bias, 4 floats, is small enough to be written inline)
    assert sorted(result.weights) == ["w.bn_folded"]
    assert ops_of(result).count("const") == 2


def test_folding_can_be_turned_off() -> None:
    model, feeds = conv_bn()
    result = import_and_compare(model, feeds, fold_batch_norm=False)
    assert "batch_norm" in ops_of(result)
    assert not any("folded" in n for n in result.notes)


@pytest.mark.parametrize(
    "kw", [dict(extra_reader=True), dict(conv_is_output=True), dict(runtime_mean=True)]
)
def test_a_pair_that_cannot_fold_is_left_alone(kw: dict) -> None:
    model, feeds = conv_bn(**kw)
    result = import_and_compare(model, feeds)
    assert "batch_norm" in ops_of(result)


@given(
    cout=st.sampled_from([2, 4, 6]),
    groups=st.sampled_from([1, 2]),
    bias=st.booleans(),
    seed=st.integers(0, 1000),
)
@settings(max_examples=25, deadline=None)
def test_folded_and_unfolded_agree_with_onnxruntime(
    cout: int, groups: int, bias: bool, seed: int
) -> None:
    model, feeds = conv_bn(cout=cout, groups=groups, bias=bias, seed=seed)
    want = run_ort(model, feeds)
    from relaxc.frontend.onnx import import_onnx

    for fold in (True, False):
        result = import_onnx(model, fold_batch_norm=fold)
        assert ("batch_norm" in ops_of(result)) is not fold
        assert_matches(run_interpreter(result, [feeds["x"]]), want, f"fold={fold}")


def test_a_real_model_folds_every_conv_batch_norm_pair() -> None:
    model, feeds = conv_branches()
    folded = import_and_compare(model, feeds)
    kept = import_and_compare(model, feeds, fold_batch_norm=False)
    assert ops_of(kept).count("batch_norm") == 1 and "batch_norm" not in ops_of(folded)
    assert len(computing_ops(folded)) == len(computing_ops(kept)) - 1
