"""grid_sample: per (batch, output position) each spatial axis's taps from the grid, then
per channel the sum over one tap per axis.

The formulas and their order are :mod:`relaxc.ir.ops.grid_sample`'s (float64 coordinates,
the taps row-major with the first spatial axis outermost, the weights multiplied in axis
order, ``acc += w * x`` in double, rounded once); ``nearest`` copies the element. The taps
live in small local arrays (at most 4 per axis); a static ``{kernel}_reflect`` of this
kernel reflects a position into the border, as :func:`relaxc.ir.ops.grid_sample.reflect`.
"""

from __future__ import annotations

import numpy as np

from relaxc.ir.ops.grid_sample import CUBIC_A, N_TAPS, TAPS, borders

from .. import dtypes as T
from .base import Gen


def _lit(v: float) -> str:
    return T.float_literal(float(v), "f64")


def _reflect_fn(name: str) -> str:
    return f"""static double {name}(double x, double lo, double hi)
{{
    double span = hi - lo, dx, n, r, out;
    int below = x < lo, odd;
    if (!(below || x > hi)) return x;
    if (span == 0.0) return lo;
    dx = below ? lo - x : x - hi;
    n = trunc(dx / span);
    r = dx - n * span;
    odd = fmod(n, 2.0) != 0.0;
    if (below) out = odd ? hi - r : lo + r;
    else out = odd ? lo + r : hi - r;
    return out < lo ? lo : (out > hi ? hi : out);
}}"""


def _axis(g: Gen, a: int, d: int, grid_at: str, reflect: str) -> None:
    """The taps of spatial axis ``a`` (length ``d``): ``i{a}[k]``, ``w{a}[k]``, ``v{a}[k]``."""
    attrs = g.spec.attr
    mode, padding = attrs["mode"], attrs["padding_mode"]
    align = bool(attrs["align_corners"])
    lo, hi = borders(d, align)
    grid_t = g.spec.ins[1]
    g.emit(f"c = (double){g.load(grid_t.dtype, grid_at)};")
    g.emit("if (!isfinite(c)) { bad = 1; c = 0.0; }")
    if align:
        g.emit(f"p = (c + 1.0) / 2.0 * {_lit(d - 1)};")
    else:
        g.emit(f"p = ((c + 1.0) * {_lit(d)} - 1.0) / 2.0;")
    if mode == "nearest":
        g.emit("p = nearbyint(p);")
    if padding == "reflection":
        g.emit(f"p = {reflect}(p, {_lit(lo)}, {_lit(hi)});")
    g.emit(f"p = p < -3.0 ? -3.0 : (p > {_lit(d + 2)} ? {_lit(d + 2)} : p);")
    n = N_TAPS[mode]
    if mode == "nearest":
        g.emit("q = (int64_t)p;")
    else:
        g.emit("b = floor(p);")
        g.emit("t = p - b;")
        g.emit(f"q = (int64_t)b + {TAPS[mode]};")
        if mode == "linear":
            g.emit(f"w{a}[0] = 1 - t;")
            g.emit(f"w{a}[1] = t;")
        else:
            A = _lit(CUBIC_A)
            g.emit("u = t + 1; v = 1 - t; s = 2 - t;")
            g.emit(f"w{a}[0] = (({A} * u - 5 * {A}) * u + 8 * {A}) * u - 4 * {A};")
            g.emit(f"w{a}[1] = (({A} + 2) * t - ({A} + 3)) * t * t + 1;")
            g.emit(f"w{a}[2] = (({A} + 2) * v - ({A} + 3)) * v * v + 1;")
            g.emit(f"w{a}[3] = (({A} * s - 5 * {A}) * s + 8 * {A}) * s - 4 * {A};")
    with g.loop("k", str(n)):
        g.emit("j = q + k;")
        if padding == "zeros":
            g.emit(f"v{a}[k] = j >= 0 && j < {d};")
        else:
            g.emit(f"v{a}[k] = 1;")
            if padding == "reflection":
                g.emit(f"j = (int64_t)trunc({reflect}((double)j, {_lit(lo)}, {_lit(hi)}));")
        g.emit(f"i{a}[k] = j < 0 ? 0 : (j > {d - 1} ? {d - 1} : j);")


def gen_grid_sample(g: Gen) -> list[str]:
    x, grid = g.spec.ins
    out = g.spec.outs[0]
    attrs = g.spec.attr
    mode = attrs["mode"]
    dims = [int(d) for d in x.shape[2:]]  # type: ignore[arg-type]
    r = len(dims)
    os_ = g.shape(out)
    xs = g.shape(x)
    batch, chans = os_[0], os_[1]
    positions = g.prod(os_[2:])
    spatial = g.prod([str(d) for d in dims])
    strides = [str(int(np.prod(dims[a + 1 :], dtype=np.int64))) for a in range(r)]
    reflect = f"{g.fname}_reflect"
    if attrs["padding_mode"] == "reflection":
        g.prelude.append(_reflect_fn(reflect))
    npd = T.DTYPES[out.dtype].numpy
    fill = np.asarray(np.nan if T.kind(out.dtype) == "float" else 0).astype(npd)
    zero = T.element_literal(np.zeros((), npd), out.dtype)
    n_taps = N_TAPS[mode]
    with g.loop("n", batch):
        with g.loop("o", positions):
            g.emit("bad = 0;")
            for a, d in enumerate(dims):
                _axis(g, a, d, f"x1[(n * {positions} + o) * {r} + {r - 1 - a}]", reflect)
            with g.block("if (bad)"):
                with g.loop("ch", chans):
                    g.emit(
                        f"y0[(n * {chans} + ch) * {positions} + o] = "
                        f"{T.element_literal(fill, out.dtype)};"
                    )
                g.emit("continue;")
            with g.loop("ch", chans):
                g.emit(f"xb = (n * {xs[1]} + ch) * {spatial};")
                at = f"y0[(n * {chans} + ch) * {positions} + o]"
                if mode == "nearest":
                    ok = " && ".join(f"v{a}[0]" for a in range(r))
                    q = " + ".join(
                        f"i{a}[0]" if strides[a] == "1" else f"i{a}[0] * {strides[a]}"
                        for a in range(r)
                    )
                    g.emit(f"{at} = ({ok}) ? x0[xb + {q}] : {zero};")
                else:
                    g.emit("acc = 0.0;")
                    _tap_loops(g, 0, r, "xb", "", strides)
                    g.emit(f"{at} = {g.store(out.dtype, 'acc')};")
    names = ["n", "o", "ch", "k", "j", "q", "xb"]
    doubles = ["c", "p"]
    if mode != "nearest":
        names += [f"t{a}" for a in range(r)]
        doubles += ["b", "t", "acc"] + (["u", "v", "s"] if mode == "cubic" else [])
    decls = [f"int64_t {', '.join(names)};", f"double {', '.join(doubles)};", "int bad;"]
    for a in range(r):
        decls += [f"int64_t i{a}[{n_taps}];", f"int v{a}[{n_taps}];"]
        decls += [f"double w{a}[{n_taps}];"] if mode != "nearest" else []
    return decls


def _tap_loops(g: Gen, a: int, r: int, base: str, weight: str, strides: list[str]) -> None:
    """One loop per spatial axis over its taps, skipping taps outside the input, the weight
    ``w{0}[t0] * w{1}[t1] * ...`` multiplied in axis order."""
    if a == r:
        val = g.load(g.spec.ins[0].dtype, f"x0[{base}]")
        g.emit(f"acc += {weight} * (double){val};")
        return
    n = N_TAPS[g.spec.attr["mode"]]
    with g.loop(f"t{a}", str(n)):
        g.emit(f"if (!v{a}[t{a}]) continue;")
        term = f"i{a}[t{a}]" if strides[a] == "1" else f"i{a}[t{a}] * {strides[a]}"
        w = f"w{a}[t{a}]" if not weight else f"{weight} * w{a}[t{a}]"
        if a + 1 < r:
            g.emit(f"double ww{a} = {w};")
            w = f"ww{a}"
        _tap_loops(g, a + 1, r, f"{base} + {term}", w, strides)
