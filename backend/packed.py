"""Implementations of the runtime functions ``call_packed("name", ...)`` can reach.

Each takes a :class:`PackedContext` and the evaluated arguments. Whether a function keeps
a reference to its arguments (which matters to liveness) is declared in the IR core's
packed-function table, not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Call
from relaxc.ir.vocab import CALL_CPACKED, STACK_ALLOCA, STRUCT_SET

C_TARGET_OPS = frozenset({STACK_ALLOCA, STRUCT_SET, CALL_CPACKED})
"""The ops LegalizePackedCalls writes for the C target: argument structs and packed C calls."""


def c_target_only(e: Call) -> RxError:
    """The error for running IR that LegalizePackedCalls has lowered for the C target."""
    return RxError(
        f"{e.op}: this program was lowered for the C target (LegalizePackedCalls "
        "wrapped its buffers into packed-call argument structs), which only C runs; the "
        "interpreter and the VM run the IR from before that pass (relaxc passes FILE -t "
        "c --dump-before LegalizePackedCalls) or build the C: relaxc build FILE -t c -p none",
        e.loc,
    )


@dataclass(frozen=True)
class PackedContext:
    """What a runtime function may know about its caller: the values of symbolic dims."""

    dims: Mapping[str, int]


def _reshape(ctx: PackedContext, args: Sequence[Any]) -> np.ndarray:
    """``vm.builtin.reshape(x, shape)``: a view of ``x`` with a new shape (shares memory)."""
    if len(args) != 2 or not isinstance(args[0], np.ndarray) or not isinstance(args[1], tuple):
        raise RxError("vm.builtin.reshape expects a tensor and a shape")
    x, shape = args
    if int(np.prod(shape, dtype=np.int64)) != x.size:
        raise RxError(f"vm.builtin.reshape: cannot view {x.shape} as {shape}")
    return x.reshape(shape)


def _copy(ctx: PackedContext, args: Sequence[Any]) -> None:
    """``relaxc.copy(src, dst)``: copy ``src`` into ``dst`` (same shape and dtype)."""
    if len(args) != 2 or not all(isinstance(a, np.ndarray) for a in args):
        raise RxError("relaxc.copy expects two tensors")
    src, dst = args
    if src.shape != dst.shape or src.dtype != dst.dtype:
        raise RxError(f"relaxc.copy: {src.dtype}{src.shape} into {dst.dtype}{dst.shape}")
    np.copyto(dst, src)
    return None


PACKED_IMPLS: dict[str, Callable[[PackedContext, Sequence[Any]], Any]] = {
    "vm.builtin.reshape": _reshape,
    "relaxc.copy": _copy,
}
