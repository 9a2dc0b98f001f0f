"""linear_attention: inference and the numpy kernel, against loops written from the
recurrences (one head, one step at a time)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.ir import dims as D
from relaxc.ir.nodes import Var
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import OpError, bind_args
from relaxc.ir.types import TensorType, TupleType, dtype_from_numpy

n = D.Sym("n")


def T(shape: Any, dtype: str = "f32") -> TensorType:
    return TensorType(tuple(shape), dtype)


def _bound(k: int, attrs: dict) -> Any:
    op = REGISTRY.get("linear_attention")
    assert op is not None
    return op, bind_args(op, [Var(f"x{i}") for i in range(k)], list(attrs.items()))


def infer(types: list, **attrs: Any) -> Any:
    op, b = _bound(len(types), attrs)
    return op.infer(types, b.attrs)


def run(arrays: list, **attrs: Any) -> tuple[np.ndarray, np.ndarray]:
    op, b = _bound(len(arrays), attrs)
    types = [T(a.shape, dtype_from_numpy(a.dtype)) for a in arrays]
    t = op.infer(types, b.attrs)
    y, s = op.kernel(arrays, dict(b.attrs))
    assert y.shape == tuple(t.fields[0].shape) and y.dtype == arrays[0].dtype
    assert s.shape == tuple(t.fields[1].shape) and s.dtype == arrays[3].dtype
    return y, s


def _loop(q, k, v, s0, decay=None, beta=None, *, scale):
    """The recurrence of each head written out, in float64."""
    B, Hq, steps, _ = q.shape
    Hkv, Dv = k.shape[1], v.shape[3]
    y = np.zeros((B, Hq, steps, Dv))
    out = np.zeros(s0.shape)
    for b in range(B):
        for hk in range(Hkv):
            S = s0[b, hk].astype(float).copy()
            for t in range(steps):
                kt, vt = k[b, hk, t].astype(float), v[b, hk, t].astype(float)
                if decay is not None:
                    g = decay[b, hk, t].astype(float)
                    S = np.exp(g)[:, None] * S
                if beta is not None:
                    bt = float(beta[b, hk if beta.shape[1] > 1 else 0, t, 0])
                    vt = bt * (vt - S.T @ kt)
                S = S + np.outer(kt, vt)
                for h in range(Hq):
                    if h // (Hq // Hkv) == hk:
                        y[b, h, t] = scale * (q[b, h, t].astype(float) @ S)
            out[b, hk] = S
    return y, out


def _inputs(seed: int, b=2, hq=4, hkv=2, steps=5, dk=3, dv=2, dtype=np.float64):
    r = np.random.default_rng(seed)
    q = r.standard_normal((b, hq, steps, dk)).astype(dtype)
    k = r.standard_normal((b, hkv, steps, dk)).astype(dtype) * 0.5
    v = r.standard_normal((b, hkv, steps, dv)).astype(dtype)
    s0 = r.standard_normal((b, hkv, dk, dv)).astype(dtype)
    decay = -r.random((b, hkv, steps, dk)).astype(dtype)
    beta = r.random((b, hkv, steps, 1)).astype(dtype)
    return q, k, v, s0, decay, beta


def test_linear_attention_inference() -> None:
    q, k, v, s = T((2, 4, n, 3)), T((2, 2, n, 3)), T((2, 2, n, 5)), T((2, 2, 3, 5))
    want = TupleType((T((2, 4, n, 5)), T((2, 2, 3, 5))))
    assert infer([q, k, v, s], scale=0.5, rule="linear") == want
    assert infer([q, k, v, s, T((2, 2, n, 1))], scale=0.5, rule="gated") == want
    assert infer([q, k, v, s, T((2, 1, n, 1))], scale=0.5, rule="delta") == want
    f32_state = infer(
        [q, k, v, T((2, 2, 3, 5), "f64"), T((2, 2, n, 3)), T((2, 2, n, 1))], scale=1.0
    )
    assert f32_state.fields[1].dtype == "f64"
    with pytest.raises(OpError, match="rule gated_delta takes 6 inputs"):
        infer([q, k, v, s], scale=1.0)
    with pytest.raises(OpError, match="rule must be one of"):
        infer([q, k, v, s], scale=1.0, rule="retention")
    with pytest.raises(OpError, match="query heads a multiple"):
        infer([T((2, 3, n, 3)), k, v, s], scale=1.0, rule="linear")
    with pytest.raises(OpError, match="decay"):
        infer([q, k, v, s, T((2, 2, n, 2))], scale=1.0, rule="gated")
    with pytest.raises(OpError, match="beta"):
        infer([q, k, v, s, T((2, 2, n, 3))], scale=1.0, rule="delta")
    with pytest.raises(OpError, match="state"):
        infer([q, k, v, T((2, 2, 5, 3))], scale=1.0, rule="linear")


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
@pytest.mark.parametrize("wide", [True, False])
def test_linear_attention_matches_the_recurrence(rule: str, wide: bool) -> None:
    q, k, v, s0, decay, beta = _inputs(1)
    if not wide:  # one decay per head, one beta for every head
        decay, beta = decay[..., :1], beta[:, :1]
    args = [q, k, v, s0]
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    args += [decay] if gated else []
    args += [beta] if delta else []
    y, s = run(args, scale=0.4, rule=rule)
    wy, ws = _loop(
        q,
        k,
        v,
        s0,
        np.broadcast_to(decay, k.shape[:3] + (3,)) if gated else None,
        beta if delta else None,
        scale=0.4,
    )
    np.testing.assert_allclose(y, wy, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s, ws, rtol=1e-12, atol=1e-12)


def test_linear_attention_linear_rule_is_causal_attention_without_softmax() -> None:
    """From a zero state, the linear rule's output is scale * sum over j <= t of
    (q_t . k_j) v_j: attention with the causal mask and no softmax."""
    q, k, v, _, _, _ = _inputs(2, hq=2, hkv=2)
    zero = np.zeros((2, 2, 3, 2))
    y, s = run([q, k, v, zero], scale=0.7, rule="linear")
    scores = np.einsum("bhtd,bhjd->bhtj", q, k) * np.tril(np.ones((5, 5)))
    np.testing.assert_allclose(y, 0.7 * scores @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s, np.einsum("bhtd,bhtm->bhdm", k, v), rtol=1e-12)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 6), st.integers(0, 2**31))
def test_linear_attention_steps_compose(split: int, seed: int) -> None:
    """Running T steps at once equals running the first part, then the rest from the state
    it left (what past_state / present_state carry between calls)."""
    q, k, v, s0, decay, beta = _inputs(seed, steps=6)
    cut = lambda x, a, b_: x[:, :, a:b_]  # noqa: E731
    whole_y, whole_s = run([q, k, v, s0, decay, beta], scale=0.5)
    y1, s1 = run(
        [cut(x, 0, split) for x in (q, k, v)] + [s0] + [cut(x, 0, split) for x in (decay, beta)],
        scale=0.5,
    )
    rest = [cut(x, split, 6) for x in (q, k, v)] + [s1] + [cut(x, split, 6) for x in (decay, beta)]
    if split < 6:
        y2, s2 = run(rest, scale=0.5)
        np.testing.assert_allclose(np.concatenate([y1, y2], axis=2), whole_y, rtol=1e-10)
        np.testing.assert_allclose(s2, whole_s, rtol=1e-10, atol=1e-12)
    else:
        np.testing.assert_allclose(s1, whole_s, rtol=1e-10)


def test_linear_attention_low_precision_rounds_once() -> None:
    """float16 inputs with a float32 state: computed in float64, each result rounded once."""
    q, k, v, s0, decay, beta = _inputs(3)
    args16 = [x.astype(np.float16) for x in (q, k, v)] + [s0.astype(np.float32)]
    args16 += [decay.astype(np.float16), beta.astype(np.float16)]
    y, s = run(args16, scale=0.5)
    wide = [x.astype(np.float64) for x in args16]
    wy, ws = run(wide, scale=0.5)
    np.testing.assert_array_equal(y, wy.astype(np.float16))
    np.testing.assert_array_equal(s, ws.astype(np.float32))
