"""Winograd F(2x2, 3x3) for the f32 conv2d kernels that pay for it.

Which convolutions: f32, static shapes, 3x3 kernel, stride 1, dilation 1, one group, any
padding, and enough output tiles and channels that 16 products per 2x2 output tile (against
36 for the direct sum) win over the transforms (:func:`plan`; the rest keeps the blocked GEMM
of :mod:`.blocked`). Where the micro-tiles are 16 lanes wide (AVX, AArch64: the recommended
build) the direct GEMM is fast enough that only layers of at least :data:`WIDE_MIN_TILES`
tiles take Winograd: the kernel's first lines send the others to the direct GEMM under the
preprocessor (one C file; each build picks).

What it guarantees:

* **No extra constants.** The weights stay as they are (OIHW, in ``.rodata``); they are
  transformed at run time, per block of output channels and input channels, into the scratch.
* **Only planned scratch.** ``U[16][Kb][Cb]`` (transformed weights of ``Kb`` output and ``Cb``
  input channels), ``V[16][Cb][LDV]`` (transformed input tiles of ``R`` rows of tiles; or
  ``V[16][C][LDV]``, every channel, see the loops), ``M[16][Kb][LDM]`` (their products, summed
  over the input-channel blocks), two small row buffers, the 9 x ``Cb`` weights being
  transformed and ``Cb`` row pointers, all carved with :meth:`Gen.scratch_array`: at most
  :data:`BUDGET` bytes and at most :data:`IO_FACTOR` times the convolution's own input and
  output, so that a small layer gets a small scratch (or keeps the direct GEMM); the plan and
  the code cannot disagree. No stack arrays, no malloc.
* **Portable C99 that vectorizes at -O2.** The 16 batched products are the micro-tiles of
  :mod:`.blocked` (B given as row pointers into ``V``); the transforms are counted loops over
  ``restrict`` parameters of constant trip counts, in static functions of the kernel alone
  (:attr:`Gen.prelude`), so that GCC's very-cheap cost model vectorizes them.
* **Numbers.** Each output is ``A^T [sum over channels of (G g G^T) * (B^T d B)] A`` plus the
  bias, in ``float``: not the direct sum's rounding. The transforms' coefficients are 0, +-1
  and 1/2, so the error stays a small multiple of the direct sum's (measured in docs/c.md).
* **Infinities and NaN as the reference.** A call whose output holds an infinity or a NaN
  (which any infinite or NaN input or weight causes, as does an overflow inside the
  transforms) is computed again by the direct GEMM (``{f}_gemm``, the kernel :mod:`.blocked`
  would have emitted, on the same scratch): the transforms would make NaN of ``inf - inf``
  where the direct sum has an infinity.

Loops, per image, one of two orders (:class:`Plan`, the one of least estimated work,
:meth:`Plan.cost`, that fits the scratch): blocks of ``Kb`` output channels (``k0``), blocks
of ``R`` rows of tiles (``ty0``), blocks of ``Cb`` input channels (``c0``: weight transform,
unless it was done once for the whole ``C``; input transform; 16 GEMMs accumulating in
``M``), output transform of ``M`` into the output (partial tiles at odd edges are cut); or,
with ``V`` holding every channel (``v_all``: the input transform once, for layers of many
output channels and few tiles), blocks of tile rows (input transform of all channels), then
blocks of output channels, then of input channels (weight transform, GEMMs), output
transform.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Gen, Spec, pad4, pair, scratch_place
from .blocked import gen_conv2d_gemm
from .lines import CLines
from .microtile import MR_MAX, V, emit_sgemm, narrow, register_helper, static_dim, tile_rows

BUDGET = 512 * 1024
"""The most bytes of scratch a Winograd conv2d takes (about half of a usual L2 per array at
most); the blocks shrink to fit it and :data:`IO_FACTOR`."""

IO_FACTOR = 2
"""Nor more than this many times the bytes of the convolution's own input and output (live
at the call anyway): a small convolution does not get a scratch out of proportion to it,
or keeps the direct GEMM when no blocking fits. (On the zoo models the scratch stays under
the arena's peak: their arenas are unchanged.)"""

KB_MAX = 48
"""The most output channels per block (a multiple of the micro-tile's 6 rows). The input
transform is repeated once per block: its cost is about 2 / Kb of the products'."""

CB_MAX = 32
"""The most input channels per block (the reduction of one pass of the micro-tiles)."""

T_MAX = 112
"""The most tiles per block of tile rows (7 blocks of 16 columns of the micro-tiles). The
weight transform is repeated once per such block when C is blocked: about 3 / T of the
products' cost."""

MIN_GAIN = 1.3
"""Winograd only where the direct multiply-adds are at least this many times its estimated
work (:meth:`Plan.cost`: 16 products per tile, partial tiles and the micro-tiles' column
padding counted, plus the transforms' overheads): below, measured at -O2, it is barely
faster or slower (docs/c.md)."""

WIDE_MIN_TILES = 100
"""Where the micro-tiles are 16 lanes wide (AVX, AArch64: ``{p}_sgemm_nv == 16``, the
recommended build), Winograd only with at least this many 2x2 tiles an image (an output of
about 20 x 20): below, the weight transform per call and the weights' memory traffic cost
more than the products save (measured: docs/c.md). The rule is the preprocessor's: one C
file, each build picks."""

MIN_CHANNELS = 8
"""Input and output channels at least this many (fewer: the transforms dominate)."""


@dataclass(frozen=True)
class Plan:
    """The blocking of one Winograd conv2d: shapes and block sizes (all static)."""

    n: int
    c: int
    h: int
    w: int
    k: int
    oh: int
    ow: int
    pt: int
    pl: int
    rows: int  # R: rows of tiles per block
    kb: int
    cb: int
    v_all: bool = False
    """V holds every input channel of a block of tile rows, transformed once and read by
    every block of output channels (else V holds one block of ``cb`` channels, transformed
    again for each block of output channels)."""

    @property
    def vc(self) -> int:
        """Input channels V holds."""
        return self.c if self.v_all else self.cb

    @property
    def th(self) -> int:
        return -(-self.oh // 2)

    @property
    def tw(self) -> int:
        return -(-self.ow // 2)

    @property
    def twp(self) -> int:
        """Tiles per row the input transform computes: a multiple of 4 (constant trip count
        that vectorizes); those beyond ``tw`` are overwritten by the next row or unused."""
        return -(-self.tw // 4) * 4

    @property
    def ws(self) -> int:
        """Floats of one row buffer of the input transform: the padded input row."""
        return 2 * self.twp + 2

    @property
    def ldm(self) -> int:
        return -(-self.rows * self.tw // V) * V

    @property
    def ldv(self) -> int:
        return max(self.ldm, self.rows * self.tw + self.twp - self.tw)

    def arrays(self) -> list[tuple[str, str, int]]:
        """The scratch arrays (C type, name, elements) in the order the kernel carves them."""
        return [
            ("float", "u", 16 * self.kb * self.cb),
            ("float", "v", 16 * self.vc * self.ldv),
            ("float", "m", 16 * self.kb * self.ldm),
            ("float", "s", 4 * self.ws),
            ("float", "zero", self.w),
            ("float", "wt", 9 * self.cb),
            ("const float *", "rows", self.cb),
        ]

    def scratch(self) -> int:
        """Bytes of scratch, as :meth:`Gen.scratch_array` lays :meth:`arrays` out."""
        end = 0
        for ctype, _, count in self.arrays():
            end = scratch_place(end, ctype, count)[1]
        return end

    def columns(self) -> int:
        """Columns the products compute over the whole output (per channel pair)."""
        full, last = divmod(self.th, self.rows)
        return full * _cols(self.rows * self.tw) + (_cols(last * self.tw) if last else 0)

    def cost(self) -> float:
        """The estimated work, in multiply-adds: the products, with the overheads of the
        transforms and the passes over the channel blocks as fractions of them (the input
        transform repeated once per block of output channels unless V holds all channels,
        the weight transform once per block of tile rows unless all the channels are one block
        and V does not hold them all)."""
        products = 16 * self.columns() * self.k * self.c
        k_blocks = 1 if self.v_all else -(-self.k // self.kb)
        row_blocks = -(-self.th // self.rows) if self.cb < self.c or self.v_all else 1
        over = 1.5 * k_blocks / self.k + 3 * row_blocks / self.columns() + 1 / self.cb
        over += 1 / self.kb  # each 16 columns of V are read again per 6 rows of U
        return products * (1 + over)

    def widths(self) -> tuple[int, ...]:
        """The micro-tile widths the products use: 16, and the last block's 4 or 8 or 16."""
        full, last = divmod(self.th, self.rows)
        found = set()
        for r in (self.rows,) * bool(full) + ((last,) if last else ()):
            n = _cols(r * self.tw)
            if n >= V:
                found.add(V)
            if n % V:
                found.add(4 if n % V <= 4 else 8 if n % V <= 8 else V)
        return tuple(sorted(found))


def _cols(tiles: int) -> int:
    """Columns the products compute for a block of ``tiles`` tiles: blocks of 16 and a last
    micro-tile 4, 8 or 16 wide."""
    full, rest = divmod(-(-tiles // 4) * 4, V)
    return full * V + (0 if rest == 0 else 4 if rest <= 4 else 8 if rest <= 8 else V)


def plan(spec: Spec) -> Plan | None:
    """The Winograd blocking of this conv2d, or None when it is not eligible (not f32, a
    symbolic dim, not 3x3 / stride 1 / dilation 1 / one group) or would not pay."""
    if spec.op != "conv2d" or any(t.dtype != "f32" for t in spec.ins + spec.outs):
        return None
    a = spec.attr
    x, w = spec.ins[0], spec.ins[1]
    out = spec.outs[0]
    if a["groups"] != 1 or pair(a["strides"]) != (1, 1) or pair(a["dilation"]) != (1, 1):
        return None
    shape = [static_dim(d) for d in (*x.shape, *w.shape, *out.shape)]
    if None in shape or len(shape) != 12:
        return None
    n, c, h, wd, k, cg, kh, kw, _, _, oh, ow = (int(s) for s in shape)  # type: ignore[arg-type]
    if (kh, kw) != (3, 3) or cg != c or n == 0 or oh < 2 or ow < 2:
        return None
    if c < MIN_CHANNELS or k < MIN_CHANNELS:
        return None
    pt, pl, _, _ = pad4(a["padding"])
    th, tw = -(-oh // 2), -(-ow // 2)
    cap = min(BUDGET, IO_FACTOR * 4 * n * (c * h * wd + k * oh * ow))
    best: tuple[tuple[float, int, int, int, bool], Plan] | None = None
    for rows in range(1, th + 1):
        if rows > 1 and rows * tw > T_MAX:
            break
        for cb in sorted({min(c, CB_MAX), min(c, CB_MAX // 2), min(c, CB_MAX // 4)}, reverse=True):
            for kb in sorted({min(k, KB_MAX)} | set(range(MR_MAX, min(k, KB_MAX), MR_MAX)))[::-1]:
                for v_all in (False, True):
                    p = Plan(n, c, h, wd, k, oh, ow, pt, pl, rows, kb, cb, v_all)
                    if p.scratch() > cap:
                        continue
                    key = (p.cost(), -rows, -kb, -cb, v_all)  # ties: the larger blocks
                    if best is None or key < best[0]:
                        best = (key, p)
    if best is None or 9 * oh * ow * k * c < MIN_GAIN * best[0][0]:
        return None
    return best[1]


register_helper(
    "all_finite",
    (),
    """\
/* Whether the n floats at x are all finite: x * 0 is 0 for them and NaN for an infinity or a
 * NaN, summed in 16 lanes (vectorized: 4 elements a cycle, not one add's latency each). */
static int PFX_all_finite(const float *restrict x, int64_t n)
{
    float z0 = 0.0f, z1 = 0.0f, z2 = 0.0f, z3 = 0.0f, z4 = 0.0f, z5 = 0.0f, z6 = 0.0f;
    float z7 = 0.0f, z8 = 0.0f, z9 = 0.0f, z10 = 0.0f, z11 = 0.0f, z12 = 0.0f, z13 = 0.0f;
    float z14 = 0.0f, z15 = 0.0f;
    const int64_t whole = n - n % 16;
    int64_t i;
    for (i = 0; i < whole; i += 16) {
        z0 += x[i] * 0.0f; z1 += x[i + 1] * 0.0f; z2 += x[i + 2] * 0.0f; z3 += x[i + 3] * 0.0f;
        z4 += x[i + 4] * 0.0f; z5 += x[i + 5] * 0.0f; z6 += x[i + 6] * 0.0f;
        z7 += x[i + 7] * 0.0f; z8 += x[i + 8] * 0.0f; z9 += x[i + 9] * 0.0f;
        z10 += x[i + 10] * 0.0f; z11 += x[i + 11] * 0.0f; z12 += x[i + 12] * 0.0f;
        z13 += x[i + 13] * 0.0f; z14 += x[i + 14] * 0.0f; z15 += x[i + 15] * 0.0f;
    }
    for (i = whole; i < n; ++i) z0 += x[i] * 0.0f;
    z0 += z1 + z2 + z3 + z4 + z5 + z6 + z7;
    z8 += z9 + z10 + z11 + z12 + z13 + z14 + z15;
    return z0 + z8 == 0.0f;
}""",
)


def _weight_transform(g: Gen, p: Plan) -> str:
    """``{f}_wt``: U[xi][k][c] = (G w[k0 + k][c0 + c] G^T)[xi] for k < kn, c < cn. Each
    output channel's 9 x cn weights are first copied into ``t`` as 9 rows of cn (the one
    strided access), so that the transform reads rows and vectorizes."""
    su = p.kb * p.cb
    c = CLines()

    def over(n: str) -> None:
        with c.loop("c", n):
            c.emit(" ".join(f"t[{j * p.cb} + c] = wk[9 * c + {j}];" for j in range(9)))
        with c.loop("c", n):
            # G g: rows g0, (g0 + g1 + g2) / 2, (g0 - g1 + g2) / 2, g2 (over the kernel's rows)
            for j in range(3):
                r0, r1, r2 = (f"t[{(3 * i + j) * p.cb} + c]" for i in range(3))
                c.emit(f"const float h0{j} = {r0}, h3{j} = {r2};")
                c.emit(f"const float e{j} = h0{j} + h3{j}, g{j} = {r1};")
                c.emit(f"const float h1{j} = 0.5f * (e{j} + g{j});")
                c.emit(f"const float h2{j} = 0.5f * (e{j} - g{j});")
            # (G g) G^T: the same over the columns
            for i in range(4):
                with c.opened(f"{{ const float f = h{i}0 + h{i}2;", 2):
                    vals = [f"h{i}0", f"0.5f * (f + h{i}1)", f"0.5f * (f - h{i}1)", f"h{i}2"]
                    for j, v in enumerate(vals):
                        c.emit(f"uk[{(4 * i + j) * su} + c] = {v};")

    c.emit(
        f"static void {g.fname}_wt(const float *restrict w, float *restrict u, float *restrict t,"
    )
    c.emit("    int64_t k0, int64_t kn, int64_t c0, int64_t cn)")
    with c.opened("{"):
        c.emit("int64_t k, c;")
        with c.loop("k", "kn"):
            c.emit(f"const float *restrict wk = w + ((k0 + k) * {p.c} + c0) * 9;")
            c.emit(f"float *restrict uk = u + k * {p.cb};")
            if p.c % p.cb == 0:  # every block of channels is whole: a constant trip count
                c.emit("(void)cn;")
                over(str(p.cb))
            else:  # whole blocks in a loop of constant trip count (vectorized), the last one of cn
                with c.opened(f"if (cn == {p.cb}) {{", close=None):
                    over(str(p.cb))
                with c.block("} else"):
                    over("cn")
    return c.text()


def _input_transform(g: Gen, p: Plan) -> str:
    """``{f}_vt``: V[xi][c][r * TW + tx] = (B^T d B)[xi] for the 4x4 input tile d of tile
    (ty0 + r, tx), channel c0 + c, zero outside the input (the padding); columns from
    rows * TW to the next multiple of 16 are zero (the products' last block)."""
    sv = p.vc * p.ldv
    hw = p.h * p.w
    ws = p.ws
    c = CLines()
    c.emit(f"static void {g.fname}_vt(const float *restrict x, const float *restrict zero,")
    c.emit("    float *restrict s, float *restrict v, int64_t c0, int64_t cn, int64_t ty0,")
    c.emit("    int64_t rows)")
    with c.opened("{"):
        c.emit(f"const int64_t filled = rows * {p.tw}, ncols = (filled + 3) / 4 * 4;")
        c.emit("int64_t c, r, q, t;")
        c.emit("/* the row buffers: zero but where the input row goes (the padding) */")
        c.emit(f"for (q = 0; q < {4 * ws}; ++q) s[q] = 0.0f;")
        with c.loop("c", "cn"):
            c.emit(f"const float *xc = x + (c0 + c) * {hw};")
            with c.loop("r", "rows"):
                c.emit(f"const int64_t ih = 2 * (ty0 + r) - {p.pt};")
                for i in range(4):
                    c.emit(
                        f"const float *restrict d{i} = ih + {i} >= 0 && ih + {i} < {p.h} ? "
                        f"xc + (ih + {i}) * {p.w} : zero;"
                    )
                c.emit(f"float *restrict vr = v + c * {p.ldv} + r * {p.tw};")
                c.emit("/* B^T d: over the rows of the tile, for every column of the input */")
                with c.loop("q", str(p.w)):
                    c.emit("const float a0 = d0[q], a1 = d1[q], a2 = d2[q], a3 = d3[q];")
                    c.emit(f"s[{p.pl} + q] = a0 - a2;")
                    c.emit(f"s[{ws + p.pl} + q] = a1 + a2;")
                    c.emit(f"s[{2 * ws + p.pl} + q] = a2 - a1;")
                    c.emit(f"s[{3 * ws + p.pl} + q] = a1 - a3;")
                c.emit("/* (B^T d) B: over the columns of each tile */")
                with c.loop("t", str(p.twp)):
                    for i in range(4):
                        o = i * ws
                        head = (
                            f"{{ const float b0 = s[{o} + 2 * t], b1 = s[{o + 1} + 2 * t],"
                            f" b2 = s[{o + 2} + 2 * t], b3 = s[{o + 3} + 2 * t];"
                        )
                        with c.opened(head, 2):
                            for j, val in enumerate(("b0 - b2", "b1 + b2", "b2 - b1", "b1 - b3")):
                                c.emit(f"vr[{(4 * i + j) * sv} + t] = {val};")
            with c.loop("q", "ncols", "filled"):
                c.emit(f"float *restrict vc = v + c * {p.ldv} + q;")
                c.emit(" ".join(f"vc[{e * sv}] = 0.0f;" for e in range(16)))
    return c.text()


def _output_transform(g: Gen, p: Plan, bias: bool) -> str:
    """``{f}_ot``: the 2x2 outputs A^T M A (+ the bias) of each tile of rows ty0 .. ty0 +
    rows - 1, output channels k0 .. k0 + kn - 1, cut at the output's edges."""
    sm = p.kb * p.ldm
    ohw = p.oh * p.ow
    bias_param = "const float *restrict bias, " if bias else ""
    add = " + bv" if bias else ""
    c = CLines()

    def tile(t: str, both_rows: bool, both_cols: bool) -> None:
        """One tile's outputs: A^T M gives the rows P = M0 + M1 + M2 and Q = M1 - M2 - M3
        (over the tile's 4 columns j), then each row's P0 + P1 + P2 and P1 - P2 - P3; only
        what is inside the output is computed."""
        cols = range(4) if both_cols else range(3)
        used = [4 * i + j for i in range(4 if both_rows else 3) for j in cols]
        with c.opened("{"):
            c.emit(f"const float {', '.join(f'm{e} = mr[{e * sm} + {t}]' for e in used)};")
            for j in cols:
                row = f"p{j} = m{j} + m{4 + j} + m{8 + j}"
                if both_rows:
                    row += f", q{j} = m{4 + j} - m{8 + j} - m{12 + j}"
                c.emit(f"const float {row};")
            c.emit(f"y0[2 * {t}] = p0 + p1 + p2{add};")
            if both_cols:
                c.emit(f"y0[2 * {t} + 1] = p1 - p2 - p3{add};")
            if both_rows:
                c.emit(f"y0[{p.ow} + 2 * {t}] = q0 + q1 + q2{add};")
                if both_cols:
                    c.emit(f"y0[{p.ow} + 2 * {t} + 1] = q1 - q2 - q3{add};")

    half, odd = divmod(p.ow, 2)

    def tiles(both_rows: bool) -> None:
        """The tiles of one row of tiles: whole ones, then the last one cut to its left
        column when the output's width is odd."""
        c.emit(f"for (t = 0; t < {half}; ++t)")
        tile("t", both_rows, True)
        if odd:
            tile(str(half), both_rows, False)

    c.emit(f"static void {g.fname}_ot(const float *restrict m, {bias_param}float *restrict y,")
    c.emit("    int64_t k0, int64_t kn, int64_t ty0, int64_t rows)")
    with c.opened("{"):
        c.emit("int64_t k, r, t;")
        with c.loop("k", "kn"):
            if bias:
                c.emit("const float bv = bias[k0 + k];")
            with c.loop("r", "rows"):
                c.emit("const int64_t oh = 2 * (ty0 + r);")
                c.emit(f"const float *restrict mr = m + k * {p.ldm} + r * {p.tw};")
                c.emit(f"float *restrict y0 = y + (k0 + k) * {ohw} + oh * {p.ow};")
                if p.oh % 2:  # the last row of tiles has one output row
                    with c.opened(f"if (oh + 1 < {p.oh}) {{", close=None):
                        tiles(True)
                    with c.block("} else"):
                        tiles(False)
                else:
                    with c.opened("{"):
                        tiles(True)
    return c.text()


def gen_winograd_f32(g: Gen, p: Plan) -> list[str]:
    """The Winograd conv2d of plan ``p`` (see the module's docstring for the loops)."""
    g.restrict = True
    bias = len(g.spec.ins) == 3
    # The blocked GEMM of the same conv2d, for a call whose input or weights hold an infinity
    # or a NaN: the transforms would turn inf - inf into NaN where the direct sum gives +-inf.
    direct = Gen(g.spec, f"{g.fname}_gemm", g.h, g.loc)
    g.prelude.append(direct.render(gen_conv2d_gemm(direct)))
    g.prelude += [_weight_transform(g, p), _input_transform(g, p), _output_transform(g, p, bias)]
    finite = g.h.use("all_finite")
    mr = g.h.use("sgemm_mr")
    decls = [g.scratch_array(ctype, name, count) for ctype, name, count in p.arrays()]
    row_counts = tile_rows(p.k, p.kb)
    widths = p.widths()
    several_w = len(widths) > 1
    several = len(row_counts) > 1 or several_w  # else one micro-tile shape: no nr
    width = narrow("nn") if several_w else str(widths[0])
    ints = "b, k0, kn, ty0, nrows, ncols, c0, cn, e, p0, c, m0, q"
    ints += (", nr" if several else "") + (", nn" if several_w else "")
    decls.append(f"int64_t {ints};")
    su, sv, sm = p.kb * p.cb, p.vc * p.ldv, p.kb * p.ldm
    hoist = p.cb == p.c  # U of all the channels at once: once per block of output channels
    fallback = f"{direct.fname}({', '.join([*g.x, *g.y, 'scratch'])});"
    if p.tw * p.th < WIDE_MIN_TILES:
        # with 8-lane vectors and FMA the direct GEMM is 3 to 4 times faster, the transforms
        # and the weights' memory traffic barely: there, too few tiles do not pay
        g.raw(f"#if {mr.replace('sgemm_mr', 'sgemm_nv')} == 16")
        g.emit(fallback)
        g.emit("return;")
        g.raw("#endif")
    with g.loop("q", str(p.w)):
        g.emit("zero[q] = 0.0f;")
    voff = "c0 + " if p.v_all else ""

    def products() -> None:
        """Over the blocks of input channels: the weight transform unless hoisted, the input
        transform unless V holds all channels, the 16 GEMMs summing into M."""
        with g.block(f"for (c0 = 0; c0 < {p.c}; c0 += {p.cb})"):
            g.emit(f"cn = {p.c} - c0 < {p.cb} ? {p.c} - c0 : {p.cb};")
            if not hoist:
                g.emit(f"{g.fname}_wt(x1, u, wt, k0, kn, c0, cn);")
            if not p.v_all:
                g.emit(f"{g.fname}_vt(xb, zero, s, v, c0, cn, ty0, nrows);")
            with g.loop("e", "16"):
                with g.block(f"for (p0 = 0; p0 < ncols; p0 += {V})"):
                    if several_w:
                        g.emit(f"nn = ncols - p0 < {V} ? ncols - p0 : {V};")
                    with g.loop("c", "cn"):
                        g.emit(f"rows[c] = v + e * {sv} + ({voff}c) * {p.ldv} + p0;")
                    with g.block(f"for (m0 = 0; m0 < kn; m0 += {mr})"):
                        if several:
                            g.emit(f"nr = kn - m0 < {mr} ? kn - m0 : {mr};")
                        args = (
                            f"cn, u + e * {su} + m0 * {p.cb}, {p.cb}, rows, "
                            f"m + e * {sm} + m0 * {p.ldm} + p0, {p.ldm}, c0 > 0, NULL"
                        )
                        emit_sgemm(g, "nr", row_counts, width, widths, args)
        bias_arg = "x2, " if bias else ""
        g.emit(f"{g.fname}_ot(m, {bias_arg}yb, k0, kn, ty0, nrows);")

    def k_block_head() -> None:
        g.emit(f"kn = {p.k} - k0 < {p.kb} ? {p.k} - k0 : {p.kb};")
        if hoist:
            g.emit(f"{g.fname}_wt(x1, u, wt, k0, kn, 0, {p.c});")

    def row_block_head() -> None:
        g.emit(f"nrows = {p.th} - ty0 < {p.rows} ? {p.th} - ty0 : {p.rows};")
        g.emit(f"ncols = (nrows * {p.tw} + 3) / 4 * 4;")

    with g.loop("b", str(p.n)):
        g.emit(f"const float *xb = x0 + b * {p.c * p.h * p.w};")
        g.emit(f"float *yb = y0 + b * {p.k * p.oh * p.ow};")
        if p.v_all:  # rows of tiles, all channels transformed once, then the output channels
            with g.block(f"for (ty0 = 0; ty0 < {p.th}; ty0 += {p.rows})"):
                row_block_head()
                g.emit(f"{g.fname}_vt(xb, zero, s, v, 0, {p.c}, ty0, nrows);")
                with g.block(f"for (k0 = 0; k0 < {p.k}; k0 += {p.kb})"):
                    k_block_head()
                    products()
        else:  # output channels, then rows of tiles, then input channels
            with g.block(f"for (k0 = 0; k0 < {p.k}; k0 += {p.kb})"):
                k_block_head()
                with g.block(f"for (ty0 = 0; ty0 < {p.th}; ty0 += {p.rows})"):
                    row_block_head()
                    products()
    # An infinity or a NaN in the input or the weights makes some output NaN or infinite (each
    # input and weight reaches an output through coefficients that are not all zero), as does
    # an overflow of the transforms: then the direct sum decides (inf - inf would be NaN
    # where the reference has an infinity).
    with g.block(f"if (!{finite}(y0, {p.n * p.k * p.oh * p.ow}))"):
        g.emit(fallback)
    g.scratch_bytes = max(g.scratch_bytes, direct.scratch_bytes)
    return decls
