"""What a colour means in the pictures: the kind of op that wrote the buffer.

Each op has a fixed colour, whatever the model (a conv2d output is blue in every picture);
ops of one family share a hue. The colour is presentation, so it lives here, not on the
op's registry record; the family of an op the table does not name comes from the record
(elementwise or not).
"""

from __future__ import annotations

import zlib

from relaxc.ir.ops import REGISTRY

FAMILIES: dict[str, tuple[str, ...]] = {
    "matmul": ("conv2d", "dense", "matmul"),
    "pooling": ("max_pool2d", "avg_pool2d", "global_avg_pool2d"),
    "normalization": ("batch_norm", "layer_norm", "rms_norm", "lrn", "softmax"),
    "data movement": ("concat", "split", "transpose", "strided_slice", "take"),
    "reduction": ("sum", "mean", "max"),
    "fill": ("full", "ones", "zeros"),
}
"""Families of ops drawn in shades of one hue."""

SHADES: dict[str, tuple[str, ...]] = {
    "matmul": ("#4e79a7", "#2f5c8a", "#86a9cf"),
    "pooling": ("#59a14f", "#3b7a33", "#8cc482"),
    "normalization": ("#b07aa1", "#8a5680", "#d2a6c7", "#e377c2", "#c49bd6"),
    "data movement": ("#9c755f", "#7a5540", "#c49c84", "#a0522d", "#d2b48c"),
    "reduction": ("#edc948", "#c9a51f", "#f5dc8a"),
    "fill": ("#bab0ac", "#8f8682", "#d6cfcb"),
    "elementwise": ("#f28e2b", "#e15759", "#ff9da7", "#d4661a", "#ffbe7d", "#c0392b"),
}

ELEMENTWISE: dict[str, str] = {
    "relu": "#f28e2b",
    "add": "#e15759",
    "multiply": "#ff9da7",
    "gelu": "#d4661a",
    "silu": "#ffbe7d",
    "sigmoid": "#c0392b",
    "clip": "#f1a340",
    "tanh": "#fdd0a2",
}
"""The common elementwise ops, each its own shade of orange and red."""

SCRATCH = "#17becf"
"""A kernel's working memory (PlanKernelScratch's ``scratch (%s)``: written by ``"<op> scratch"``
in the report) is teal, whatever the kernel."""

UNKNOWN = "#79706e"
"""Buffers no op writes (or a view chain hides the writer) are grey."""


def family(op: str) -> str:
    """The family of ``op`` ("other" for an op relaxc does not know, "" for none)."""
    if not op:
        return ""
    if op.endswith(" scratch"):
        return "kernel scratch"
    for name, ops in FAMILIES.items():
        if op in ops:
            return name
    rec = REGISTRY.get(op)
    if rec is not None and rec.elementwise:
        return "elementwise"
    return "other"


def op_colour(op: str) -> str:
    """The fill colour of a buffer written by ``op``: a pure function of the op's name."""
    fam = family(op)
    if fam == "kernel scratch":
        return SCRATCH
    if fam in FAMILIES:
        return SHADES[fam][FAMILIES[fam].index(op) % len(SHADES[fam])]
    if fam == "elementwise":
        if op in ELEMENTWISE:
            return ELEMENTWISE[op]
        shades = SHADES["elementwise"]
        return shades[zlib.crc32(op.encode()) % len(shades)]
    return UNKNOWN


def ink(fill: str) -> str:
    """The text colour that reads on ``fill`` (``#rrggbb``): dark on light fills, white on
    dark ones (by relative luminance)."""
    r, g, b = (int(fill[k : k + 2], 16) / 255 for k in (1, 3, 5))
    lum = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "#222" if lum > 0.55 else "#fff"
