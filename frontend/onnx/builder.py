"""Building the relaxc function an ONNX graph becomes, folding what is known at import time.

:meth:`ProgramBuilder.emit` is the one way a converter produces a value: when every input is
known at import time it runs the op's reference kernel right away (so constant subgraphs fold
with exactly the semantics the program would have had at run time); otherwise it appends a
binding to the function body, with the result type that relaxc's own type inference gives.
Folded values reach the program only when a run-time computation uses them: small ones as an
inline ``const(...)`` literal, the rest as named weights of the side-car ``.npz``.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import numpy as np

from relaxc.frontend.weights import splat_view
from relaxc.ir import dims as D
from relaxc.ir.nodes import Bind, Call, DType, ListLit, Project, Stmt, Var
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import OpError, Registry, bind_args
from relaxc.ir.types import TensorType, TupleType, Type, numpy_dtype

from .values import DimArray, Folded, Runtime, ShapeValue, Value

INLINE_LIMIT = 8
"""Folded tensors of at most this many elements become inline literals, not weights."""

_NOT_NAME = re.compile(r"[^A-Za-z0-9_]+")


class ConversionError(Exception):
    """relaxc cannot express what a node asks for; the importer names the node."""


def sanitize(hint: str, fallback: str = "v") -> str:
    """An IR-name spelling of an ONNX name: letters, digits and underscores only."""
    name = _NOT_NAME.sub("_", hint).strip("_")
    return (name or fallback)[:64]


class ProgramBuilder:
    """Collects the body of one function, its named weights, and unique value names."""

    def __init__(self, registry: Registry = REGISTRY, inline_limit: int = INLINE_LIMIT):
        self.registry = registry
        self.inline_limit = inline_limit
        self.body: list[Stmt] = []
        self.weights: dict[str, np.ndarray] = {}
        self._names: set[str] = set()
        self._materialized: dict[int, tuple[Folded, Runtime]] = {}
        self._dim_tensors: dict[ShapeValue, Runtime] = {}
        self.from_dims: set[str] = set()
        """Variables computed only from dims and constants at run time (dims used as data,
        :meth:`_dims_tensor`, and what the program computes from them alone): a shape
        input among them is a function of the dims that import-time folding did not reach."""
        self.bounds: dict[str, int] = {}
        """Upper bounds of symbolic dims: the user's (``--bound``), then those the graph
        implies (:attr:`implied`), which shape folding may use to decide comparisons."""
        self.implied: dict[str, tuple[int, str]] = {}
        """Bounds the model itself sets (dim -> (bound, why)): a slice of a 64-long table
        to ``seq`` needs ``seq <= 64``; they become ``upper_bounds`` the run checks."""

    # -- names ------------------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        """A variable name derived from ``hint`` that no other value of the function has."""
        base = sanitize(hint)
        name, k = base, 1
        while name in self._names:
            k += 1
            name = f"{base}_{k}"
        self._names.add(name)
        return name

    def _weight_name(self, hint: str, array: np.ndarray) -> str:
        name, k = hint or "weight", 1
        while name in self.weights:
            k += 1
            name = f"{hint}_{k}"
        self.weights[name] = array
        return name

    # -- values -----------------------------------------------------------------------------
    def runtime(self, v: Value, hint: str = "c") -> Runtime:
        """``v`` as a variable of the program (folded values become constants on first use)."""
        if isinstance(v, Runtime):
            return v
        if isinstance(v, DimArray):  # its dims as a vector, reshaped at run time
            flat = self._dims_tensor(v.flat(), hint)
            return self.runtime(self.emit("reshape", [flat], {"newshape": v.type.shape}, hint))
        if isinstance(v, ShapeValue):
            if not v.static:
                return self._dims_tensor(v, hint)
            v = Folded(v.to_array(), hint)
        cached = self._materialized.get(id(v))
        if cached is not None:
            return cached[1]
        array = v.array  # a splat stays a view: the weights archive records it as one value
        t = v.type
        # (an empty array of rank 2 or more has no literal: [] reads as shape (0,))
        inline = array.size > 0 or array.ndim == 1
        if inline and array.size <= self.inline_limit and array.dtype.kind in "fiu":
            literal = array.item() if array.ndim == 0 else _nested(array.tolist())
            name = self.fresh(v.name or hint)
            self.body.append(
                Bind(name, t, Call("const", (literal,), (("dtype", _dtype_value(t.dtype)),)))
            )
        else:
            weight = self._weight_name(v.name or hint, array)
            name = self.fresh(v.name or hint)
            self.body.append(Bind(name, t, Call("const", (weight,), ())))
        out = Runtime(Var(name), t)
        self._materialized[id(v)] = (v, out)
        return out

    def _dims_tensor(self, v: ShapeValue, hint: str) -> Runtime:
        """Dims used as tensor data (GPT-2's mask indices ``arange(batch) * seq``), computed
        when the program runs: a symbolic dim ``d`` is ``sum(full((d,), 1))``, exact in i64
        (the program's shapes carry the value; no op reads a dim as data)."""
        cached = self._dim_tensors.get(v)
        if cached is not None:
            return cached
        parts: list[Value] = []
        for d in v.dims:
            if D.is_static(d):
                parts.append(Folded(np.array([int(d)], np.int64), f"{hint}_dim"))  # type: ignore[arg-type]
                continue
            if D.interval(d, {n: (0, None) for n in D.free_vars(d)})[0] < 0:
                raise ConversionError(
                    f"the dim expression {D.dim_to_str(d)} (which may be negative) is used as "
                    "tensor data; relaxc computes only non-negative dims at run time"
                )
            ones = self.emit(
                "full", [], {"shape": (d,), "fill_value": 1.0, "dtype": DType("i64")}, hint
            )
            parts.append(self.emit("sum", [ones], {"axes": (0,), "keepdims": True}, hint))
        out = parts[0] if len(parts) == 1 else self.emit("concat", parts, {"axis": 0}, hint)
        if v.scalar:
            out = self.emit("reshape", [out], {"newshape": ()}, hint)
        result = self.runtime(out, hint)
        self._dim_tensors[v] = result
        return result

    def bind(self, hint: str, expr: Any, t: Type, annotate: bool = False) -> Var:
        name = self.fresh(hint)
        self.body.append(Bind(name, t if annotate else None, expr))
        return Var(name)

    # -- ops --------------------------------------------------------------------------------
    def emit(
        self,
        op: str,
        inputs: Sequence[Value],
        attrs: Mapping[str, Any] | None = None,
        hint: str = "t",
    ) -> Any:
        """Apply ``op`` (a registered relaxc op) to ``inputs``; fold when all are known.

        Returns one value, or a list of values for ops with a tuple result (``split``).
        """
        opdef = self.registry.get(op)
        assert opdef is not None, op
        kwargs = tuple((k, v) for k, v in (attrs or {}).items())
        placeholders = tuple(Var(f"in{i}") for i in range(len(inputs)))
        try:
            bound = bind_args(opdef, placeholders, kwargs)
            result_type = opdef.infer([v.type for v in inputs], bound.attrs)
        except OpError as e:
            raise ConversionError(str(e)) from None
        if inputs and all(_known(v) for v in inputs):
            return self._fold(opdef, inputs, bound.attrs, result_type, hint)
        runtime = [v for v in inputs if isinstance(v, Runtime)]
        dims_only = all(v.var.name in self.from_dims for v in runtime)
        args = tuple(self.runtime(v, f"{hint}_in{i}").var for i, v in enumerate(inputs))
        shown = tuple((k, v) for k, v in kwargs if not _is_default(opdef, k, v))
        var = self.bind(hint, Call(op, args, shown), result_type)
        if dims_only:  # computed from dims and constants only (the inputs made no data)
            self.from_dims.add(var.name)
        if isinstance(result_type, TupleType):
            outs = []
            for i, field_type in enumerate(result_type.fields):
                assert isinstance(field_type, TensorType)
                outs.append(
                    Runtime(self.bind(f"{hint}_{i}", Project(var, i), field_type), field_type)
                )
            return outs
        assert isinstance(result_type, TensorType)
        return Runtime(var, result_type)

    def _fold(
        self,
        opdef: Any,
        inputs: Sequence[Value],
        attrs: Mapping[str, Any],
        result_type: Type,
        hint: str,
    ) -> Any:
        arrays = [v.to_array() if isinstance(v, ShapeValue) else v.array for v in inputs]  # type: ignore[union-attr]
        if opdef.is_view:
            assert isinstance(result_type, TensorType)
            shape = tuple(int(d) for d in result_type.shape)  # type: ignore[arg-type]
            first = splat_view(arrays[0])
            if first is not None:  # a splat stays a splat (a view of its one value)
                return Folded(np.broadcast_to(first, shape), hint)
            return Folded(np.asarray(arrays[0], order="C").reshape(shape), hint)
        result = opdef.kernel(arrays, attrs)
        if isinstance(result_type, TupleType):
            return [
                Folded(_as(r, t), f"{hint}_{i}")
                for i, (r, t) in enumerate(zip(result, result_type.fields))
            ]
        return Folded(_as(result, result_type), hint)


def _is_default(opdef: Any, key: str, value: Any) -> bool:
    """True if ``value`` is what the op assumes when attribute ``key`` is left out."""
    spec = opdef.attr_spec(key)
    return spec is not None and type(spec.default) is type(value) and spec.default == value


def _known(v: Value) -> bool:
    return isinstance(v, Folded) or (isinstance(v, ShapeValue) and v.static)


def _as(array: Any, t: Type) -> np.ndarray:
    assert isinstance(t, TensorType)
    return np.asarray(array, dtype=numpy_dtype(t.dtype), order="C")


def _nested(items: Any) -> Any:
    if isinstance(items, list):
        return ListLit(tuple(_nested(x) for x in items))
    return items


def _dtype_value(name: str) -> DType:
    return DType(name)
