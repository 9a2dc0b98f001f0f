"""Einsum as ops relaxc has: per operand, diagonals (a transpose, a reshape and a strided
slice of step n + 1) and sums of the letters no one else needs; then operands are combined
pairwise, left to right, as one batched matmul ``(B, L, K) @ (B, K, R)`` (or a multiply when
nothing is contracted, nor only on one side), between transposes and reshapes; finally a
transpose into the output's order.

That covers batched matmuls, transposes, sums, inner, outer and Hadamard products,
diagonals and traces, with ``...`` for leading dims. Refused with a sentence: dims that
differ for one letter (broadcasting inside an equation) and diagonals of symbolic dims.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from relaxc.ir import dims as D

from .context import NodeContext, shape_of
from .values import Value

_SPARE = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
"""Letters for the dims of ``...`` (ONNX letters are lowercase or uppercase: the ones an
equation uses are skipped)."""


@dataclass
class Term:
    """An operand: its value and one letter per axis."""

    value: Value
    letters: str


def parse(ctx: NodeContext, equation: str, ranks: Sequence[int]) -> tuple[list[str], str]:
    """Each input's letters and the output's, with ``...`` spelled out as spare letters."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    specs = lhs.split(",")
    if len(specs) != len(ranks):
        raise ctx.fail(
            f"equation '{equation}' names {len(specs)} operands, the node has {len(ranks)}"
        )
    used = set(c for c in eq if c.isalpha())
    spare = [c for c in _SPARE + _SPARE.lower() if c not in used]
    ell_rank = 0
    for s, r in zip(specs, ranks):
        if "..." in s:
            ell_rank = max(ell_rank, r - len(s.replace("...", "")))
    ell = "".join(spare[:ell_rank])
    out_specs = []
    for s, r in zip(specs, ranks):
        if not all(c.isalpha() for c in s.replace("...", "")):
            raise ctx.fail(f"equation '{equation}' has a character that is not a letter")
        if "..." in s:
            k = r - len(s.replace("...", ""))
            s = s.replace("...", ell[ell_rank - k :] if k else "")
        if len(s) != r:
            raise ctx.fail(f"operand '{s}' of equation '{equation}' does not match its rank {r}")
        out_specs.append(s)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        counts = {c: sum(s.count(c) for s in out_specs) for c in set("".join(out_specs))}
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    if len(set(out)) != len(out) or any(c not in "".join(out_specs) for c in out):
        raise ctx.fail(f"the output '{rhs}' of equation '{equation}' repeats or invents a letter")
    return out_specs, out


class Einsum:
    """The decomposition of one Einsum node."""

    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx
        self.dims: dict[str, D.Dim] = {}

    def note_dims(self, t: Term) -> None:
        for c, d in zip(t.letters, shape_of(t.value)):
            seen = self.dims.setdefault(c, d)
            if not D.dims_equal(seen, d):
                raise self.ctx.fail(
                    f"letter '{c}' stands for dims {D.dim_to_str(seen)} and {D.dim_to_str(d)}; "
                    "broadcasting inside an Einsum is not supported"
                )

    # -- steps ----------------------------------------------------------------------------
    def transpose(self, t: Term, order: str) -> Term:
        if order == t.letters:
            return t
        perm = tuple(t.letters.index(c) for c in order)
        return Term(self.ctx.emit("transpose", [t.value], {"axes": perm}), order)

    def reshape(self, v: Value, shape: Sequence[D.Dim]) -> Value:
        if tuple(shape_of(v)) == tuple(shape):
            return v
        return self.ctx.emit("reshape", [v], {"newshape": tuple(shape)})

    def diagonal(self, t: Term) -> Term:
        """``t`` with each repeated letter's axes reduced to their diagonal."""
        while True:
            rep = next((c for c in t.letters if t.letters.count(c) > 1), None)
            if rep is None:
                return t
            n = self.dims[rep]
            if not D.is_static(n):
                raise self.ctx.fail(f"the diagonal of letter '{rep}' needs a static dim")
            i = t.letters.index(rep)
            j = t.letters.index(rep, i + 1)
            rest = [k for k in range(len(t.letters)) if k not in (i, j)]
            order = "".join(t.letters[k] for k in rest) + rep + rep
            perm = tuple(rest) + (i, j)
            v = t.value
            if perm != tuple(range(len(perm))):
                v = self.ctx.emit("transpose", [v], {"axes": perm})
            keep = [self.dims[c] for c in order[:-2]]
            nn = int(n)  # type: ignore[arg-type]
            v = self.reshape(v, [*keep, nn * nn])
            v = self.ctx.emit(
                "strided_slice",
                [v],
                {"begin": (0,), "end": (nn * nn,), "strides": (nn + 1,), "axes": (len(keep),)},
            )
            t = Term(v, order[:-1])

    def sum_out(self, t: Term, needed: set[str]) -> Term:
        drop = tuple(i for i, c in enumerate(t.letters) if c not in needed)
        if not drop:
            return t
        v = self.ctx.emit("sum", [t.value], {"axes": drop})
        return Term(v, "".join(c for c in t.letters if c in needed))

    def combine(self, a: Term, b: Term, needed: set[str]) -> Term:
        """``a`` and ``b`` contracted over their shared letters that are not ``needed``."""
        la, lb = a.letters, b.letters
        batch = [c for c in la if c in lb and c in needed]
        contract = [c for c in la if c in lb and c not in needed]
        left = [c for c in la if c not in lb]
        right = [c for c in lb if c not in la]
        dims = self.dims
        if not contract and not left and not right:
            order = "".join(batch)
            va, vb = self.transpose(a, order).value, self.transpose(b, order).value
            return Term(self.ctx.emit("multiply", [va, vb]), order)
        a2 = self.transpose(a, "".join(batch + left + contract))
        b2 = self.transpose(b, "".join(batch + contract + right))
        bsz = D.product(dims[c] for c in batch)
        lsz = D.product(dims[c] for c in left)
        ksz = D.product(dims[c] for c in contract)
        rsz = D.product(dims[c] for c in right)
        va = self.reshape(a2.value, [bsz, lsz, ksz])
        vb = self.reshape(b2.value, [bsz, ksz, rsz])
        prod = self.ctx.emit("matmul", [va, vb])
        letters = "".join(batch + left + right)
        return Term(self.reshape(prod, [dims[c] for c in letters]), letters)


def convert_einsum(ctx: NodeContext) -> list:
    equation = ctx.attr("equation")
    if not isinstance(equation, str):
        raise ctx.fail("needs the equation attribute")
    operands = [v for v in ctx.inputs if v is not None]
    if not operands:
        raise ctx.fail("needs at least one operand")
    specs, out = parse(ctx, equation, [len(shape_of(v)) for v in operands])
    if len({v.type.dtype for v in operands}) != 1:
        raise ctx.fail("its operands have different dtypes")
    e = Einsum(ctx)
    terms = [Term(v, s) for v, s in zip(operands, specs)]
    for t in terms:
        e.note_dims(t)

    def needed_after(k: int) -> set[str]:
        """Letters the output or the operands after ``k`` use."""
        return set(out).union(*[set(t.letters) for t in terms[k + 1 :]])

    acc = e.sum_out(
        e.diagonal(terms[0]),
        needed_after(0) | set(terms[1].letters) if len(terms) > 1 else set(out),
    )
    for k in range(1, len(terms)):
        nxt = e.diagonal(terms[k])
        nxt = e.sum_out(nxt, needed_after(k) | set(acc.letters))
        acc = e.combine(acc, nxt, needed_after(k))
        acc = e.sum_out(acc, needed_after(k))
    result = e.transpose(acc, out)
    return [result.value]
