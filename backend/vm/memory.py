"""The VM's memory: blocks, a pooled allocator, and the counters that measure them.

A **block** is one piece of memory the VM holds for the program:

* ``arena``    — a ``memory.alloc_storage(..., arena=true)`` made by PlanMemory: one
  allocation, tensors are numpy views into it at their planned offsets;
* ``dynamic``  — any other ``memory.alloc_storage`` (sizes known only at run time);
* ``external`` — an ``alloc_storage(..., external=true)``: memory of a function's outputs;
* ``result``   — the fresh array of a kernel called without destination passing (programs
  before ManifestAlloc, and ``call`` of a primitive function).

The first three come from :class:`PooledAllocator`: free lists keyed by the exact size
and alignment (like the PooledAllocator of TVM's relax VM), so a later allocation of the
same size reuses a freed block instead of asking numpy for new memory.

**Counting.** A block's bytes are its requested size (alignment padding is not counted).
They are counted as allocated when the allocating instruction runs, and as freed at the
moment the last *register* referring to the block is cleared — by a kill of that register,
or by the return of the function whose frame holds it. Registers refer to a block when
they hold the storage itself, a tensor carved from it, a view of such a tensor, or a tuple
containing one; :attr:`Block.rc` counts them. A kill clears only its own register, so
killing one name never frees memory another register still refers to. Blocks that back
the value returned by the entry function are handed to the caller: counted as freed from
the VM's point of view (``handed_over``) and never put back into the pool.

With ``poison=True`` freed blocks (and killed storages and tensors) are overwritten with
0xFF bytes, so a read of dead memory gives NaN or -1 instead of plausible numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

ARENA, DYNAMIC, EXTERNAL, RESULT = "arena", "dynamic", "external", "result"
KINDS = (ARENA, DYNAMIC, EXTERNAL, RESULT)
POISON_BYTE = 0xFF


class Block:
    """One piece of memory and the number of registers that refer to it."""

    __slots__ = ("nbytes", "align", "kind", "raw", "buf", "rc", "owners")

    def __init__(
        self, nbytes: int, align: int, kind: str, raw: Any, buf: np.ndarray | None, owners: tuple
    ):
        self.nbytes = nbytes
        self.align = align
        self.kind = kind
        self.raw = raw  # the object that owns the memory (numpy collapses every view's base to it)
        self.buf = buf  # the aligned bytes of a storage (None for kernel results)
        self.rc = 1
        self.owners = owners

    def __repr__(self) -> str:
        return f"<Block {self.kind} {self.nbytes} B rc={self.rc}>"


@dataclass
class MemoryStats:
    """What one run held. Bytes are requested sizes; see the module docstring for when
    bytes count as allocated and freed."""

    current: int = 0
    peak: int = 0
    working: int = 0  # every kind except external (outputs)
    working_peak: int = 0
    kind_current: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    kind_peak: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    allocations: int = 0  # storage requests served by the pool
    reuses: int = 0  # ... of which from a free list
    results: int = 0  # kernel results adopted as blocks
    frees: int = 0  # blocks released (to the pool, or dropped for kernel results)
    handed_over: int = 0  # bytes of blocks given to the caller with the result

    @property
    def fresh_allocations(self) -> int:
        """Pool requests that needed new memory from numpy."""
        return self.allocations - self.reuses

    def _add(self, kind: str, n: int) -> None:
        self.current += n
        if self.current > self.peak:
            self.peak = self.current
        kc = self.kind_current
        kc[kind] += n
        if kc[kind] > self.kind_peak[kind]:
            self.kind_peak[kind] = kc[kind]
        if kind != EXTERNAL:
            self.working += n
            if self.working > self.working_peak:
                self.working_peak = self.working

    def _sub(self, kind: str, n: int) -> None:
        self.current -= n
        self.kind_current[kind] -= n
        if kind != EXTERNAL:
            self.working -= n

    def to_json(self) -> dict[str, Any]:
        return {
            "peak": self.peak,
            "working_peak": self.working_peak,
            "arena_peak": self.kind_peak[ARENA],
            "dynamic_peak": self.kind_peak[DYNAMIC],
            "external_peak": self.kind_peak[EXTERNAL],
            "result_peak": self.kind_peak[RESULT],
            "allocations": self.allocations,
            "reuses": self.reuses,
            "results": self.results,
            "frees": self.frees,
            "handed_over": self.handed_over,
        }


class PooledAllocator:
    """Free lists by exact (size, alignment); counts what the program holds."""

    def __init__(self, poison: bool = False):
        self.poison = poison
        self.free: dict[tuple[int, int], list[tuple[np.ndarray, np.ndarray]]] = {}
        self.pooled_bytes = 0  # bytes sitting in free lists
        self.owners: dict[int, Block] = {}  # id(owner of the memory) -> live block
        self.stats = MemoryStats()

    # -- storages ---------------------------------------------------------------------------
    def alloc(self, nbytes: int, align: int, kind: str) -> Block:
        """A block of ``nbytes`` aligned to ``align``, referred to by one register."""
        stats = self.stats
        stats.allocations += 1
        key = (nbytes, align)
        lst = self.free.get(key)
        if lst:
            raw, buf = lst.pop()
            self.pooled_bytes -= nbytes
            stats.reuses += 1
        else:
            raw = np.empty(nbytes + align, dtype=np.uint8)
            shift = (-raw.ctypes.data) % align
            buf = raw[shift : shift + nbytes]
        blk = Block(nbytes, align, kind, raw, buf, (id(raw),))
        self.owners[id(raw)] = blk
        stats._add(kind, nbytes)
        return blk

    def adopt(self, value: Any) -> tuple[Block, ...]:
        """Count a fresh kernel result (an array or a tuple of them) as one block."""
        leaves = [x for x in _leaves(value) if isinstance(x, np.ndarray)]
        if not leaves:
            return ()
        owners: dict[int, Any] = {}
        nbytes = 0
        for x in leaves:
            owner = x.base if x.base is not None else x
            if id(owner) in self.owners:  # not fresh after all (defensive)
                blocks = self.blocks_of(value)
                for b in blocks:
                    b.rc += 1  # one more register refers to them
                return blocks
            owners.setdefault(id(owner), owner)
            nbytes += x.nbytes
        blk = Block(nbytes, 0, RESULT, tuple(owners.values()), None, tuple(owners))
        for k in owners:
            self.owners[k] = blk
        self.stats.results += 1
        self.stats._add(RESULT, nbytes)
        return (blk,)

    def blocks_of(self, value: Any) -> tuple[Block, ...]:
        """The live blocks a value refers to (found from each array's memory owner)."""
        if isinstance(value, Block):
            return (value,)
        if isinstance(value, np.ndarray):
            owner = value.base if value.base is not None else value
            blk = self.owners.get(id(owner))
            return (blk,) if blk is not None else ()
        if isinstance(value, tuple):
            out: list[Block] = []
            for x in value:
                for blk in self.blocks_of(x):
                    if blk not in out:
                        out.append(blk)
            return tuple(out)
        return ()

    # -- freeing ----------------------------------------------------------------------------
    def release(self, blk: Block) -> None:
        """The last register let go of ``blk``: back to the pool (or dropped, for results)."""
        for k in blk.owners:
            self.owners.pop(k, None)
        stats = self.stats
        stats.frees += 1
        stats._sub(blk.kind, blk.nbytes)
        if blk.buf is None:
            if self.poison:
                for owner in blk.raw:
                    poison_array(owner)
            blk.raw = None
            return
        if self.poison:
            blk.buf.fill(POISON_BYTE)
        self.free.setdefault((blk.nbytes, blk.align), []).append((blk.raw, blk.buf))
        self.pooled_bytes += blk.nbytes
        blk.raw = blk.buf = None

    def hand_over(self, blk: Block) -> None:
        """``blk`` backs the entry function's result: the caller owns it now."""
        for k in blk.owners:
            self.owners.pop(k, None)
        self.stats._sub(blk.kind, blk.nbytes)
        self.stats.handed_over += blk.nbytes

    def trim(self) -> int:
        """Give the free lists' memory back to numpy; returns the bytes dropped."""
        n = self.pooled_bytes
        self.free.clear()
        self.pooled_bytes = 0
        return n


def poison_array(a: Any) -> None:
    """Overwrite a writeable, contiguous array's bytes with 0xFF (anything else is left alone)."""
    if isinstance(a, np.ndarray) and a.flags.writeable and a.flags.c_contiguous and a.size:
        a.reshape(-1).view(np.uint8).fill(POISON_BYTE)


def _leaves(v: Any) -> list[Any]:
    if isinstance(v, tuple):
        return [x for f in v for x in _leaves(f)]
    return [v]
