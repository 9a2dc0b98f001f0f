"""LinearAttention and CausalConvWithState (opset 27): the onnx package's node tests through
the interpreter and the VM (C for a sample), and models built here against onnx's reference
evaluator (onnxruntime does not implement these operators)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import pytest

from .test_ops_attention import _compare_with_reference
from .util import feed_order, make_model, randn, run_interpreter

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

from relaxc.frontend.onnx import import_onnx  # noqa: E402
from relaxc.ir.diagnostics import RxError  # noqa: E402
from tests.frontend.onnx import node_cases  # noqa: E402

OPS = ("LinearAttention", "CausalConvWithState")


@lru_cache(maxsize=1)
def _cases() -> dict[str, Any]:
    return {c.name: c for c in node_cases.all_cases() if node_cases.tested_op(c) in OPS}


def _names(op: str, c_sample: bool = False) -> list[str]:
    """The node tests of ``op`` but the expanded ones (LinearAttention's expand to Scan)."""
    out = [
        n
        for n, c in sorted(_cases().items())
        if node_cases.tested_op(c) == op and not n.endswith("_expanded")
    ]
    return out[::3] if c_sample else out


@pytest.mark.parametrize("name", _names("LinearAttention") + _names("CausalConvWithState"))
def test_node_cases(name: str) -> None:
    outcome = node_cases.run_case(_cases()[name])
    assert outcome.status == "passed", outcome.message


@pytest.mark.parametrize(
    "name", _names("LinearAttention", True) + _names("CausalConvWithState", True)
)
def test_node_cases_c(name: str) -> None:
    outcome = node_cases.run_case(_cases()[name], ("c",))
    assert outcome.status == "passed", outcome.message


@pytest.mark.parametrize("name", [n for n in _names("CausalConvWithState")])
def test_causal_conv_expanded_node_cases(name: str) -> None:
    """The expanded form (Concat, Conv, Slice, ...) gives what the fused converter does."""
    outcome = node_cases.run_case(_cases()[name + "_expanded"])
    assert outcome.status == "passed", outcome.message


def _check(model: Any, feeds: dict[str, np.ndarray], rtol: float = 1e-5) -> None:
    _compare_with_reference(model, feeds, rtol, atol=1e-5)


def _set_attr(model: Any, name: str, value: Any) -> None:
    node = model.graph.node[0]
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(kept + [helper.make_attribute(name, value)])


# -- LinearAttention ---------------------------------------------------------------------------


def _linear_model(
    rule: str,
    hq: int,
    hkv: int,
    steps: int,
    dk: int,
    dv: int,
    past: bool,
    decay_wide: bool,
    beta_heads: int,
    dtype: Any = np.float32,
    **attrs: Any,
) -> tuple[Any, dict[str, np.ndarray]]:
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    ins = [("query", (2, steps, hq * dk)), ("key", (2, steps, hkv * dk))]
    ins += [("value", (2, steps, hkv * dv))]
    names = ["query", "key", "value", "past_state" if past else "", "", ""]
    ins += [("past_state", (2, hkv, dk, dv))] if past else []
    if gated:
        names[4] = "decay"
        ins += [("decay", (2, steps, hkv * dk if decay_wide else hkv))]
    if delta:
        names[5] = "beta"
        ins += [("beta", (2, steps, beta_heads))]
    while names[-1] == "":
        names.pop()
    node = helper.make_node(
        "LinearAttention",
        names,
        ["y", "state"],
        q_num_heads=hq,
        kv_num_heads=hkv,
        update_rule=rule,
        **attrs,
    )
    model = make_model(
        [node],
        [(n, dtype, s) for n, s in ins],
        [("y", dtype, None), ("state", dtype, None)],
        opset=27,
    )
    feeds = {n: randn(*s, seed=i, dtype=dtype) for i, (n, s) in enumerate(ins)}
    if "key" in feeds:  # keys of unit length, as the delta rules expect
        k = feeds["key"].reshape(2, steps, hkv, dk)
        feeds["key"] = (k / np.linalg.norm(k, axis=-1, keepdims=True)).reshape(2, steps, -1)
    if "decay" in feeds:
        feeds["decay"] = -np.abs(feeds["decay"])
    if "beta" in feeds:
        feeds["beta"] = 1 / (1 + np.exp(-feeds["beta"]))
    return model, {n: np.ascontiguousarray(a, dtype=dtype) for n, a in feeds.items()}


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
@pytest.mark.parametrize(
    "hq, hkv, past, decay_wide, beta_heads",
    [(2, 2, False, True, 2), (4, 2, True, False, 1), (3, 1, True, True, 1)],
)
def test_linear_attention_matches_the_reference(
    rule: str, hq: int, hkv: int, past: bool, decay_wide: bool, beta_heads: int
) -> None:
    model, feeds = _linear_model(rule, hq, hkv, 5, 3, 2, past, decay_wide, beta_heads)
    _check(model, feeds)


def test_linear_attention_explicit_scale_and_a_single_step() -> None:
    model, feeds = _linear_model("gated_delta", 2, 2, 1, 4, 3, True, True, 2, scale=0.3)
    _check(model, feeds)


def test_linear_attention_refusals() -> None:
    model, _ = _linear_model("gated", 2, 2, 3, 2, 2, False, True, 2)
    node = model.graph.node[0]
    del node.input[4:]
    with pytest.raises(RxError, match="update_rule 'gated' needs the decay input"):
        import_onnx(model)
    model, _ = _linear_model("linear", 2, 2, 3, 2, 2, False, True, 2)
    _set_attr(model, "kv_num_heads", 3)  # (onnx's checks reject it first)
    with pytest.raises(RxError, match=r"q_num_heads \(2\) must be a positive multiple"):
        import_onnx(model)
    model, _ = _linear_model("delta", 2, 2, 3, 2, 2, False, True, 2)
    model.graph.input[-1].type.tensor_type.shape.dim[2].dim_value = 3  # beta (2, 3, 3)
    with pytest.raises(RxError, match="beta's last dim 3 must be kv_num_heads"):
        import_onnx(model)
    model, _ = _linear_model("linear", 2, 2, 3, 2, 2, False, True, 2)
    model.opset_import[0].version = 26
    with pytest.raises(RxError, match="an operator of opset 27 and later"):
        import_onnx(model)


# -- CausalConvWithState -----------------------------------------------------------------------


def _conv_model(
    length: int,
    k: int,
    bias: bool,
    past: bool,
    activation: str | None = None,
    dtype: Any = np.float32,
) -> tuple[Any, dict[str, np.ndarray]]:
    ins = [("x", (2, 3, length)), ("w", (3, 1, k))]
    ins += [("b", (3,))] if bias else []
    ins += [("past", (2, 3, k - 1))] if past else []
    names = ["x", "w", "b" if bias else "", "past" if past else ""]
    while names[-1] == "":
        names.pop()
    attrs = {"activation": activation} if activation else {}
    node = helper.make_node("CausalConvWithState", names, ["y", "state"], **attrs)
    model = make_model(
        [node],
        [(n, dtype, s) for n, s in ins],
        [("y", dtype, None), ("state", dtype, None)],
        opset=27,
    )
    return model, {n: randn(*s, seed=i, dtype=dtype) for i, (n, s) in enumerate(ins)}


@pytest.mark.parametrize("length, k", [(6, 3), (2, 4), (1, 2), (5, 1)])
@pytest.mark.parametrize("bias, past", [(False, False), (True, True), (False, True)])
@pytest.mark.parametrize("activation", [None, "silu"])
def test_causal_conv_matches_the_reference(
    length: int, k: int, bias: bool, past: bool, activation: str | None
) -> None:
    """Inputs longer and shorter than the carried state (whose last k - 1 positions then mix
    the past and the input), kernel size 1 (no state), bias, past state, SiLU."""
    model, feeds = _conv_model(length, k, bias, past and k > 1, activation)
    _check(model, feeds)


def test_causal_conv_chunks_compose() -> None:
    """A sequence in two calls, the state carried, equals it in one."""
    model, feeds = _conv_model(7, 3, True, True)
    x, state = feeds["x"], feeds["past"]
    result = import_onnx(model)
    whole = run_interpreter(result, [feeds[n] for n in feed_order(model)])
    parts = []
    for a, b in ((0, 4), (4, 7)):
        m, _ = _conv_model(b - a, 3, True, True)
        f = dict(feeds, x=np.ascontiguousarray(x[:, :, a:b]), past=state)
        y, state = run_interpreter(import_onnx(m), [f[n] for n in feed_order(m)])
        parts.append(y)
    np.testing.assert_allclose(np.concatenate(parts, axis=2), whole[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(state, whole[1])


def test_causal_conv_refusals() -> None:
    model, _ = _conv_model(4, 3, False, False, activation="silu")
    _set_attr(model, "activation", "gelu")
    with pytest.raises(RxError, match="activation 'gelu' is not one of none, silu, swish"):
        import_onnx(model)
    model, _ = _conv_model(4, 3, False, True)
    model.graph.input[2].type.tensor_type.shape.dim[2].dim_value = 3
    with pytest.raises(RxError, match="past_state must be"):
        import_onnx(model)
    model, _ = _conv_model(4, 3, False, False)
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "L"
    del model.graph.value_info[:]
    for out in model.graph.output:
        out.type.tensor_type.ClearField("shape")
    with pytest.raises(RxError, match="the input's length must be static"):
        import_onnx(model)
