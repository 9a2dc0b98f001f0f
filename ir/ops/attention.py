"""Transformer ops: ``attention`` (scaled dot-product attention, fused) and
``rotary_embedding``.

``attention`` takes 4-D ``q (B, Hq, Sq, D)``, ``k (B, Hkv, Skv, D)``, ``v (B, Hkv, Skv, Dv)``
(query head ``h`` reads key/value head ``h // (Hq / Hkv)``: grouped-query attention without
repeating K and V), an optional additive ``bias`` (rank 4, each dim 1 or the full
``(B, Hq, Sq, Skv)``; ``-inf`` disallows a key) and optional per-batch key counts
``kv_lens (B,)`` (keys from ``kv_lens[b]`` on are padding). The score of query ``i`` and key
``j`` is ``softcap(scale * q.k)``, plus the bias, plus ``-inf`` where ``causal`` disallows
``j > i + offset`` (the offset is ``kv_lens[b] - Sq`` when ``kv_lens`` is given) and where
``j`` is padding, and outside the sliding window: with ``p = i + offset`` (``offset`` as for
``causal``, also when not causal) key ``j`` is allowed when ``p - window_left <= j`` (a
``window_left`` of -1: no bound) and ``j <= p + window_right`` (-1: no bound). A row whose
added bias is ``-inf`` everywhere (no key allowed) is a zero row, as ONNX defines.
``result`` picks the output: ``y`` (softmax(scores) @ v, ``(B, Hq, Sq, Dv)``) or one of
ONNX's qk_matmul_output modes, ``(B, Hq, Sq, Skv)``: ``qk`` (scale * q.k), ``qk_softcap``,
``qk_bias`` (the scores with the bias) and ``probs`` (the softmax).

With ``rounding="once"`` the numpy kernel computes in float64 and rounds once. With
``rounding`` ``f16`` or ``bf16`` (q's dtype: what ONNX's Attention computes on them) it
rounds to that dtype where ONNX's reference does: q and k each multiplied by ``sqrt(scale)``
rounded to the dtype, each dot product (summed in float64), each step of the softcap (the
quotient, the tanh, the product), the sum with the bias, the softmax's difference from the
row's maximum, its exponential, the row's sum (in bfloat16 after each addition, as numpy
sums ml_dtypes' bfloat16) and the quotient, unless ``softmax_steps`` is false (ONNX's
softmax_precision float or double: the softmax in float64, its probabilities rounded once);
the output's dot products are summed in float64 from those probabilities. The C kernel
computes one query row at a time in a scratch of ``Skv`` doubles, never a ``Sq x Skv``
matrix, rounding at the same steps (C does not store bf16).

``rotary_embedding`` rotates pairs of the first ``R = 2 * cos.shape[-1]`` features of each
head of ``x`` (rank 4: ``(B, S, H, D)`` with ``seq_axis=1`` or ``(B, H, S, D)`` with
``seq_axis=2``) by the angle whose cosine and sine are ``cos[b, s, i]``, ``sin[b, s, i]``
(``(B or 1, S, R / 2)``): the pair is ``(x[i], x[i + R/2])``, or ``(x[2i], x[2i + 1])`` when
``interleaved``; ``(a, b) -> (a cos - b sin, a sin + b cos)``; the features from ``R`` on
are copied.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.registry import AttrSpec, OpDef, OpError, Registry
from relaxc.ir.types import TensorType, Type, numpy_dtype

from .checks import as_contiguous, require_dims_equal, require_float_math, require_rank, sstr
from .common import same_dtype, tensors

RESULTS = ("y", "qk", "qk_softcap", "qk_bias", "probs")
"""What an ``attention`` call computes (its ``result`` attribute)."""

ROUNDINGS = ("once", "f16", "bf16")
"""Where an ``attention`` call rounds to its dtype (its ``rounding`` attribute)."""


def _is_one(d: D.Dim) -> bool:
    return isinstance(d, int) and d == 1


def _infer_attention(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    op = "attention"
    ts = tensors(inputs, op)
    q, k, v = ts[0], ts[1], ts[2]
    dtype = same_dtype([q, k, v], op)
    require_float_math(dtype, op)
    for name, t in (("q", q), ("k", k), ("v", v)):
        require_rank(t, 4, op, f"{name} (batch, heads, sequence, head size)")
    b, hq, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    require_dims_equal(k.shape[0], b, op, "batch of k and q")
    require_dims_equal(v.shape[0], b, op, "batch of v and q")
    require_dims_equal(k.shape[3], d, op, "head size of k and q")
    require_dims_equal(v.shape[1], hkv, op, "heads of v and k")
    require_dims_equal(v.shape[2], skv, op, "sequence of v and k")
    if isinstance(hq, int) and isinstance(hkv, int) and (hkv == 0 or hq % hkv):
        raise OpError(f"{op}: {hq} query heads are not a multiple of {hkv} key/value heads")
    if not isinstance(hq, int) or not isinstance(hkv, int):
        if not D.dims_equal(hq, hkv):
            raise OpError(f"{op}: symbolic head counts must be equal (got {sstr((hq, hkv))})")
    if attrs["result"] not in RESULTS:
        raise OpError(f"{op}: result must be one of {', '.join(RESULTS)}, got {attrs['result']}")
    if attrs["rounding"] not in ROUNDINGS:
        raise OpError(f"{op}: rounding must be once, f16 or bf16, got {attrs['rounding']}")
    if attrs["rounding"] != "once" and attrs["rounding"] != dtype:
        raise OpError(f"{op}: rounding {attrs['rounding']} on {dtype} (it must be q's dtype)")
    for side in ("window_left", "window_right"):
        if attrs[side] < -1:
            raise OpError(f"{op}: {side} must be -1 (no bound) or at least 0, got {attrs[side]}")
    if attrs["softcap"] < 0:
        raise OpError(f"{op}: softcap must be 0 (none) or positive, got {attrs['softcap']}")
    full = (b, hq, sq, skv)
    if len(ts) > 3:
        bias = ts[3]
        if bias.dtype != dtype:
            raise OpError(f"{op}: bias is {bias.dtype}, q is {dtype}")
        require_rank(bias, 4, op, "bias")
        for got, want in zip(bias.shape, full):
            if not _is_one(got) and not D.dims_equal(got, want):
                raise OpError(f"{op}: bias {sstr(bias.shape)} does not broadcast to {sstr(full)}")
    if len(ts) > 4:
        lens = ts[4]
        if lens.dtype != "i64":
            raise OpError(f"{op}: kv_lens must be i64, got {lens.dtype}")
        require_rank(lens, 1, op, "kv_lens")
        require_dims_equal(lens.shape[0], b, op, "length of kv_lens and batch")
    if attrs["result"] == "y":
        return TensorType((b, hq, sq, v.shape[3]), dtype)
    return TensorType(full, dtype)


def _allowed(xs: Sequence[np.ndarray], attrs: Mapping[str, Any], sq: int, skv: int) -> np.ndarray:
    """Where the causal, padding and window rules allow key j for query i: (B or 1, 1, Sq,
    Skv)."""
    i = np.arange(sq).reshape(1, 1, sq, 1)
    j = np.arange(skv).reshape(1, 1, 1, skv)
    allowed = np.ones((1, 1, sq, skv), dtype=bool)
    if len(xs) > 4:
        lens = xs[4].astype(np.int64).reshape(-1, 1, 1, 1)
        allowed = allowed & (j < lens)
        p = i + (lens - sq)
    else:
        p = i + int(attrs["offset"])
    if attrs["causal"]:
        allowed = allowed & (j <= p)
    if attrs["window_left"] >= 0:
        allowed = allowed & (j >= p - int(attrs["window_left"]))
    if attrs["window_right"] >= 0:
        allowed = allowed & (j <= p + int(attrs["window_right"]))
    return allowed


def _row_sums(e: np.ndarray, r: Callable[[np.ndarray], np.ndarray], each: bool) -> np.ndarray:
    """The sums of ``e``'s last axis, rounded by ``r``: once, or after each addition (in
    order) when ``each`` (numpy's sum of ml_dtypes' bfloat16, as ONNX's reference sums)."""
    if not each:
        return r(np.sum(e, axis=-1, keepdims=True))
    total = np.zeros(e.shape[:-1] + (1,))
    for j in range(e.shape[-1]):
        total = r(total + e[..., j : j + 1])
    return total


def _attention(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    q, k, v = xs[0], xs[1], xs[2]
    sq, hq = q.shape[2], q.shape[1]
    skv, hkv = k.shape[2], k.shape[1]
    rep = hq // hkv if hkv else 1
    f64 = np.float64
    steps = attrs["rounding"] != "once"
    low = numpy_dtype(attrs["rounding"]) if steps else None

    def r(x: np.ndarray) -> np.ndarray:
        """``x`` rounded to the dtype ``rounding`` names (else as it is)."""
        return np.asarray(x).astype(low).astype(f64) if steps else x

    with np.errstate(all="ignore"):
        keys = np.repeat(k.astype(f64), rep, axis=1)
        queries = q.astype(f64)
        if steps:
            root = r(np.sqrt(f64(attrs["scale"])))
            qk = r(np.matmul(r(queries * root), r(keys * root).swapaxes(-1, -2)))
        else:
            qk = np.matmul(queries, keys.swapaxes(-1, -2)) * float(attrs["scale"])
        if attrs["result"] == "qk":
            return as_contiguous(qk, q.dtype)
        cap = float(attrs["softcap"])
        capped = r(r(np.tanh(r(qk / cap))) * cap) if cap > 0 else qk
        if attrs["result"] == "qk_softcap":
            return as_contiguous(capped, q.dtype)
        bias = np.zeros((1, 1, sq, skv), f64)
        if len(xs) > 3:
            bias = bias + xs[3].astype(f64)
        bias = np.where(_allowed(xs, attrs, sq, skv), bias, -np.inf)
        scores = r(capped + bias)
        if attrs["result"] == "qk_bias":
            return as_contiguous(scores, q.dtype)
        top = np.max(scores, axis=-1, keepdims=True) if skv else np.zeros(scores.shape[:-1] + (1,))
        rs = r if attrs["softmax_steps"] else (lambda x: x)
        e = rs(np.exp(rs(scores - np.where(np.isneginf(top), 0.0, top))))
        total = _row_sums(e, rs, attrs["rounding"] == "bf16" and attrs["softmax_steps"])
        probs = r(e / np.where(total == 0, 1.0, total))
        if skv:
            masked = np.isneginf(np.max(bias, axis=-1, keepdims=True))
            probs = np.where(masked, 0.0, probs)
        if attrs["result"] == "probs":
            return as_contiguous(np.broadcast_to(probs, scores.shape), q.dtype)
        y = np.matmul(probs, np.repeat(v.astype(f64), rep, axis=1))
    return as_contiguous(y, q.dtype)


def _infer_rotary(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    op = "rotary_embedding"
    ts = tensors(inputs, op)
    x, cos, sin = ts
    dtype = same_dtype(ts, op)
    require_float_math(dtype, op)
    require_rank(x, 4, op, "x")
    require_rank(cos, 3, op, "cos (batch, sequence, rotary dim / 2)")
    require_rank(sin, 3, op, "sin (batch, sequence, rotary dim / 2)")
    seq_axis = attrs["seq_axis"]
    if seq_axis not in (1, 2):
        raise OpError(f"{op}: seq_axis must be 1 (B, S, H, D) or 2 (B, H, S, D), got {seq_axis}")
    for name, t in (("cos", cos), ("sin", sin)):
        for got, want, what in (
            (t.shape[0], x.shape[0], "batch"),
            (t.shape[1], x.shape[seq_axis], "sequence"),
        ):
            if not (what == "batch" and _is_one(got)):
                require_dims_equal(got, want, op, f"{what} of {name} and x")
    require_dims_equal(sin.shape[2], cos.shape[2], op, "last dims of sin and cos")
    half, d = cos.shape[2], x.shape[3]
    if isinstance(half, int) and isinstance(d, int) and 2 * half > d:
        raise OpError(f"{op}: rotary dim {2 * half} (twice cos's last dim) exceeds head size {d}")
    if not isinstance(half, int):
        raise OpError(f"{op}: the rotary dim (cos's last dim) must be static")
    return x


def _rotary(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x, cos, sin = xs
    half = cos.shape[2]
    # (B, S, 1, half) against x as (B, S, H, D): a seq_axis=2 x is read through a transpose.
    xt = x if attrs["seq_axis"] == 1 else x.transpose(0, 2, 1, 3)
    out = xt.astype(np.float64)  # a copy: the features from 2 * half on stay as they are
    c = cos.astype(np.float64)[:, :, None, :]
    s = sin.astype(np.float64)[:, :, None, :]
    if attrs["interleaved"]:
        a, b = xt[..., 0 : 2 * half : 2], xt[..., 1 : 2 * half : 2]
        first, second = out[..., 0 : 2 * half : 2], out[..., 1 : 2 * half : 2]
    else:
        a, b = xt[..., :half], xt[..., half : 2 * half]
        first, second = out[..., :half], out[..., half : 2 * half]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    first[...] = a64 * c - b64 * s
    second[...] = a64 * s + b64 * c
    if attrs["seq_axis"] == 2:
        out = out.transpose(0, 2, 1, 3)
    return as_contiguous(out, x.dtype)


def register_all(reg: Registry) -> None:
    reg.register(
        OpDef(
            "attention",
            "softmax(softcap(scale * q @ k.T) + bias + causal/padding/window masks) @ v, per head",
            "kernel",
            _infer_attention,
            family="matmul",
            min_inputs=3,
            max_inputs=5,
            kernel=_attention,
            input_names=("q", "k", "v", "bias", "kv_lens"),
            float_only=True,
            attrs=(
                AttrSpec("scale", "float", doc="multiplies q . k"),
                AttrSpec("softcap", "float", 0.0, "scores -> softcap * tanh(scores / softcap)"),
                AttrSpec("causal", "bool", False, "query i sees keys j <= i + offset"),
                AttrSpec("offset", "int", 0, "query 0's position (the past's length)"),
                AttrSpec("result", "str", "y", "y, qk, qk_softcap, qk_bias or probs"),
                AttrSpec("window_left", "int", -1, "keys j >= i + offset - window_left"),
                AttrSpec("window_right", "int", -1, "keys j <= i + offset + window_right"),
                AttrSpec("rounding", "str", "once", "once, or f16 / bf16: ONNX's steps"),
                AttrSpec("softmax_steps", "bool", True, "rounding f16/bf16 in the softmax too"),
            ),
        )
    )
    reg.register(
        OpDef(
            "rotary_embedding",
            "rotate feature pairs of each head by the angles of cos and sin (RoPE)",
            "kernel",
            _infer_rotary,
            family="elementwise",  # pointwise on feature pairs (not one input element each)
            min_inputs=3,
            max_inputs=3,
            kernel=_rotary,
            input_names=("x", "cos", "sin"),
            inplace=(0,),
            float_only=True,
            attrs=(
                AttrSpec("interleaved", "bool", False, "pairs (2i, 2i + 1), else (i, i + R/2)"),
                AttrSpec("seq_axis", "int", 2, "1: x is (B, S, H, D); 2: (B, H, S, D)"),
            ),
        )
    )


__all__ = ["RESULTS", "ROUNDINGS", "register_all"]
