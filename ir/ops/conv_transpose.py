"""conv2d_transpose: the transposed 2-D convolution (ONNX ConvTranspose), NCHW data and a
(C, O/G, KH, KW) weight (ONNX's layout), with strides, padding, dilation, output padding and
groups.

Each input position scatters its products with the kernel's taps into the full output
(``(H - 1) * SH + DH * (KH - 1) + 1 + OPH`` rows, ``output_padding`` the extra rows and
columns at the end), of which the padding is cropped. The numpy kernel makes, per group, one
BLAS product of the transposed weights with the input (the columns), and adds each tap's
column into its strided slice of the full output, in the product dtype of conv2d
(:func:`.checks.product_dtype`: float32 for f16 and f32), then adds the bias and rounds once.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.registry import AttrSpec, OpDef, OpError, Registry
from relaxc.ir.types import TensorType, Type

from .checks import as_contiguous, pad4, positive_pair, product_dtype, require_dims_equal
from .checks import require_numeric, require_rank
from .common import same_dtype, tensors

Pair = tuple[int, int]


class TransposeParams(NamedTuple):
    strides: Pair
    pads: tuple[int, int, int, int]
    dilation: Pair
    output_padding: Pair
    groups: int


def transpose_params(attrs: Mapping[str, Any]) -> TransposeParams:
    """The attributes, checked."""
    op = "conv2d_transpose"
    strides = positive_pair(attrs["strides"], op, "strides")
    pads = pad4(attrs["padding"], op)
    if min(pads) < 0:
        raise OpError(f"{op}: padding must not be negative, got {attrs['padding']}")
    dilation = positive_pair(attrs["dilation"], op, "dilation")
    op_pad = tuple(attrs["output_padding"])
    if len(op_pad) == 1:
        op_pad = (op_pad[0], op_pad[0])
    if len(op_pad) != 2 or min(op_pad) < 0:
        raise OpError(f"{op}: output_padding must be 2 non-negative ints, got {op_pad}")
    groups = attrs["groups"]
    if groups < 1:
        raise OpError(f"{op}: groups must be positive, got {groups}")
    return TransposeParams(strides, pads, dilation, (op_pad[0], op_pad[1]), groups)


def full_length(n: D.Dim, k: D.Dim, stride: int, dilation: int, extra: int) -> D.Dim:
    """The uncropped output length: (n - 1) * stride + dilation * (k - 1) + 1 + extra."""
    return D.add(D.mul(D.add(n, -1), stride), D.add(D.mul(D.add(k, -1), dilation), 1 + extra))


def _infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    op = "conv2d_transpose"
    ts = tensors(inputs, op)
    x, w = ts[0], ts[1]
    dtype = same_dtype(ts, op)
    require_numeric(dtype, op)
    require_rank(x, 4, op, "data (NCHW)")
    require_rank(w, 4, op, "weight (C, O/G, KH, KW)")
    p = transpose_params(attrs)
    n, c, h, wd = x.shape
    cw, og, kh, kw = w.shape
    require_dims_equal(c, cw, op, "input channels and the weight's first dim")
    if isinstance(c, int) and c % p.groups:
        raise OpError(f"{op}: {c} input channels are not divisible by groups={p.groups}")
    o = D.mul(og, p.groups)
    if len(ts) == 3:
        require_rank(ts[2], 1, op, "bias")
        require_dims_equal(ts[2].shape[0], o, op, "bias length and output channels")
    pt, pl, pb, pr = p.pads
    fh = full_length(h, kh, p.strides[0], p.dilation[0], p.output_padding[0])
    fw = full_length(wd, kw, p.strides[1], p.dilation[1], p.output_padding[1])
    oh, ow = D.add(fh, -(pt + pb)), D.add(fw, -(pl + pr))
    for what, d in (("height", oh), ("width", ow)):
        if isinstance(d, int) and d < 0:
            raise OpError(f"{op}: the padding leaves a negative output {what} ({d})")
    return TensorType((n, o, oh, ow), dtype)


def conv2d_transpose(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x, w = xs[0], xs[1]
    p = transpose_params(attrs)
    acc = product_dtype(x.dtype)
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    g = p.groups
    cg = c // g
    (sh, sw), (dh, dw) = p.strides, p.dilation
    fh = int(full_length(h, kh, sh, dh, p.output_padding[0]))  # type: ignore[arg-type]
    fw = int(full_length(wd, kw, sw, dw, p.output_padding[1]))  # type: ignore[arg-type]
    full = np.zeros((n, g, og, fh, fw), dtype=acc)
    if x.size and w.size:
        # (G, O/G * KH * KW, C/G) @ (N, G, C/G, H * W): each tap's products at every position
        wt = w.astype(acc, copy=False).reshape(g, cg, og * kh * kw).transpose(0, 2, 1)
        cols = np.matmul(wt, x.astype(acc, copy=False).reshape(n, g, cg, h * wd))
        cols = cols.reshape(n, g, og, kh, kw, h, wd)
        for i in range(kh):
            for j in range(kw):
                rows = slice(i * dh, i * dh + (h - 1) * sh + 1, sh)
                columns = slice(j * dw, j * dw + (wd - 1) * sw + 1, sw)
                full[:, :, :, rows, columns] += cols[:, :, :, i, j]
    pt, pl, pb, pr = p.pads
    y = full.reshape(n, g * og, fh, fw)[:, :, pt : fh - pb, pl : fw - pr]
    if len(xs) == 3:
        y = y + xs[2].astype(acc, copy=False).reshape(1, -1, 1, 1)
    return as_contiguous(y, x.dtype)


def register_all(reg: Registry) -> None:
    reg.register(
        OpDef(
            "conv2d_transpose",
            "transposed 2-D convolution, NCHW data and (C, O/G, KH, KW) weight (+ bias (O,))",
            "kernel",
            _infer,
            family="matmul",
            min_inputs=2,
            max_inputs=3,
            kernel=conv2d_transpose,
            input_names=("data", "weight", "bias"),
            attrs=(
                AttrSpec("strides", "ints", (1, 1), "(sh, sw) or one int"),
                AttrSpec("padding", "pad", (0, 0, 0, 0), "cropped: (top, left, bottom, right)"),
                AttrSpec("dilation", "ints", (1, 1), "(dh, dw) or one int"),
                AttrSpec("output_padding", "ints", (0, 0), "rows and columns added at the end"),
                AttrSpec("groups", "int", 1, "channel groups"),
            ),
            example="conv2d_transpose(%x, %w, strides=(2, 2))",
        )
    )
