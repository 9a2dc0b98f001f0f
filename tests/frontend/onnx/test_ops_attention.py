"""The transformer operators of opsets 23-25 (RMSNormalization, RotaryEmbedding, Attention):
the onnx package's node tests through the interpreter and the VM (C for a sample), and
models built here against onnx's reference evaluator."""

from __future__ import annotations

import re

from functools import lru_cache
from typing import Any

import numpy as np
import pytest

from .util import feed_order, make_model, randn, run_interpreter

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from relaxc.frontend.onnx import import_onnx  # noqa: E402
from relaxc.ir.diagnostics import RxError  # noqa: E402
from tests.frontend.onnx import node_cases  # noqa: E402

OPS = ("RMSNormalization", "RotaryEmbedding", "Attention")


@lru_cache(maxsize=1)
def _cases() -> dict[str, Any]:
    return {c.name: c for c in node_cases.all_cases() if node_cases.tested_op(c) in OPS}


def _names(op: str, c_sample: bool = False) -> list[str]:
    """The non-expanded node tests of ``op`` at opsets relaxc reads (<= 25)."""
    out = []
    for name, case in sorted(_cases().items()):
        version = max(o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx"))
        if node_cases.tested_op(case) == op and not name.endswith("_expanded") and version <= 25:
            out.append(name)
    return out[::4] if c_sample else out


@pytest.mark.parametrize("name", _names("RMSNormalization"))
def test_rms_normalization_node_cases(name: str) -> None:
    outcome = node_cases.run_case(_cases()[name])
    assert outcome.status == "passed", outcome.message


@pytest.mark.parametrize("name", _names("RMSNormalization", c_sample=True))
def test_rms_normalization_node_cases_c(name: str) -> None:
    outcome = node_cases.run_case(_cases()[name], ("c",))
    assert outcome.status == "passed", outcome.message


def _reference(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(x) for x in ReferenceEvaluator(model).run(None, feeds)]


def _compare_with_reference(
    model: Any, feeds: dict[str, np.ndarray], rtol: float = 1e-5, atol: float = 1e-6
) -> None:
    result = import_onnx(model)
    got = run_interpreter(result, [feeds[n] for n in feed_order(model)])
    want = _reference(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def _rms_model(x_shape: tuple, s_shape: tuple, axis: int, **attrs: Any) -> Any:
    node = helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=axis, **attrs)
    return make_model(
        [node],
        [("x", np.float32, x_shape), ("s", np.float32, s_shape)],
        [("y", np.float32, None)],
        opset=23,
    )


@pytest.mark.parametrize(
    "s_shape, axis",
    [((5,), -1), ((1, 5), -1), ((4, 1), -2), ((3, 1, 1), 1), ((2, 1, 1, 5), 2)],
)
def test_rms_normalization_scale_broadcasts_to_x(s_shape: tuple, axis: int) -> None:
    """Scale broadcasts to X (unidirectionally), not only as the normalized dims."""
    model = _rms_model((2, 3, 4, 5), s_shape, axis, epsilon=1e-3)
    feeds = {"x": randn(2, 3, 4, 5, seed=1), "s": randn(*s_shape, seed=2)}
    _compare_with_reference(model, feeds)


def test_rms_normalization_refusals() -> None:
    model = _rms_model((2, 3), (3,), -1, stash_type=10)
    with pytest.raises(RxError, match="stash_type 10"):
        import_onnx(model)
    model = _rms_model((2, 3), (3,), 0)  # axis 0: scale (3,) does not broadcast as (2, 3)
    model.graph.input[1].type.tensor_type.shape.dim[0].dim_value = 2
    with pytest.raises(RxError, match="does not broadcast"):
        import_onnx(model)


# -- RotaryEmbedding and Attention: node tests ------------------------------------------------

BF16 = "bf16"
"""Attention cases in bfloat16: the C target does not store bf16, so they are refused there."""


def _attention_names(c_sample: bool = False) -> list[str]:
    names = _names("Attention")
    return [n for n in names[::4] if BF16 not in n] if c_sample else names


@pytest.mark.parametrize("name", _names("RotaryEmbedding"))
def test_rotary_embedding_node_cases(name: str) -> None:
    outcome = node_cases.run_case(_cases()[name])
    assert outcome.status == "passed", outcome.message


@pytest.mark.parametrize("name", _names("RotaryEmbedding", c_sample=True))
def test_rotary_embedding_node_cases_c(name: str) -> None:
    outcome = node_cases.run_case(_cases()[name], ("c",))
    assert outcome.status == "passed", outcome.message


@pytest.mark.parametrize("name", _attention_names())
def test_attention_node_cases(name: str) -> None:
    outcome = node_cases.run_case(_cases()[name])
    assert outcome.status == "passed", outcome.message


@pytest.mark.parametrize("name", _attention_names(c_sample=True))
def test_attention_node_cases_c(name: str) -> None:
    outcome = node_cases.run_case(_cases()[name], ("c",))
    assert outcome.status == "passed", outcome.message


@pytest.mark.parametrize("name", [n for n in _names("Attention") if "fp16" in n])
def test_attention_float16_node_cases_in_c(name: str) -> None:
    """float16 cases in C: the kernel rounds at ONNX's steps, as the numpy kernel does."""
    outcome = node_cases.run_case(_cases()[name], ("c",))
    assert outcome.status == "passed", outcome.message


@pytest.mark.parametrize("name", [n for n in _names("Attention") if BF16 in n])
def test_attention_bfloat16_is_refused_by_c(name: str) -> None:
    outcome = node_cases.run_case(_cases()[name], ("interp", "vm"))
    assert outcome.status == "passed", outcome.message
    outcome = node_cases.run_case(_cases()[name], ("c",))
    assert outcome.status == "refused", outcome
    assert re.search(r"attention on bf16.*: dtype bf16 has no C representation", outcome.message)


# -- a GPT-style block at opset 23 against onnx's reference evaluator -------------------------


def _gpt_block(seq: int = 6, hidden: int = 16, heads: int = 4, kv_heads: int = 2) -> Any:
    """RMSNorm -> Q/K/V projections -> RoPE on Q and K -> causal grouped-query Attention with a
    KV cache -> output projection + residual -> RMSNorm -> MLP + residual."""
    head = hidden // heads
    r = np.random.default_rng(7)
    w = lambda *s: (r.standard_normal(s) * 0.3).astype(np.float32)  # noqa: E731
    theta = np.arange(16)[:, None] * (1e-2 ** (np.arange(head // 2) / (head // 2)))[None, :]
    inits = {
        "g1": w(hidden) + 1,
        "g2": w(hidden) + 1,
        "wq": w(hidden, hidden),
        "wk": w(hidden, kv_heads * head),
        "wv": w(hidden, kv_heads * head),
        "wo": w(hidden, hidden),
        "w1": w(hidden, 2 * hidden),
        "w2": w(2 * hidden, hidden),
        "cos": np.cos(theta).astype(np.float32),
        "sin": np.sin(theta).astype(np.float32),
    }
    H = helper
    nodes = [
        H.make_node("RMSNormalization", ["x", "g1"], ["n1"], axis=-1, epsilon=1e-5),
        H.make_node("MatMul", ["n1", "wq"], ["q"]),
        H.make_node("MatMul", ["n1", "wk"], ["k"]),
        H.make_node("MatMul", ["n1", "wv"], ["v"]),
        H.make_node("RotaryEmbedding", ["q", "cos", "sin", "pos"], ["qr"], num_heads=heads),
        H.make_node("RotaryEmbedding", ["k", "cos", "sin", "pos"], ["kr"], num_heads=kv_heads),
        H.make_node(
            "Attention",
            ["qr", "kr", "v", "", "past_k", "past_v"],
            ["att", "present_k", "present_v"],
            is_causal=1,
            q_num_heads=heads,
            kv_num_heads=kv_heads,
        ),
        H.make_node("MatMul", ["att", "wo"], ["o"]),
        H.make_node("Add", ["x", "o"], ["h1"]),
        H.make_node("RMSNormalization", ["h1", "g2"], ["n2"], axis=-1),
        H.make_node("MatMul", ["n2", "w1"], ["u"]),
        H.make_node("Sigmoid", ["u"], ["su"]),
        H.make_node("Mul", ["u", "su"], ["act"]),
        H.make_node("MatMul", ["act", "w2"], ["m"]),
        H.make_node("Add", ["h1", "m"], ["y"]),
    ]
    past = 3
    return make_model(
        nodes,
        [
            ("x", np.float32, (1, seq, hidden)),
            ("pos", np.int64, (1, seq)),
            ("past_k", np.float32, (1, kv_heads, past, head)),
            ("past_v", np.float32, (1, kv_heads, past, head)),
        ],
        [
            ("y", np.float32, None),
            ("present_k", np.float32, None),
            ("present_v", np.float32, None),
        ],
        initializers=inits,
        opset=23,
    )


def test_gpt_block_matches_the_reference_evaluator() -> None:
    model = _gpt_block()
    feeds = {
        "x": randn(1, 6, 16, seed=3),
        "pos": np.arange(3, 9, dtype=np.int64).reshape(1, 6),
        "past_k": randn(1, 2, 3, 4, seed=4),
        "past_v": randn(1, 2, 3, 4, seed=5),
    }
    _compare_with_reference(model, feeds, rtol=1e-4)
    result = import_onnx(model)
    ops = {c.op for c in _calls(result.module)}
    assert {"attention", "rotary_embedding", "rms_norm"} <= ops
    want = _reference(model, feeds)
    got = node_cases._vm(result, [feeds[n] for n in feed_order(model)], {})
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(g, w_, rtol=1e-4, atol=1e-5)


def _calls(module: Any) -> list[Any]:
    from relaxc.ir.nodes import Call

    fn = module.functions[0]
    return [b.value for b in fn.body if isinstance(b.value, Call)]


def _raw_model(node: Any, inputs: list[tuple[str, Any, tuple]]) -> Any:
    """A one-node model without onnx's checks (they reject some of these first)."""
    from .util import tensor_info

    graph = helper.make_graph(
        [node], "t", [tensor_info(*i) for i in inputs], [tensor_info("y", np.float32, None)]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])


def test_attention_refusals() -> None:
    qkv3 = [(n, np.float32, (1, 2, 8)) for n in "qkv"]
    model = _raw_model(helper.make_node("Attention", ["q", "k", "v"], ["y"]), qkv3)
    with pytest.raises(RxError, match="need the q_num_heads and kv_num_heads"):
        import_onnx(model)
    qkv4 = [(n, np.float32, (1, 2, 3, 4)) for n in "qkv"]
    node = helper.make_node("Attention", ["q", "k", "v", "m"], ["y"])
    model = _raw_model(node, qkv4 + [("m", np.int64, (3, 3))])
    with pytest.raises(RxError, match="attn_mask is i64; it must be bool or the dtype of Q"):
        import_onnx(model)
    node = helper.make_node("Attention", ["q", "k", "v", "m"], ["y"])
    model = _raw_model(node, qkv4 + [("m", np.float32, (3, 4))])
    with pytest.raises(RxError, match="must be at most the total sequence length 3"):
        import_onnx(model)
    node = helper.make_node("Attention", ["q", "k", "v", "", "pk"], ["y"])
    model = _raw_model(node, qkv4 + [("pk", np.float32, (1, 2, 3, 4))])
    with pytest.raises(RxError, match="past_key and past_value must be given together"):
        import_onnx(model)


def test_rotary_embedding_refusals() -> None:
    node = helper.make_node("RotaryEmbedding", ["x", "c", "s"], ["y"])
    ins = [("x", np.float32, (1, 3, 8)), ("c", np.float32, (1, 3, 4)), ("s", np.float32, (1, 3, 4))]
    with pytest.raises(RxError, match="needs the num_heads attribute"):
        import_onnx(_raw_model(node, ins))
    node = helper.make_node("RotaryEmbedding", ["x", "c", "s"], ["y"], rotary_embedding_dim=4)
    ins = [
        ("x", np.float32, (1, 2, 3, 8)),
        ("c", np.float32, (1, 3, 4)),
        ("s", np.float32, (1, 3, 4)),
    ]
    with pytest.raises(RxError, match="not half the rotary dim 4"):
        import_onnx(_raw_model(node, ins))


def test_gpt_block_with_a_symbolic_sequence_on_every_backend() -> None:
    """The block with a symbolic sequence length (bounded for C): the interpreter, the VM and
    C (whose attention recomputes scores instead of holding a row of symbolic length)."""
    model = _gpt_block()
    for vi in model.graph.input:
        if vi.name in ("x", "pos"):
            vi.type.tensor_type.shape.dim[1].dim_param = "s"
    del model.graph.value_info[:]
    for out in model.graph.output:
        out.type.tensor_type.ClearField("shape")
    result = import_onnx(model, upper_bounds={"s": 8})
    for seq in (5, 1):
        feeds = {
            "x": randn(1, seq, 16, seed=seq),
            "pos": np.arange(3, 3 + seq, dtype=np.int64).reshape(1, seq),
            "past_k": randn(1, 2, 3, 4, seed=4),
            "past_v": randn(1, 2, 3, 4, seed=5),
        }
        want = _reference(model, feeds)
        args = [feeds[n] for n in feed_order(model)]
        for backend in ("interp", "vm", "c"):
            got = node_cases.RUNNERS[backend](result, args, {"s": seq})
            for g, w_ in zip(got, want):
                np.testing.assert_allclose(g, w_, rtol=1e-4, atol=1e-5, err_msg=backend)


# -- against onnxruntime ------------------------------------------------------------------------


def _attention_model(mode: int, **attrs: Any) -> Any:
    node = helper.make_node(
        "Attention",
        ["q", "k", "v", "m"],
        ["y", "pk", "pv", "qk"],
        qk_matmul_output_mode=mode,
        **attrs,
    )
    ins = [("q", (1, 2, 3, 4)), ("k", (1, 2, 5, 4)), ("v", (1, 2, 5, 4)), ("m", (3, 5))]
    from .util import tensor_info

    graph = helper.make_graph(
        [node],
        "a",
        [tensor_info(n, np.float32, s) for n, s in ins],
        [tensor_info(n, np.float32, None) for n in ("y", "pk", "pv", "qk")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    return model, {n: randn(*s, seed=i) * 2 for i, (n, s) in enumerate(ins)}


@pytest.mark.parametrize("mode", [0, 1, 3])
@pytest.mark.parametrize("attrs", [{}, {"softcap": 2.0, "is_causal": 1}, {"scale": 0.2}])
def test_attention_matches_onnxruntime(mode: int, attrs: dict) -> None:
    """Y, the present K/V and qk_matmul_output against onnxruntime. With a softcap, mode 0 is
    the scores before the softcap (the spec's words, and onnxruntime's), where onnx's reference
    evaluator gives them after it."""
    from .util import run_ort

    model, feeds = _attention_model(mode, **attrs)
    want = run_ort(model, feeds)
    got = run_interpreter(import_onnx(model), [feeds[n] for n in "qkvm"])
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(g, w_, rtol=1e-5, atol=1e-5)


def test_operators_of_opset_23_are_refused_in_older_models() -> None:
    node = helper.make_node("RMSNormalization", ["x", "s"], ["y"])
    graph = helper.make_graph(
        [node],
        "t",
        [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, (2, 3)) for n in "xs"],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    with pytest.raises(
        RxError, match="an operator of opset 23 and later; the model imports opset 22"
    ):
        import_onnx(model)


# -- opset 25's sliding window, float16 and softmax_precision --------------------------------------


def _windowed_model(dtype: Any, opset: int = 25, mask: bool = True, **attrs: Any) -> Any:
    from .util import tensor_info

    names = ["q", "k", "v", "m", "pk", "pv"] if mask else ["q", "k", "v", "", "pk", "pv"]
    node = helper.make_node("Attention", names, ["y", "present_k", "present_v"], **attrs)
    ins = [("q", (1, 2, 4, 4)), ("k", (1, 2, 4, 4)), ("v", (1, 2, 4, 3))]
    ins += [("m", (4, 6))] if mask else []
    ins += [("pk", (1, 2, 2, 4)), ("pv", (1, 2, 2, 3))]
    graph = helper.make_graph(
        [node],
        "w",
        [tensor_info(n, dtype, s) for n, s in ins],
        [tensor_info(n, dtype, None) for n in ("y", "present_k", "present_v")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    feeds = {n: randn(*s, seed=i, dtype=dtype) for i, (n, s) in enumerate(ins)}
    return model, feeds


@pytest.mark.parametrize(
    "attrs",
    [
        {"left_window_size": 1},
        {"left_window_size": 2, "right_window_size": 1},
        {"right_window_size": 0, "left_window_size": 0},
        {"left_window_size": 1, "is_causal": 1, "softcap": 2.0},
    ],
)
def test_attention_window_matches_onnxruntime(attrs: dict) -> None:
    """Opset 25's window counts positions from the past's length: query i at i + 2 here."""
    from .util import run_ort

    model, feeds = _windowed_model(np.float32, **attrs)
    want = run_ort(model, feeds)
    result = import_onnx(model)
    got = run_interpreter(result, [feeds[n] for n in feed_order(model)])
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(g, w_, rtol=1e-5, atol=1e-6)
    assert any(dict(c.kwargs).get("window_left", -1) >= 0 for c in _calls(result.module))


def test_attention_float16_rounds_at_the_reference_steps() -> None:
    """float16 Attention against onnx's reference (which rounds each step in float16): within
    the node tests' float16 tolerance, where a float64 computation rounded once is not."""
    model, feeds = _windowed_model(np.float16, is_causal=1, softcap=3.0, mask=False)
    want = _reference(model, feeds)
    got = run_interpreter(import_onnx(model), [feeds[n] for n in feed_order(model)])
    r, a = node_cases._half_tolerance(node_cases.RTOL, np.dtype(np.float16))
    for g, w_ in zip(got, want):
        assert g.dtype == np.float16
        np.testing.assert_allclose(g.astype(np.float32), w_.astype(np.float32), rtol=r, atol=a)


def test_attention_25_refusals() -> None:
    model, _ = _windowed_model(np.float32, left_window_size=-2)
    with pytest.raises(RxError, match="left_window_size must be -1"):
        import_onnx(model)
    model, _ = _windowed_model(np.float32, q_num_heads=2, kv_num_heads=2)
    with pytest.raises(RxError, match="must not be given with 4-D"):
        import_onnx(model)
    model, _ = _windowed_model(np.float32, softmax_precision=10)
    with pytest.raises(RxError, match="softmax_precision float16 below the inputs' f32"):
        import_onnx(model)
    model, _ = _windowed_model(np.float32, opset=24, left_window_size=1)  # not read before 25
    result = import_onnx(model)
    assert all(dict(c.kwargs).get("window_left", -1) == -1 for c in _calls(result.module))


@pytest.mark.parametrize("precision", [None, 1, 10])
def test_attention_float16_softmax_precision_matches_the_reference(precision: Any) -> None:
    """float16 with softmax_precision float (a float32 softmax, its probabilities rounded
    once), float16 (every step rounded) or none (as float16): the reference's bits."""
    attrs = {} if precision is None else {"softmax_precision": precision}
    model, feeds = _windowed_model(np.float16, left_window_size=2, **attrs)
    for name in ("q", "k"):
        feeds[name] = (feeds[name] * 3).astype(np.float16)  # scores far from 0: rounding shows
    want = _reference(model, feeds)
    result = import_onnx(model)
    call = next(c for c in _calls(result.module) if c.op == "attention")
    assert dict(call.kwargs).get("softmax_steps", True) is (precision != 1)
    got = run_interpreter(result, [feeds[n] for n in feed_order(model)])
    for g, w_ in zip(got, want):
        ulp = np.spacing(np.abs(w_)).astype(np.float64)
        assert (np.abs(g.astype(np.float64) - w_.astype(np.float64)) <= ulp).all()
