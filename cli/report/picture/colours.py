"""What a colour means in the pictures: the kind of op that wrote the buffer.

Each op has a fixed colour, whatever the model (a conv2d output is blue in every picture);
ops of one family share a hue. The family is a fact of the op (``OpDef.family`` on its
registry record); the colours are presentation, so they live here: each family's shades,
and for the common ops a shade of their own (another op of the family gets one of the
family's shades by a hash of its name).
"""

from __future__ import annotations

import zlib

from relaxc.ir.ops import REGISTRY

SHADES: dict[str, tuple[str, ...]] = {
    "matmul": ("#4e79a7", "#2f5c8a", "#86a9cf"),
    "pooling": ("#59a14f", "#3b7a33", "#8cc482"),
    "normalization": ("#b07aa1", "#8a5680", "#d2a6c7", "#e377c2", "#c49bd6"),
    "data movement": ("#9c755f", "#7a5540", "#c49c84", "#a0522d", "#d2b48c"),
    "reduction": ("#edc948", "#c9a51f", "#f5dc8a"),
    "fill": ("#bab0ac", "#8f8682", "#d6cfcb"),
    "elementwise": ("#f28e2b", "#e15759", "#ff9da7", "#d4661a", "#ffbe7d", "#c0392b"),
}
"""The shades of each family's hue (an op of family ``other`` is :data:`UNKNOWN` grey)."""

OWN_SHADE: dict[str, str] = {
    "conv2d": "#4e79a7",
    "dense": "#2f5c8a",
    "matmul": "#86a9cf",
    "max_pool2d": "#59a14f",
    "avg_pool2d": "#3b7a33",
    "global_avg_pool2d": "#8cc482",
    "batch_norm": "#b07aa1",
    "layer_norm": "#8a5680",
    "rms_norm": "#d2a6c7",
    "lrn": "#e377c2",
    "softmax": "#c49bd6",
    "concat": "#9c755f",
    "split": "#7a5540",
    "transpose": "#c49c84",
    "strided_slice": "#a0522d",
    "take": "#d2b48c",
    "sum": "#edc948",
    "mean": "#c9a51f",
    "max": "#f5dc8a",
    "full": "#bab0ac",
    "ones": "#8f8682",
    "zeros": "#d6cfcb",
    "relu": "#f28e2b",
    "add": "#e15759",
    "multiply": "#ff9da7",
    "gelu": "#d4661a",
    "silu": "#ffbe7d",
    "sigmoid": "#c0392b",
    "clip": "#f1a340",
    "tanh": "#fdd0a2",
}
"""The common ops, each a shade of its own (so that they tell apart in one picture)."""

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
    rec = REGISTRY.get(op)
    return rec.family if rec is not None else "other"


def op_colour(op: str) -> str:
    """The fill colour of a buffer written by ``op``: a pure function of the op's name."""
    fam = family(op)
    if fam == "kernel scratch":
        return SCRATCH
    if fam not in SHADES:
        return UNKNOWN
    if op in OWN_SHADE:
        return OWN_SHADE[op]
    shades = SHADES[fam]
    return shades[zlib.crc32(op.encode()) % len(shades)]


def ink(fill: str) -> str:
    """The text colour that reads on ``fill`` (``#rrggbb``): dark on light fills, white on
    dark ones (by relative luminance)."""
    r, g, b = (int(fill[k : k + 2], 16) / 255 for k in (1, 3, 5))
    lum = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "#222" if lum > 0.55 else "#fff"
