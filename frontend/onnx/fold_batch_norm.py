"""Inference batch normalization folded into the convolution before it, at import time.

A ``BatchNormalization`` in inference form right after a ``Conv`` is an affine map per
output channel, so the two are one convolution with scaled weights and a new bias::

    s  = scale / sqrt(var + epsilon)
    W' = W * s            (per output channel)
    B' = (B - mean) * s + beta      (B = 0 when the Conv has no bias)

onnxruntime's graph optimizer does the same (its Conv+BatchNormalization fusion), as do
TVM's and TFLite's converters. The program then holds one tensor where it held two (the
convolution's output and the normalized one, even when the normalization ran in place) and
reads the feature map once instead of twice.

A pair folds only when the result is the same function of the input: the Conv's output has
no reader but the normalization (and is not a graph output), the normalization uses no
training outputs, and every weight involved is known at import time and of one float dtype.
``W'`` and ``B'`` are computed in float64 and rounded once to that dtype; the folded program
differs from the unfolded one by that rounding and the order of the sums (within the
tolerance of a blocked sum; the tests compare both with onnxruntime).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from .values import Folded, Value


@dataclass(frozen=True)
class ConvBatchNorm:
    """A ``Conv`` node (by index) and the ``BatchNormalization`` node that alone reads it."""

    conv: int
    batch_norm: int
    epsilon: float


def foldable_pairs(graph: Any, env: Mapping[str, Value], opset: int) -> dict[int, ConvBatchNorm]:
    """The Conv -> BatchNormalization pairs of ``graph`` that fold, keyed by the Conv's index.

    ``env`` holds the values known before any node runs (initializers as :class:`Folded`);
    ``Constant`` nodes are not looked through (exporters give BatchNormalization and Conv
    their weights as initializers)."""
    readers: dict[str, list[tuple[int, int]]] = {}
    for index, node in enumerate(graph.node):
        for slot, name in enumerate(node.input):
            if name:
                readers.setdefault(name, []).append((index, slot))
    outputs = {o.name for o in graph.output}
    nodes = list(graph.node)
    pairs: dict[int, ConvBatchNorm] = {}
    for index, conv in enumerate(nodes):
        if conv.op_type != "Conv" or conv.domain not in ("", "ai.onnx") or len(conv.output) != 1:
            continue
        out = conv.output[0]
        if out in outputs or len(readers.get(out, [])) != 1:
            continue
        (bn_index, slot) = readers[out][0]
        bn = nodes[bn_index]
        if bn.op_type != "BatchNormalization" or bn.domain not in ("", "ai.onnx") or slot != 0:
            continue
        attrs = {a.name: a for a in bn.attribute}
        if _int_attr(attrs, "training_mode", 0) or (
            opset < 9 and not _int_attr(attrs, "spatial", 1)
        ):
            continue
        if any(name and (name in outputs or readers.get(name)) for name in bn.output[1:]):
            continue  # a training output is read: leave the node to report it
        weights = [conv.input[1]] + ([conv.input[2]] if len(conv.input) > 2 else [])
        params = list(bn.input[1:5])
        if len(params) != 4 or not all(
            name and isinstance(env.get(name), Folded) for name in weights + params
        ):
            continue
        arrays = [env[name].array for name in weights + params]  # type: ignore[union-attr]
        if arrays[0].ndim != 4 or any(a.ndim != 1 for a in arrays[1:]):
            continue
        if len({a.dtype for a in arrays}) != 1 or arrays[0].dtype.kind != "f":
            continue
        channels = arrays[0].shape[0]
        if any(a.shape[0] != channels for a in arrays[1:]):
            continue
        eps = attrs.get("epsilon")
        epsilon = float(eps.f) if eps is not None else 1e-5
        pairs[index] = ConvBatchNorm(index, bn_index, epsilon)
    return pairs


def folded_weights(
    w: Folded, b: Folded | None, params: list[Folded], epsilon: float, hint: str
) -> tuple[Folded, Folded]:
    """(W', B') of a Conv with weight ``w`` and bias ``b`` and the normalization with
    ``params`` (scale, B, mean, var), rounded once to the weight's dtype."""
    scale, beta, mean, var = (p.array.astype(np.float64) for p in params)
    with np.errstate(all="ignore"):
        s = scale / np.sqrt(var + epsilon)
        bias = np.zeros_like(s) if b is None else b.array.astype(np.float64)
        w2 = w.array.astype(np.float64) * s.reshape(-1, 1, 1, 1)
        b2 = (bias - mean) * s + beta
    dtype = w.array.dtype
    return (
        Folded(np.ascontiguousarray(w2.astype(dtype)), f"{w.name}.bn_folded"),
        Folded(np.ascontiguousarray(b2.astype(dtype)), f"{hint}.bn_folded_bias"),
    )


def _int_attr(attrs: Mapping[str, Any], name: str, default: int) -> int:
    a = attrs.get(name)
    return int(a.i) if a is not None else default
