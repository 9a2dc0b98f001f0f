"""Shape values with symbolic dims through the ops exporters apply to them.

Exporters compute shapes in the graph: ``Shape`` of an input, then ``Gather``, ``Concat``,
arithmetic, ``Max``/``Min``, ``Mod``, ``Equal``/``Less``/... and ``Where`` over the dims
(TorchScript's ``Expand`` writes ``Where(Equal(shape, -1), ones, shape)``). When one of an
op's inputs is a :class:`ShapeValue` with symbolic dims, :func:`fold` carries the op out at
import time on the dims themselves:

* arithmetic gives a :class:`ShapeValue` of dim expressions (``seq * 4``, ``max(seq, 1)``);
* a comparison gives a folded bool array when every element is decided by what is known of
  the dims (each symbolic dim is at least 1 and at most its ``--bound``): ``seq == -1`` is
  false, ``seq >= 1`` true; one that depends on the dim's value (``seq == 4``) is refused;
* ``Where`` with a known condition picks dims element by element.

:func:`prove_le` and :func:`dim_ranges` are the facts the Slice converter uses too.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from relaxc.ir import dims as D

from .builder import ConversionError
from .values import DimArray, Folded, ShapeValue, Value

MIN_DIM = 1
"""What the importer assumes of every symbolic input dim: it is at least this."""


def dim_ranges(bounds: Mapping[str, int], names: set[str]) -> dict[str, tuple[int, int | None]]:
    """Each symbolic dim's range: [1, its bound] (no upper end without a bound)."""
    return {n: (MIN_DIM, bounds.get(n)) for n in names}


def interval(d: D.Dim, bounds: Mapping[str, int]) -> tuple[int, int | None]:
    """The range of ``d`` over every allowed value of its dims."""
    d = D.simplify(d)
    return D.interval(d, dim_ranges(bounds, D.free_vars(d)))


def prove_le(a: D.Dim, b: D.Dim, bounds: Mapping[str, int]) -> bool:
    """True when ``a <= b`` for every allowed value of the dims (False: not provable)."""
    if D.dims_equal(a, b):
        return True
    lo, _ = interval(D.BinOp("-", b, a), bounds)
    if lo >= 0:
        return True
    # floor(x / c) <= x for x >= 0 and c >= 1: enough to prove x <= b
    if isinstance(a, D.BinOp) and a.op == "/" and D.is_static(a.rhs) and int(a.rhs) >= 1:  # type: ignore[arg-type]
        if interval(a.lhs, bounds)[0] >= 0 and prove_le(a.lhs, b, bounds):
            return True
    return _quasi_affine_non_negative(D.simplify(D.BinOp("-", b, a)), bounds)


_PERIOD_LIMIT = 4096


def _quasi_affine_non_negative(d: D.Dim, bounds: Mapping[str, int]) -> bool:
    """``d >= 0`` for every allowed value of its one dim ``n``, when ``d`` is quasi-affine in
    ``n`` (``+``, ``-``, products with a constant, floor ``/`` and ``%`` by positive constants:
    ``n - n / 2``). Such a ``d`` has a period ``P`` with ``d(n + P) = d(n) + c`` for a
    constant ``c``; so ``d >= 0`` on ``[1, 1 + P)`` and ``c >= 0`` prove it for every
    ``n >= 1``. With a bound, every value up to it is checked instead."""
    names = D.free_vars(d)
    if len(names) != 1:
        return False
    (name,) = names
    period = _quasi_period(d)
    if period is None:
        return False
    bound = bounds.get(name)
    value = lambda k: D.evaluate(d, {name: k})  # noqa: E731
    if bound is not None and bound - MIN_DIM < _PERIOD_LIMIT:
        return all(value(k) >= 0 for k in range(MIN_DIM, bound + 1))
    if period > _PERIOD_LIMIT:
        return False
    if any(value(k) < 0 for k in range(MIN_DIM, MIN_DIM + period)):
        return False
    return value(MIN_DIM + period) - value(MIN_DIM) >= 0


def _quasi_period(d: D.Dim) -> int | None:
    """A period of the non-affine part of a quasi-affine ``d`` (the product of its divisors),
    or None when ``d`` is not quasi-affine (min/max, a product of two symbolic terms)."""
    if isinstance(d, (int, D.Sym)):
        return 1
    if isinstance(d, D.DimCall):
        return None
    if d.op in ("+", "-"):
        a, b = _quasi_period(d.lhs), _quasi_period(d.rhs)
        return None if a is None or b is None else a * b
    if d.op == "*":
        if not (D.is_static(d.lhs) or D.is_static(d.rhs)):
            return None
        a, b = _quasi_period(d.lhs), _quasi_period(d.rhs)
        return None if a is None or b is None else a * b
    if not (isinstance(d.rhs, int) and d.rhs > 0):
        return None
    inner = _quasi_period(d.lhs)
    return None if inner is None else inner * d.rhs


def _elements(v: Value) -> tuple[list[D.Dim], tuple[int, ...]] | None:
    """The dims of a shape-like value (a ShapeValue, or a small folded integer array), and
    its numpy shape; None for anything else."""
    if isinstance(v, ShapeValue):
        return list(v.dims), (() if v.scalar else (len(v.dims),))
    if isinstance(v, Folded) and v.array.dtype.kind in "iub" and v.array.ndim <= 1:
        return [int(x) for x in v.array.reshape(-1)], v.array.shape
    return None


def _broadcast(
    parts: Sequence[tuple[list[D.Dim], tuple[int, ...]]],
) -> tuple[list[list[D.Dim]], tuple[int, ...]]:
    shape = np.broadcast_shapes(*(s for _, s in parts))
    n = int(np.prod(shape)) if shape else 1
    out = []
    for dims, _ in parts:
        out.append(dims * n if len(dims) == 1 and n != 1 else dims)
    if any(len(d) != n for d in out):
        raise ConversionError(
            f"shape values of lengths {[len(d) for d, _ in parts]} do not broadcast"
        )
    return out, tuple(shape)


def _sub(a: D.Dim, b: D.Dim) -> D.Dim:
    return D.simplify(D.BinOp("-", a, b))


_ARITH: dict[str, Callable[[D.Dim, D.Dim], D.Dim]] = {
    "add": lambda a, b: D.simplify(D.add(a, b)),
    "subtract": _sub,
    "multiply": lambda a, b: D.simplify(D.mul(a, b)),
    "divide": lambda a, b: D.simplify(D.BinOp("/", a, b)),
    "mod": lambda a, b: D.simplify(D.BinOp("%", a, b)),
    "maximum": lambda a, b: D.simplify(D.DimCall("max", (a, b))),
    "minimum": lambda a, b: D.simplify(D.DimCall("min", (a, b))),
}
_COMPARE = {
    "equal": "==",
    "less": "<",
    "greater": ">",
    "less_equal": "<=",
    "greater_equal": ">=",
}


_MOVES = ("reshape", "transpose", "strided_slice")
"""Data movement that reshapes dims: the result has the same dims in another order."""


def symbolic(v: Value) -> bool:
    """True for a shape value with a symbolic dim (what :func:`fold` works on)."""
    return (isinstance(v, ShapeValue) and not v.static) or isinstance(v, DimArray)


def _move(op: str, v: Value, attrs: Mapping) -> Value | None:
    """``reshape``, ``transpose`` or ``strided_slice`` of dims, as numpy moves them."""
    arr: np.ndarray
    if isinstance(v, ShapeValue):
        arr = np.empty(len(v.dims), dtype=object)
        arr[:] = list(v.dims)
        if v.scalar:
            arr = arr.reshape(())
    elif isinstance(v, DimArray):
        arr = v.array
    else:
        return None
    if op == "reshape":
        out = arr.reshape(tuple(int(d) for d in attrs["newshape"]))
    elif op == "transpose":
        out = arr.transpose(attrs["axes"])
    else:
        index = [slice(None)] * arr.ndim
        strides = attrs.get("strides") or (1,) * len(attrs["begin"])
        axes = attrs.get("axes") or tuple(range(len(attrs["begin"])))
        for a, b, e, st in zip(axes, attrs["begin"], attrs["end"], strides):
            index[a] = slice(b, e, st)
        out = arr[tuple(index)]
    if out.ndim <= 1:
        return ShapeValue(tuple(out.reshape(-1).tolist()), scalar=out.ndim == 0)
    if all(D.is_static(d) for d in out.reshape(-1)):
        return Folded(out.astype(np.int64), "")
    return DimArray(out.copy())


def _arith(op: str, a: D.Dim, b: D.Dim, bounds: Mapping[str, int]) -> D.Dim:
    """``a op b`` on dims; ``max``/``min`` of two dims one provably the larger is that one
    (``max(batch, 1)`` is ``batch``: a symbolic dim is at least 1)."""
    if op in ("maximum", "minimum"):
        if prove_le(b, a, bounds):
            return a if op == "maximum" else b
        if prove_le(a, b, bounds):
            return b if op == "maximum" else a
    return _ARITH[op](a, b)


def _decide(op: str, a: D.Dim, b: D.Dim, bounds: Mapping[str, int]) -> bool | None:
    """``a op b`` for every allowed value of the dims, or None when it depends on them."""
    if D.is_static(a) and D.is_static(b):
        x, y = int(a), int(b)  # type: ignore[arg-type]
        return {"==": x == y, "<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y}[op]
    lo, hi = interval(_sub(a, b), bounds)  # the range of a - b
    if D.dims_equal(a, b):
        lo = hi = 0
    if op == "==":
        if lo == hi == 0:
            return True
        return False if lo > 0 or (hi is not None and hi < 0) else None
    if op in ("<", ">="):
        if hi is not None and hi < 0:
            return op == "<"
        return (op == ">=") if lo >= 0 else None
    if lo > 0:
        return op == ">"
    return (op == "<=") if hi is not None and hi <= 0 else None


def fold(
    op: str, inputs: Sequence[Value], attrs: Mapping, bounds: Mapping[str, int]
) -> Value | None:
    """``op`` on ``inputs`` (one of them a ShapeValue with symbolic dims) carried out on the
    dims; None when ``op`` is not one this module folds (the caller goes on as for any op)."""
    if op in _MOVES:
        return _move(op, inputs[0], attrs)
    if (
        op == "cast"
        and str(attrs.get("dtype")) in ("i32", "i64")
        and isinstance(inputs[0], (ShapeValue, DimArray))
    ):
        return inputs[0]
    if op == "negative" and isinstance(inputs[0], ShapeValue):
        v = inputs[0]
        return ShapeValue(tuple(_sub(0, d) for d in v.dims), v.scalar)
    if op in _ARITH or op in _COMPARE:
        parts = [_elements(v) for v in inputs]
        if any(p is None for p in parts) or len(parts) != 2:
            return None
        (xa, xb), shape = _broadcast(parts)  # type: ignore[arg-type]
        if op in _ARITH:
            dims = tuple(_arith(op, p, q, bounds) for p, q in zip(xa, xb))
            return ShapeValue(dims, scalar=shape == ())
        decided = []
        for p, q in zip(xa, xb):
            r = _decide(_COMPARE[op], p, q, bounds)
            if r is None:
                raise ConversionError(
                    f"it compares the dim {D.dim_to_str(p)} with {D.dim_to_str(q)} "
                    f"({_COMPARE[op]}), which depends on the value of a symbolic dim; give the "
                    "input a static shape (--shape) to fold it"
                )
            decided.append(r)
        return Folded(np.array(decided, dtype=bool).reshape(shape), "")
    if op == "where":
        cond, x, y = inputs
        if not isinstance(cond, Folded):
            return None
        parts = [_elements(v) for v in (cond, x, y)]
        if any(p is None for p in parts):
            return None
        (c, xs, ys), shape = _broadcast(parts)  # type: ignore[arg-type]
        return ShapeValue(tuple(p if bool(k) else q for k, p, q in zip(c, xs, ys)), shape == ())
    return None
