"""What the compiler knows about runtime functions reached through ``call_packed``.

Liveness depends on it: a function that *keeps* a reference to an argument extends that
buffer's life to the end of the function, and one whose result may alias an argument ties
the two lifetimes together. A function not listed here is assumed to do both (the safe
assumption: an unknown callee may keep anything it is given).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PackedSpec:
    """Memory behaviour of one runtime function."""

    summary: str
    keeps_args: bool = False
    result_aliases: tuple[int, ...] = ()  # argument positions the result may alias


PACKED_FUNCS: dict[str, PackedSpec] = {
    "vm.builtin.reshape": PackedSpec("view a tensor with a new shape", result_aliases=(0,)),
    "relaxc.copy": PackedSpec("copy a tensor into another of the same shape"),
}

UNKNOWN = PackedSpec("unknown runtime function", keeps_args=True, result_aliases=(-1,))
"""Assumed for unlisted names: keeps every argument, result may alias any of them."""


def packed_spec(name: object) -> PackedSpec:
    return PACKED_FUNCS.get(name, UNKNOWN) if isinstance(name, str) else UNKNOWN
