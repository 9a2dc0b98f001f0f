"""attention and rotary_embedding: inference and the numpy kernels, against loops written
from the definitions."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.ir import dims as D
from relaxc.ir.nodes import Var
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import OpError, bind_args
from relaxc.ir.types import TensorType, dtype_from_numpy

n = D.Sym("n")


def T(shape: Any, dtype: str = "f32") -> TensorType:
    return TensorType(tuple(shape), dtype)


def _bound(name: str, k: int, attrs: dict) -> Any:
    op = REGISTRY.get(name)
    assert op is not None
    return op, bind_args(op, [Var(f"x{i}") for i in range(k)], list(attrs.items()))


def infer(name: str, types: list, **attrs: Any) -> Any:
    op, b = _bound(name, len(types), attrs)
    return op.infer(types, b.attrs)


def run(name: str, arrays: list, **attrs: Any) -> np.ndarray:
    op, b = _bound(name, len(arrays), attrs)
    types = [T(a.shape, dtype_from_numpy(a.dtype)) for a in arrays]
    t = op.infer(types, b.attrs)
    out = op.kernel(arrays, dict(b.attrs))
    assert out.shape == tuple(t.shape) and out.dtype == arrays[0].dtype
    return out


def _loop_attention(
    q, k, v, bias=None, lens=None, *, scale, softcap=0.0, causal=False, offset=0, window=(-1, -1)
):
    """Y by the definition, one (batch, head, query) row at a time, in float64."""
    B, Hq, Sq, _ = q.shape
    Hkv, Skv, Dv = k.shape[1], k.shape[2], v.shape[3]
    y = np.zeros((B, Hq, Sq, Dv))
    for b in range(B):
        for h in range(Hq):
            hk = h // (Hq // Hkv)
            for i in range(Sq):
                s = np.array([float(q[b, h, i] @ k[b, hk, j]) * scale for j in range(Skv)])
                if softcap:
                    s = softcap * np.tanh(s / softcap)
                add = (
                    np.zeros(Skv)
                    if bias is None
                    else np.broadcast_to(bias, (B, Hq, Sq, Skv))[b, h, i].astype(float)
                )
                for j in range(Skv):
                    off = offset if lens is None else lens[b] - Sq
                    if (causal and j > i + off) or (lens is not None and j >= lens[b]):
                        add[j] = -math.inf
                    if (window[0] >= 0 and j < i + off - window[0]) or (
                        window[1] >= 0 and j > i + off + window[1]
                    ):
                        add[j] = -math.inf
                if np.all(add == -math.inf):
                    continue
                z = s + add
                p = np.exp(z - z.max())
                y[b, h, i] = (p / p.sum()) @ v[b, hk].astype(float)
    return y


def _qkv(seed: int, b=2, hq=4, hkv=2, sq=3, skv=5, d=4, dv=3, dtype=np.float32):
    r = np.random.default_rng(seed)
    return (
        r.standard_normal((b, hq, sq, d)).astype(dtype),
        r.standard_normal((b, hkv, skv, d)).astype(dtype),
        r.standard_normal((b, hkv, skv, dv)).astype(dtype),
    )


def test_attention_inference() -> None:
    q, k, v = T((2, 4, n, 8)), T((2, 2, 6, 8)), T((2, 2, 6, 5))
    assert infer("attention", [q, k, v], scale=0.5) == T((2, 4, n, 5))
    assert infer("attention", [q, k, v, T((1, 1, n, 6))], scale=0.5, result="probs") == T(
        (2, 4, n, 6)
    )
    assert infer("attention", [q, k, v, T((1, 1, 1, 1)), T((2,), "i64")], scale=1.0) == T(
        (2, 4, n, 5)
    )
    with pytest.raises(OpError, match="not a multiple of 3"):
        infer("attention", [q, T((2, 3, 6, 8)), T((2, 3, 6, 5))], scale=1.0)
    with pytest.raises(OpError, match="head size of k and q"):
        infer("attention", [q, T((2, 2, 6, 7)), v], scale=1.0)
    with pytest.raises(OpError, match="does not broadcast"):
        infer("attention", [q, k, v, T((1, 1, 1, 5))], scale=1.0)
    with pytest.raises(OpError, match="kv_lens must be i64"):
        infer("attention", [q, k, v, T((1, 1, 1, 1)), T((2,), "i32")], scale=1.0)
    with pytest.raises(OpError, match="result must be one of"):
        infer("attention", [q, k, v], scale=1.0, result="scores")
    with pytest.raises(OpError, match="bias is f64"):
        infer("attention", [q, k, v, T((1, 1, 1, 1), "f64")], scale=1.0)


@pytest.mark.parametrize(
    "causal, offset, softcap", [(False, 0, 0.0), (True, 0, 0.0), (True, 2, 3.0)]
)
def test_attention_matches_the_definition(causal: bool, offset: int, softcap: float) -> None:
    q, k, v = _qkv(1)
    bias = np.random.default_rng(2).standard_normal((1, 4, 3, 5)).astype(np.float32)
    got = run(
        "attention", [q, k, v, bias], scale=0.3, causal=causal, offset=offset, softcap=softcap
    )
    want = _loop_attention(q, k, v, bias, scale=0.3, causal=causal, offset=offset, softcap=softcap)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_attention_padding_and_fully_masked_rows() -> None:
    """kv_lens masks the padding keys and moves the causal frontier to kv_lens - Sq; a row
    with no allowed key (kv_lens 0, or a negative offset) is zeros, not NaN."""
    q, k, v = _qkv(3, dtype=np.float64)
    zero = np.zeros((1, 1, 1, 1))
    for lens in (np.array([5, 2]), np.array([0, 4]), np.array([1, 3])):
        for causal in (False, True):
            got = run("attention", [q, k, v, zero, lens], scale=0.5, causal=causal)
            want = _loop_attention(q, k, v, lens=lens, scale=0.5, causal=causal)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
            assert not np.isnan(got).any()
    got = run("attention", [q, k, v, zero, np.array([0, 5])], scale=0.5)
    assert (got[0] == 0).all()


@pytest.mark.parametrize("window", [(0, 0), (1, -1), (-1, 1), (2, 0), (0, 3)])
@pytest.mark.parametrize(
    "causal, offset, lens", [(False, 0, None), (True, 2, None), (True, 0, [5, 2])]
)
def test_attention_window_matches_the_definition(window, causal, offset, lens) -> None:
    """Key j is allowed for query i when i + offset - left <= j <= i + offset + right, the
    offset being kv_lens[b] - Sq with kv_lens; rows the window empties are zeros."""
    q, k, v = _qkv(6, dtype=np.float64)
    args = [q, k, v] + ([np.zeros((1, 1, 1, 1)), np.array(lens)] if lens else [])
    got = run(
        "attention",
        args,
        scale=0.5,
        causal=causal,
        offset=offset,
        window_left=window[0],
        window_right=window[1],
    )
    want = _loop_attention(
        q,
        k,
        v,
        lens=None if lens is None else np.array(lens),
        scale=0.5,
        causal=causal,
        offset=offset,
        window=window,
    )
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _float16_steps(q, k, v, bias, scale, softcap):
    """ONNX's Attention in float16 numpy arithmetic (numpy rounds each op to float16; its
    float16 matmul and sum add in float32): what ``rounding="f16"`` reproduces."""
    root = np.float16(np.sqrt(scale))
    rep = q.shape[1] // k.shape[1]
    keys, values = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    qk = np.matmul(q * root, (keys * root).swapaxes(-1, -2))
    c = np.float16(softcap)
    scores = np.tanh(qk / c) * c + bias
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = e / e.sum(axis=-1, keepdims=True)
    return np.matmul(probs, values)


def test_attention_float16_rounding_follows_the_steps() -> None:
    q, k, v = (x * 3 for x in _qkv(7, sq=6, skv=7, d=8, dtype=np.float16))
    bias = np.random.default_rng(8).standard_normal((1, 4, 6, 7)).astype(np.float16)
    want = _float16_steps(q, k, v, bias, 0.35, 4.0)
    args = [q, k, v, bias]
    stepped = run("attention", args, scale=0.35, softcap=4.0, rounding="f16")
    once = run("attention", args, scale=0.35, softcap=4.0)
    ulp = np.spacing(np.abs(want))
    assert (np.abs(stepped.astype(np.float64) - want) <= ulp).all()
    assert (stepped == want).mean() > 0.95
    assert (once != want).mean() > 0.1  # rounded once, float64 lands elsewhere
    with pytest.raises(OpError, match="rounding f16 on f32"):
        infer("attention", [T(q.shape), T(k.shape), T(v.shape)], scale=1.0, rounding="f16")


def test_attention_score_results() -> None:
    q, k, v = _qkv(4)
    bias = np.where(np.random.default_rng(5).random((2, 1, 3, 5)) < 0.3, -np.inf, 0.5).astype(
        np.float32
    )
    args = [q, k, v, bias]
    qk = run("attention", args, scale=0.5, softcap=2.0, result="qk")
    kk = np.repeat(k, 2, axis=1)
    np.testing.assert_allclose(qk, q @ kk.swapaxes(-1, -2) * 0.5, rtol=1e-5, atol=1e-6)
    capped = run("attention", args, scale=0.5, softcap=2.0, result="qk_softcap")
    np.testing.assert_allclose(capped, 2.0 * np.tanh(qk / 2.0), rtol=1e-5, atol=1e-6)
    scores = run("attention", args, scale=0.5, softcap=2.0, result="qk_bias")
    np.testing.assert_allclose(scores, capped + bias, rtol=1e-5, atol=1e-6)
    probs = run("attention", args, scale=0.5, softcap=2.0, result="probs")
    sums = probs.sum(axis=-1)
    open_rows = ~np.isneginf(bias.max(axis=-1))
    np.testing.assert_allclose(sums[np.broadcast_to(open_rows, sums.shape)], 1.0, rtol=1e-5)
    assert (sums[~np.broadcast_to(open_rows, sums.shape)] == 0).all()
    assert (probs[np.broadcast_to(np.isneginf(bias), probs.shape)] == 0).all()


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.sampled_from([1, 2, 4]), st.integers(1, 4), st.integers(0, 2**31))
def test_attention_grouped_query_is_repeated_heads(hkv: int, rep: int, sq: int, seed: int) -> None:
    """Query head h reads key/value head h // (Hq / Hkv): the same as repeating K and V."""
    q, k, v = _qkv(seed, b=1, hq=hkv * rep, hkv=hkv, sq=sq, skv=4, dtype=np.float64)
    got = run("attention", [q, k, v], scale=0.7, causal=True)
    want = run(
        "attention",
        [q, np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)],
        scale=0.7,
        causal=True,
    )
    np.testing.assert_array_equal(got, want)


def test_rotary_inference() -> None:
    x = T((2, 3, n, 8))
    assert infer("rotary_embedding", [x, T((2, n, 2)), T((2, n, 2))]) == x
    assert infer(
        "rotary_embedding", [T((2, n, 3, 8)), T((1, n, 4)), T((1, n, 4))], seq_axis=1
    ) == T((2, n, 3, 8))
    with pytest.raises(OpError, match="exceeds head size 8"):
        infer("rotary_embedding", [x, T((2, n, 5)), T((2, n, 5))])
    with pytest.raises(OpError, match="sequence of cos and x"):
        infer("rotary_embedding", [x, T((2, 4, 2)), T((2, 4, 2))])
    with pytest.raises(OpError, match="seq_axis must be 1"):
        infer("rotary_embedding", [x, T((2, n, 2)), T((2, n, 2))], seq_axis=3)


def _angles(b: int, s: int, half: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    theta = np.random.default_rng(seed).uniform(-3, 3, (b, s, half))
    return np.cos(theta), np.sin(theta)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotary_rotates_pairs_and_copies_the_rest(interleaved: bool) -> None:
    r = np.random.default_rng(0)
    x = r.standard_normal((2, 3, 4, 10))  # (B, H, S, D), rotary dim 6
    cos, sin = _angles(2, 4, 3, 1)
    y = run("rotary_embedding", [x, cos, sin], interleaved=interleaved)
    first = slice(0, 6, 2) if interleaved else slice(0, 3)
    second = slice(1, 6, 2) if interleaved else slice(3, 6)
    a, b = x[..., first], x[..., second]
    c, s = cos[:, None], sin[:, None]
    np.testing.assert_allclose(y[..., first], a * c - b * s, rtol=1e-12)
    np.testing.assert_allclose(y[..., second], a * s + b * c, rtol=1e-12)
    np.testing.assert_array_equal(y[..., 6:], x[..., 6:])
    # a rotation keeps each pair's length
    np.testing.assert_allclose(np.hypot(y[..., first], y[..., second]), np.hypot(a, b), rtol=1e-12)


def test_rotary_sequence_axis_one_is_the_transpose() -> None:
    x = np.random.default_rng(2).standard_normal((2, 3, 4, 6)).astype(np.float32)  # (B, H, S, D)
    cos, sin = (a.astype(np.float32) for a in _angles(1, 4, 3, 3))
    heads_first = run("rotary_embedding", [x, cos, sin])
    seq_first = run(
        "rotary_embedding", [np.ascontiguousarray(x.transpose(0, 2, 1, 3)), cos, sin], seq_axis=1
    )
    np.testing.assert_array_equal(seq_first.transpose(0, 2, 1, 3), heads_first)
