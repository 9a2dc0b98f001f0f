"""Converters of the elementwise operators: activations, unary math, comparisons, logic,
bit operations, Mod, Mean and Where (issue 30). Each ONNX version from opset 7 to 24 of
these ops has the semantics of the last (later versions only added types), except where a
converter reads ``ctx.opset``."""

from __future__ import annotations

from typing import Callable

import numpy as np

from relaxc.ir.types import numpy_dtype

from .context import NodeContext, shape_of
from .values import Folded, Value

Converter = Callable[[NodeContext], list]

UNARY = {
    "Reciprocal": "reciprocal",
    "Floor": "floor",
    "Ceil": "ceil",
    "Round": "round",
    "Sin": "sin",
    "Cos": "cos",
    "Tan": "tan",
    "Asin": "asin",
    "Acos": "acos",
    "Atan": "atan",
    "Sinh": "sinh",
    "Cosh": "cosh",
    "Asinh": "asinh",
    "Acosh": "acosh",
    "Atanh": "atanh",
    "Softplus": "softplus",
    "Softsign": "softsign",
    "Mish": "mish",
    "Sign": "sign",
    "IsNaN": "isnan",
    "Not": "logical_not",
    "BitwiseNot": "bitwise_not",
}
BINARY = {
    "Equal": "equal",
    "Less": "less",
    "Greater": "greater",
    "LessOrEqual": "less_equal",
    "GreaterOrEqual": "greater_equal",
    "And": "logical_and",
    "Or": "logical_or",
    "Xor": "logical_xor",
    "BitwiseAnd": "bitwise_and",
    "BitwiseOr": "bitwise_or",
    "BitwiseXor": "bitwise_xor",
}
# ONNX op -> (relaxc op, {ONNX attribute: (relaxc attribute, ONNX default)})
ACTIVATIONS: dict[str, tuple[str, dict[str, tuple[str, float]]]] = {
    "Elu": ("elu", {"alpha": ("alpha", 1.0)}),
    "Selu": (
        "selu",
        {
            "alpha": ("alpha", 1.67326319217681884765625),
            "gamma": ("gamma", 1.05070102214813232421875),
        },
    ),
    "Celu": ("celu", {"alpha": ("alpha", 1.0)}),
    "ThresholdedRelu": ("thresholded_relu", {"alpha": ("alpha", 1.0)}),
    "Shrink": ("shrink", {"bias": ("bias", 0.0), "lambd": ("lambd", 0.5)}),
}


def _unary(op: str) -> Converter:
    def convert(ctx: NodeContext) -> list:
        return [ctx.emit(op, [ctx.input(0)])]

    return convert


def _binary(op: str) -> Converter:
    def convert(ctx: NodeContext) -> list:
        return [ctx.emit(op, [ctx.input(0), ctx.input(1)])]

    return convert


def _activation(op: str, attrs: dict[str, tuple[str, float]]) -> Converter:
    def convert(ctx: NodeContext) -> list:
        given = {ours: float(ctx.attr(name, default)) for name, (ours, default) in attrs.items()}
        return [ctx.emit(op, [ctx.input(0)], given)]

    return convert


def convert_gelu(ctx: NodeContext) -> list:
    approximate = ctx.attr("approximate", "none")
    if approximate == "none":
        return [ctx.emit("gelu", [ctx.input(0)])]
    if approximate == "tanh":
        return [ctx.emit("gelu_tanh", [ctx.input(0)])]
    raise ctx.fail(f"approximate must be 'none' or 'tanh', got '{approximate}'")


def convert_prelu(ctx: NodeContext) -> list:
    """Slope broadcast to X's shape (unidirectionally: the output has X's shape)."""
    x, slope = ctx.input(0), ctx.input(1, "the slope")
    y = ctx.emit("prelu", [x, slope])
    if len(shape_of(y)) != len(shape_of(x)) or shape_of(y) != shape_of(x):
        raise ctx.fail(
            f"the slope of shape {shape_of(slope)} does not broadcast to X's shape {shape_of(x)}"
        )
    return [y]


def convert_is_inf(ctx: NodeContext) -> list:
    attrs = {
        "detect_negative": bool(ctx.attr("detect_negative", 1)),
        "detect_positive": bool(ctx.attr("detect_positive", 1)),
    }
    return [ctx.emit("isinf", [ctx.input(0)], attrs)]


def convert_mod(ctx: NodeContext) -> list:
    a, b = ctx.input(0), ctx.input(1)
    fmod = bool(ctx.attr("fmod", 0))
    if not fmod and a.type.dtype.startswith("f") and ctx.opset < 28:
        raise ctx.fail(
            f"fmod=0 on {a.type.dtype}: ONNX Mod before version 28 takes floats only with "
            "fmod=1 (the remainder with the dividend's sign)"
        )
    return [ctx.emit("mod", [a, b], {"fmod": fmod})]


def convert_bit_shift(ctx: NodeContext) -> list:
    direction = ctx.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.fail(f"direction must be 'LEFT' or 'RIGHT', got {direction!r}")
    return [ctx.emit("bit_shift", [ctx.input(0), ctx.input(1)], {"direction": direction.lower()})]


def convert_mean(ctx: NodeContext) -> list:
    """The sum of the inputs (broadcast), divided by their count."""
    values = [v for v in ctx.inputs if v is not None]
    if not values:
        raise ctx.fail("needs at least one input")
    acc: Value = values[0]
    for v in values[1:]:
        acc = ctx.emit("add", [acc, v])
    if len(values) == 1:
        return [acc]
    count = Folded(np.array(len(values), dtype=numpy_dtype(acc.type.dtype)), f"{ctx.hint()}_count")
    return [ctx.emit("divide", [acc, count])]


def convert_where(ctx: NodeContext) -> list:
    cond, x, y = ctx.input(0, "the condition"), ctx.input(1), ctx.input(2)
    if cond.type.dtype != "bool":
        raise ctx.fail(f"the condition must be a bool tensor, got {cond.type.dtype}")
    return [ctx.emit("where", [cond, x, y])]


def table() -> dict[str, Converter]:
    out: dict[str, Converter] = {}
    out.update({k: _unary(v) for k, v in UNARY.items()})
    out.update({k: _binary(v) for k, v in BINARY.items()})
    out.update({k: _activation(op, attrs) for k, (op, attrs) in ACTIVATIONS.items()})
    out.update(
        {
            "Gelu": convert_gelu,
            "PRelu": convert_prelu,
            "IsInf": convert_is_inf,
            "Mod": convert_mod,
            "BitShift": convert_bit_shift,
            "Mean": convert_mean,
            "Where": convert_where,
        }
    )
    return out
