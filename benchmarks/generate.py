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


def chain_program(n_statements: int, width: int = 16, add_every: int = 0) -> str:
    """Text of a module whose @main is one chain of ``n_statements`` elementwise ops, each
    reading the one before (with ``add_every = k``, every k-th is an ``add`` that also reads
    the one before that): every op may run in place, so ComputeInPlace, the planner and the
    liveness see one long chain of views of one buffer."""
    unary = ["relu", "tanh", "exp", "negative"]
    lines = [
        f"fn @main(%x: Tensor[({width}, {width}), f32]) -> Tensor[({width}, {width}), f32] {{",
        "  %v0 = relu(%x)",
    ]
    for i in range(1, n_statements):
        if add_every and i % add_every == 0 and i >= 2:
            lines.append(f"  %v{i} = add(%v{i - 1}, %v{i - 2})")
        else:
            lines.append(f"  %v{i} = {unary[i % len(unary)]}(%v{i - 1})")
    lines.append(f"  return %v{n_statements - 1}")
    lines.append("}")
    return "\n".join(lines) + "\n"
