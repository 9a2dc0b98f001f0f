"""The default op registry, built once from the op definition modules."""

from __future__ import annotations

from relaxc.ir.registry import Registry

from . import elementwise, memory, misc, movement, nn, reduce, transform


def build_registry() -> Registry:
    """A fresh registry holding every op relaxc knows."""
    reg = Registry()
    for module in (elementwise, memory, misc, movement, nn, reduce, transform):
        module.register_all(reg)
    return reg


REGISTRY: Registry = build_registry()
"""The registry the verifier, interpreter and passes use (read-only after import)."""
