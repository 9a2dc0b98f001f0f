"""linear_attention in C: one key/value head at a time, its state in a scratch of Dk x Dv
doubles, stepped through the sequence as the numpy kernel steps (float64 throughout)."""

from __future__ import annotations

from relaxc.ir.ops.linear_attention import delta, gated

from .. import dtypes as T_
from .base import Gen, unsupported


def gen_linear_attention(g: Gen) -> list[str]:
    """For each batch and key/value head: the state loaded (as double), then for each step
    the decay, the delta rule's correction ``u = beta * (v - S^T k)`` (in a scratch of Dv
    doubles), the update ``S += k u^T`` and each query head of the group's output row
    ``scale * q^T S``; the state stored last."""
    s = g.spec
    q, k, v, state = s.ins[:4]
    rule = s.attr["rule"]
    B, Hq, T, Dk = g.shape(q)
    Hkv, Dv = g.shape(k)[1], g.shape(v)[3]
    dk, dv = q.shape[3], v.shape[3]
    if not isinstance(dk, int) or not isinstance(dv, int):
        raise unsupported(s, "the key and value head sizes must be static (the state's scratch)")
    g.restrict = True
    decls = [
        "int64_t b, hk, h, t, d, m;",
        "double acc, f;",
        g.scratch_array("double", "st", max(dk * dv, 1)),
        g.scratch_array("double", "u", max(dv, 1)),
    ]
    rep = f"({Hq} / {Hkv})"
    ld = lambda t_, e: f"(double){g.load(t_.dtype, e)}"  # noqa: E731
    x_decay = "x4" if gated(rule) else None
    x_beta = ("x5" if gated(rule) else "x4") if delta(rule) else None
    scale = T_.float_literal(float(s.attr["scale"]), "f64")
    srow = f"((b * {Hkv} + hk) * {Dk})"
    with g.loop("b", B):
        with g.loop("hk", Hkv):
            with g.loop("d", Dk):
                with g.loop("m", Dv):
                    idx = f"({srow} + d) * {Dv} + m"
                    g.emit(f"st[d * {Dv} + m] = {ld(state, f'x3[{idx}]')};")
            with g.loop("t", T):
                kv_row = f"((b * {Hkv} + hk) * {T} + t)"
                if x_decay is not None:
                    decay = s.ins[4]
                    wide = not (isinstance(decay.shape[3], int) and decay.shape[3] == 1)
                    at = f"{kv_row} * {Dk} + d" if wide else kv_row
                    with g.loop("d", Dk):
                        g.emit(f"f = exp({ld(decay, f'{x_decay}[{at}]')});")
                        with g.loop("m", Dv):
                            g.emit(f"st[d * {Dv} + m] *= f;")
                with g.loop("m", Dv):
                    g.emit(f"u[m] = {ld(v, f'x2[{kv_row} * {Dv} + m]')};")
                if x_beta is not None:
                    beta = s.ins[5 if gated(rule) else 4]
                    per_head = not (isinstance(beta.shape[1], int) and beta.shape[1] == 1)
                    at = kv_row if per_head else f"(b * {T} + t)"
                    g.emit(f"f = {ld(beta, f'{x_beta}[{at}]')};")
                    with g.loop("m", Dv):
                        g.emit("acc = 0;")
                        with g.loop("d", Dk):
                            kd = ld(k, f"x1[{kv_row} * {Dk} + d]")
                            g.emit(f"acc += st[d * {Dv} + m] * {kd};")
                        g.emit("u[m] = f * (u[m] - acc);")
                with g.loop("d", Dk):
                    g.emit(f"f = {ld(k, f'x1[{kv_row} * {Dk} + d]')};")
                    with g.loop("m", Dv):
                        g.emit(f"st[d * {Dv} + m] += f * u[m];")
                with g.loop("h", f"(hk + 1) * {rep}", start=f"hk * {rep}"):  # the group
                    qrow = f"((b * {Hq} + h) * {T} + t)"
                    with g.loop("m", Dv):
                        g.emit("acc = 0;")
                        with g.loop("d", Dk):
                            qd = ld(q, f"x0[{qrow} * {Dk} + d]")
                            g.emit(f"acc += {qd} * st[d * {Dv} + m];")
                        g.emit(
                            f"y0[{qrow} * {Dv} + m] = {g.store(s.outs[0].dtype, f'{scale} * acc')};"
                        )
            with g.loop("d", Dk):
                with g.loop("m", Dv):
                    idx = f"({srow} + d) * {Dv} + m"
                    g.emit(f"y1[{idx}] = {g.store(s.outs[1].dtype, f'st[d * {Dv} + m]')};")
    return decls
