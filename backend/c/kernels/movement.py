"""Factories and data movement: zeros/ones/full, concat, split, transpose, strided_slice, take."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as T

from .base import (
    Gen,
    horner,
    loop_nest,
    outer_inner,
)


def gen_fill(g: Gen) -> list[str]:
    out = g.spec.outs[0]
    op = g.spec.op
    if op == "zeros":
        v = np.zeros((), np.dtype(T.DTYPES[out.dtype].numpy))
    elif op == "ones":
        v = np.ones((), np.dtype(T.DTYPES[out.dtype].numpy))
    else:
        fv = g.spec.attr["fill_value"]
        dt = np.dtype(T.DTYPES[out.dtype].numpy)
        v = np.full((), int(fv) if dt.kind in "iub" else fv, dtype=dt)
    lit = T.element_literal(v[()], out.dtype)
    with g.loop("i", g.numel(out)):
        g.emit(f"y0[i] = {lit};")
    return ["int64_t i;"]


def gen_concat(g: Gen) -> list[str]:
    out = g.spec.outs[0]
    axis = g.spec.attr["axis"] % len(out.shape)
    outer, total, inner = outer_inner(g, out, axis)
    offset = "0"
    for t, x in zip(g.spec.ins, g.x):
        _, length, _ = outer_inner(g, t, axis)
        block = g.prod([length, inner])
        with g.loop("o", outer):
            with g.loop("j", block):
                g.emit(f"y0[(o * {total} + {offset}) * {inner} + j] = {x}[o * {block} + j];")
        offset = length if offset == "0" else f"{offset} + {length}"
    return ["int64_t o, j;"]


def gen_split(g: Gen) -> list[str]:
    x = g.spec.ins[0]
    axis = g.spec.attr["axis"] % len(x.shape)
    outer, total, inner = outer_inner(g, x, axis)
    offset = "0"
    for t, y in zip(g.spec.outs, g.y):
        _, length, _ = outer_inner(g, t, axis)
        block = g.prod([length, inner])
        with g.loop("o", outer):
            with g.loop("j", block):
                g.emit(f"{y}[o * {block} + j] = x0[(o * {total} + {offset}) * {inner} + j];")
        offset = length if offset == "0" else f"({offset} + {length})"
    return ["int64_t o, j;"]


def _perm(axes: Any, ndim: int) -> tuple[int, ...]:
    if axes is None:
        return tuple(reversed(range(ndim)))
    return tuple(a % ndim for a in axes)


def gen_transpose(g: Gen) -> list[str]:
    x, out = g.spec.ins[0], g.spec.outs[0]
    perm = _perm(g.spec.attr["axes"], len(x.shape))
    if not x.shape:
        g.emit("y0[0] = x0[0];")
        return []
    xs = g.shape(x)

    def body(vars_: list[str]) -> None:
        src = [""] * len(perm)
        for out_axis, in_axis in enumerate(perm):
            src[in_axis] = vars_[out_axis]
        g.emit(f"y0[{horner(vars_, g.shape(out))}] = x0[{horner(src, xs)}];")

    vars_ = loop_nest(g, g.shape(out), body)
    return [f"int64_t {', '.join(vars_)};"]


def gen_strided_slice(g: Gen) -> list[str]:
    x, out = g.spec.ins[0], g.spec.outs[0]
    a = g.spec.attr
    n = len(a["begin"])
    strides = a["strides"] if a["strides"] is not None else (1,) * n
    axes = a["axes"] if a["axes"] is not None else tuple(range(n))
    sl: dict[int, tuple[int, int]] = {}
    for ax, b, e, st in zip(axes, a["begin"], a["end"], strides):
        ax %= len(x.shape)
        d = x.shape[ax]
        assert isinstance(d, int)
        r = range(d)[slice(b, e, st)]
        sl[ax] = (r.start, r.step)
    if not out.shape:
        g.emit("y0[0] = x0[0];")
        return []
    xs = g.shape(x)

    def body(vars_: list[str]) -> None:
        src = []
        for ax, v in enumerate(vars_):
            if ax in sl:
                start, step = sl[ax]
                src.append(f"({start} + {v} * {step})" if (start, step) != (0, 1) else v)
            else:
                src.append(v)
        g.emit(f"y0[{horner(vars_, g.shape(out))}] = x0[{horner(src, xs)}];")

    vars_ = loop_nest(g, g.shape(out), body)
    return [f"int64_t {', '.join(vars_)};"]


def gen_take(g: Gen) -> list[str]:
    data, idx = g.spec.ins
    axis = g.spec.attr["axis"] % len(data.shape)
    outer, length, inner = outer_inner(g, data, axis)
    count = g.numel(idx)

    def gather() -> None:
        with g.loop("o", outer):
            with g.loop("j", count):
                g.emit("k = (int64_t)x1[j];")
                g.emit("if (k < 0) k = 0;")
                g.emit(f"if (k > {length} - 1) k = {length} - 1;")
                with g.loop("m", inner):
                    g.emit(
                        f"y0[(o * {count} + j) * {inner} + m] = x0[(o * {length} + k) "
                        f"* {inner} + m];"
                    )

    if length.isdigit() and int(length) > 0:
        gather()
    else:
        # A symbolic axis may be empty in a run: clipping would index -1 (the interpreter
        # refuses that run; here nothing is read and the result is zeros).
        with g.block(f"if ({length} > 0)"):
            gather()
        with g.block("else"):
            with g.loop("j", g.numel(g.spec.outs[0])):
                g.emit("y0[j] = 0;")
    return ["int64_t o, j, m, k;"]
