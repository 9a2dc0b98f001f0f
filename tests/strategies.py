"""Hypothesis strategies for IR modules.

* :func:`modules` — syntactically arbitrary modules (any op names, values, types), built as
  IR nodes directly, for printer/parser round-trip properties;
* :func:`programs` — well-typed programs over the registered kernel ops, with views, tuples,
  aliases, constants, primitive functions and symbolic dims, for differential tests.
"""

from __future__ import annotations

import string

from hypothesis import strategies as st

from relaxc.ir import dims as D
from relaxc.ir.nodes import (
    Bind,
    Call,
    CallFunc,
    DictLit,
    DType,
    Effect,
    Function,
    Invoke,
    ListLit,
    Module,
    Param,
    Project,
    TupleExpr,
    Var,
)
from relaxc.ir.types import DTYPES, OBJECT, STORAGE, TensorType, TupleType

KEYWORDS = {"fn", "attrs", "call", "invoke", "return", "outs", "true", "false", "Tensor", "Tuple",
            "Storage", "Object", "inf", "nan", "max", "min"}
RESERVED = KEYWORDS | set(DTYPES) | {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                     "float16", "bfloat16", "float32", "float64"}

ident = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(lambda s: s not in RESERVED)
local_name = st.from_regex(r"[A-Za-z0-9_]{1,6}", fullmatch=True)
dotted = st.lists(ident, min_size=1, max_size=3).map(".".join)
dtype_name = st.sampled_from(sorted(DTYPES))


def _dim_exprs() -> st.SearchStrategy:
    leaves = st.one_of(st.integers(0, 1000), ident.map(D.Sym))

    def extend(children: st.SearchStrategy) -> st.SearchStrategy:
        binop = st.tuples(st.sampled_from(D.BIN_OPS), children, children).filter(
            # The parser folds integer-only arithmetic, so such nodes never come back.
            lambda t: not (isinstance(t[1], int) and isinstance(t[2], int))
        ).map(lambda t: D.BinOp(*t))
        call = st.tuples(st.sampled_from(D.DIM_FUNCS), st.lists(children, min_size=1, max_size=3)).map(
            lambda t: D.DimCall(t[0], tuple(t[1]))
        )
        return st.one_of(binop, call)

    return st.recursive(leaves, extend, max_leaves=6)


dims = _dim_exprs()

floats = st.floats(allow_nan=False, width=64)
scalar_values = st.one_of(
    st.integers(-10**6, 10**6), floats, st.booleans(), st.text(max_size=8),
    dtype_name.map(DType), dims,
)


def _values() -> st.SearchStrategy:
    def extend(children: st.SearchStrategy) -> st.SearchStrategy:
        return st.one_of(
            st.lists(children, max_size=3).map(tuple),
            st.lists(children, max_size=3).map(lambda xs: ListLit(tuple(xs))),
            st.dictionaries(ident, children, max_size=3).map(lambda d: DictLit(tuple(d.items()))),
        )

    return st.recursive(scalar_values, extend, max_leaves=8)


values = _values()


def _types() -> st.SearchStrategy:
    tensor = st.builds(
        lambda shape, dt: TensorType(tuple(shape), dt),
        st.lists(dims, max_size=3), dtype_name,
    )
    leaves = st.one_of(tensor, st.just(STORAGE), st.just(OBJECT))
    return st.recursive(leaves, lambda ch: st.lists(ch, max_size=3).map(lambda fs: TupleType(tuple(fs))),
                        max_leaves=4)


types = _types()
variables = local_name.map(Var)
call_args = st.lists(st.one_of(variables, values), max_size=4).map(tuple)
kwargs = st.dictionaries(ident, values, max_size=3).map(lambda d: tuple(d.items()))

exprs = st.one_of(
    variables,
    st.builds(Call, dotted, call_args, kwargs),
    st.builds(CallFunc, ident, st.lists(variables, max_size=3).map(tuple)),
    st.builds(TupleExpr, st.lists(variables, max_size=3).map(tuple)),
    st.builds(Project, variables, st.integers(0, 20)),
)
invokes = st.builds(
    Invoke, ident, st.booleans(), call_args, kwargs, st.lists(variables, max_size=3).map(tuple)
)
effects = st.one_of(
    st.builds(Effect, st.builds(Call, dotted, call_args, kwargs)),
    st.builds(Effect, invokes),
)
stmts = st.one_of(st.builds(Bind, local_name, st.one_of(st.none(), types), exprs), effects)


@st.composite
def functions(draw: st.DrawFn) -> Function:
    params = tuple(Param(n, draw(types)) for n in draw(st.lists(local_name, max_size=3, unique=True)))
    attrs = tuple(draw(st.dictionaries(ident, values, max_size=2)).items())
    body = tuple(draw(st.lists(stmts, max_size=6)))
    ret = draw(st.one_of(variables, st.builds(TupleExpr, st.lists(variables, max_size=3).map(tuple))))
    return Function(draw(ident), params, draw(types), attrs, body, ret)


modules = st.lists(functions(), max_size=3).map(lambda fs: Module(tuple(fs)))
