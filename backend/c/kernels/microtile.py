"""The f32 GEMM micro-tiles the blocked kernels (:mod:`.blocked`) and Winograd (:mod:`.winograd`)
share, and the way both register their C helpers.

``{p}_sgemm_<r>x<w>`` computes ``r`` rows (up to 6) of ``w`` columns (16, or 8 or 4 for a
last, narrower block) of ``C = A B`` over ``kc`` rows of ``B`` given as pointers (each to ``w``
floats), ``A``'s rows ``lda`` apart. The 6 x 16 accumulators are scalar locals the compiler
keeps in 12 vector registers with AVX (or AArch64); with SSE's 4 lanes the 16 columns are
done as two halves of 8 (``{p}_sgemm_nv``), 12 registers each. The multiply-add is ``fmaf``
where the target has a fast one (``FP_FAST_FMAF``, C99's own macro: -march with FMA) and
``a * b + c`` elsewhere.
"""

from __future__ import annotations

from contextlib import nullcontext

from relaxc.ir import dims as D

from ..helpers import HELPERS
from .base import Gen
from .lines import CLines

V = 16
"""Columns of a micro-tile (output positions of a conv2d, columns of a matmul)."""

MR_MAX = 6
"""Rows of a micro-tile (``{p}_sgemm_mr``)."""


def c_text(text: str) -> str:
    """C text with ``PFX`` for the model's prefix, as the :data:`HELPERS` format wants it."""
    return text.replace("{", "{{").replace("}", "}}").replace("PFX", "{p}")


def register_helper(name: str, deps: tuple[str, ...], text: str) -> None:
    HELPERS[name] = (deps, c_text(text))


register_helper(
    "sgemm_mr",
    (),
    """\
/* An f32 GEMM micro-tile is 6 rows of 16 columns. Its 96 accumulators fit 12 of AVX's 16
 * vector registers (or 24 of AArch64's 32) at once; with SSE's 16 registers of 4 lanes the
 * tile is computed as two halves of 8 columns, 12 registers each. */
#define PFX_sgemm_mr 6
#if defined(__AVX__) || defined(__aarch64__)
#define PFX_sgemm_nv 16
#else
#define PFX_sgemm_nv 8
#endif""",
)

register_helper(
    "fmadd",
    (),
    """\
/* a * b + c for floats: fused (one rounding) where the target has a fast fmaf (C99's
 * FP_FAST_FMAF), else a multiply and an add. */
#if defined(FP_FAST_FMAF)
#define PFX_fmadd(a, b, c) fmaf((a), (b), (c))
#else
#define PFX_fmadd(a, b, c) ((a) * (b) + (c))
#endif""",
)


WIDTHS = (16, 8, 4)
"""Columns a micro-tile computes: 16, or 8 or 4 for a last block of fewer positions."""


def narrow(n: str) -> str:
    """The micro-tile width (C expression) for a block of ``n`` columns."""
    return f"({n} <= 4 ? 4 : ({n} <= 8 ? 8 : 16))"


def _microkernel(c: CLines, rows: int, width: int, step: int) -> None:
    """The micro-tile of ``rows`` rows of ``width`` columns, ``step`` columns at a time (a
    16-column tile is two halves of 8 with SSE). The loop only multiplies and adds into
    locals that start at zero, so that GCC's SLP vectorizer turns them into vector registers
    even at -O2 and its register allocator keeps them there; the previous chunks' sum and the
    bias are added after the loop (kept out of it, and out of any local array: either costs
    spills)."""
    s = [[f"s{r}_{v}" for v in range(step)] for r in range(rows)]
    halves = step != width
    quads = range(0, step, 4)
    c.emit(
        f"static void PFX_sgemm_{rows}x{width}(int64_t kc, const float *restrict a, int64_t lda,"
    )
    c.emit("    const float *const *restrict b, float *restrict c, int64_t ldc, int acc,")
    c.emit("    const float *restrict bias)")
    with c.opened("{"):
        c.emit("int64_t k, h;" if halves else "int64_t k;")
        if rows == 1:
            c.emit("(void)lda;")
            c.emit("(void)ldc;")
        with c.block(f"for (h = 0; h < {width}; h += {step})") if halves else nullcontext():
            for r in range(rows):
                c.emit(f"float {', '.join(s[r])};")
            for r in range(rows):
                c.emit(" = ".join(s[r]) + " = 0.0f;")
            with c.block("for (k = 0; k < kc; ++k)"):
                c.emit(f"const float *restrict bk = b[k]{' + h' if halves else ''};")
                for v0 in quads:
                    c.emit(
                        f"const float {', '.join(f'x{v} = bk[{v}]' for v in range(v0, v0 + 4))};"
                    )
                for r in range(rows):
                    with c.opened(f"{{ const float w = {f'a[{r} * lda + k]' if r else 'a[k]'};", 2):
                        for v in range(step):
                            c.emit(f"{s[r][v]} = PFX_fmadd(w, x{v}, {s[r][v]});")
            for r in range(rows):
                row = (f"c + {r} * ldc" if r else "c") + (" + h" if halves else "")
                with c.opened(f"{{ float *restrict cr = {row};", 2):
                    with c.opened("if (acc) {", 2):
                        for v0 in quads:
                            c.emit(" ".join(f"{s[r][v]} += cr[{v}];" for v in range(v0, v0 + 4)))
                    with c.opened(f"if (bias != NULL) {{ const float t = bias[{r}];", 2):
                        for v0 in quads:
                            c.emit(" ".join(f"{s[r][v]} += t;" for v in range(v0, v0 + 4)))
                    for v0 in quads:
                        c.emit(" ".join(f"cr[{v}] = {s[r][v]};" for v in range(v0, v0 + 4)))


def _tile(rows: int, width: int) -> str:
    """The micro-tile ``rows`` x ``width``: C[r][v] = (sum over k < kc of A[r * lda + k] *
    B[k][v]) (+ C[r][v] if acc) (+ bias[r]), rows of C ldc apart, B[k] pointing to width
    floats; each C[r][v] sums its kc terms in order, in a float held in a register."""
    c = CLines()
    c.raw("#if PFX_sgemm_nv == 16")
    _microkernel(c, rows, width, min(width, 16))
    c.raw("#else")
    _microkernel(c, rows, width, min(width, 8))
    c.raw("#endif")
    return c.text()


for _w in WIDTHS:
    for _r in range(1, MR_MAX + 1):
        register_helper(f"sgemm_{_r}x{_w}", ("sgemm_mr", "fmadd"), _tile(_r, _w))


def tile_rows(m: int | None, block: int | None = None) -> tuple[int, ...]:
    """The row counts of the micro-tiles that cover ``m`` rows (in blocks of ``block`` rows,
    when given): tiles of 6 and each block's remainder; every count when ``m`` is symbolic."""
    if m is None:
        return tuple(range(1, MR_MAX + 1))
    if m == 0:  # no tile runs; one call keeps the kernel's locals used (-Werror)
        return (1,)
    blocks = [m] if block is None else [block] * (m // block) + ([m % block] if m % block else [])
    found = {MR_MAX for b in blocks if b >= MR_MAX} | {b % MR_MAX for b in blocks if b % MR_MAX}
    return tuple(sorted(found))


def tail_widths(n: int | None) -> tuple[int, ...]:
    """The widths of the tiles a last block of fewer than 16 columns of ``n`` can take (none
    when ``n`` is a multiple of 16; every width when it is symbolic)."""
    if n is None:
        return WIDTHS
    t = n % V
    return () if t == 0 else ((4 if t <= 4 else 8 if t <= 8 else 16),)


def emit_sgemm(
    g: Gen, rows: str, row_counts: tuple[int, ...], width: str, widths: tuple[int, ...], args: str
) -> None:
    """A call of the micro-tile for ``rows`` x ``width`` (C expressions) with ``args`` (kc, a,
    lda, b, c, ldc, acc, bias): a switch over the tiles the shapes can reach, so that only
    those are emitted (a model's file holds the tiles its kernels call, not all 18)."""
    cases = [(r, w) for w in widths for r in row_counts]
    if not cases:
        return
    if len(cases) == 1:
        r, w = cases[0]
        g.emit(f"{g.h.use(f'sgemm_{r}x{w}')}({args});")
        return
    key = f"{width} * 8 + {rows}" if len(widths) > 1 else rows
    with g.block(f"switch ({key})"):
        for r, w in cases:
            label = w * 8 + r if len(widths) > 1 else r
            g.emit(f"case {label}: {g.h.use(f'sgemm_{r}x{w}')}({args}); break;")
        g.emit("default: break;")


def static_dim(d: D.Dim) -> int | None:
    """``d`` when it is a number, None when it is symbolic."""
    return d if isinstance(d, int) else None
