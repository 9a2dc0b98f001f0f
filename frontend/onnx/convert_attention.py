"""Converters of the transformer operators of opsets 23 and 24: RMSNormalization,
RotaryEmbedding and Attention.

RMSNormalization maps onto ``rms_norm`` (its axes are ``axis`` to the last); RotaryEmbedding
onto ``rotary_embedding`` and Attention onto ``attention`` (:mod:`relaxc.ir.ops.attention`),
both fused ops: a composition of Attention from matmul, softmax and adds would plan a
sequence x sequence score matrix for every head (what onnx's reference does), where the
fused op's C kernel computes one query row at a time in a scratch of one key-sequence length.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.types import numpy_dtype

from .context import NodeContext, norm_axis, rank_of, shape_of
from .values import Folded, Value

Converter = Callable[[NodeContext], list]

# TensorProto element types a stash_type may name, and whether relaxc's float64 statistics
# are at least as precise.
_STASH_AT_LEAST_F32 = {1: "float32", 11: "float64"}


def _static_dims(ctx: NodeContext, dims: tuple[D.Dim, ...], what: str) -> list[int]:
    out = [d for d in dims if isinstance(d, int)]
    if len(out) != len(dims):
        raise ctx.fail(f"{what} must be static, got {tuple(D.dim_to_str(d) for d in dims)}")
    return out


def _is_one(d: D.Dim) -> bool:
    return isinstance(d, int) and d == 1


# -- RMSNormalization ----------------------------------------------------------------------


def convert_rms_normalization(ctx: NodeContext) -> list:
    """``rms_norm`` over the axes from ``axis`` on; a Scale that broadcasts to X but not
    as the normalized dims is applied by a multiply after ``rms_norm`` with unit weights."""
    stash = int(ctx.attr("stash_type", 1))
    if stash not in _STASH_AT_LEAST_F32:
        raise ctx.fail(
            f"stash_type {stash} asks for statistics below float32 precision; relaxc computes "
            "them in float64 (stash_type 1 or 11)"
        )
    x, scale = ctx.input(0, "X"), ctx.input(1, "scale")
    if x.type.dtype != scale.type.dtype:
        raise ctx.fail(f"X is {x.type.dtype} but scale is {scale.type.dtype}")
    rank = rank_of(x)
    if rank == 0:
        raise ctx.fail("X must have rank 1 or more")
    axis = norm_axis(int(ctx.attr("axis", -1)), rank, ctx)
    attrs = {"axes": tuple(range(axis, rank)), "epsilon": float(ctx.attr("epsilon", 1e-5))}
    normalized = tuple(shape_of(x)[axis:])
    s_shape = tuple(shape_of(scale))
    if len(s_shape) > rank:
        raise ctx.fail(f"scale has rank {len(s_shape)}, more than X's {rank}")
    trimmed = s_shape[len(s_shape) - min(len(s_shape), len(normalized)) :]
    lead = s_shape[: len(s_shape) - len(trimmed)]
    if (
        len(trimmed) == len(normalized)
        and all(_is_one(d) for d in lead)
        and all(D.dims_equal(a, b) for a, b in zip(trimmed, normalized))
    ):
        w = scale if not lead else ctx.emit("reshape", [scale], {"newshape": normalized})
        return [ctx.emit("rms_norm", [x, w], attrs)]
    _check_broadcasts(ctx, s_shape, tuple(shape_of(x)), "scale", "X")
    if isinstance(scale, Folded) and not lead and all(D.is_static(d) for d in normalized):
        full = np.broadcast_to(
            scale.array.reshape((1,) * (len(normalized) - scale.array.ndim) + scale.array.shape),
            _static_dims(ctx, normalized, "the normalized dims"),
        )
        w = Folded(np.array(full, order="C"), scale.name)
        return [ctx.emit("rms_norm", [x, w], attrs)]
    ones = Folded(
        np.ones(_static_dims(ctx, normalized, "the normalized dims"), numpy_dtype(x.type.dtype)),
        f"{ctx.hint()}_unit_scale",
    )
    y = ctx.emit("rms_norm", [x, ones], attrs)
    return [ctx.emit("multiply", [y, scale])]


def _check_broadcasts(
    ctx: NodeContext, small: tuple[D.Dim, ...], big: tuple[D.Dim, ...], what: str, to: str
) -> None:
    """An error unless ``small`` broadcasts (numpy, one direction) to ``big``."""
    ok = len(small) <= len(big) and all(
        _is_one(a) or D.dims_equal(a, b) for a, b in zip(reversed(small), reversed(big))
    )
    if not ok:
        raise ctx.fail(
            f"{what} has shape {tuple(D.dim_to_str(d) for d in small)}, which does not "
            f"broadcast to {to}'s {tuple(D.dim_to_str(d) for d in big)}"
        )


# -- RotaryEmbedding -----------------------------------------------------------------------


def convert_rotary_embedding(ctx: NodeContext) -> list:
    """``rotary_embedding`` on X as (B, H, S, D), or a 3-D (B, S, H * D) X viewed as
    (B, S, H, D); with position_ids the caches' rows are taken first (``take``)."""
    x, cos, sin = ctx.input(0, "X"), ctx.input(1, "cos_cache"), ctx.input(2, "sin_cache")
    positions = ctx.optional(3)
    interleaved = bool(ctx.attr("interleaved", 0))
    rank = rank_of(x)
    shape = tuple(shape_of(x))
    if rank == 3:
        heads = int(ctx.attr("num_heads", 0))
        if heads <= 0:
            raise ctx.fail("a 3-D X (batch, sequence, hidden) needs the num_heads attribute")
        hidden = shape[2]
        if not isinstance(hidden, int) or hidden % heads:
            raise ctx.fail(
                f"the hidden size {D.dim_to_str(hidden)} is not a multiple of num_heads={heads}"
            )
        xv = ctx.emit("reshape", [x], {"newshape": (shape[0], shape[1], heads, hidden // heads)})
        seq_axis = 1
    elif rank == 4:
        xv, seq_axis = x, 2
    else:
        raise ctx.fail(f"X must have rank 3 or 4, got {rank}")
    if positions is not None:
        if positions.type.dtype not in ("i64", "i32"):
            raise ctx.fail(f"position_ids must be integers, got {positions.type.dtype}")
        if rank_of(cos) != 2 or rank_of(sin) != 2:
            raise ctx.fail(
                "with position_ids the caches must be 2-D (max position, rotary dim / 2)"
            )
        cos = ctx.emit("take", [cos, positions], {"axis": 0})
        sin = ctx.emit("take", [sin, positions], {"axis": 0})
    for name, c in (("cos_cache", cos), ("sin_cache", sin)):
        if rank_of(c) != 3:
            raise ctx.fail(
                f"{name} must be (batch, sequence, rotary dim / 2) without position_ids, got "
                f"rank {rank_of(c)}"
            )
    half = shape_of(cos)[2]
    head = shape_of(xv)[3]
    dim = int(ctx.attr("rotary_embedding_dim", 0)) or head
    if not D.dims_equal(D.mul(half, 2), dim):
        raise ctx.fail(
            f"the caches' last dim {D.dim_to_str(half)} is not half the rotary dim "
            f"{D.dim_to_str(dim)}"
        )
    y = ctx.emit(
        "rotary_embedding", [xv, cos, sin], {"interleaved": interleaved, "seq_axis": seq_axis}
    )
    return [y if rank == 4 else ctx.emit("reshape", [y], {"newshape": shape})]


# -- Attention -----------------------------------------------------------------------------

_MODES = ("qk", "qk_softcap", "qk_bias", "probs")

# softmax_precision values below float32 (TensorProto element types).
_LOW_SOFTMAX = {10: "float16", 16: "bfloat16"}
_NAMES = {"f16": "float16", "bf16": "bfloat16"}


def _heads_first(ctx: NodeContext, t: Value, heads: int, what: str) -> Value:
    """A 3-D (B, S, H * d) input as (B, H, S, d)."""
    b, seq, hidden = shape_of(t)
    if not isinstance(hidden, int) or hidden % heads:
        raise ctx.fail(
            f"{what}'s hidden size {D.dim_to_str(hidden)} is not a multiple of {heads} heads"
        )
    split = ctx.emit("reshape", [t], {"newshape": (b, seq, heads, hidden // heads)})
    return ctx.emit("transpose", [split], {"axes": (0, 2, 1, 3)})


def _bias(ctx: NodeContext, mask: Value, q: Value, total: D.Dim) -> Value:
    """The attn_mask as an additive rank-4 bias of q's dtype whose last dim is ``total``
    (a bool mask: 0 where True, -inf where False; a shorter one padded with -inf)."""
    dtype = q.type.dtype
    np_dtype = numpy_dtype(dtype)
    if mask.type.dtype == "bool":
        zero = Folded(np.zeros((), np_dtype), f"{ctx.hint()}_zero")
        ninf = Folded(np.array(-np.inf, np_dtype), f"{ctx.hint()}_ninf")
        mask = ctx.emit("where", [mask, zero, ninf])
    elif mask.type.dtype != dtype:
        raise ctx.fail(
            f"attn_mask is {mask.type.dtype}; it must be bool or the dtype of Q ({dtype})"
        )
    rank = rank_of(mask)
    if rank == 0 or rank > 4:
        raise ctx.fail(f"attn_mask must have rank 1 to 4, got {rank}")
    if rank < 4:
        mask = ctx.emit("reshape", [mask], {"newshape": (1,) * (4 - rank) + tuple(shape_of(mask))})
    last = shape_of(mask)[3]
    if not D.dims_equal(last, total):
        if not (isinstance(last, int) and isinstance(total, int) and last < total):
            raise ctx.fail(
                f"attn_mask's last dim {D.dim_to_str(last)} must be at most the total sequence "
                f"length {D.dim_to_str(total)}"
            )
        lead = _static_dims(ctx, tuple(shape_of(mask)[:3]), "attn_mask's leading dims")
        pad = Folded(np.full(lead + [total - last], -np.inf, np_dtype), f"{ctx.hint()}_mask_pad")
        mask = ctx.emit("concat", [mask, pad], {"axis": 3})
    return mask


def convert_attention(ctx: NodeContext) -> list:
    """One ``attention`` call for Y and, when the node's qk_matmul_output is wanted, one
    more with its mode as the ``result``; 3-D inputs are viewed per head and transposed to
    (B, H, S, d), past_key/past_value concatenated before K/V (the present outputs)."""
    q, k, v = ctx.input(0, "Q"), ctx.input(1, "K"), ctx.input(2, "V")
    mask, past_k, past_v = ctx.optional(3), ctx.optional(4), ctx.optional(5)
    lens = ctx.optional(6) if ctx.opset >= 24 else None
    if (past_k is None) != (past_v is None):
        raise ctx.fail("past_key and past_value must be given together")
    if lens is not None and past_k is not None:
        raise ctx.fail("nonpad_kv_seqlen cannot be combined with past_key/past_value")
    ranks = (rank_of(q), rank_of(k), rank_of(v))
    if ranks not in ((3, 3, 3), (4, 4, 4)):
        raise ctx.fail(f"Q, K and V must all be 3-D or all 4-D, got ranks {ranks}")
    for name, t in (("K", k), ("V", v)):
        if t.type.dtype != q.type.dtype:
            raise ctx.fail(f"{name} is {t.type.dtype} but Q is {q.type.dtype}")
    low = q.type.dtype in ("f16", "bf16")
    precision = ctx.attr("softmax_precision")
    if precision is not None and not low and int(precision) in _LOW_SOFTMAX:
        raise ctx.fail(
            f"softmax_precision {_LOW_SOFTMAX[int(precision)]} below the inputs' "
            f"{q.type.dtype} is not supported (relaxc's softmax is at least as precise as Q)"
        )
    three_d = ranks[0] == 3
    heads_given = any(n in ctx.attrs for n in ("q_num_heads", "kv_num_heads"))
    if not three_d and ctx.opset >= 25 and heads_given:
        raise ctx.fail("q_num_heads and kv_num_heads must not be given with 4-D Q, K and V")
    if three_d:
        hq, hkv = int(ctx.attr("q_num_heads", 0)), int(ctx.attr("kv_num_heads", 0))
        if hq <= 0 or hkv <= 0:
            raise ctx.fail("3-D Q, K and V need the q_num_heads and kv_num_heads attributes")
        q = _heads_first(ctx, q, hq, "Q")
        k = _heads_first(ctx, k, hkv, "K")
        v = _heads_first(ctx, v, hkv, "V")
    if past_k is not None and past_v is not None:
        k = ctx.emit("concat", [past_k, k], {"axis": 2})
        v = ctx.emit("concat", [past_v, v], {"axis": 2})
    head = shape_of(q)[3]
    scale = ctx.attr("scale")
    if scale is None:
        if not isinstance(head, int) or head <= 0:
            raise ctx.fail("the default scale 1/sqrt(head size) needs a static head size")
        scale = 1.0 / float(np.sqrt(head))
    attrs: dict = {"scale": float(scale), "softcap": float(ctx.attr("softcap", 0.0))}
    if low:  # ONNX rounds each step in f16/bf16 (the expected outputs are those steps')
        attrs["rounding"] = q.type.dtype
        if precision is not None and int(precision) in (1, 11):
            attrs["softmax_steps"] = False  # a float or double softmax, rounded once
        elif precision is not None and _LOW_SOFTMAX.get(int(precision)) != _NAMES[q.type.dtype]:
            raise ctx.fail(
                f"softmax_precision {precision} on {q.type.dtype} inputs is not supported "
                "(relaxc reads float, double or Q's own type)"
            )
    window = _window(ctx)
    attrs.update(window)
    if ctx.attr("is_causal", 0) or window:
        offset: D.Dim = 0 if past_k is None else shape_of(past_k)[2]
        if not isinstance(offset, int):
            raise ctx.fail(
                "is_causal or a window with past_key needs a static past sequence length"
            )
        attrs["offset"] = offset
    if ctx.attr("is_causal", 0):
        attrs["causal"] = True
    total = shape_of(k)[2]
    inputs = [q, k, v]
    if mask is not None:
        inputs.append(_bias(ctx, mask, q, total))
    if lens is not None:
        if lens.type.dtype != "i64":
            raise ctx.fail(f"nonpad_kv_seqlen must be int64, got {lens.type.dtype}")
        if mask is None:
            zero = np.zeros((1, 1, 1, 1), numpy_dtype(q.type.dtype))
            inputs.append(Folded(zero, f"{ctx.hint()}_zero_bias"))
        inputs.append(lens)
    y = ctx.emit("attention", inputs, attrs)
    if three_d:
        b, heads, seq, dv = shape_of(y)
        y = ctx.emit("transpose", [y], {"axes": (0, 2, 1, 3)})
        y = ctx.emit("reshape", [y], {"newshape": (b, seq, D.mul(heads, dv))})
    outs = [y, k, v]
    if len(ctx.node.output) > 3 and ctx.node.output[3]:
        mode = int(ctx.attr("qk_matmul_output_mode", 0))
        if not 0 <= mode < len(_MODES):
            raise ctx.fail(f"qk_matmul_output_mode {mode} is not 0, 1, 2 or 3")
        outs.append(ctx.emit("attention", inputs, {**attrs, "result": _MODES[mode]}, k=3))
    return outs


def _window(ctx: NodeContext) -> dict[str, int]:
    """Opset 25's sliding window as the ``attention`` attributes that differ from no bound."""
    if ctx.opset < 25:
        return {}
    out = {}
    for name, attr in (("left_window_size", "window_left"), ("right_window_size", "window_right")):
        size = int(ctx.attr(name, -1))
        if size < -1:
            raise ctx.fail(f"{name} must be -1 (no bound) or at least 0, got {size}")
        if size >= 0:
            out[attr] = size
    return out


def _from_opset_23(convert: Converter) -> Converter:
    """``convert``, refusing a node of a model whose opset predates the operator (all three
    first appear in opset 23)."""

    def checked(ctx: NodeContext) -> list:
        if ctx.opset < 23:
            raise ctx.fail(
                f"{ctx.op_type} is an operator of opset 23 and later; the model imports opset "
                f"{ctx.opset}"
            )
        return convert(ctx)

    return checked


def table() -> dict[str, Converter]:
    return {
        "RMSNormalization": _from_opset_23(convert_rms_normalization),
        "RotaryEmbedding": _from_opset_23(convert_rotary_embedding),
        "Attention": _from_opset_23(convert_attention),
    }
