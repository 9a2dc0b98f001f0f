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
from .values import Folded

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


def table() -> dict[str, Converter]:
    return {
        "RMSNormalization": convert_rms_normalization,
    }
