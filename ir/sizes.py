"""The bytes of a tensor and rounding up to an alignment: the one definition of each.

A tensor of type ``Tensor[(d0, d1, ...), dtype]`` holds ``d0 * d1 * ... * bytes(dtype)``
bytes (bool counts one byte; a rank-0 tensor holds one element). With symbolic dims that is
a dim expression; :func:`tensor_nbytes_bound` is its largest value when every dim lies in
``[0, bound]``. Rounding up is to a multiple of the alignment, for an int and for a dim
expression (``align * ((n + align - 1) / align)``, which :mod:`relaxc.ir.storage_bounds`
recognises); 0 stays 0, and an alignment of 1 (or less) leaves the size as it is.
"""

from __future__ import annotations

from typing import Mapping

from . import dims as D
from .dims import Dim
from .types import TensorType, Type, dtype_nbytes, tensor_leaves


def tensor_nbytes(t: TensorType) -> Dim:
    """Bytes of a tensor of type ``t``, as a simplified dim expression (an int when the shape
    is static)."""
    return D.mul(D.product(t.shape), dtype_nbytes(t.dtype))


def value_nbytes(t: Type) -> Dim:
    """Bytes of every tensor in a value of type ``t`` (each field of a tuple, nested tuples
    included; objects and storages hold none), as a dim expression."""
    total: Dim = 0
    for leaf in tensor_leaves(t):
        total = D.add(total, tensor_nbytes(leaf))
    return total


def tensor_nbytes_bound(t: TensorType, bounds: Mapping[str, int]) -> int | None:
    """The most bytes a tensor of type ``t`` holds when each dim name ``k`` lies in
    ``[0, bounds[k]]``; None when its size depends on a name without a bound."""
    n = tensor_nbytes(t)
    return n if isinstance(n, int) else D.upper_bound(n, bounds)


def round_up(n: int, align: int) -> int:
    """``n`` rounded up to a multiple of ``align`` (``n`` itself when ``align`` <= 1)."""
    return n if align <= 1 else -(-n // align) * align


def round_up_dim(n: Dim, align: int) -> Dim:
    """The dim ``n`` rounded up to a multiple of ``align``: an int for an int, else the
    simplified ``(n + align - 1) / align * align`` (``n`` itself when ``align`` <= 1)."""
    if isinstance(n, int):
        return round_up(n, align)
    if align <= 1:
        return n
    return D.simplify(D.BinOp("*", D.BinOp("/", D.BinOp("+", n, align - 1), align), align))
