"""Hypothesis strategies for IR modules.

* :func:`modules` — syntactically arbitrary modules (any op names, values, types), built as
  IR nodes directly, for printer/parser round-trip properties;
* :func:`programs` — well-typed programs over the registered kernel ops, with views, tuples,
  aliases, constants, primitive functions and symbolic dims, for differential tests.
"""

from __future__ import annotations


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

KEYWORDS = {
    "fn",
    "attrs",
    "call",
    "invoke",
    "return",
    "outs",
    "true",
    "false",
    "Tensor",
    "Tuple",
    "Storage",
    "Object",
    "inf",
    "nan",
    "max",
    "min",
}
RESERVED = (
    KEYWORDS
    | set(DTYPES)
    | {
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "float16",
        "bfloat16",
        "float32",
        "float64",
    }
)

ident = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(
    lambda s: s not in RESERVED
)
local_name = st.from_regex(r"[A-Za-z0-9_]{1,6}", fullmatch=True)
dotted = st.lists(ident, min_size=1, max_size=3).map(".".join)
dtype_name = st.sampled_from(sorted(DTYPES))


def _dim_exprs() -> st.SearchStrategy:
    leaves = st.one_of(st.integers(0, 1000), ident.map(D.Sym))

    def extend(children: st.SearchStrategy) -> st.SearchStrategy:
        binop = (
            st.tuples(st.sampled_from(D.BIN_OPS), children, children)
            .filter(
                # The parser folds integer-only arithmetic, so such nodes never come back.
                lambda t: not (isinstance(t[1], int) and isinstance(t[2], int))
            )
            .map(lambda t: D.BinOp(*t))
        )
        call = st.tuples(
            st.sampled_from(D.DIM_FUNCS), st.lists(children, min_size=1, max_size=3)
        ).map(lambda t: D.DimCall(t[0], tuple(t[1])))
        return st.one_of(binop, call)

    return st.recursive(leaves, extend, max_leaves=6)


dims = _dim_exprs()

floats = st.floats(allow_nan=False, width=64)
scalar_values = st.one_of(
    st.integers(-(10**6), 10**6),
    floats,
    st.booleans(),
    st.text(max_size=8),
    dtype_name.map(DType),
    dims,
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
        st.lists(dims, max_size=3),
        dtype_name,
    )
    leaves = st.one_of(tensor, st.just(STORAGE), st.just(OBJECT))
    return st.recursive(
        leaves,
        lambda ch: st.lists(ch, max_size=3).map(lambda fs: TupleType(tuple(fs))),
        max_leaves=4,
    )


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
    params = tuple(
        Param(n, draw(types)) for n in draw(st.lists(local_name, max_size=3, unique=True))
    )
    attrs = tuple(draw(st.dictionaries(ident, values, max_size=2)).items())
    body = tuple(draw(st.lists(stmts, max_size=6)))
    ret = draw(
        st.one_of(variables, st.builds(TupleExpr, st.lists(variables, max_size=3).map(tuple)))
    )
    return Function(draw(ident), params, draw(types), attrs, body, ret)


modules = st.lists(functions(), max_size=3).map(lambda fs: Module(tuple(fs)))


# ---------------------------------------------------------------------------------------
# Well-typed programs.

PRIMITIVE_PRELUDE = """fn @prim_add_relu(%a: Tensor[(p, q), f32], %b: Tensor[(p, q), f32]) -> Tensor[(p, q), f32]
    attrs {primitive = true} {
  %s = add(%a, %b)
  %r = relu(%s)
  return %r
}

fn @helper_scale(%a: Tensor[(p, q), f32]) -> Tensor[(p, q), f32] {
  %two = const(2.0, f32)
  %m = multiply(%a, %two)
  return %m
}

fn @helper_view(%a: Tensor[(p, q), f32]) -> Tensor[(p * q,), f32] {
  %v = reshape(%a, (p * q,))
  return %v
}

"""  # noqa: E501


class GeneratedProgram:
    """A generated program: its text, and values for its symbolic dims."""

    def __init__(self, text: str, dims: dict[str, int]):
        self.text = text
        self.dims = dims

    def __repr__(self) -> str:
        return f"GeneratedProgram(dims={self.dims})\n{self.text}"


@st.composite
def programs(draw: st.DrawFn, max_ops: int = 14) -> GeneratedProgram:
    """A random well-typed program: f32 values of shapes (B, F), (F,), (B,), (B * F,).

    B is static or the symbolic dim ``n`` (with or without an upper bound); it uses
    elementwise ops, broadcasting, views, aliases, tuples and projections, reductions,
    matmul with a constant, split, calls of primitive and non-primitive functions, and
    returns one value or a tuple (parameters and views included).
    """
    symbolic = draw(st.booleans())
    f = draw(st.integers(1, 4)) * 2
    if symbolic:
        n_val = draw(st.integers(1, 5))
        bounded = draw(st.booleans())
        B = "n"
        attrs = (
            f"\n    attrs {{upper_bounds = {{n = {n_val + draw(st.integers(0, 3))}}}}}"
            if bounded
            else ""
        )
        dims = {"n": n_val}
    else:
        B = str(draw(st.integers(1, 4)))
        attrs = ""
        dims = {}
    BF = f"Tensor[({B}, {f}), f32]"
    flat = f"({B} * {f},)" if symbolic else f"({int(B) * f},)"
    pool: dict[str, list[str]] = {"BF": ["x", "y"], "F": ["w"], "B": [], "flat": []}
    lines: list[str] = []
    counter = 0

    pending: list[tuple[str, str]] = []

    def new(kind: str) -> str:
        # Joins the pool after the current statement, so it is never its own operand.
        nonlocal counter
        counter += 1
        name = f"v{counter}"
        pending.append((kind, name))
        return name

    def pick(kind: str) -> str:
        return draw(st.sampled_from(pool[kind]))

    n_ops = draw(st.integers(1, max_ops))
    for _ in range(n_ops):
        choice = draw(
            st.sampled_from(
                [
                    "unary",
                    "unary",
                    "binary",
                    "binary",
                    "bcast",
                    "view",
                    "unview",
                    "alias",
                    "tuple",
                    "sum",
                    "matmul",
                    "split",
                    "prim",
                    "helper",
                    "helper_view",
                    "const",
                    "kill_free_chain",
                ]
            )
        )
        if choice == "unary":
            src = pick("BF")
            op = draw(
                st.sampled_from(["relu", "tanh", "negative", "abs", "sigmoid", "erf", "leaky_relu"])
            )
            attr = ""
            if op == "leaky_relu":  # default, positional or keyword alpha
                attr = draw(st.sampled_from(["", ", 0.2", ", alpha=-0.5", ", alpha=3"]))
            lines.append(f"%{new('BF')} = {op}(%{src}{attr})")
        elif choice == "binary":
            a, b = pick("BF"), pick("BF")
            op = draw(st.sampled_from(["add", "subtract", "multiply", "maximum", "minimum"]))
            lines.append(f"%{new('BF')} = {op}(%{a}, %{b})")
        elif choice == "bcast":
            a, b = pick("BF"), pick("F")
            lines.append(f"%{new('BF')} = add(%{a}, %{b})")
        elif choice == "view":
            lines.append(f"%{new('flat')} = reshape(%{pick('BF')}, {flat})")
        elif choice == "unview" and pool["flat"]:
            lines.append(f"%{new('BF')} = reshape(%{pick('flat')}, ({B}, {f}))")
        elif choice == "alias":
            lines.append(f"%{new('BF')} = %{pick('BF')}")
        elif choice == "tuple":
            a, b = pick("BF"), pick("F")
            t = f"t{counter}"
            counter += 1
            lines.append(f"%{t} = (%{a}, %{b})")
            idx = draw(st.integers(0, 1))
            lines.append(f"%{new('BF' if idx == 0 else 'F')} = %{t}.{idx}")
        elif choice == "sum":
            src = pick("BF")
            if draw(st.booleans()):
                lines.append(f"%{new('B')} = sum(%{src}, axes=1)")
            else:
                lines.append(f"%{new('F')} = sum(%{src}, axes=0)")
        elif choice == "matmul":
            w = f"c{counter}"
            counter += 1
            vals = draw(
                st.lists(
                    st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0]), min_size=f * f, max_size=f * f
                )
            )
            rows = ", ".join(
                "[" + ", ".join(map(str, vals[i * f : (i + 1) * f])) + "]" for i in range(f)
            )
            lines.append(f"%{w} = const([{rows}], f32)")
            lines.append(f"%{new('BF')} = matmul(%{pick('BF')}, %{w})")
        elif choice == "split":
            t = f"s{counter}"
            counter += 1
            lines.append(f"%{t} = split(%{pick('BF')}, 2, axis=1)")
            a = f"h{counter}"
            counter += 1
            lines.append(f"%{a} = %{t}.{draw(st.integers(0, 1))}")
            lines.append(f"%{new('BF')} = concat(%{a}, %{a}, axis=1)")
        elif choice == "prim":
            lines.append(f"%{new('BF')} = call @prim_add_relu(%{pick('BF')}, %{pick('BF')})")
        elif choice == "helper":
            lines.append(f"%{new('BF')} = call @helper_scale(%{pick('BF')})")
        elif choice == "helper_view":
            lines.append(f"%{new('flat')} = call @helper_view(%{pick('BF')})")
        elif choice == "const":
            vals = draw(
                st.lists(st.sampled_from([-2.0, -1.0, 0.25, 1.0, 3.0]), min_size=f, max_size=f)
            )
            lines.append(f"%{new('F')} = const([{', '.join(map(str, vals))}], f32)")
        elif choice == "kill_free_chain":
            a = pick("BF")
            mid = f"m{counter}"
            counter += 1
            lines.append(f"%{mid} = exp(%{a})")
            lines.append(f"%{new('BF')} = tanh(%{mid})")
        for kind, name in pending:
            pool[kind].append(name)
        pending.clear()
    # Return one value or a tuple mixing kinds.
    kinds = {
        "BF": BF,
        "F": f"Tensor[({f},), f32]",
        "B": f"Tensor[({B},), f32]",
        "flat": f"Tensor[{flat}, f32]",
    }
    n_ret = draw(st.integers(1, 3))
    rets = []
    for _ in range(n_ret):
        kind = draw(st.sampled_from([k for k in pool if pool[k]]))
        rets.append((pick(kind), kind))
    if n_ret == 1:
        ret_expr, ret_type = f"%{rets[0][0]}", kinds[rets[0][1]]
    else:
        ret_expr = "(" + ", ".join(f"%{r}" for r, _ in rets) + ")"
        ret_type = "Tuple[" + ", ".join(kinds[k] for _, k in rets) + "]"
    head = f"fn @main(%x: {BF}, %y: {BF}, %w: Tensor[({f},), f32]) -> {ret_type}{attrs} {{\n"
    body = "".join(f"  {ln}\n" for ln in lines)
    text = PRIMITIVE_PRELUDE + head + body + f"  return {ret_expr}\n}}\n"
    return GeneratedProgram(text, dims)
