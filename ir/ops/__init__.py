"""The default op registry, built once from the op definition modules."""

from __future__ import annotations

from relaxc.ir.registry import Registry

from . import (
    attention,
    bits,
    cnn,
    compare,
    conv_transpose,
    cumulative,
    elementwise,
    linalg,
    linear_attention,
    grid_sample,
    memory,
    misc,
    movement,
    nn,
    reduce,
    resize,
    scan,
    transform,
)


def build_registry() -> Registry:
    """A fresh registry holding every op relaxc knows."""
    reg = Registry()
    for module in (
        elementwise,
        compare,
        memory,
        misc,
        nn,
        reduce,
        transform,
        scan,
        attention,
        linear_attention,
        conv_transpose,
        resize,
        cnn,
        movement,
        cumulative,
        bits,
        linalg,
        grid_sample,
    ):
        module.register_all(reg)
    return reg


REGISTRY: Registry = build_registry()
"""The registry the verifier, interpreter and passes use (read-only after import)."""
