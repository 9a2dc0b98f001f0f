"""Converters of sampling at computed positions: GridSample and AffineGrid.

GridSample (opsets 16, 20, 22) becomes the ``grid_sample`` op (opset 16 spells the modes
bilinear and bicubic, 20 and later linear and cubic; any number of spatial axes). AffineGrid
(20) is composed: the base grid of the output size (a constant: each position's normalized
coordinates, last spatial axis first, and a 1) times each batch's transposed ``theta``,

    grid[n] = base (P, r + 1) @ theta[n]^T (r + 1, r),  reshaped to (N, D1, ..., Dr, r),

a ``matmul`` and a ``reshape``; ``size`` must be known when the model is imported.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.types import numpy_dtype

from .context import NodeContext, rank_of, shape_of
from .values import Folded

Converter = Callable[[NodeContext], list]

_MODES_16 = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}
_MODES_20 = {"linear": "linear", "nearest": "nearest", "cubic": "cubic"}


def convert_grid_sample(ctx: NodeContext) -> list:
    x, grid = ctx.input(0, "X"), ctx.input(1, "grid")
    names = _MODES_16 if ctx.opset < 20 else _MODES_20
    default = "bilinear" if ctx.opset < 20 else "linear"
    mode = str(ctx.attr("mode", default))
    if mode not in names:
        raise ctx.fail(
            f"mode '{mode}' is not one of opset {ctx.opset}'s: {', '.join(sorted(names))}"
        )
    padding = str(ctx.attr("padding_mode", "zeros"))
    if padding not in ("zeros", "border", "reflection"):
        raise ctx.fail(f"padding_mode '{padding}' is not one of zeros, border, reflection")
    rank = rank_of(x)
    if rank < 3:
        raise ctx.fail(f"X must have rank 3 or more (N, C, spatial axes), got rank {rank}")
    if names[mode] != "nearest" and not x.type.dtype.startswith("f"):
        raise ctx.fail(f"{mode} sampling of {x.type.dtype} tensors is not supported (only floats)")
    attrs = {
        "mode": names[mode],
        "padding_mode": padding,
        "align_corners": bool(ctx.attr("align_corners", 0)),
    }
    return [ctx.emit("grid_sample", [x, grid], attrs)]


def base_grid(sizes: list[int], align_corners: bool) -> np.ndarray:
    """The normalized coordinates of every position of ``sizes`` (row-major), as rows
    ``(x_last, ..., x_first, 1)`` (float64): align_corners puts -1 and 1 at the end
    positions (a length of 1 at 0, as PyTorch does: the converter refuses it, see
    :func:`convert_affine_grid`), otherwise at the outer edges of the end positions."""
    axes = []
    for d in sizes:
        i = np.arange(d, dtype=np.float64)
        if align_corners:
            axes.append(i * 2 / (d - 1) - 1 if d > 1 else np.zeros(d))
        else:
            axes.append((2 * i + 1) / d - 1)
    mesh = np.meshgrid(*axes, indexing="ij")
    cols = [m.reshape(-1) for m in reversed(mesh)]
    return np.stack(cols + [np.ones(int(np.prod(sizes)))], axis=1)


def convert_affine_grid(ctx: NodeContext) -> list:
    theta = ctx.input(0, "theta")
    size = ctx.ints(ctx.input(1, "size"), "size")
    assert size is not None
    if len(size) not in (4, 5):
        raise ctx.fail(f"size must be (N, C, H, W) or (N, C, D, H, W), got {size}")
    spatial = size[2:]
    r = len(spatial)
    if any(d < 0 for d in size):
        raise ctx.fail(f"size must not be negative, got {size}")
    shape = shape_of(theta)
    if rank_of(theta) != 3 or shape[1:] != (r, r + 1):
        raise ctx.fail(
            f"theta must be (N, {r}, {r + 1}) for a size of {len(size)} values, "
            f"got ({', '.join(D.dim_to_str(d) for d in shape)})"
        )
    if D.is_static(shape[0]) and int(shape[0]) != size[0]:  # type: ignore[arg-type]
        raise ctx.fail(f"size's batch {size[0]} is not theta's, {D.dim_to_str(shape[0])}")
    dtype = theta.type.dtype
    if not dtype.startswith("f"):
        raise ctx.fail(f"theta must be floating-point, got {dtype}")
    align = bool(ctx.attr("align_corners", 0))
    if align and 1 in spatial:
        raise ctx.fail(
            f"align_corners=1 with a spatial length of 1 (size {size}) has no agreed grid: "
            "onnx's reference implementation puts the position at -1, onnxruntime at 1, "
            "PyTorch at 0"
        )
    base = base_grid(spatial, align)
    base_v = Folded(base.astype(numpy_dtype(dtype)), f"{ctx.hint()}_base")
    theta_t = ctx.emit("transpose", [theta], {"axes": (0, 2, 1)})
    grid = ctx.emit("matmul", [base_v, theta_t])
    return [ctx.emit("reshape", [grid], {"newshape": (shape[0], *spatial, r)})]


def table() -> dict[str, Converter]:
    return {"GridSample": convert_grid_sample, "AffineGrid": convert_affine_grid}
