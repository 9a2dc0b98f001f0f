"""Deterministic generators of large .rx programs for the benchmarks.

``layered_program(n)`` builds a module whose @main has about ``n`` bindings: a chain of
"blocks" mixing elementwise ops, matmuls, views and tuples, over a symbolic batch dim, so
parsing, verification and every pass see the constructs real programs use.
"""

from __future__ import annotations

import random


def layered_program(n_bindings: int, seed: int = 0, width: int = 16) -> str:
    """Text of a module with roughly ``n_bindings`` bindings in @main."""
    rng = random.Random(seed)
    lines = [
        "fn @fused_scale_add(%p0: Tensor[(b, 16), f32], %p1: Tensor[(b, 16), f32]) -> "
        "Tensor[(b, 16), f32]",
        "    attrs {primitive = true} {",
        "  %0 = multiply(%p0, %p1)",
        "  %1 = add(%0, %p1)",
        "  return %1",
        "}",
        "",
        f"fn @main(%x: Tensor[(b, {width}), f32], %w: Tensor[({width}, {width}), f32]) -> "
        f"Tensor[(b, {width}), f32]",
        "    attrs {upper_bounds = {b = 64}} {",
    ]
    live = ["x"]
    count = 0
    i = 0
    unary = ["relu", "tanh", "sigmoid", "exp", "negative", "abs"]
    binary = ["add", "subtract", "multiply", "maximum", "minimum"]
    while count < n_bindings:
        a = rng.choice(live[-8:])
        b = rng.choice(live[-8:])
        kind = rng.random()
        name = f"v{i}"
        if kind < 0.35:
            lines.append(f"  %{name} = {rng.choice(unary)}(%{a})")
        elif kind < 0.7:
            lines.append(f"  %{name} = {rng.choice(binary)}(%{a}, %{b})")
        elif kind < 0.8:
            lines.append(f"  %{name} = call @fused_scale_add(%{a}, %{b})")
        elif kind < 0.9:
            lines.append(
                f"  %{name}_t: Tuple[Tensor[(b, {width}), f32], Tensor[(b, {width}), "
                f"f32]] = (%{a}, %{b})"
            )
            lines.append(f"  %{name} = %{name}_t.1")
            count += 1
        else:
            lines.append(f"  %{name}_r = reshape(%{a}, (b * {width},))")
            lines.append(f"  %{name}_e = exp(%{name}_r)")
            lines.append(f"  %{name} = reshape(%{name}_e, (b, {width}))")
            count += 2
        live.append(name)
        count += 1
        i += 1
    lines.append(f"  return %{live[-1]}")
    lines.append("}")
    return "\n".join(lines) + "\n"
