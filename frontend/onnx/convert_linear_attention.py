"""The converter of LinearAttention (opset 27) onto ``linear_attention``
(:mod:`relaxc.ir.ops.linear_attention`).

The packed 3-D inputs ``(B, T, H * D)`` are viewed per head and transposed to ``(B, H, T,
D)``; a per-head decay ``(B, T, Hkv)`` becomes ``(B, Hkv, T, 1)`` and beta ``(B, T, Hkv or
1)`` becomes ``(B, Hkv or 1, T, 1)``; an absent past_state is zeros of the query's dtype
(the present_state's dtype, as ONNX's reference has it). The output is transposed back and
packed to ``(B, T, Hq * Dv)``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.ops.linear_attention import RULES, delta, gated
from relaxc.ir.types import numpy_dtype

from .context import NodeContext, rank_of, shape_of
from .values import Folded, Value

Converter = Callable[[NodeContext], list]


def _heads_first(ctx: NodeContext, t: Value, heads: int, size: D.Dim, what: str) -> Value:
    """A packed (B, T, heads * size) input as (B, heads, T, size)."""
    b, steps, hidden = shape_of(t)
    if not D.dims_equal(hidden, D.mul(heads, size)):
        raise ctx.fail(
            f"{what}'s last dim {D.dim_to_str(hidden)} is not {heads} heads of {D.dim_to_str(size)}"
        )
    split = ctx.emit("reshape", [t], {"newshape": (b, steps, heads, size)})
    return ctx.emit("transpose", [split], {"axes": (0, 2, 1, 3)})


def _rule(ctx: NodeContext) -> str:
    raw = ctx.attr("update_rule", "gated_delta")
    rule = raw.decode() if isinstance(raw, bytes) else str(raw)
    if rule not in RULES:
        raise ctx.fail(f"update_rule '{rule}' is not one of {', '.join(RULES)}")
    return rule


def convert_linear_attention(ctx: NodeContext) -> list:
    if ctx.opset < 27:
        raise ctx.fail(
            f"LinearAttention is an operator of opset 27 and later; the model imports opset "
            f"{ctx.opset}"
        )
    q, k, v = ctx.input(0, "query"), ctx.input(1, "key"), ctx.input(2, "value")
    past, decay, beta = ctx.optional(3), ctx.optional(4), ctx.optional(5)
    rule = _rule(ctx)
    for name, given, needed in (("decay", decay, gated(rule)), ("beta", beta, delta(rule))):
        if needed and given is None:
            raise ctx.fail(f"update_rule '{rule}' needs the {name} input")
        if not needed and given is not None:
            raise ctx.fail(f"update_rule '{rule}' takes no {name} input")
    hq, hkv = int(ctx.attr("q_num_heads", 0)), int(ctx.attr("kv_num_heads", 0))
    if hq <= 0 or hkv <= 0 or hq % hkv:
        raise ctx.fail(f"q_num_heads ({hq}) must be a positive multiple of kv_num_heads ({hkv})")
    for name, t in (("query", q), ("key", k), ("value", v), ("decay", decay), ("beta", beta)):
        if t is None:
            continue
        if rank_of(t) != 3:
            raise ctx.fail(
                f"{name} must have rank 3 (batch, steps, heads * size), got {rank_of(t)}"
            )
        if t.type.dtype != q.type.dtype:
            raise ctx.fail(f"{name} is {t.type.dtype} but query is {q.type.dtype}")
    b, steps, q_hidden = shape_of(q)
    v_hidden = shape_of(v)[2]
    sizes = []
    for what, hidden, heads in (("query", q_hidden, hq), ("value", v_hidden, hkv)):
        if not isinstance(hidden, int) or hidden % heads:
            raise ctx.fail(
                f"{what}'s last dim {D.dim_to_str(hidden)} is not a multiple of {heads} heads"
            )
        sizes.append(hidden // heads)
    dk, dv = sizes
    inputs = [
        _heads_first(ctx, q, hq, dk, "query"),
        _heads_first(ctx, k, hkv, dk, "key"),
        _heads_first(ctx, v, hkv, dv, "value"),
        _state(ctx, past, q, (b, hkv, dk, dv)),
    ]
    if decay is not None:
        last = shape_of(decay)[2]
        if D.dims_equal(last, hkv * dk):
            inputs.append(_heads_first(ctx, decay, hkv, dk, "decay"))
        elif D.dims_equal(last, hkv):
            inputs.append(_heads_first(ctx, decay, hkv, 1, "decay"))
        else:
            raise ctx.fail(
                f"decay's last dim {D.dim_to_str(last)} must be kv_num_heads ({hkv}) or "
                f"kv_num_heads * the key size ({hkv * dk})"
            )
    if beta is not None:
        last = shape_of(beta)[2]
        if not (isinstance(last, int) and last in (hkv, 1)):
            raise ctx.fail(
                f"beta's last dim {D.dim_to_str(last)} must be kv_num_heads ({hkv}) or 1"
            )
        inputs.append(_heads_first(ctx, beta, last, 1, "beta"))
    scale = float(ctx.attr("scale", 0.0)) or 1.0 / float(np.sqrt(dk))
    y, present = ctx.emit("linear_attention", inputs, {"scale": scale, "rule": rule})
    y = ctx.emit("transpose", [y], {"axes": (0, 2, 1, 3)})
    return [ctx.emit("reshape", [y], {"newshape": (b, steps, hq * dv)}), present]


def _state(ctx: NodeContext, past: Value | None, q: Value, full: tuple) -> Value:
    """past_state, checked against (B, Hkv, Dk, Dv), or zeros of the query's dtype."""
    if past is not None:
        if not all(D.dims_equal(g, e) for g, e in zip(shape_of(past), full)) or rank_of(
            past
        ) != len(full):
            raise ctx.fail(
                f"past_state must be (batch, kv_num_heads, key size, value size) = "
                f"{tuple(D.dim_to_str(d) for d in full)}, got "
                f"{tuple(D.dim_to_str(d) for d in shape_of(past))}"
            )
        return past
    if all(isinstance(d, int) for d in full):
        zeros = np.zeros(tuple(int(d) for d in full), numpy_dtype(q.type.dtype))
        return Folded(zeros, f"{ctx.hint(1)}_initial")
    return ctx.emit("zeros", [], {"shape": full, "dtype": q.type.dtype})


def table() -> dict[str, Converter]:
    return {"LinearAttention": convert_linear_attention}
