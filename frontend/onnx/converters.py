"""The table of ONNX operators the importer converts: op_type -> converter."""

from __future__ import annotations

from typing import Callable

from . import convert_math, convert_movement, convert_nn, convert_shape
from .context import NodeContext

Converter = Callable[[NodeContext], list]


def _build() -> dict[str, Converter]:
    table: dict[str, Converter] = {}
    for module in (convert_math, convert_movement, convert_nn, convert_shape):
        table.update(module.table())
    return table


CONVERTERS: dict[str, Converter] = _build()
"""Every supported operator of the default ONNX domain (read-only after import)."""

# Outputs beyond the first that a converter cannot produce: refused if anything uses them.
EXTRA_OUTPUTS = {
    "Dropout": "the dropout mask",
    "MaxPool": "the argmax indices",
    "BatchNormalization": "training statistics",
    "LayerNormalization": "the mean and inverse standard deviation",
}
