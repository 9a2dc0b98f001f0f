"""What memory planning works on: the storages of a function and which of them are planned.

:func:`storages` reads every ``memory.alloc_storage`` binding into a :class:`StorageInfo`;
:func:`planning_candidates` says which of them PlanMemory places (per scope, each with its
buffer: live interval and size rounded up to its alignment) and which stay dynamic. Shared
by PlanMemory, the passes that bound what it will achieve (:func:`max_live_bytes` in
:mod:`relaxc.passes.storage_tenants`) and the memory report, so that all count the same
buffers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relaxc.ir import dims as D
from relaxc.ir.alias import AliasInfo, Liveness
from relaxc.ir.io_arena import IO_IN_ARENA
from relaxc.ir.nodes import Bind, Function
from relaxc.ir.sizes import round_up
from relaxc.ir.vocab import ALLOC_STORAGE, call_of

from .planning.model import Buffer


@dataclass(frozen=True)
class StorageInfo:
    """One ``alloc_storage`` binding and what planning needs to know about it."""

    name: str
    index: int
    size: D.Dim
    align: int
    scope: str
    external: bool
    arena: bool
    proven_bound: int = 0
    clock_stopped: bool = False


def storage_info(stmt: Bind, index: int) -> StorageInfo:
    call = call_of(stmt.value, ALLOC_STORAGE)
    assert call is not None
    attrs: dict[str, Any] = {
        "size": call.args[0] if call.args else None,
        "align": 64,
        "scope": "global",
        "external": False,
        "arena": False,
        "proven_bound": 0,
        "clock_stopped": False,
    }
    names = ("size", "align", "scope", "external", "arena")
    for k, v in zip(names, call.args):
        attrs[k] = v
    attrs.update(dict(call.kwargs))
    return StorageInfo(
        stmt.name,
        index,
        attrs["size"],
        attrs["align"],
        attrs["scope"],
        bool(attrs["external"]),
        bool(attrs["arena"]),
        attrs["proven_bound"] if isinstance(attrs["proven_bound"], int) else 0,
        attrs["clock_stopped"] is True,
    )


def storages(fn: Function) -> list[StorageInfo]:
    """Every ``memory.alloc_storage`` binding of ``fn``, in order."""
    return [
        storage_info(s, i)
        for i, s in enumerate(fn.body)
        if isinstance(s, Bind) and call_of(s.value, ALLOC_STORAGE)
    ]


def planning_candidates(
    fn: Function, info: AliasInfo, live: Liveness
) -> tuple[dict[str, list[tuple[StorageInfo, Buffer]]], list[StorageInfo]]:
    """What PlanMemory places: per scope, each storage of known or bounded size with its
    buffer (live interval, size rounded up to its alignment); and the dynamic storages.

    Not candidates: outputs (``external``), arenas, and storages a runtime function keeps
    or the return hands over (unless the function has its inputs and outputs in the arena).
    """
    bounds = fn.upper_bounds()
    by_scope: dict[str, list[tuple[StorageInfo, Buffer]]] = {}
    dynamic: list[StorageInfo] = []
    returned = info.returned(fn)
    # With inputs and outputs in the arena, the storages of the outputs are planned too:
    # live to the end (the return uses them), so nothing reuses their bytes.
    holds_output = (
        set()
        if fn.attr(IO_IN_ARENA) is True
        else {s for t, s in info.storage_of.items() if t in returned}
    )
    kept = {s for t, s in info.storage_of.items() if t in info.escaping}
    for s in storages(fn):
        if (
            s.external
            or s.arena
            or s.name in info.escaping
            or s.name in kept
            or s.name in returned
            or s.name in holds_output
        ):
            continue  # the caller's memory, an arena already, or kept by a runtime function
        size = s.size if isinstance(s.size, int) else D.upper_bound(s.size, bounds)
        if size is None:
            dynamic.append(s)
            continue
        # Negative for every allowed dim (a window taller than the bounded input): no run
        # gets past this allocation, and the arena must not shrink for it.
        size = max(size, 0)
        start = live.defined[s.name]
        end = live.last_use.get(s.name, start) + 1
        buf = Buffer(start, end, round_up(size, s.align), s.align, s.name)
        by_scope.setdefault(s.scope, []).append((s, buf))
    return by_scope, dynamic
