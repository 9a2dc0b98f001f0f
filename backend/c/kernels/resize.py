"""resize: the taps of each resized axis as constant tables, one loop per output axis.

The tables (input indices, float64 weights, and for tf_crop_and_resize which positions fall
outside the input) come from :func:`relaxc.ir.ops.resize.resize_taps`, the function the numpy
kernel computes them with, when the kernel is generated: they are ``static const`` data of
the kernel, not planned memory. ``nearest`` copies one element (any dtype, bits exact); linear
and cubic sum ``(product of the taps' weights) * x`` in ``double`` in the numpy kernel's order
and round once. An identity axis (its length kept, no taps) may be symbolic.
"""

from __future__ import annotations

import numpy as np

from relaxc.ir.ops.resize import AxisTaps, resize_taps

from .. import dtypes as T
from .base import Gen


def _table(ctype: str, name: str, values: list[str]) -> str:
    return f"static const {ctype} {name}[{len(values)}] = {{{', '.join(values)}}};"


def _tables(g: Gen, taps: list[AxisTaps | None], nearest: bool) -> list[str]:
    decls = []
    for a, t in enumerate(taps):
        if t is None:
            continue
        decls.append(_table("int32_t", f"ri{a}", [str(int(i)) for i in t.source.reshape(-1)]))
        if not nearest:
            w = [T.float_literal(float(v), "f64") for v in t.weight.reshape(-1)]
            decls.append(_table("double", f"rw{a}", w))
        if t.outside is not None and t.outside.any():
            decls.append(_table("unsigned char", f"ro{a}", [str(int(v)) for v in t.outside]))
    return decls


def gen_resize(g: Gen) -> list[str]:
    x, out = g.spec.ins[0], g.spec.outs[0]
    attrs = g.spec.attr
    rank = len(out.shape)
    if any(isinstance(d, int) and d == 0 for d in out.shape):
        g.emit("(void)x0;")
        g.emit("(void)y0;")
        return []
    taps = resize_taps(x.shape, out.shape, attrs)
    nearest = attrs["mode"] == "nearest"
    decls = _tables(g, taps, nearest)
    xs, os_ = g.shape(x), g.shape(out)
    strides = [g.prod(xs[a + 1 :]) if a + 1 < rank else "1" for a in range(rank)]
    outside = [
        f"ro{a}[o{a}]"
        for a, t in enumerate(taps)
        if t is not None and t.outside is not None and t.outside.any()
    ]
    names = [f"o{a}" for a in range(rank)] + ["k"]
    g.emit("k = 0;")

    def offset(prev: str, term: str, stride: str) -> str:
        part = term if stride == "1" else f"{term} * {stride}"
        return part if prev == "0" else f"{prev} + {part}"

    def body(base: str) -> None:
        if outside:
            ev = np.asarray(attrs["extrapolation_value"]).astype(T.DTYPES[out.dtype].numpy)
            with g.block(f"if ({' || '.join(outside)})"):
                g.emit(f"y0[k++] = {T.element_literal(ev, out.dtype)};")
                g.emit("continue;")
        if nearest:
            g.emit(f"y0[k++] = x0[{base}];")
            return
        g.emit("acc = 0.0;")
        active = [a for a in range(rank) if taps[a] is not None]
        _tap_loops(g, taps, active, 0, base, "1.0", strides)
        g.emit(f"y0[k++] = {g.store(out.dtype, 'acc')};")

    def rec(a: int, base: str) -> None:
        if a == rank:
            body(base)
            return
        with g.loop(f"o{a}", os_[a]):
            t = taps[a]
            if t is None:
                rec(a + 1, offset(base, f"o{a}", strides[a]))
            elif nearest:
                rec(a + 1, offset(base, f"ri{a}[o{a}]", strides[a]))
            else:
                rec(a + 1, base)

    rec(0, "0")
    if not nearest:
        active = [a for a in range(rank) if taps[a] is not None]
        names += [f"t{a}" for a in active]
        decls.append("double acc;")
    return decls + [f"int64_t {', '.join(names)};"]


def _tap_loops(
    g: Gen,
    taps: list[AxisTaps | None],
    active: list[int],
    i: int,
    base: str,
    weight: str,
    strides: list[str],
) -> None:
    """The loops over one tap per resized axis (row-major), the weights multiplied in axis
    order, ``acc += w * x``."""
    if i == len(active):
        x = g.load(g.spec.ins[0].dtype, f"x0[{base}]")
        g.emit(f"acc += {weight} * (double){x};")
        return
    a = active[i]
    t = taps[a]
    assert t is not None
    n = t.weight.shape[1]
    with g.loop(f"t{a}", str(n)):
        at = f"o{a} * {n} + t{a}" if n != 1 else f"o{a}"
        term = f"ri{a}[{at}]" if strides[a] == "1" else f"ri{a}[{at}] * {strides[a]}"
        g.emit(f"int64_t q{a} = {term if base == '0' else base + ' + ' + term};")
        g.emit(f"double w{a} = {weight} * rw{a}[{at}];")
        _tap_loops(g, taps, active, i + 1, f"q{a}", f"w{a}", strides)
