"""Three small but real ONNX models built with onnx.helper, shaped like exporter output:
a conv net with branches and concat, a residual block, and a transformer block whose
sequence length is symbolic (shape arithmetic feeds its reshapes)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .util import helper, make_model, randn

F32 = np.float32


class Graph:
    """A little graph writer: ``g.op("Conv", ["x", w], pads=...)`` returns the output name."""

    def __init__(self, seed: int = 0):
        self.nodes: list[Any] = []
        self.init: dict[str, np.ndarray] = {}
        self.seed = seed
        self.count = 0

    def weight(self, name: str, *shape: int, scale: float | None = None) -> str:
        self.seed += 1
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        self.init[name] = randn(*shape, seed=self.seed) * (scale or 1.0 / math.sqrt(fan_in))
        return name

    def const(self, name: str, value: Any) -> str:
        self.init[name] = np.asarray(value)
        return name

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs: Any) -> Any:
        self.count += 1
        outs = [f"/{op_type.lower()}_{self.count}/out{i}" for i in range(n_out)]
        self.nodes.append(
            helper.make_node(op_type, inputs, outs, name=f"{op_type}_{self.count}", **attrs)
        )
        return outs[0] if n_out == 1 else outs

    def conv_bn_relu(
        self, x: str, cin: int, cout: int, k: int, prefix: str, stride: int = 1
    ) -> str:
        w = self.weight(f"{prefix}.weight", cout, cin, k, k)
        y = self.op(
            "Conv", [x, w], kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride, stride]
        )
        bn = [
            self.weight(f"{prefix}.bn.gamma", cout, scale=0.5),
            self.weight(f"{prefix}.bn.beta", cout, scale=0.1),
            self.weight(f"{prefix}.bn.mean", cout, scale=0.1),
        ]
        self.init[f"{prefix}.bn.var"] = np.abs(randn(cout, seed=self.seed + 100)) + 0.5
        y = self.op("BatchNormalization", [y, *bn, f"{prefix}.bn.var"], epsilon=1e-5)
        return self.op("Relu", [y])


def conv_branches(opset: int = 13) -> tuple[Any, dict]:
    """Conv + BN + ReLU, max pooling, three branches (1x1, 3x3 + LeakyRelu, avg-pool + 1x1)
    joined by Concat, LRN, Clip, global pooling, Flatten, Gemm, Softmax."""
    g = Graph(seed=10)
    x = g.conv_bn_relu("image", 3, 8, 3, "stem")
    x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    a = g.op("Relu", [g.op("Conv", [x, g.weight("a.w", 4, 8, 1, 1), g.weight("a.b", 4)])])
    b = g.op(
        "LeakyRelu", [g.op("Conv", [x, g.weight("b.w", 6, 8, 3, 3)], pads=[1, 1, 1, 1])], alpha=0.1
    )
    c = g.op("AveragePool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    c = g.op("Sigmoid", [g.op("Conv", [c, g.weight("c.w", 2, 8, 1, 1)])])
    y = g.op("Concat", [a, b, c], axis=1)
    y = g.op("LRN", [y], size=3, alpha=1e-4, beta=0.75, bias=1.0)
    if opset >= 11:
        y = g.op("Clip", [y, g.const("lo", np.array(0.0, F32)), g.const("hi", np.array(6.0, F32))])
    else:
        y = g.op("Clip", [y], min=0.0, max=6.0)
    y = g.op("Flatten", [g.op("GlobalAveragePool", [y])])
    y = g.op("Gemm", [y, g.weight("fc.w", 10, 12), g.weight("fc.b", 10)], transB=1)
    y = g.op("Softmax", [y], axis=1)
    g.nodes[-1].output[0] = "probs"
    model = make_model(
        g.nodes,
        [("image", F32, [1, 3, 16, 16])],
        [("probs", F32, None)],
        g.init,
        opset=opset,
        name="conv_branches",
    )
    return model, {"image": randn(1, 3, 16, 16, seed=1)}


def residual_block(opset: int = 13) -> tuple[Any, dict]:
    """Two residual blocks (identity and strided-projection shortcuts) on a batch of two, with
    Dropout and Identity as inference no-ops, ReduceMean pooling and two outputs."""
    g = Graph(seed=20)
    x = "x"
    y = g.conv_bn_relu(x, 8, 8, 3, "b1.c1")
    y = g.op("Dropout", [y])
    w = g.weight("b1.c2.weight", 8, 8, 3, 3)
    y = g.op(
        "BatchNormalization",
        [
            g.op("Conv", [y, w], pads=[1, 1, 1, 1]),
            g.weight("b1.g", 8),
            g.weight("b1.b", 8),
            g.weight("b1.m", 8),
            g.const("b1.v", np.ones(8, F32)),
        ],
    )
    x = g.op("Relu", [g.op("Add", [y, g.op("Identity", [x])])])
    y = g.conv_bn_relu(x, 8, 16, 3, "b2.c1", stride=2)
    y = g.op("Conv", [y, g.weight("b2.c2.weight", 16, 16, 3, 3)], pads=[1, 1, 1, 1])
    short = g.op("Conv", [x, g.weight("b2.proj", 16, 8, 1, 1)], strides=[2, 2])
    x = g.op("Relu", [g.op("Sum", [y, short])])
    g.nodes[-1].output[0] = "features"
    g.op("ReduceMean", ["features"], axes=[2, 3], keepdims=0)
    g.nodes[-1].output[0] = "pooled"
    model = make_model(
        g.nodes,
        [("x", F32, [2, 8, 8, 8])],
        [("features", F32, None), ("pooled", F32, None)],
        g.init,
        opset=opset,
        name="residual",
    )
    return model, {"x": randn(2, 8, 8, 8, seed=2)}


def attention_block(
    seq: int = 5, opset: int = 17, dim: int = 16, heads: int = 2
) -> tuple[Any, dict]:
    """A pre-norm transformer block on (1, seq, dim) with seq a dim_param: LayerNormalization,
    a fused QKV MatMul + Split, head reshapes computed by Shape/Gather/Unsqueeze/Concat, an
    attention bias from ConstantOfShape of a run-time shape, Softmax, an erf GELU MLP and two
    residual adds."""
    g = Graph(seed=30)
    hd = dim // heads
    h = g.op(
        "LayerNormalization",
        ["x", g.weight("ln1.g", dim, scale=1.0), g.weight("ln1.b", dim, scale=0.1)],
        axis=-1,
        epsilon=1e-5,
    )
    qkv = g.op(
        "Add",
        [
            g.op("MatMul", [h, g.weight("qkv.w", dim, 3 * dim)]),
            g.weight("qkv.b", 3 * dim, scale=0.1),
        ],
    )
    q, k, v = g.op(
        "Split", [qkv, g.const("qkv.split", np.array([dim] * 3, np.int64))], n_out=3, axis=2
    )
    shape = g.op("Shape", ["x"])
    n = g.op("Gather", [shape, g.const("one", np.array(1, np.int64))], axis=0)
    n1 = g.op("Unsqueeze", [n, g.const("axes0", np.array([0], np.int64))])
    heads_shape = g.op(
        "Concat",
        [
            g.const("c1", np.array([1], np.int64)),
            n1,
            g.const("c_heads", np.array([heads, hd], np.int64)),
        ],
        axis=0,
    )

    def split_heads(t: str, perm: list[int]) -> str:
        return g.op("Transpose", [g.op("Reshape", [t, heads_shape])], perm=perm)

    q, k, v = (
        split_heads(q, [0, 2, 1, 3]),
        split_heads(k, [0, 2, 3, 1]),
        split_heads(v, [0, 2, 1, 3]),
    )
    scores = g.op("Div", [g.op("MatMul", [q, k]), g.const("scale", np.array(math.sqrt(hd), F32))])
    bias_shape = g.op("Concat", [g.const("c11", np.array([1, 1], np.int64)), n1, n1], axis=0)
    bias = g.op("ConstantOfShape", [bias_shape], value=helper.make_tensor("zero", 1, [1], [0.0]))
    probs = g.op("Softmax", [g.op("Add", [scores, bias])], axis=-1)
    ctx = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    merged_shape = g.op(
        "Concat",
        [g.const("c1b", np.array([1], np.int64)), n1, g.const("c_dim", np.array([-1], np.int64))],
        axis=0,
    )
    ctx = g.op("Reshape", [ctx, merged_shape])
    attn = g.op(
        "Add", [g.op("MatMul", [ctx, g.weight("o.w", dim, dim)]), g.weight("o.b", dim, scale=0.1)]
    )
    x = g.op("Add", ["x", attn])
    h = g.op("LayerNormalization", [x, g.weight("ln2.g", dim, scale=1.0)], axis=-1)
    up = g.op(
        "Add",
        [
            g.op("MatMul", [h, g.weight("fc1.w", dim, 2 * dim)]),
            g.weight("fc1.b", 2 * dim, scale=0.1),
        ],
    )
    erf = g.op("Erf", [g.op("Div", [up, g.const("sqrt2", np.array(math.sqrt(2.0), F32))])])
    gelu = g.op(
        "Mul",
        [
            g.op("Mul", [up, g.op("Add", [erf, g.const("one_f", np.array(1.0, F32))])]),
            g.const("half", np.array(0.5, F32)),
        ],
    )
    down = g.op("MatMul", [gelu, g.weight("fc2.w", 2 * dim, dim)])
    g.op("Add", [x, g.op("Add", [down, g.weight("fc2.b", dim, scale=0.1)])])
    g.nodes[-1].output[0] = "out"
    model = make_model(
        g.nodes,
        [("x", F32, [1, "seq", dim])],
        [("out", F32, None)],
        g.init,
        opset=opset,
        name="attention",
    )
    return model, {"x": randn(1, seq, dim, seed=3)}
