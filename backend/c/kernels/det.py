"""det: Gaussian elimination with partial pivoting in double, per matrix, on a copy in the
call's scratch; the same operations in the same order as the numpy kernel (the first
largest pivot, NaN counting as the largest as numpy's argmax has it), so the same bits."""

from __future__ import annotations

from relaxc.ir import dims as D

from .base import Gen, unsupported


def gen_det(g: Gen) -> list[str]:
    x, out = g.spec.ins[0], g.spec.outs[0]
    n_dim = x.shape[-1]
    if not D.is_static(n_dim):
        raise unsupported(g.spec, "the matrix size must be static", loc=g.loc)
    n = int(n_dim)  # type: ignore[arg-type]
    batch = g.numel(out)
    decls = ["int64_t b, i, j, k, p;", "double det, best, v, piv, f;"]
    if n == 0:
        with g.loop("b", batch):
            g.emit(f"y0[b] = {g.store(out.dtype, '1.0')};")
        return decls + ["(void)x0;"]
    decls.append(g.scratch_array("double", "a", n * n))
    with g.loop("b", batch):
        with g.loop("i", str(n * n)):
            g.emit(f"a[i] = (double){g.load(x.dtype, f'x0[b * {n * n} + i]')};")
        g.emit("det = 1.0;")
        with g.loop("k", str(n)):
            g.emit("p = k;")
            g.emit(f"best = fabs(a[k * {n} + k]);")
            with g.loop("i", str(n), "k + 1"):
                g.emit(f"v = fabs(a[i * {n} + k]);")
                g.emit("if (best == best && (v != v || v > best)) { best = v; p = i; }")
            g.emit(f"piv = a[p * {n} + k];")
            with g.block("if (p != k)"):
                with g.loop("j", str(n)):
                    g.emit(
                        f"v = a[k * {n} + j]; a[k * {n} + j] = a[p * {n} + j]; a[p * {n} + j] = v;"
                    )
                g.emit("det = -det;")
            g.emit("det = det * piv;")
            with g.block("if (piv != 0)"):
                with g.loop("i", str(n), "k + 1"):
                    g.emit(f"f = a[i * {n} + k] / piv;")
                    with g.loop("j", str(n), "k + 1"):
                        g.emit(f"a[i * {n} + j] -= f * a[k * {n} + j];")
        g.emit(f"y0[b] = {g.store(out.dtype, '(det)')};")
    return decls
