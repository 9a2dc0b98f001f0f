"""Blocked f32 kernels: conv2d, matmul and dense through register-tiled GEMM micro-kernels.

Portable C99 that compilers vectorize at ``-O2`` (GCC's very-cheap cost model: no run-time
alias checks, no loops of unknown trip count) and better with ``-O3 -march=native``:

* **Micro-tiles.** ``{p}_sgemm_<r>x<w>``: ``r`` rows (up to 6) of ``w`` columns of ``C = A B``
  in registers (:mod:`.microtile`, shared with :mod:`.winograd`).
* **conv2d** is a GEMM per image and group: ``C`` (output channels x output positions) =
  the weights (output channels x ``CG*KH*KW``, OIHW as they are: no repacking, no copy) x
  im2col(x). im2col is never built: for each chunk of at most :data:`KC_MAX` of its rows and
  each block of 16 output positions, ``{p}_conv_pack`` points each row into the input when
  its 16 elements are neighbours there (a 1x1 with unit strides; a stride-1 convolution
  with "same" padding across, away from the borders) and otherwise fills it in a panel on the
  scratch (padding as zeros, strides, dilation). Output channels go by blocks whose weights
  stay in cache (:data:`A_BLOCK`). Depthwise convolutions (one input and one output channel
  per group) are direct loops over a zero-framed copy of the channel instead, and 3x3
  stride-1 ones that pay for it Winograd F(2x2, 3x3) (:mod:`.winograd`, on these
  micro-tiles; :func:`gen_conv2d_gemm` stays their fallback; :func:`.linalg.gen_conv2d`
  chooses among the three).
* **matmul** is the same GEMM with ``B`` read in place; **dense** with more than a few
  rows packs ``w``'s transpose into the panel; fewer rows are 4 dot products at a time,
  each summed in 16 lanes.

Numbers: sums are ``float`` (the reference sums in ``double``), in blocks: each output sums
its terms in order within a chunk of :data:`KC_MAX` rows, the chunk's sum is added to what
the previous chunks left in the output, and the bias last; dense's dot products sum 16
lanes and add the lanes at the end. The error of such a sum of n terms is at most about
n * 2**-24 times the sum of the terms' magnitudes (and typically far less); docs/c.md says
so. Other dtypes keep the generic kernels.

Memory: a kernel's working arrays (a panel of ``KC_MAX`` rows of 16 floats, its row pointers,
one 6 x 16 tile; a depthwise channel's zero frame) are carved from the call's *scratch*, a
buffer PlanKernelScratch plans in the arena for the call (:meth:`Gen.scratch_array`; at most
``16*KC_MAX*4 + KC_MAX*8 + 6*16*4`` = 4,992 bytes, each array 64-byte aligned, or a frame of at most
:data:`DW_BUFFER` floats). What stays on the stack are scalars and register blocks: the
tables of the 16 positions in ``conv_pack`` (192 bytes), dense's 4 x 16 partial sums.
"""

from __future__ import annotations

from typing import Callable

from relaxc.ir import dims as D

from .base import Gen, pad4, pair
from .microtile import (
    MR_MAX,
    V,
    WIDTHS,
    emit_sgemm,
    narrow,
    register_helper,
    static_dim,
    tail_widths,
    tile_rows,
)

KC_MAX = 64
"""The most rows of ``B`` (``CG*KH*KW`` of a conv2d, ``K`` of a matmul) one panel holds: a
4 KiB panel, which stays in L1 (measured as fast as 256 rows on the zoo models)."""

A_BLOCK = 256 * 1024
"""Bytes of ``A`` (weights) a block of rows holds while every column block of ``B`` goes by:
about half of a usual L2 (more, and the weights stream from L3 once per 16 columns)."""


register_helper(
    "conv_pack",
    (),
    """\
/* Rows k0 .. k0 + kc - 1 of the im2col matrix of one image and group of a conv2d (row k is
 * input channel k / (KH * KW), kernel row k / KW % KH, kernel column k % KW), at output
 * positions p0 .. p0 + np - 1 (np <= 16; OW positions per output row): rows[k] points to
 * the row's 16 floats, in the input itself when they are 16 neighbours there (unit column
 * stride, inside the input), else in panel (16 floats per row, zero in the padding and
 * beyond np).
 * With unit strides and the output as wide as the input ("same" padding across), a row's 16
 * elements are 16 neighbours in the input whatever output rows they span; the few that fall
 * in the padding make the row a copy with those zeroed (16-wide, vectorized, by comparing
 * each position's output row and column with the range that reads inside the input).
 * Otherwise a row whose 16 positions
 * lie in one output row, inside the input, is read in place (unit stride) or gathered
 * (16-wide, vectorized); any other goes output row by output row. */
static void PFX_conv_pack(const float *restrict x, int64_t H, int64_t W, int64_t KH, int64_t KW,
    int64_t sh, int64_t sw, int64_t pt, int64_t pl, int64_t dh, int64_t dw, int64_t OW,
    int64_t k0, int64_t kc, int64_t p0, int64_t np, float *restrict panel,
    const float **rows)
{
    int64_t k, t, c = k0 / (KH * KW), i = k0 / KW % KH, j = k0 % KW;
    const int64_t oh0 = p0 / OW, ow0 = p0 % OW, oh15 = (p0 + 15) / OW;
    const int one_row = np == 16 && ow0 + 16 <= OW;
    const int linear = np == 16 && sh == 1 && sw == 1 && OW == W;
    int32_t ohv[16], owv[16]; /* the output row and column of each of the 16 positions */
    {
        int32_t oh = (int32_t)oh0, ow = (int32_t)ow0;
        for (t = 0; t < 16; ++t) {
            ohv[t] = oh;
            owv[t] = ow;
            if (++ow == OW) {
                ow = 0;
                ++oh;
            }
        }
    }
    if (linear) {
        /* Whether a row is read in place, and which of its 16 elements are padding, depend
         * only on its kernel tap (i, j): decided once per tap, then every channel of the
         * chunk at that tap is a pointer or a masked copy. */
        const int64_t T = KH * KW, HW = H * W, first_tap = k0 % T;
        int64_t tap;
        for (tap = 0; tap < T; ++tap) {
            const int64_t ti = tap / KW, tj = tap % KW;
            const int64_t at = p0 + (ti * dh - pt) * W + tj * dw - pl;
            const int32_t a = (int32_t)(pt - ti * dh), b = (int32_t)(H + pt - ti * dh);
            const int32_t d = (int32_t)(pl - tj * dw), e = (int32_t)(W + pl - tj * dw);
            int32_t in[16];
            int all = 1, inside = at >= 0 && at + 16 <= HW;
            k = (tap - first_tap + T) % T;
            if (k >= kc) continue;
            c = (k0 + k) / T;
            for (t = 0; t < 16; ++t) {
                in[t] = (ohv[t] >= a) & (ohv[t] < b) & (owv[t] >= d) & (owv[t] < e);
                all &= in[t];
            }
            for (; k < kc; k += T, ++c) {
                const float *xc = x + c * HW;
                float *restrict row = panel + 16 * k;
                if (inside && all) {
                    rows[k] = xc + at;
                } else if (inside) {
                    const float *restrict xr = xc + at;
                    for (t = 0; t < 16; ++t) {
                        const float f = xr[t]; /* inside: read unconditionally (vectorized) */
                        row[t] = in[t] ? f : 0.0f;
                    }
                    rows[k] = row;
                } else { /* the 16 positions reach beyond the channel: one by one */
                    for (t = 0; t < 16; ++t) row[t] = in[t] ? xc[at + t] : 0.0f;
                    rows[k] = row;
                }
            }
        }
        return;
    }
    for (k = 0; k < kc; ++k) {
        float *restrict row = panel + 16 * k;
        const float *xc = x + c * H * W;
        const int64_t ih0 = oh0 * sh - pt + i * dh, iw0 = ow0 * sw - pl + j * dw;
        const int64_t at = p0 + (i * dh - pt) * W + j * dw - pl;
        rows[k] = row;
        if (linear && at >= 0 && at + 16 <= H * W) {
            /* output (oh, ow) reads input (oh + i * dh - pt, ow + j * dw - pl): inside when
             * oh is in [olo, ohi) and ow in [wlo, whi) */
            const int64_t olo = pt - i * dh, ohi = H + pt - i * dh;
            const int64_t wlo = pl - j * dw, whi = W + pl - j * dw;
            const int64_t last = oh15 > oh0 ? OW - 1 : ow0 + 15; /* the largest ow */
            const int64_t first = oh15 > oh0 ? 0 : ow0; /* the smallest ow */
            if (oh0 >= olo && oh15 < ohi && first >= wlo && last < whi) {
                rows[k] = xc + at;
            } else {
                const float *restrict xr = xc + at;
                const int32_t a = (int32_t)olo, b = (int32_t)ohi;
                const int32_t d = (int32_t)wlo, e = (int32_t)whi;
                for (t = 0; t < 16; ++t) {
                    const float f = xr[t];
                    const int in = (ohv[t] >= a) & (ohv[t] < b) & (owv[t] >= d) & (owv[t] < e);
                    row[t] = in ? f : 0.0f;
                }
            }
        } else if (one_row && ih0 >= 0 && ih0 < H && iw0 >= 0 && iw0 + 15 * sw < W) {
            const float *restrict xr = xc + ih0 * W + iw0;
            if (sw == 1) {
                rows[k] = xr;
            } else if (sw == 2) {
                for (t = 0; t < 16; ++t) row[t] = xr[2 * t];
            } else {
                for (t = 0; t < 16; ++t) row[t] = xr[t * sw];
            }
        } else {
            int64_t v = 0, oh = oh0, ow = ow0;
            while (v < np) {
                const int64_t n = OW - ow < np - v ? OW - ow : np - v;
                const int64_t ih = oh * sh - pt + i * dh;
                t = 0;
                if (ih >= 0 && ih < H) {
                    const float *xr = xc + ih * W;
                    const int64_t iw = ow * sw - pl + j * dw;
                    int64_t lo = iw >= 0 ? 0 : (sw - 1 - iw) / sw;
                    int64_t hi = iw < W ? (W - iw + sw - 1) / sw : 0;
                    if (lo > n) lo = n;
                    if (hi > n) hi = n;
                    for (; t < lo; ++t) row[v + t] = 0.0f;
                    for (; t < hi; ++t) row[v + t] = xr[iw + t * sw];
                }
                for (; t < n; ++t) row[v + t] = 0.0f;
                v += n;
                ow = 0;
                ++oh;
            }
            for (; v < 16; ++v) row[v] = 0.0f;
        }
        if (++j == KW) {
            j = 0;
            if (++i == KH) {
                i = 0;
                ++c;
            }
        }
    }
}""",
)


# ---------------------------------------------------------------------------------------
# Generators.


def chunk_rows(k: D.Dim) -> int:
    """Rows of ``B`` per chunk: :data:`KC_MAX`, or ``k`` when fewer."""
    kk = static_dim(k)
    return kk if kk is not None and 0 < kk < KC_MAX else KC_MAX


def block_rows(kc: int, m: int | None) -> int | None:
    """Rows of ``A`` per block, so that the block (rows x ``kc`` floats) stays within
    :data:`A_BLOCK` bytes while the columns of ``B`` go by; None when all ``m`` rows fit."""
    mc = max(MR_MAX, A_BLOCK // (4 * kc) // MR_MAX * MR_MAX)
    return None if m is not None and m <= mc else mc


def is_f32(g: Gen) -> bool:
    return all(t.dtype == "f32" for t in g.spec.ins + g.spec.outs)


def emit_partial_tile(
    g: Gen,
    row_counts: tuple[int, ...],
    widths: tuple[int, ...],
    n: str,
    out: Callable[[str, str], str],
    args: str,
) -> None:
    """A block of ``n`` (< 16) columns through the scratch tile: the sums of the previous
    chunks copied in (``k0 > 0``), the micro-tile on the tile, the tile copied out to
    ``out(r, v)`` (the C element of row ``r``, column ``v``)."""
    with g.block("if (k0 > 0)"):
        with g.loop("r", "nr"):
            with g.loop("v", n):
                g.emit(f"tile[r * {V} + v] = {out('r', 'v')};")
    emit_sgemm(g, "nr", row_counts, narrow(n), widths, args)
    with g.loop("r", "nr"):
        with g.loop("v", n):
            g.emit(f"{out('r', 'v')} = tile[r * {V} + v];")


def gen_conv2d_gemm(g: Gen) -> list[str]:
    """conv2d on f32 (not depthwise) as a blocked GEMM per image and group: the loops of
    :func:`.linalg.gen_conv2d_f32`."""
    x, w = g.spec.ins[0], g.spec.ins[1]
    out = g.spec.outs[0]
    a = g.spec.attr
    groups = a["groups"]
    g.restrict = True
    sh, sw = pair(a["strides"])
    pads = pad4(a["padding"])
    pt, pl = pads[0], pads[1]
    dh, dw = pair(a["dilation"])
    N, C, H, W = g.shape(x)
    OC, CG, KH, KW = g.shape(w)
    OH, OW = g.shape(out)[2], g.shape(out)[3]
    oc_static = static_dim(w.shape[0])
    og_static = oc_static // groups if oc_static is not None else None
    OG = str(og_static) if og_static is not None else (f"({OC} / {groups})" if groups != 1 else OC)
    K = g.prod([CG, KH, KW])
    HW = g.prod([H, W])
    P = g.prod([OH, OW])
    k_static = static_dim(D.product(w.shape[1:]))
    kc_max = chunk_rows(D.product(w.shape[1:]))
    mc = block_rows(kc_max, og_static)
    direct = KH == "1" and KW == "1" and (sh, sw) == (1, 1) and pads == (0, 0, 0, 0)
    bias = len(g.spec.ins) == 3
    mr = g.h.use("sgemm_mr")
    pack = g.h.use("conv_pack")
    oc_rows = tile_rows(og_static, mc)
    p_tail = tail_widths(static_dim(D.product(out.shape[2:])))
    decls = [
        *_gemm_scratch(g, kc_max),
        "int64_t b, grp, k0, kc, oc0, oc1, p0, np, oc, nr, r, v;",
    ]
    if direct or k_static is None or k_static == 0:
        decls.append("int64_t k;")

    def packed() -> None:
        g.emit(
            f"{pack}(xg, {H}, {W}, {KH}, {KW}, {sh}, {sw}, {pt}, {pl}, {dh}, "
            f"{dw}, {OW}, k0, kc, p0, np, panel, rows);"
        )

    def tiles() -> None:
        """The micro-tiles of output channels oc0 .. oc1 at positions p0 .. p0 + np."""
        with g.block(f"for (oc = oc0; oc < oc1; oc += {mr})"):
            g.emit(f"nr = oc1 - oc < {mr} ? oc1 - oc : {mr};")
            bias_arg = f"k0 + kc == {K} ? x2 + grp * {OG} + oc : NULL" if bias else "NULL"
            a_arg = f"wg + oc * {K} + k0, {K}"
            with g.block(f"if (np == {V})"):
                o_arg = f"yg + oc * {P} + p0, {P}"
                emit_sgemm(
                    g,
                    "nr",
                    oc_rows,
                    str(V),
                    (V,),
                    f"kc, {a_arg}, rows, {o_arg}, k0 > 0, {bias_arg}",
                )
            with g.block("else"):  # a partial block of positions: through a tile
                emit_partial_tile(
                    g,
                    oc_rows,
                    p_tail,
                    "np",
                    lambda r, v: f"yg[(oc + {r}) * {P} + p0 + {v}]",
                    f"kc, {a_arg}, rows, tile, {V}, k0 > 0, {bias_arg}",
                )

    def columns() -> None:
        """Every block of 16 positions for output channels oc0 .. oc1."""
        with g.block(f"for (p0 = 0; p0 < {P}; p0 += {V})"):
            g.emit(f"np = {P} - p0 < {V} ? {P} - p0 : {V};")
            if direct:
                with g.block(f"if (np == {V})"):
                    with g.loop("k", "kc"):
                        g.emit(f"rows[k] = xg + (k0 + k) * {HW} + p0;")
                with g.block("else"):
                    packed()
            else:
                packed()
            tiles()

    with g.loop("b", N):
        with g.loop("grp", str(groups)):
            g.emit(f"const float *xg = x0 + (b * {C} + grp * {CG}) * {HW};")
            g.emit(f"const float *wg = x1 + grp * {OG} * {K};")
            g.emit(f"float *yg = y0 + (b * {OC} + grp * {OG}) * {P};")
            with g.block(f"for (k0 = 0; k0 < {K}; k0 += {kc_max})"):
                g.emit(f"kc = {K} - k0 < {kc_max} ? {K} - k0 : {kc_max};")
                if mc is None:
                    g.emit("oc0 = 0;")
                    g.emit(f"oc1 = {OG};")
                    columns()
                else:
                    with g.block(f"for (oc0 = 0; oc0 < {OG}; oc0 += {mc})"):
                        g.emit(f"oc1 = {OG} - oc0 < {mc} ? {OG} : oc0 + {mc};")
                        columns()
            if k_static is None or k_static == 0:
                # An empty reduction: the output is the bias (or zeros).
                with g.block(f"if ({K} == 0)"):
                    with g.loop("oc", OG):
                        with g.loop("k", P):
                            val = f"x2[grp * {OG} + oc]" if bias else "0.0f"
                            g.emit(f"yg[oc * {P} + k] = {val};")
    return decls


def _gemm_scratch(g: Gen, kc_max: int) -> list[str]:
    """The scratch arrays of a blocked GEMM: a panel of ``kc_max`` rows of 16 columns, the
    pointers to its rows (or to the input, where a row needs no copy) and one 6 x 16 tile."""
    return [
        g.scratch_array("float", "panel", V * kc_max),
        g.scratch_array("const float *", "rows", kc_max),
        g.scratch_array("float", "tile", MR_MAX * V),
    ]


DW_BUFFER = 1024
"""The most floats a depthwise conv2d frames in its scratch (4 KiB: channels up to about
30 x 30 with their padding; larger ones go through :func:`_depthwise_rows`)."""


def gen_depthwise_f32(g: Gen) -> list[str]:
    """A depthwise conv2d (groups = channels, one input channel per group) on f32. With static
    shapes: each channel is copied into a buffer in the scratch framed by zeros (the padding, as
    the reference pads; the frame is zeroed once per call), then each block of 16 output
    columns of a row sums its taps (kernel rows, then columns, in order) in registers, with no
    bounds check (vectorized; stride-2 reads as well as the compiler can). Symbolic or very
    large channels go through :func:`_depthwise_rows`."""
    x, w = g.spec.ins[0], g.spec.ins[1]
    out = g.spec.outs[0]
    a = g.spec.attr
    sh, sw = pair(a["strides"])
    pt, pl, _, _ = pad4(a["padding"])
    dh, dw = pair(a["dilation"])
    dims = [static_dim(d) for d in (w.shape[2], w.shape[3], x.shape[2], x.shape[3])]
    dims += [static_dim(out.shape[2]), static_dim(out.shape[3])]
    if None in dims or not dims[4] or not dims[5]:
        return _depthwise_rows(g)
    kh, kw, h_in, w_in, h_out, w_out = (int(d) for d in dims)  # type: ignore[arg-type]
    blocks = -(-w_out // V)
    # the frame: pl zero columns, the row, zeros up to what the last block reads; pt zero
    # rows, the channel, zero rows up to what the last output row reads
    wp = max(pl + w_in, (blocks * V - 1) * sw + (kw - 1) * dw + 1)
    hp = max(pt + h_in, (h_out - 1) * sh + (kh - 1) * dh + 1)
    if hp * wp > DW_BUFFER:
        return _depthwise_rows(g)
    g.restrict = True
    N, C, H, W = g.shape(x)
    OC = g.dim(w.shape[0])
    OH, OW = str(h_out), str(w_out)
    madd = g.h.use("fmadd")
    bias = len(g.spec.ins) == 3
    with g.loop("j", str(hp * wp)):
        g.emit("buf[j] = 0.0f;")
    with g.loop("bc", g.prod([N, OC])):
        g.emit(f"const int64_t c = bc % {OC};")
        g.emit(f"const float *xc = x0 + (bc / {OC} * {C} + c) * {g.prod([H, W])};")
        g.emit(f"const float *wc = x1 + c * {kh * kw};")
        with g.loop("i", str(h_in)):
            with g.loop("j", str(w_in)):
                g.emit(f"buf[({pt} + i) * {wp} + {pl} + j] = xc[i * {w_in} + j];")
        with g.loop("oh", OH):
            g.emit(f"float *restrict yr = y0 + (bc * {OH} + oh) * {OW};")
            g.emit(f"const float *br = buf + oh * {sh * wp};")
            accs = [f"a{v}" for v in range(V)]
            with g.block(f"for (ow = 0; ow < {OW}; ow += {V})"):
                # 16 scalar accumulators: the compiler packs them into vector registers
                g.emit(f"float {', '.join(accs)};")
                g.emit(" = ".join(accs) + " = 0.0f;")
                # one loop over the taps (two nested loops keep GCC from vectorizing)
                with g.loop("t", str(kh * kw)):
                    g.emit("const float wv = wc[t];")
                    g.emit(
                        f"const float *s = br + t / {kw} * {dh * wp} + t % {kw} * {dw} + ow * {sw};"
                    )
                    for v0 in range(0, V, 4):
                        g.emit(
                            " ".join(
                                f"a{v} = {madd}(wv, s[{v * sw}], a{v});" for v in range(v0, v0 + 4)
                            )
                        )
                if bias:  # after the sum, as the reference adds it
                    g.emit(
                        "{ const float bv = x2[c]; "
                        + " ".join(f"a{v} += bv;" for v in range(V))
                        + " }"
                    )
                stores = " ".join(f"yr[ow + {v}] = a{v};" for v in range(V))
                if w_out % V == 0:
                    g.emit(stores)
                else:
                    with g.block(f"if (ow + {V} <= {OW})"):
                        g.emit(stores)
                    with g.block("else"):
                        g.emit(f"float t[{V}];")
                        g.emit(" ".join(f"t[{v}] = a{v};" for v in range(V)))
                        with g.loop("v", f"{OW} - ow"):
                            g.emit("yr[ow + v] = t[v];")
    decl = "int64_t bc, oh, ow, i, j, t" + (", v;" if w_out % V else ";")
    return [decl, g.scratch_array("float", "buf", hp * wp)]


def _depthwise_rows(g: Gen) -> list[str]:
    """A depthwise conv2d on f32 of symbolic (or very wide) rows: for each channel and output
    row, the row accumulates tap after tap (sum over kernel rows, then columns, in order), in
    16-wide blocks the compiler vectorizes at -O2 when the stride is 1; the columns whose taps
    all lie inside the input skip the bounds checks."""
    g.restrict = True
    x, w = g.spec.ins[0], g.spec.ins[1]
    out = g.spec.outs[0]
    a = g.spec.attr
    sh, sw = pair(a["strides"])
    pt, pl, _, _ = pad4(a["padding"])
    dh, dw = pair(a["dilation"])
    N, C, H, W = g.shape(x)
    OC, _, KH, KW = g.shape(w)
    OH, OW = g.shape(out)[2], g.shape(out)[3]
    madd = g.h.use("fmadd")
    bias = len(g.spec.ins) == 3
    with g.loop("bc", g.prod([N, OC])):
        g.emit(f"const int64_t c = bc % {OC};")
        g.emit(f"const float *xc = x0 + (bc / {OC} * {C} + c) * {g.prod([H, W])};")
        g.emit(f"const float *wc = x1 + c * {g.prod([KH, KW])};")
        with g.loop("oh", OH):
            g.emit(f"float *restrict yr = y0 + (bc * {OH} + oh) * {OW};")
            init = "x2[c]" if bias else "0.0f"
            with g.loop("ow", OW):
                g.emit(f"yr[ow] = {init};")
            with g.loop("i", KH):
                g.emit(f"const int64_t ih = oh * {sh} - {pt} + i * {dh};")
                g.emit(f"if (ih < 0 || ih >= {H}) continue;")
                g.emit(f"xr = xc + ih * {W};")
                with g.loop("j", KW):
                    g.emit(f"const float wv = wc[i * {KW} + j];")
                    g.emit(f"const int64_t off = j * {dw} - {pl};")
                    # ow in [lo, hi): 0 <= ow * sw + off < W
                    g.emit(f"int64_t lo = off >= 0 ? 0 : ({sw} - 1 - off) / {sw};")
                    g.emit(f"int64_t hi = off < {W} ? ({W} - off + {sw} - 1) / {sw} : 0;")
                    g.emit(f"if (hi > {OW}) hi = {OW};")
                    g.emit("ow = lo;")
                    if sw == 1:
                        with g.block(f"for (; ow + {V} <= hi; ow += {V})"):
                            with g.loop("v", str(V)):
                                g.emit(f"yr[ow + v] = {madd}(wv, xr[ow + v + off], yr[ow + v]);")
                    with g.block("for (; ow < hi; ++ow)"):
                        g.emit(f"yr[ow] = {madd}(wv, xr[ow * {sw} + off], yr[ow]);")
    return ["int64_t bc, oh, ow, i, j" + (", v;" if sw == 1 else ";"), "const float *xr;"]


def gen_matmul_f32(g: Gen) -> list[str]:
    """matmul on f32: per batch, ``out = a b`` through the micro-tiles, ``b`` read in place
    (its last 16-column block, when narrower, packed with zeros)."""
    from .base import loop_nest, matmul_batch_offsets

    g.restrict = True
    a, b = g.spec.ins
    out = g.spec.outs[0]
    os_, as_ = g.shape(out), g.shape(a)
    batch = os_[:-2]
    M, N, K = os_[-2], os_[-1], as_[-1]
    kc_max = chunk_rows(a.shape[-1])
    mr = g.h.use("sgemm_mr")
    m_rows = tile_rows(static_dim(out.shape[-2]))
    n_tail = tail_widths(static_dim(out.shape[-1]))
    decls = [
        *_gemm_scratch(g, kc_max),
        "int64_t k0, kc, n0, nn, m0, nr, k, r, v;",
    ]

    def body(bv: list[str]) -> None:
        a_off, b_off, o_off = matmul_batch_offsets(g, a, b, out, bv)
        g.emit(f"const float *am = x0 + ({a_off}) * {g.prod([M, K])};")
        g.emit(f"const float *bm = x1 + ({b_off}) * {g.prod([K, N])};")
        g.emit(f"float *om = y0 + ({o_off}) * {g.prod([M, N])};")
        with g.block(f"for (k0 = 0; k0 < {K}; k0 += {kc_max})"):
            g.emit(f"kc = {K} - k0 < {kc_max} ? {K} - k0 : {kc_max};")
            with g.block(f"for (n0 = 0; n0 < {N}; n0 += {V})"):
                g.emit(f"nn = {N} - n0 < {V} ? {N} - n0 : {V};")
                with g.block(f"if (nn == {V})"):
                    with g.loop("k", "kc"):
                        g.emit(f"rows[k] = bm + (k0 + k) * {N} + n0;")
                with g.block("else"):
                    with g.loop("k", "kc"):
                        with g.loop("v", str(V)):
                            g.emit(
                                f"panel[{V} * k + v] = v < nn ? bm[(k0 + k) * {N} + n0 + v] : 0.0f;"
                            )
                        g.emit(f"rows[k] = panel + {V} * k;")
                with g.block(f"for (m0 = 0; m0 < {M}; m0 += {mr})"):
                    g.emit(f"nr = {M} - m0 < {mr} ? {M} - m0 : {mr};")
                    a_arg = f"am + m0 * {K} + k0, {K}"
                    with g.block(f"if (nn == {V})"):
                        o_arg = f"om + m0 * {N} + n0, {N}"
                        emit_sgemm(
                            g,
                            "nr",
                            m_rows,
                            str(V),
                            (V,),
                            f"kc, {a_arg}, rows, {o_arg}, k0 > 0, NULL",
                        )
                    with g.block("else"):
                        emit_partial_tile(
                            g,
                            m_rows,
                            n_tail,
                            "nn",
                            lambda r, v: f"om[(m0 + {r}) * {N} + n0 + {v}]",
                            f"kc, {a_arg}, rows, tile, {V}, k0 > 0, NULL",
                        )
        if static_dim(a.shape[-1]) is None:
            with g.block(f"if ({K} == 0)"):
                with g.loop("k", g.prod([M, N])):
                    g.emit("om[k] = 0.0f;")

    vars_ = loop_nest(g, batch, body, "b")
    if vars_:
        decls.append(f"int64_t {', '.join(vars_)};")
    return decls


DENSE_GEMM_ROWS = 4
"""Rows of x from which dense packs ``w``'s transpose and uses the micro-tiles."""


def gen_dense_f32(g: Gen) -> list[str]:
    """dense on f32: few rows are dot products (4 rows of w at a time, 16 lanes each, the
    lanes added at the end); more rows go through the micro-tiles with ``w``'s transpose
    packed into the panel."""
    g.restrict = True
    x, w = g.spec.ins[0], g.spec.ins[1]
    xs, ws = g.shape(x), g.shape(w)
    rows = g.prod(xs[:-1]) if len(xs) > 1 else "1"
    N, K = ws[0], ws[1]
    bias = len(g.spec.ins) == 3
    madd = g.h.use("fmadd")
    rows_static = static_dim(D.product(x.shape[:-1])) if len(x.shape) > 1 else 1
    decls = ["int64_t r, n0, k, v;"]
    gemm = rows_static is None or rows_static >= DENSE_GEMM_ROWS

    def dots() -> None:
        with g.loop("r", rows):
            g.emit(f"const float *xr = x0 + r * {K};")
            with g.block(f"for (n0 = 0; n0 < {N}; n0 += 4)"):
                g.emit(f"const int64_t nq = {N} - n0 < 4 ? {N} - n0 : 4;")
                with g.loop("q", "4"):
                    with g.loop("v", str(V)):
                        g.emit("acc[q][v] = 0.0f;")
                with g.block("if (nq == 4)"):
                    g.emit(f"const float *w0 = x1 + n0 * {K}, *w1 = w0 + {K};")
                    g.emit(f"const float *w2 = w1 + {K}, *w3 = w2 + {K};")
                    with g.block(f"for (k = 0; k + {V} <= {K}; k += {V})"):
                        with g.loop("v", str(V)):
                            g.emit("const float xv = xr[k + v];")
                            for q in range(4):
                                g.emit(f"acc[{q}][v] = {madd}(xv, w{q}[k + v], acc[{q}][v]);")
                    with g.block(f"for (v = 0; k < {K}; ++k, ++v)"):
                        for q in range(4):
                            g.emit(f"acc[{q}][v] = {madd}(xr[k], w{q}[k], acc[{q}][v]);")
                with g.block("else"):
                    with g.loop("q", "nq"):
                        g.emit(f"const float *wq = x1 + (n0 + q) * {K};")
                        with g.block(f"for (k = 0; k + {V} <= {K}; k += {V})"):
                            with g.loop("v", str(V)):
                                g.emit(f"acc[q][v] = {madd}(xr[k + v], wq[k + v], acc[q][v]);")
                        with g.block(f"for (v = 0; k < {K}; ++k, ++v)"):
                            g.emit(f"acc[q][v] = {madd}(xr[k], wq[k], acc[q][v]);")
                with g.loop("q", "nq"):
                    g.emit("float s = 0.0f;")
                    with g.loop("v", str(V)):
                        g.emit("s += acc[q][v];")
                    if bias:
                        g.emit("s += x2[n0 + q];")
                    g.emit(f"y0[r * {N} + n0 + q] = s;")

    if not gemm:
        dots()
        return decls + ["int64_t q;", f"float acc[4][{V}];"]
    kc_max = chunk_rows(w.shape[1])
    mr = g.h.use("sgemm_mr")
    r_rows = tile_rows(rows_static)
    n_static = static_dim(w.shape[0])
    n_tail = WIDTHS if bias else tail_widths(n_static)
    if bias and n_static is not None:  # every block goes through the tile
        n_tail = tuple(sorted(({V} if n_static >= V else set()) | set(tail_widths(n_static))))
    decls += [
        *_gemm_scratch(g, kc_max),
        "int64_t k0, kc, nn, m0, nr;",
    ]
    with g.block(f"for (k0 = 0; k0 < {K}; k0 += {kc_max})"):
        g.emit(f"kc = {K} - k0 < {kc_max} ? {K} - k0 : {kc_max};")
        with g.block(f"for (n0 = 0; n0 < {N}; n0 += {V})"):
            g.emit(f"nn = {N} - n0 < {V} ? {N} - n0 : {V};")
            with g.loop("k", "kc"):
                with g.loop("v", str(V)):
                    g.emit(f"panel[{V} * k + v] = v < nn ? x1[(n0 + v) * {K} + k0 + k] : 0.0f;")
                g.emit(f"rows[k] = panel + {V} * k;")
            with g.block(f"for (m0 = 0; m0 < {rows}; m0 += {mr})"):
                g.emit(f"nr = {rows} - m0 < {mr} ? {rows} - m0 : {mr};")
                a_arg = f"x0 + m0 * {K} + k0, {K}"

                def through_tile() -> None:
                    with g.block("if (k0 > 0)"):
                        with g.loop("r", "nr"):
                            with g.loop("v", "nn"):
                                g.emit(f"tile[r * {V} + v] = y0[(m0 + r) * {N} + n0 + v];")
                    emit_sgemm(
                        g,
                        "nr",
                        r_rows,
                        narrow("nn"),
                        n_tail,
                        f"kc, {a_arg}, rows, tile, {V}, k0 > 0, NULL",
                    )
                    last = f"k0 + kc == {K}"
                    with g.loop("r", "nr"):
                        with g.loop("v", "nn"):
                            # the bias (one per column here) after the whole sum
                            tv = f"tile[r * {V} + v]"
                            val = f"{last} ? {tv} + x2[n0 + v] : {tv}" if bias else tv
                            g.emit(f"y0[(m0 + r) * {N} + n0 + v] = {val};")

                if bias:
                    through_tile()
                else:
                    with g.block(f"if (nn == {V})"):
                        emit_sgemm(
                            g,
                            "nr",
                            r_rows,
                            str(V),
                            (V,),
                            f"kc, {a_arg}, rows, y0 + m0 * {N} + n0, {N}, k0 > 0, NULL",
                        )
                    with g.block("else"):
                        through_tile()
    return decls
