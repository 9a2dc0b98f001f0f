"""One supply of fresh value names: what every pass that adds bindings uses."""

from __future__ import annotations

from typing import Iterable

from .nodes import Bind, Function


def function_names(fn: Function) -> set[str]:
    """Every value name ``fn`` defines: its parameters and its bindings."""
    return {p.name for p in fn.params} | {s.name for s in fn.body if isinstance(s, Bind)}


class NameSupply:
    """Hands out names that collide with nothing taken so far: ``base``, ``base_1``, ..."""

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self.taken: set[str] = set(taken)

    @classmethod
    def for_function(cls, fn: Function) -> "NameSupply":
        return cls(function_names(fn))

    def fresh(self, base: str) -> str:
        name = base
        i = 1
        while name in self.taken:
            name = f"{base}_{i}"
            i += 1
        self.taken.add(name)
        return name

    def reserve(self, name: str) -> None:
        self.taken.add(name)
