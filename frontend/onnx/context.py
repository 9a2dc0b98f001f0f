"""What a converter sees of the node it converts: inputs, attributes and the builder."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.types import TensorType

from . import shape_fold
from .builder import ConversionError, ProgramBuilder
from .values import DimArray, Folded, Runtime, ShapeValue, Value


@dataclass
class NodeContext:
    """One ONNX node being converted."""

    node: Any
    attrs: Mapping[str, Any]
    opset: int
    builder: ProgramBuilder
    inputs: Sequence[Value | None]

    @property
    def op_type(self) -> str:
        return str(self.node.op_type)

    def fail(self, message: str) -> ConversionError:
        """An error to raise: ``raise ctx.fail("...")``."""
        return ConversionError(message)

    def input(self, i: int, what: str | None = None) -> Value:
        """Input ``i``; an error if the node lacks it."""
        v = self.inputs[i] if i < len(self.inputs) else None
        if v is None:
            raise self.fail(f"needs input {i}{f' ({what})' if what else ''}")
        return v

    def optional(self, i: int) -> Value | None:
        """Input ``i``, or None when absent (an empty name or fewer inputs)."""
        return self.inputs[i] if i < len(self.inputs) else None

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def hint(self, k: int = 0) -> str:
        """A name hint for output ``k``: the ONNX output name."""
        outs = self.node.output
        return (
            str(outs[k]) if k < len(outs) and outs[k] else (self.node.name or self.op_type.lower())
        )

    def emit(
        self, op: str, inputs: Sequence[Value], attrs: Mapping[str, Any] | None = None, k: int = 0
    ) -> Any:
        """``op`` on ``inputs``: folded on the dims when an input is a shape with symbolic
        dims (:mod:`.shape_fold`), folded when all are known, else a statement."""
        if any(shape_fold.symbolic(v) for v in inputs):
            folded = shape_fold.fold(op, inputs, attrs or {}, self.builder.bounds)
            if folded is not None:
                return folded
        return self.builder.emit(op, inputs, attrs, self.hint(k))

    # -- values that must be known at import time --------------------------------------------
    def folded(self, v: Value, what: str, sets_shape: bool = False) -> np.ndarray:
        """``v`` known at import time, or an error saying why it is not: computed from tensor
        values (with ``sets_shape``, the output's shape would depend on them), or a function
        of symbolic dims where a number is needed."""
        if isinstance(v, Folded):
            return v.array
        if isinstance(v, DimArray):
            v = v.flat()
        if isinstance(v, ShapeValue):
            if v.static:
                return v.to_array()
            dims = ", ".join(D.dim_to_str(d) for d in v.dims)
            raise self.fail(
                f"{what} is ({dims}), computed from symbolic dims, but relaxc needs it as a "
                "number here; give the input a static shape (--shape)"
            )
        if sets_shape:
            raise self.value_dependent(what, v)
        raise self.fail(
            f"{what} must be known when the model is imported (a constant), "
            "but it is computed at run time"
        )

    def value_dependent(self, what: str, v: Value | None = None) -> ConversionError:
        """The refusal of a node whose output shape depends on tensor values (or, when ``v``
        was computed at run time from dims alone, on dims folding did not reach)."""
        if isinstance(v, Runtime) and v.var.name in self.builder.from_dims:
            return self.fail(
                f"{what} is computed from the input's dims, but by operations relaxc does not "
                "fold when it imports the model (so it would be known only at run time); give "
                "the input a static shape (--shape)"
            )
        return self.fail(
            f"its output shape depends on tensor values: {what} is computed at run time from "
            "tensor data (not from constants or the input's dims), and relaxc fixes every "
            "shape, static or symbolic, when the model is imported"
        )

    def ints(self, v: Value | None, what: str, sets_shape: bool = False) -> list[int] | None:
        """A folded integer vector as a list (None stays None)."""
        if v is None:
            return None
        arr = self.folded(v, what, sets_shape)
        if arr.dtype.kind not in "iu":
            raise self.fail(f"{what} must be integers, got {arr.dtype}")
        return [int(x) for x in arr.reshape(-1)]

    def scalar(self, v: Value | None, what: str, sets_shape: bool = False) -> float | None:
        if v is None:
            return None
        arr = self.folded(v, what, sets_shape)
        if arr.size != 1:
            raise self.fail(f"{what} must be a single value, got shape {arr.shape}")
        return float(arr.reshape(-1)[0])


def shape_of(v: Value) -> tuple[D.Dim, ...]:
    t = v.type
    assert isinstance(t, TensorType)
    return t.shape


def rank_of(v: Value) -> int:
    return len(shape_of(v))


def norm_axis(axis: int, rank: int, ctx: NodeContext, what: str = "axis") -> int:
    """``axis`` in [0, rank), accepting negatives; an error names the node otherwise."""
    if not -rank <= axis < rank:
        raise ctx.fail(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0
