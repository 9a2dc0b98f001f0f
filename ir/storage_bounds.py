"""Every tensor carved out of a storage lies inside it: proved at verification time.

For each ``%t = memory.alloc_tensor(%s, OFFSET, SHAPE, DTYPE)`` whose storage ``%s`` is made
by ``memory.alloc_storage(SIZE, ...)`` in the same function, ``OFFSET + bytes(SHAPE, DTYPE)
<= SIZE`` must hold for every value the dims may take (each symbolic dim in ``[0, bound]``
with its ``upper_bounds`` entry, in ``[0, unbounded)`` without one). A tensor that may reach
past its storage is an error located at the ``alloc_tensor``: a backend that trusted it
would write past the buffer (the C target's static arrays have no guard).

The proof is by cases, each sound: equal expressions; a difference whose interval is
non-negative; a storage size ``a * (y / a)`` (a size rounded up to an alignment, as
ManifestAlloc writes it) with ``end + a - 1 <= y``; a static storage size no smaller than the
tensor's largest extent.
What none of them proves is refused, with the sizes in the message.
"""

from __future__ import annotations

from typing import Any, Mapping

from . import dims as D
from .diagnostics import RxError
from .nodes import Bind, Call, Function, Var
from .sizes import tensor_nbytes
from .types import TensorType
from .vocab import ALLOC_STORAGE, ALLOC_TENSOR, call_of, is_int


def _floor_multiple(d: D.Dim) -> tuple[D.Dim, int] | None:
    """``(y, a)`` when ``d`` is ``a * (y / a)`` (a multiple of ``a`` rounded down from ``y``,
    factors in either order) for a constant ``a > 0``, else None. ``d >= y - (a - 1)``."""
    if not (isinstance(d, D.BinOp) and d.op == "*"):
        return None
    for a, q in ((d.rhs, d.lhs), (d.lhs, d.rhs)):
        if is_int(a) and a > 0 and isinstance(q, D.BinOp) and q.op == "/" and q.rhs == a:
            return q.lhs, a
    return None


def provably_le(lhs: D.Dim, rhs: D.Dim, ranges: Mapping[str, tuple[int, int | None]]) -> bool:
    """True when ``lhs <= rhs`` for every value of the dims within ``ranges``."""
    if D.dims_equal(lhs, rhs):
        return True
    lo, _ = D.interval(D.simplify(D.BinOp("-", rhs, lhs)), ranges)
    if lo >= 0:
        return True
    rounded = _floor_multiple(rhs)  # a size rounded up to an alignment, as ManifestAlloc writes it
    if rounded is not None:
        y, a = rounded
        if provably_le(D.simplify(D.add(lhs, a - 1)), y, ranges):
            return True
    _, hi = D.interval(lhs, ranges)
    rlo, _ = D.interval(rhs, ranges)
    return hi is not None and hi <= rlo


def check_tensors_fit_storage(fn: Function) -> None:
    """RxError at the first ``alloc_tensor`` of ``fn`` that may overrun its storage."""
    ranges = {k: (0, v) for k, v in fn.upper_bounds().items()}
    sizes: dict[str, D.Dim] = {}
    for stmt in fn.body:
        if not isinstance(stmt, Bind):
            continue
        call = call_of(stmt.value, ALLOC_STORAGE, ALLOC_TENSOR)
        if call is None:
            continue
        if call.op == ALLOC_STORAGE:
            size = _arg(call, 0, "size")
            if size is not None:
                sizes[stmt.name] = size
            continue
        storage = call.args[0] if call.args else None
        if not isinstance(storage, Var) or storage.name not in sizes:
            continue
        offset, shape, dtype = (
            _arg(call, 1, "offset"),
            _arg(call, 2, "shape"),
            _arg(call, 3, "dtype"),
        )
        if offset is None or shape is None or dtype is None:
            continue  # the op's own checks report a malformed call
        size = sizes[storage.name]
        end = D.simplify(D.add(offset, tensor_nbytes(TensorType(tuple(shape), dtype.name))))
        if not provably_le(end, size, ranges):
            raise RxError(
                f"memory.alloc_tensor: %{stmt.name} ends at byte {D.dim_to_str(end)}, "
                f"past the end of storage %{storage.name} ({D.dim_to_str(size)} bytes), for some "
                "allowed dim value"
                if not (is_int(end) and is_int(size))
                else f"memory.alloc_tensor: %{stmt.name} at bytes [{D.dim_to_str(offset)}, {end}) "
                f"does not fit in storage %{storage.name} of {size} bytes",
                call.loc or stmt.loc,
            )


_POSITIONS = {"size": 0, "offset": 1, "shape": 2, "dtype": 3}


def _arg(call: Call, pos: int, key: str) -> Any:
    for k, v in call.kwargs:
        if k == key:
            return v
    if pos < len(call.args):
        return call.args[pos]
    return None
