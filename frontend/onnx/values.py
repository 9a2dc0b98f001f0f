"""What an ONNX tensor name stands for while a graph is imported.

Every ONNX value becomes one of three things:

* :class:`Runtime` — computed when the program runs: a variable of the relaxc function.
* :class:`Folded` — known at import time (an initializer, a ``Constant``, or anything
  computed only from those): a numpy array. It becomes a weight or an inline constant only
  if a run-time computation uses it.
* :class:`ShapeValue` — a small integer vector (or scalar) of dimensions, some of them
  symbolic, such as ``Shape(x)`` of an input with a ``dim_param``. It exists so that the
  shape arithmetic exporters emit (Shape → Gather → Concat → Reshape) folds into a reshape
  whose target shape has symbolic dims.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.nodes import Var
from relaxc.ir.types import TensorType, dtype_from_numpy


@dataclass(frozen=True)
class Runtime:
    """A value computed at run time, bound to ``var``."""

    var: Var
    type: TensorType


@dataclass(frozen=True, eq=False)
class Folded:
    """A value known at import time. ``name`` is the ONNX name it came from (for weights)."""

    array: np.ndarray
    name: str

    @property
    def type(self) -> TensorType:
        dtype = dtype_from_numpy(self.array.dtype)
        assert dtype is not None, self.array.dtype
        return TensorType(tuple(int(d) for d in self.array.shape), dtype)


@dataclass(frozen=True)
class ShapeValue:
    """An int64 vector (or, with ``scalar``, a single int) of possibly symbolic dims."""

    dims: tuple[D.Dim, ...]
    scalar: bool = False

    @property
    def static(self) -> bool:
        return all(D.is_static(d) for d in self.dims)

    def to_array(self) -> np.ndarray:
        assert self.static
        arr = np.array([int(d) for d in self.dims], dtype=np.int64)  # type: ignore[arg-type]
        return arr.reshape(()) if self.scalar else arr

    @property
    def type(self) -> TensorType:
        return TensorType(() if self.scalar else (len(self.dims),), "i64")


@dataclass(frozen=True, eq=False)
class DimArray:
    """An int64 tensor of rank 2 or more of dims, some symbolic (``array``: a numpy object
    array of them): TorchScript's ``F.pad`` reshapes its pads into (begin, end) pairs and
    transposes them. Reshaped back to a vector it is a :class:`ShapeValue` again; any other
    use computes it at run time."""

    array: np.ndarray

    @property
    def type(self) -> TensorType:
        return TensorType(tuple(int(d) for d in self.array.shape), "i64")

    def flat(self) -> ShapeValue:
        return ShapeValue(tuple(self.array.reshape(-1).tolist()))


Value = Union[Runtime, Folded, ShapeValue, DimArray]


def value_type(v: Value) -> TensorType:
    """The relaxc tensor type of any importer value."""
    return v.type
