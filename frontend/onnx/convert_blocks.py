"""Converters that write blocks of one tensor into another: Col2Im (opset 18, PyTorch's
fold) and TensorScatter (opset 24, the KV-cache update), composed from existing ops so that
every backend runs them with no kernel of their own, and planned like any other tensor.

Col2Im adds each column of its input, a block of the image, at the block's place: a
``scatter_nd`` with reduction add into a zero image laid out (positions, N, C), whose
indices, one per (block offset, block) pair, are a constant of B * L values (not of the
image's size); then a transpose to (N, C, spatial...) and a crop of the pads.

TensorScatter writes ``update`` into ``past_cache`` at each batch row's write index along
the sequence axis: a ``scatter_elements`` over the cache, which writes over the past cache
where nothing else reads it (its record's in-place fact), so a decode step updates the
cache in place. Without write indices it is a concat of the update and the rest of the
cache.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.nodes import DType

from .context import NodeContext, norm_axis, rank_of, shape_of
from .values import Folded

Converter = Callable[[NodeContext], list]


def _static(ctx: NodeContext, dims: tuple[D.Dim, ...], what: str) -> tuple[int, ...]:
    if not all(isinstance(d, int) for d in dims):
        shown = ", ".join(D.dim_to_str(d) for d in dims)
        raise ctx.fail(f"{what} ({shown}) must be known when the model is imported")
    return tuple(int(d) for d in dims)  # type: ignore[arg-type]


# -- Col2Im ----------------------------------------------------------------------------------


def col2im_positions(
    image: tuple[int, ...],
    block: tuple[int, ...],
    strides: tuple[int, ...],
    pads: tuple[int, ...],
    dilations: tuple[int, ...],
) -> tuple[tuple[int, ...], np.ndarray]:
    """(the padded image's shape, the flat position in it of each (block offset, block)
    pair, offsets and blocks both in row-major order: shape (B * L,))."""
    k = len(image)
    padded = tuple(image[i] + pads[i] + pads[k + i] for i in range(k))
    counts = tuple(
        (padded[i] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(k)
    )
    if any(c < 1 for c in counts):
        raise ValueError(f"no block fits: the blocks per axis would be {counts}")
    offsets = np.indices(block).reshape(k, -1).T * np.array(dilations)  # (B, k)
    starts = np.indices(counts).reshape(k, -1).T * np.array(strides)  # (L, k)
    where = offsets[:, None, :] + starts[None, :, :]  # (B, L, k)
    flat = np.ravel_multi_index(tuple(where.reshape(-1, k).T), padded)
    return padded, flat.astype(np.int64)


def convert_col2im(ctx: NodeContext) -> list:
    x = ctx.input(0)
    image = tuple(ctx.ints(ctx.input(1, "image_shape"), "the image_shape input") or ())
    block = tuple(ctx.ints(ctx.input(2, "block_shape"), "the block_shape input") or ())
    k = len(image)
    if k < 1 or len(block) != k:
        raise ctx.fail(f"image_shape {list(image)} and block_shape {list(block)} differ in rank")
    strides = tuple(int(v) for v in ctx.attr("strides", [1] * k))
    dilations = tuple(int(v) for v in ctx.attr("dilations", [1] * k))
    pads = tuple(int(v) for v in ctx.attr("pads", [0] * (2 * k)))
    if len(strides) != k or len(dilations) != k or len(pads) != 2 * k:
        raise ctx.fail(f"strides, dilations and pads must have {k}, {k} and {2 * k} values")
    if rank_of(x) != 3:
        raise ctx.fail(f"its input has rank {rank_of(x)}; it needs (N, C * block size, blocks)")
    n, cb, length = _static(ctx, shape_of(x), "its input's shape")
    b = int(np.prod(block))
    if b < 1 or cb % b:
        raise ctx.fail(f"its input's {cb} rows are not a whole number of blocks of {b}")
    c = cb // b
    try:
        padded, flat = col2im_positions(image, block, strides, pads, dilations)
    except ValueError as e:
        raise ctx.fail(str(e)) from None
    if flat.size != b * length:
        raise ctx.fail(
            f"its input holds {length} blocks; image_shape {list(image)} with these strides, "
            f"pads and dilations makes {flat.size // b}"
        )
    cols = ctx.emit("reshape", [x], {"newshape": (n, c, b, length)})
    cols = ctx.emit("transpose", [cols], {"axes": (2, 3, 0, 1)})
    cols = ctx.emit("reshape", [cols], {"newshape": (b * length, n, c)})
    size = int(np.prod(padded))
    canvas = ctx.emit("zeros", [], {"shape": (size, n, c), "dtype": DType(x.type.dtype)})
    idx = Folded(flat.reshape(-1, 1), f"{ctx.hint()}_positions")
    summed = ctx.emit("scatter_nd", [canvas, idx, cols], {"reduction": "add"})
    img = ctx.emit("reshape", [summed], {"newshape": (*padded, n, c)})
    img = ctx.emit("transpose", [img], {"axes": (k, k + 1, *range(k))})
    if not any(pads):
        return [img]
    crop = {
        "begin": pads[:k],
        "end": tuple(padded[i] - pads[k + i] for i in range(k)),
        "axes": tuple(range(2, 2 + k)),
    }
    return [ctx.emit("strided_slice", [img], crop)]


# -- TensorScatter ---------------------------------------------------------------------------


def convert_tensor_scatter(ctx: NodeContext) -> list:
    past, update, where = ctx.input(0, "past_cache"), ctx.input(1, "update"), ctx.optional(2)
    mode = ctx.attr("mode", "linear")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode not in ("linear", "circular"):
        raise ctx.fail(f"mode '{mode}' is not 'linear' or 'circular'")
    rank = rank_of(past)
    if rank < 2 or rank_of(update) != rank:
        raise ctx.fail(f"past_cache and update have ranks {rank} and {rank_of(update)}")
    axis = norm_axis(int(ctx.attr("axis", -2)), rank, ctx)
    if axis == 0:
        raise ctx.fail("its axis is the batch axis 0; the sequence axis must be another")
    if past.type.dtype != update.type.dtype:
        raise ctx.fail(f"update is {update.type.dtype}, past_cache {past.type.dtype}")
    ps, us = shape_of(past), shape_of(update)
    for i, (p, u) in enumerate(zip(ps, us)):
        if i != axis and isinstance(p, int) and isinstance(u, int) and p != u:
            raise ctx.fail(f"update's axis {i} has {u} entries, past_cache's {p}")
    big = _static(ctx, (ps[axis],), "the cache's sequence length")[0]
    seq = _static(ctx, (us[axis],), "the update's sequence length")[0]
    if seq > big:
        raise ctx.fail(f"the update's {seq} positions exceed the cache's {big}")
    if where is None:  # every row writes at 0: the update, then the rest of the cache
        if seq == big:
            return [update]
        rest = ctx.emit("strided_slice", [past], {"begin": (seq,), "end": (big,), "axes": (axis,)})
        return [ctx.emit("concat", [update, rest], {"axis": axis})]
    if where.type.dtype != "i64" or rank_of(where) != 1:
        raise ctx.fail("its write_indices must be an int64 vector (one index per batch row)")
    steps = Folded(np.arange(seq, dtype=np.int64)[None, :], f"{ctx.hint()}_steps")
    pos = ctx.emit("add", [ctx.emit("expand_dims", [where], {"axis": 1}), steps])  # (B, S)
    if mode == "circular":
        length = Folded(np.array(big, np.int64), f"{ctx.hint()}_length")
        pos = ctx.emit("mod", [pos, length], {"fmod": False})
    lifted = [us[0]] + [1] * (rank - 1)
    lifted[axis] = seq
    pos = ctx.emit("reshape", [pos], {"newshape": tuple(lifted)})
    repeats = [1] * rank
    for i in range(1, rank):
        if i != axis:
            repeats[i] = _static(ctx, (us[i],), "the update's shape")[0]
    if any(r != 1 for r in repeats):
        pos = ctx.emit("tile", [pos], {"repeats": tuple(repeats)})
    return [ctx.emit("scatter_elements", [past, pos, update], {"axis": axis})]


def table() -> dict[str, Converter]:
    return {"Col2Im": convert_col2im, "TensorScatter": convert_tensor_scatter}
