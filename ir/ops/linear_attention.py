"""``linear_attention``: attention as a recurrence over a state matrix per key/value head
(linear attention, gated linear attention, DeltaNet and gated DeltaNet: ONNX's
LinearAttention).

Inputs, heads first as for ``attention``: ``q (B, Hq, T, Dk)``, ``k (B, Hkv, T, Dk)``,
``v (B, Hkv, T, Dv)``, the state before the first step ``state (B, Hkv, Dk, Dv)``, then
``decay (B, Hkv, T, Dk or 1)`` (log space) when ``rule`` is ``gated`` or ``gated_delta``,
then ``beta (B, Hkv or 1, T, 1)`` when ``rule`` is ``delta`` or ``gated_delta``. Query head
``h`` reads the state of key/value head ``h // (Hq / Hkv)``. For each step ``t``, with
``S`` the head's state:

- gated rules: ``S = exp(decay_t)[:, None] * S`` (per key dim, or one factor per head);
- delta rules: ``u = beta_t * (v_t - S^T k_t)``, else ``u = v_t``;
- ``S = S + k_t u^T``; the output ``y_t = scale * q_t^T S`` (``(Dv,)``).

The result is a tuple: ``y (B, Hq, T, Dv)`` in q's dtype and the state after the last step
``(B, Hkv, Dk, Dv)`` in ``state``'s dtype. The numpy kernel computes in float64 and rounds
each result once (ONNX's reference computes in float32, and rounds once too); the C kernel
holds one head's state in a scratch of ``Dk x Dv`` doubles.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.registry import AttrSpec, OpDef, OpError, Registry
from relaxc.ir.types import TensorType, TupleType, Type

from .checks import as_contiguous, require_dims_equal, require_float_math, require_rank, sstr
from .common import same_dtype, tensors

RULES = ("linear", "gated", "delta", "gated_delta")
"""The recurrences ``linear_attention`` computes (its ``rule`` attribute)."""


def gated(rule: str) -> bool:
    """Whether ``rule`` decays the state (takes a ``decay`` input)."""
    return rule in ("gated", "gated_delta")


def delta(rule: str) -> bool:
    """Whether ``rule`` corrects by the state's prediction (takes a ``beta`` input)."""
    return rule in ("delta", "gated_delta")


def _is_one(d: D.Dim) -> bool:
    return isinstance(d, int) and d == 1


def _infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    op = "linear_attention"
    rule = attrs["rule"]
    if rule not in RULES:
        raise OpError(f"{op}: rule must be one of {', '.join(RULES)}, got {rule}")
    want = 4 + gated(rule) + delta(rule)
    ts = tensors(inputs, op)
    if len(ts) != want:
        raise OpError(
            f"{op}: rule {rule} takes {want} inputs (q, k, v, state"
            f"{', decay' if gated(rule) else ''}{', beta' if delta(rule) else ''}), got {len(ts)}"
        )
    q, k, v, state = ts[:4]
    dtype = same_dtype([q, k, v] + ts[4:], op)
    require_float_math(dtype, op)
    require_float_math(state.dtype, op)
    for name, t in (("q", q), ("k", k), ("v", v), ("state", state)):
        require_rank(t, 4, op, name)
    b, hq, steps, dk = q.shape
    hkv, dv = k.shape[1], v.shape[3]
    for got, exp, what in (
        (k.shape[0], b, "batch of k and q"),
        (k.shape[2], steps, "steps of k and q"),
        (k.shape[3], dk, "key size of k and q"),
        (v.shape[0], b, "batch of v and q"),
        (v.shape[1], hkv, "heads of v and k"),
        (v.shape[2], steps, "steps of v and q"),
    ):
        require_dims_equal(got, exp, op, what)
    if not (isinstance(hq, int) and isinstance(hkv, int)) or hkv == 0 or hq % hkv:
        raise OpError(
            f"{op}: the head counts must be static and {sstr((hq,))} query heads a multiple "
            f"of {sstr((hkv,))} key/value heads"
        )
    full = (b, hkv, dk, dv)
    for got, exp in zip(state.shape, full):
        require_dims_equal(got, exp, op, f"state {sstr(state.shape)} and {sstr(full)}")
    rest = list(ts[4:])
    if gated(rule):
        decay = rest.pop(0)
        require_rank(decay, 4, op, "decay")
        lead = (b, hkv, steps)
        if not all(D.dims_equal(g, e) for g, e in zip(decay.shape[:3], lead)) or not (
            _is_one(decay.shape[3]) or D.dims_equal(decay.shape[3], dk)
        ):
            raise OpError(f"{op}: decay {sstr(decay.shape)} must be {sstr(lead + (dk,))} or 1 wide")
    if delta(rule):
        beta = rest.pop(0)
        require_rank(beta, 4, op, "beta")
        ok = (
            D.dims_equal(beta.shape[0], b)
            and (_is_one(beta.shape[1]) or D.dims_equal(beta.shape[1], hkv))
            and D.dims_equal(beta.shape[2], steps)
            and _is_one(beta.shape[3])
        )
        if not ok:
            raise OpError(f"{op}: beta {sstr(beta.shape)} must be {sstr((b, hkv, steps, 1))}")
    return TupleType((TensorType((b, hq, steps, dv), dtype), TensorType(full, state.dtype)))


def _linear_attention(
    xs: Sequence[np.ndarray], attrs: Mapping[str, Any]
) -> tuple[np.ndarray, np.ndarray]:
    rule = attrs["rule"]
    f64 = np.float64
    q, k, v, state = (x.astype(f64) for x in xs[:4])
    rest = [x.astype(f64) for x in xs[4:]]
    decay = rest.pop(0) if gated(rule) else None
    beta = rest.pop(0) if delta(rule) else None
    b, hq, steps, _ = q.shape
    hkv, dv = k.shape[1], v.shape[3]
    rep = hq // hkv
    s = state.copy()
    y = np.zeros((b, hq, steps, dv))
    scale = float(attrs["scale"])
    with np.errstate(all="ignore"):
        for t in range(steps):
            kt, vt = k[:, :, t, :], v[:, :, t, :]
            if decay is not None:
                s = s * np.exp(decay[:, :, t, :])[..., None]
            if beta is not None:
                predicted = np.einsum("bhdm,bhd->bhm", s, kt)
                vt = beta[:, :, t, :] * (vt - predicted)
            s = s + kt[..., :, None] * vt[..., None, :]
            y[:, :, t, :] = scale * np.einsum("bhd,bhdm->bhm", q[:, :, t, :], np.repeat(s, rep, 1))
    return as_contiguous(y, xs[0].dtype), as_contiguous(s, xs[3].dtype)


def register_all(reg: Registry) -> None:
    reg.register(
        OpDef(
            "linear_attention",
            "linear attention's recurrence over a state per head (linear, gated, delta rules)",
            "kernel",
            _infer,
            family="matmul",
            min_inputs=4,
            max_inputs=6,
            kernel=_linear_attention,
            multi_output=True,
            input_names=("q", "k", "v", "state", "decay", "beta"),
            float_only=True,
            attrs=(
                AttrSpec("scale", "float", doc="multiplies each output q . S"),
                AttrSpec("rule", "str", "gated_delta", "linear, gated, delta or gated_delta"),
            ),
        )
    )


__all__ = ["RULES", "delta", "gated", "register_all"]
