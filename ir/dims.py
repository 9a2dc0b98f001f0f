"""Symbolic dimension expressions: integers, names, ``+ - * / %`` and ``max``/``min``.

A dimension is a plain ``int`` or an immutable expression node. ``/`` is floor division
and ``%`` the matching remainder, both only meaningful for non-negative operands (dims
are never negative). The module offers:

* :func:`normalize` — a canonical polynomial form, so ``n * 10`` and ``10 * n`` compare equal
  and ``(2 * n + 2) / 2`` folds to ``n + 1``; :func:`simplify` turns it back into an
  expression and :func:`dims_equal` decides *provable* equality;
* :func:`evaluate` with concrete values, :func:`free_vars`;
* :func:`upper_bound` by interval arithmetic over per-name ranges (None when unbounded).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Union


@dataclass(frozen=True, slots=True)
class Sym:
    """A symbolic dimension such as ``n``."""

    name: str


@dataclass(frozen=True, slots=True)
class BinOp:
    """``lhs op rhs`` with op one of ``+ - * / %`` (``/`` is floor division)."""

    op: str
    lhs: "Dim"
    rhs: "Dim"


@dataclass(frozen=True, slots=True)
class DimCall:
    """``max(a, b, ...)`` or ``min(a, b, ...)``."""

    func: str
    args: tuple["Dim", ...]


Dim = Union[int, Sym, BinOp, DimCall]

BIN_OPS = ("+", "-", "*", "/", "%")
DIM_FUNCS = ("max", "min")
_NEG_INF = -(1 << 62)
_PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2}


class DimError(ValueError):
    """A dimension expression that cannot be evaluated (unbound name, division by zero)."""


def is_static(d: Dim) -> bool:
    """True when ``d`` is a plain integer."""
    return isinstance(d, int)


def dim_to_str(d: Dim, prec: int = 0) -> str:
    """Print ``d`` in the .rx syntax with the fewest parentheses that keep its meaning."""
    if isinstance(d, int):
        return str(d) if d >= 0 or prec == 0 else f"({d})"
    if isinstance(d, Sym):
        return d.name
    if isinstance(d, DimCall):
        return f"{d.func}(" + ", ".join(dim_to_str(a) for a in d.args) + ")"
    p = _PREC[d.op]
    # Left-associative: the right operand needs parentheses at equal precedence.
    text = f"{dim_to_str(d.lhs, p)} {d.op} {dim_to_str(d.rhs, p + 1)}"
    return f"({text})" if p < prec else text


def free_vars(d: Dim) -> set[str]:
    """Names of the symbolic dims used in ``d``."""
    out: set[str] = set()
    _collect(d, out)
    return out


def _collect(d: Dim, out: set[str]) -> None:
    if isinstance(d, Sym):
        out.add(d.name)
    elif isinstance(d, BinOp):
        _collect(d.lhs, out)
        _collect(d.rhs, out)
    elif isinstance(d, DimCall):
        for a in d.args:
            _collect(a, out)


def evaluate(d: Dim, env: Mapping[str, int]) -> int:
    """Evaluate ``d`` with the symbolic names bound by ``env``."""
    if isinstance(d, int):
        return d
    if isinstance(d, Sym):
        try:
            return env[d.name]
        except KeyError:
            raise DimError(f"symbolic dim '{d.name}' has no value") from None
    if isinstance(d, DimCall):
        vals = [evaluate(a, env) for a in d.args]
        return max(vals) if d.func == "max" else min(vals)
    a = evaluate(d.lhs, env)
    b = evaluate(d.rhs, env)
    return _apply(d.op, a, b)


def _apply(op: str, a: int, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        raise DimError("division by zero in a dimension expression")
    if op == "/":
        return a // b
    return a % b


# ---------------------------------------------------------------------------------------
# Canonical polynomial form.  A polynomial maps a monomial (a sorted tuple of atoms, each
# atom a name or an opaque normalized sub-expression rendered as a string key) to its
# integer coefficient.  Opaque atoms keep their expression so the form can be rebuilt.

Monomial = tuple[str, ...]
Poly = dict[Monomial, int]


@dataclass(frozen=True, slots=True)
class Normal:
    """The canonical form of a dim: a polynomial plus the expressions of its opaque atoms."""

    terms: tuple[tuple[Monomial, int], ...]
    atoms: tuple[tuple[str, Dim], ...]

    def as_int(self) -> int | None:
        if not self.terms:
            return 0
        if len(self.terms) == 1 and self.terms[0][0] == ():
            return self.terms[0][1]
        return None


def _poly_add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for m, c in b.items():
        v = out.get(m, 0) + sign * c
        if v:
            out[m] = v
        else:
            out.pop(m, None)
    return out


MAX_TERMS = 4096
"""A product whose expansion would exceed this many terms is kept unexpanded (an atom)."""


class _TooBig(Exception):
    pass


def _poly_mul(a: Poly, b: Poly) -> Poly:
    if len(a) * len(b) > MAX_TERMS:
        raise _TooBig
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = tuple(sorted(ma + mb))
            v = out.get(m, 0) + ca * cb
            if v:
                out[m] = v
            else:
                out.pop(m, None)
    return out


def _const(p: Poly) -> int | None:
    if not p:
        return 0
    if len(p) == 1 and () in p:
        return p[()]
    return None


def _to_poly(d: Dim, atoms: dict[str, Dim]) -> Poly:
    if isinstance(d, int):
        return {(): d} if d else {}
    if isinstance(d, Sym):
        return {(d.name,): 1}
    if isinstance(d, DimCall):
        args = [_to_poly(a, atoms) for a in d.args]
        consts = [_const(a) for a in args]
        if all(c is not None for c in consts):
            val = max(consts) if d.func == "max" else min(consts)  # type: ignore[type-var]
            return {(): val} if val else {}
        rebuilt = DimCall(d.func, tuple(_from_poly(a, atoms) for a in args))
        return _atom(rebuilt, atoms)
    lhs = _to_poly(d.lhs, atoms)
    rhs = _to_poly(d.rhs, atoms)
    if d.op == "+":
        return _poly_add(lhs, rhs)
    if d.op == "-":
        return _poly_add(lhs, rhs, -1)
    if d.op == "*":
        try:
            return _poly_mul(lhs, rhs)
        except _TooBig:
            return _atom(BinOp("*", _from_poly(lhs, atoms), _from_poly(rhs, atoms)), atoms)
    cr = _const(rhs)
    cl = _const(lhs)
    if cr is not None and cl is not None and cr != 0:
        v = _apply(d.op, cl, cr)
        return {(): v} if v else {}
    if cr is not None and cr > 0:
        if d.op == "/" and cr == 1:
            return lhs
        # (cr * m + r) / cr == m + r // cr and (cr * m + r) % cr == r % cr for integer m.
        if all(c % cr == 0 for mono, c in lhs.items() if mono != ()):
            r = lhs.get((), 0)
            if d.op == "/":
                out = {m: c // cr for m, c in lhs.items() if m != ()}
                if r // cr:
                    out[()] = r // cr
                return out
            return {(): r % cr} if r % cr else {}
    return _atom(BinOp(d.op, _from_poly(lhs, atoms), _from_poly(rhs, atoms)), atoms)


def _atom(expr: Dim, atoms: dict[str, Dim]) -> Poly:
    key = "#" + dim_to_str(expr)
    atoms[key] = expr
    return {(key,): 1}


def _term_expr(coef: int, m: Monomial, atoms: Mapping[str, Dim]) -> Dim:
    """``coef * a * b * ...`` built left-associatively, so it prints without parentheses."""
    expr: Dim | None = coef if coef != 1 else None
    for name in m:
        part = atoms[name] if name.startswith("#") else Sym(name)
        expr = part if expr is None else BinOp("*", expr, part)
    return coef if expr is None else expr


def _from_poly(p: Poly, atoms: Mapping[str, Dim]) -> Dim:
    if not p:
        return 0
    # Highest degree first, then by name, constant last: "2 * n * m + n + 1".
    order = sorted(p.items(), key=lambda kv: (-len(kv[0]), kv[0]))
    expr: Dim | None = None
    for m, c in order:
        term = abs(c) if m == () else _term_expr(abs(c), m, atoms)
        if expr is None:
            expr = term if c > 0 else (BinOp("-", 0, term) if m else c)
        else:
            expr = BinOp("+" if c > 0 else "-", expr, term)
    assert expr is not None
    return expr


def normalize(d: Dim) -> Normal:
    """The canonical form of ``d``; two dims with equal forms are provably equal."""
    atoms: dict[str, Dim] = {}
    poly = _to_poly(d, atoms)
    used = {name for m in poly for name in m if name.startswith("#")}
    return Normal(
        tuple(sorted(poly.items())),
        tuple(sorted((k, v) for k, v in atoms.items() if k in used)),
    )


def simplify(d: Dim) -> Dim:
    """Fold constants and collect like terms; integers come back as ``int``."""
    if isinstance(d, (int, Sym)):
        return d
    atoms: dict[str, Dim] = {}
    return _from_poly(_to_poly(d, atoms), atoms)


def dims_equal(a: Dim, b: Dim) -> bool:
    """True when ``a`` and ``b`` are provably equal for every value of their names."""
    if a == b:
        return True
    if isinstance(a, int) and isinstance(b, int):
        return False
    return normalize(a).terms == normalize(b).terms


def product(dims: Iterable[Dim]) -> Dim:
    """The simplified product of ``dims`` (1 for none)."""
    expr: Dim = 1
    for d in dims:
        if isinstance(expr, int) and isinstance(d, int):
            expr = expr * d
        else:
            expr = BinOp("*", expr, d)
    return simplify(expr)


def add(a: Dim, b: Dim) -> Dim:
    """Simplified ``a + b``."""
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return simplify(BinOp("+", a, b))


def mul(a: Dim, b: Dim) -> Dim:
    """Simplified ``a * b``."""
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    return simplify(BinOp("*", a, b))


def substitute(d: Dim, env: Mapping[str, Dim]) -> Dim:
    """Replace names bound in ``env`` by their dims (unbound names stay)."""
    if isinstance(d, int):
        return d
    if isinstance(d, Sym):
        return env.get(d.name, d)
    if isinstance(d, DimCall):
        return DimCall(d.func, tuple(substitute(a, env) for a in d.args))
    return BinOp(d.op, substitute(d.lhs, env), substitute(d.rhs, env))


def interval(d: Dim, ranges: Mapping[str, tuple[int, int | None]]) -> tuple[int, int | None]:
    """Interval ``[lo, hi]`` of ``d`` given a range per name (``hi`` None means unbounded).

    Names missing from ``ranges`` are taken as ``[0, unbounded)``.
    """
    if isinstance(d, int):
        return d, d
    if isinstance(d, Sym):
        return ranges.get(d.name, (0, None))
    if isinstance(d, DimCall):
        ivs = [interval(a, ranges) for a in d.args]
        los = [lo for lo, _ in ivs]
        his = [hi for _, hi in ivs]
        if d.func == "max":
            return max(los), (None if any(h is None for h in his) else max(his))  # type: ignore[type-var]
        finite = [h for h in his if h is not None]
        return min(los), (min(finite) if finite else None)
    (alo, ahi), (blo, bhi) = interval(d.lhs, ranges), interval(d.rhs, ranges)
    if d.op == "+":
        return alo + blo, (None if ahi is None or bhi is None else ahi + bhi)
    if d.op == "-":
        lo = alo - bhi if bhi is not None else _NEG_INF
        return lo, (None if ahi is None else ahi - blo)
    if d.op == "*":
        if alo >= 0 and blo >= 0:
            hi = None if ahi is None or bhi is None else ahi * bhi
            if hi is None and ((ahi == 0) or (bhi == 0)):
                hi = 0
            return alo * blo, hi
        if ahi is None or bhi is None:
            # An unbounded factor times one that may be negative has no lower bound either
            # (n * -1 for n in [0, inf) is (-inf, 0]); the ends are products of the ends.
            inf = float("inf")
            ends = [
                0.0 if 0 in (x, y) else x * y
                for x in (alo, inf if ahi is None else ahi)
                for y in (blo, inf if bhi is None else bhi)
            ]
            lo_f, hi_f = min(ends), max(ends)
            lo = _NEG_INF if lo_f == -inf else max(int(lo_f), _NEG_INF)
            return lo, (None if hi_f == inf else int(hi_f))
        cands = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
        return min(cands), max(cands)
    if d.op == "/":
        if blo > 0:
            # Floor division by a positive divisor grows with the dividend; a non-negative
            # dividend is largest over the smallest divisor, a negative one over the largest
            # (the dividend may be negative, as in a window's (n - k) / s + 1 when n < k).
            if alo >= 0:
                lo = alo // bhi if bhi is not None else 0
            else:
                lo = max(alo // blo, _NEG_INF)
            if ahi is None:
                hi = None
            elif ahi >= 0:
                hi = ahi // blo
            else:
                hi = ahi // bhi if bhi is not None else -1
            return lo, hi
        return 0, None
    # "%": floor modulo by a positive divisor lies in [0, divisor - 1] (for any dividend),
    # and never above a non-negative dividend.
    if blo > 0:
        hi = None if bhi is None else bhi - 1
        if ahi is not None and alo >= 0:
            hi = ahi if hi is None else min(hi, ahi)
        return 0, hi
    return 0, None


def upper_bound(d: Dim, bounds: Mapping[str, int]) -> int | None:
    """The largest value ``d`` can take when each name ``k`` lies in ``[0, bounds[k]]``.

    Returns None when ``d`` depends on a name without a bound (the allocation is dynamic).
    """
    ranges = {k: (0, v) for k, v in bounds.items()}
    return interval(d, ranges)[1]


def affine_in(d: Dim) -> tuple[str, int, int] | None:
    """``(n, a, b)`` when ``d`` is ``a * n + b`` for one symbolic dim ``n`` and integers
    ``a != 0`` and ``b`` (a dim whose value gives ``n`` back), else None."""
    names = free_vars(d)
    if len(names) != 1 or isinstance(d, Sym):
        return None
    (n,) = names
    try:
        b = evaluate(d, {n: 0})
        a = evaluate(d, {n: 1}) - b
        if a == 0 or any(evaluate(d, {n: k}) != a * k + b for k in (2, 3, 7, 1000)):
            return None
    except (ZeroDivisionError, ValueError, OverflowError):
        return None
    if not dims_equal(d, simplify(BinOp("+", BinOp("*", a, Sym(n)), b))):
        return None
    return n, a, b


def solve_affine(d: Dim, value: Dim) -> tuple[str, Dim] | None:
    """``(n, v)`` such that ``d`` is ``value`` when ``n`` is ``v``, for ``d = a * n + b``
    (see :func:`affine_in`); the caller checks that ``v`` is exact (substituted back, ``d``
    must equal ``value``). None when ``d`` is not affine in one dim."""
    aff = affine_in(d)
    if aff is None:
        return None
    n, a, b = aff
    if isinstance(value, int):
        return n, (value - b) // a
    return n, simplify(BinOp("/", BinOp("-", value, b), a))
