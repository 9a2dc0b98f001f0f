"""The names a function's inputs and outputs have outside relaxc: an ONNX model's.

An IR name is an identifier (``%gpu_0_data_0``); an ONNX graph's inputs and outputs may be
named anything (``gpu_0/data_0``, ``input:0``, ``0``). The importer keeps the model's names
in two function attributes, one string per parameter and one per output, in order::

    fn @main(%gpu_0_data_0: Tensor[(1, 3, 224, 224), f32]) -> Tensor[(1, 1000), f32]
        attrs {onnx_inputs = ["gpu_0/data_0"], onnx_outputs = ["gpu_0/softmax_1"]} {

The outputs are the leaves of the result, depth first (a tuple's fields in order), as
``relaxc run`` flattens them. The attributes travel with the function through the passes,
into the ``.rxb`` (as any function attribute) and into the C header, so that ``relaxc run``
reads inputs and writes outputs under the model's names and a C caller finds them. A
function without them has only its IR names. :func:`dim_sources` traces each symbolic dim
to the parameter (and ONNX input) it is read from, for messages about a dim.
"""

from __future__ import annotations

from typing import Any, cast

from . import dims as D
from .diagnostics import Loc, RxError
from .nodes import Function, ListLit
from .types import TupleType, Type, tensor_leaves

ONNX_INPUTS = "onnx_inputs"
ONNX_OUTPUTS = "onnx_outputs"


def output_count(t: Type) -> int:
    """How many arrays a result of type ``t`` flattens to (a tuple's leaves, depth first)."""
    if isinstance(t, TupleType):
        return sum(output_count(f) for f in t.fields)
    return 1


def onnx_input_names(fn: Function) -> tuple[str, ...] | None:
    """The ONNX name of each parameter of ``fn``, in order, or None if it has none."""
    return _names(fn.attr(ONNX_INPUTS))


def onnx_output_names(fn: Function) -> tuple[str, ...] | None:
    """The ONNX name of each output leaf of ``fn``, in order, or None if it has none."""
    return _names(fn.attr(ONNX_OUTPUTS))


def _names(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, ListLit) and all(isinstance(x, str) for x in value.items):
        return tuple(cast("tuple[str, ...]", value.items))
    return None


def names_attr(names: list[str] | tuple[str, ...]) -> ListLit:
    """The attribute value for ``names``."""
    return ListLit(tuple(names))


def check_io_names(key: str, value: Any, count: int, what: str, loc: Loc | None) -> None:
    """RxError unless ``value`` is a list of ``count`` distinct non-empty strings."""
    if not isinstance(value, ListLit) or not all(isinstance(x, str) for x in value.items):
        raise RxError(f"attribute '{key}' must be a list of strings such as [\"x:0\"]", loc)
    names = cast("tuple[str, ...]", value.items)
    if len(names) != count:
        raise RxError(
            f"attribute '{key}' names {len(names)} {what}, but the function has {count}", loc
        )
    seen: set[str] = set()
    for name in names:
        if not name:
            raise RxError(f"attribute '{key}' has an empty name", loc)
        if name in seen:
            raise RxError(f"attribute '{key}' names {name!r} twice", loc)
        seen.add(name)


def dim_sources(fn: Function) -> dict[str, tuple[str, str | None]]:
    """For each symbolic dim that is alone a dimension of a parameter: the first such
    parameter's IR name and its ONNX input name (None without ``onnx_inputs``), so that a
    message about the dim can name the input a user knows (``--bound N=...`` for the ONNX
    input ``gpu_0/data_0``)."""
    onnx = onnx_input_names(fn)
    out: dict[str, tuple[str, str | None]] = {}
    for k, p in enumerate(fn.params):
        for leaf in tensor_leaves(p.type):
            for d in leaf.shape:
                if isinstance(d, D.Sym) and d.name not in out:
                    out[d.name] = (p.name, onnx[k] if onnx is not None else None)
    return out
