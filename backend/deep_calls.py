"""Running programs whose calls nest deeply (``@f1`` calls ``@f2`` calls ... ``@f2000``).

The interpreter and the VM run a call of a function as a Python call, a few Python frames
per level of the program's calls, so a chain of calls deeper than a few hundred levels
would exceed Python's recursion limit (1,000 frames by default). The call graph of a
verified program has no cycle (the verifier refuses recursion), so the deepest nesting a
run can reach is known before it starts: :func:`call_depth`. :func:`run_nested` runs the
work directly when the frames it needs fit in the recursion limit as it is, and otherwise
in a worker thread with a stack and a recursion limit sized for that depth (the limit is
raised for the run only and restored after it; deep runs in one process take turns). A
program deeper than :data:`MAX_CALL_DEPTH` is refused with its depth and the limit.
"""

from __future__ import annotations

import sys
import threading
from typing import Callable, Hashable, Iterable, TypeVar

from relaxc.ir.diagnostics import RxError

T = TypeVar("T")
N = TypeVar("N", bound=Hashable)

MAX_CALL_DEPTH = 50_000
"""The deepest chain of calls (of functions calling functions) relaxc runs."""

FRAMES_PER_CALL = 16
"""Python frames one level of the program's calls may take in the interpreter or the VM
(measured: 6 in the interpreter, 2 in the VM; the rest is headroom)."""

_STACK_PER_CALL = 16 * 1024
"""Bytes of the worker thread's stack per level of calls (a generous bound of the C stack
the Python frames of one level use; the stack is reserved, not touched, so unused bytes cost
nothing)."""

_MIN_STACK = 32 * 1024 * 1024
_MARGIN = 200  # frames a run needs beside its calls (a kernel, numpy), on this thread
_HEADROOM = 1_000  # the same, generously, on a worker thread

_turns = threading.Lock()  # one deep run at a time changes the recursion limit


def call_depth(roots: Iterable[N], callees: Callable[[N], Iterable[N]]) -> int:
    """The most calls nested in one another from any of ``roots`` (0: a function that
    calls nothing; 1: calls only such functions, ...). ``callees(f)`` names the functions
    ``f`` calls; the graph has no cycle (a cycle is counted once around). Iterative: a
    chain of any depth is walked without recursion."""
    depth: dict[N, int] = {}
    for root in roots:
        if root in depth:
            continue
        stack: list[tuple[N, list[N]]] = [(root, list(callees(root)))]
        on_path = {root}
        while stack:
            f, todo = stack[-1]
            while todo and (todo[-1] in depth or todo[-1] in on_path):
                todo.pop()
            if todo:
                g = todo.pop()
                on_path.add(g)
                stack.append((g, list(callees(g))))
                continue
            stack.pop()
            on_path.discard(f)
            depth[f] = max((depth[g] + 1 for g in callees(f) if g in depth), default=0)
    return max(depth.values(), default=0)


def check_call_depth(depth: int, entry: str) -> None:
    """RxError when a run from ``entry`` would nest calls more than relaxc runs."""
    if depth > MAX_CALL_DEPTH:
        raise RxError(
            f"calls from @{entry} nest {depth:,} deep (a function calling a function ...), "
            f"more than relaxc runs ({MAX_CALL_DEPTH:,}); inline some of the functions"
        )


def _frames_in_use() -> int:
    n = 0
    f = sys._getframe()
    while f is not None:
        n += 1
        f = f.f_back
    return n


def run_nested(depth: int, entry: str, work: Callable[[], T]) -> T:
    """``work()``, which runs ``entry`` and may nest calls ``depth`` deep: on this thread
    when the recursion limit allows it, else on a worker thread with room for them (its
    result returned, its exception raised here). The work sets up what is per thread itself
    (numpy's error state)."""
    check_call_depth(depth, entry)
    in_use = _frames_in_use()
    if in_use + depth * FRAMES_PER_CALL + _MARGIN <= sys.getrecursionlimit():
        return work()
    need = in_use + depth * FRAMES_PER_CALL + _HEADROOM
    outcome: list = []

    def target() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            outcome.append((False, e))

    with _turns:
        old_limit = sys.getrecursionlimit()
        old_stack = threading.stack_size()
        try:
            threading.stack_size(max(_MIN_STACK, depth * _STACK_PER_CALL))
            worker = threading.Thread(target=target, name=f"relaxc run @{entry}", daemon=True)
            sys.setrecursionlimit(max(old_limit, need))
            worker.start()
        finally:
            threading.stack_size(old_stack)
        try:
            worker.join()
        finally:
            sys.setrecursionlimit(old_limit)
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
