"""The call graph of a module: which functions each calls, and an order with every callee
before its callers.

The order is found with an explicit stack (not Python's), so a chain of thousands of
functions calling each other is walked like a short one. Verified modules have no
recursion; a call back into a function still being walked is skipped, so the walk ends on
any module.
"""

from __future__ import annotations

from collections.abc import Container, Iterable

from .nodes import CallFunc, Function, Module


def called(fn: Function) -> list[str]:
    """The names of the functions ``fn`` calls (``call @f``), in order of first call."""
    out: dict[str, None] = {}
    for s in fn.body:
        if isinstance(s.value, CallFunc):
            out.setdefault(s.value.func, None)
    return list(out)


def callees_first(
    module: Module,
    roots: Iterable[Function] | None = None,
    done: Container[str] = (),
) -> list[Function]:
    """The non-primitive functions reachable from ``roots`` (default: every function of
    ``module``), each once, every callee before the functions that call it. Functions named
    in ``done`` (already handled by the caller) are neither walked into nor returned."""
    functions = module.by_name
    order: list[Function] = []
    state: dict[str, int] = {}  # 1 = on the stack, 2 = placed in the order
    for root in module.functions if roots is None else roots:
        if root.is_primitive or root.name in state or root.name in done:
            continue
        state[root.name] = 1
        stack = [(root, iter(called(root)))]
        while stack:
            fn, callees = stack[-1]
            for name in callees:
                g = functions.get(name)
                if g is None or g.is_primitive or name in state or name in done:
                    continue
                state[name] = 1
                stack.append((g, iter(called(g))))
                break
            else:
                stack.pop()
                state[fn.name] = 2
                order.append(fn)
    return order
