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
    """A copy in the output's order. Input axes that stay neighbours, in order, are merged
    (and axes of extent 1 dropped), so a channel shuffle is a few loops over contiguous runs;
    when the innermost run is contiguous in the input too, it is copied as one inner loop."""
    x = g.spec.ins[0]
    perm = _perm(g.spec.attr["axes"], len(x.shape))
    if not x.shape:
        g.emit("y0[0] = x0[0];")
        return []
    unit = [isinstance(d, int) and d == 1 for d in x.shape]
    pos = {a: i for i, a in enumerate(a for a in range(len(perm)) if not unit[a])}
    if not pos:
        g.emit("y0[0] = x0[0];")
        return []
    # runs of input axes that are neighbours (extent-1 axes aside), in output order
    runs: list[list[int]] = []
    for a in perm:
        if unit[a]:
            continue
        if runs and pos[runs[-1][-1]] + 1 == pos[a]:
            runs[-1].append(a)
        else:
            runs.append([a])
    # the input as the runs, in input order: extents and strides
    ext = {r[0]: g.prod([g.dim(x.shape[a]) for a in r]) for r in runs}
    order = sorted(runs, key=lambda r: r[0])
    stride: dict[int, str] = {}
    acc: list[str] = []
    for r in reversed(order):
        stride[r[0]] = g.prod(acc) if acc else "1"
        acc = [ext[r[0]]] + acc
    vars_ = [g.tmp("i") for _ in runs]
    inner = runs[-1]
    contiguous = stride[inner[0]] == "1"

    def src(vs: list[str]) -> str:
        terms = []
        for r, v in zip(runs, vs):
            st = stride[r[0]]
            if v != "0":
                terms.append(v if st == "1" else f"{v} * {st}")
        return " + ".join(terms) or "0"

    def rec(k: int) -> None:
        if k == len(runs) - 1:
            dst = horner(vars_[:-1] + ["0"], [ext[r[0]] for r in runs])
            base = src(vars_[:-1] + ["0"])
            with g.loop(vars_[-1], ext[inner[0]]):
                j = vars_[-1]
                d = j if dst == "0" else f"{dst} + {j}"
                s_ = (j if base == "0" else f"{base} + {j}") if contiguous else src(vars_)
                g.emit(f"y0[{d}] = x0[{s_}];")
            return
        with g.loop(vars_[k], ext[runs[k][0]]):
            rec(k + 1)

    rec(0)
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
