"""The shared IR vocabulary (:mod:`relaxc.ir.vocab`), walker (:mod:`relaxc.ir.walk`) and name
supply (:mod:`relaxc.ir.names`)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relaxc.frontend.parser import parse_module
from relaxc.ir import dims as D
from relaxc.ir import vocab
from relaxc.ir.diagnostics import Loc
from relaxc.ir.names import NameSupply, function_names
from relaxc.ir.nodes import (
    Bind,
    Call,
    CallFunc,
    Effect,
    Expr,
    Function,
    Invoke,
    Project,
    TupleExpr,
    Var,
    expr_vars,
)
from relaxc.ir.ops import REGISTRY
from relaxc.ir.types import OBJECT
from relaxc.ir.walk import ExprFunctor, FunctionRewriter, StmtVisitor, map_functions, with_body

X, Y, Z = Var("x"), Var("y"), Var("z")
ONE_OF_EACH: list[Expr] = [
    X,
    Call("add", (X, 2, Y), (("axis", 0),)),
    CallFunc("f", (X, Y)),
    Invoke("exp", False, (X, 1.5), (), (Z,)),
    TupleExpr((X, Y)),
    Project(X, 1),
]

MODULE = """\
fn @g(%p: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  return %p
}

fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] attrs {upper_bounds = {}} {
  %s = memory.alloc_storage(16)
  %y = memory.alloc_tensor(%s, 0, (4,), f32)
  invoke exp(%x) outs (%y)
  %z = call @g(%y)
  memory.kill_tensor(%y)
  return %z
}
"""


# -- vocab ------------------------------------------------------------------------------


def test_every_op_name_constant_is_a_registered_op() -> None:
    names = [
        vocab.CONST,
        vocab.ALLOC_STORAGE,
        vocab.ALLOC_TENSOR,
        vocab.KILL_TENSOR,
        vocab.KILL_STORAGE,
        vocab.KILL_OBJECT,
        vocab.CALL_PACKED,
        vocab.CALL_CPACKED,
        vocab.STACK_ALLOCA,
        vocab.STRUCT_SET,
    ]
    assert len(set(names)) == len(names)
    for name in names:
        assert REGISTRY.get(name) is not None, name
    assert vocab.KILL_OPS == {"memory.kill_tensor", "memory.kill_storage", "vm.kill_object"}
    assert vocab.ALLOC_OPS == {"memory.alloc_storage", "memory.alloc_tensor"}
    assert vocab.PACKED_CALL_OPS == {"call_packed", "call_cpacked"}


@pytest.mark.parametrize(
    "value, is_int, is_dim",
    [
        (3, True, True),
        (-1, True, True),
        (True, False, False),
        (3.0, False, False),
        ("n", False, False),
        (D.Sym("n"), False, True),
        (D.BinOp("*", D.Sym("n"), 2), False, True),
        (D.DimCall("max", (D.Sym("n"), 1)), False, True),
        ((1, 2), False, False),
        (None, False, False),
    ],
)
def test_is_int_and_is_dim(value: object, is_int: bool, is_dim: bool) -> None:
    assert vocab.is_int(value) is is_int
    assert vocab.is_dim(value) is is_dim


def test_call_of_matches_calls_of_the_named_ops_only() -> None:
    call = Call("exp", (X,))
    assert vocab.call_of(call) is call
    assert vocab.call_of(call, "exp", "tanh") is call
    assert vocab.call_of(call, "tanh") is None
    assert vocab.call_of(X) is None
    assert vocab.call_of(CallFunc("exp", (X,))) is None
    assert vocab.call_of(None) is None


def test_kill_predicates_recognise_kill_statements_only() -> None:
    kill = Call(vocab.KILL_STORAGE, (Var("s"),))
    assert vocab.kill_of(Effect(kill)) is kill
    assert vocab.is_kill(Effect(kill))
    assert vocab.killed_var(Effect(kill)) == Var("s")
    for op in vocab.KILL_OPS:
        assert vocab.killed_var(Effect(Call(op, (X,)))) == X
    # A binding is no kill statement, nor is a call of another op.
    assert vocab.kill_of(Bind("k", None, kill)) is None
    assert vocab.killed_var(Bind("k", None, kill)) is None
    assert vocab.kill_of(Effect(Call("exp", (X,)))) is None
    assert not vocab.is_kill(Effect(Call(vocab.CALL_PACKED, ("f", X))))
    # A kill of no variable is a kill, but ends no variable.
    assert vocab.is_kill(Effect(Call(vocab.KILL_TENSOR, (3,))))
    assert vocab.killed_var(Effect(Call(vocab.KILL_TENSOR, (3,)))) is None
    assert vocab.killed_var(Effect(Call(vocab.KILL_TENSOR, ()))) is None


# -- expr_vars --------------------------------------------------------------------------


def test_expr_vars_reads_every_variable_in_order() -> None:
    assert [list(expr_vars(e)) for e in ONE_OF_EACH] == [
        [X],
        [X, Y],
        [X, Y],
        [X, Z],
        [X, Y],
        [X],
    ]
    assert list(expr_vars("not an expression")) == []  # type: ignore[arg-type]


# -- ExprFunctor ------------------------------------------------------------------------


class _Kinds(ExprFunctor[str]):
    def visit_var(self, e: Var) -> str:
        return "var " + e.name

    def visit_call(self, e: Call) -> str:
        return "call " + e.op

    def visit_call_func(self, e: CallFunc) -> str:
        return "call_func " + e.func

    def visit_invoke(self, e: Invoke) -> str:
        return "invoke " + e.target

    def visit_tuple(self, e: TupleExpr) -> str:
        return f"tuple {len(e.fields)}"

    def visit_project(self, e: Project) -> str:
        return f"project {e.index}"


def test_expr_functor_dispatches_on_the_kind_of_expression() -> None:
    assert [_Kinds().visit_expr(e) for e in ONE_OF_EACH] == [
        "var x",
        "call add",
        "call_func f",
        "invoke exp",
        "tuple 2",
        "project 1",
    ]


def test_expr_functor_refuses_kinds_it_does_not_handle_and_non_expressions() -> None:
    class OnlyVars(ExprFunctor[str]):
        def visit_var(self, e: Var) -> str:
            return e.name

    assert OnlyVars().visit_expr(X) == "x"
    with pytest.raises(NotImplementedError, match="OnlyVars does not handle Call expressions"):
        OnlyVars().visit_expr(Call("exp", (X,)))
    with pytest.raises(TypeError, match="not an IR expression: int"):
        OnlyVars().visit_expr(3)  # type: ignore[arg-type]


def test_expr_functor_default_can_be_overridden() -> None:
    class VarOrNone(ExprFunctor["str | None"]):
        def visit_default(self, e: Expr) -> None:
            return None

        def visit_var(self, e: Var) -> str:
            return e.name

    assert [VarOrNone().visit_expr(e) for e in ONE_OF_EACH] == ["x", None, None, None, None, None]


# -- StmtVisitor, FunctionRewriter, with_body, map_functions ----------------------------


def test_stmt_visitor_walks_bindings_and_effects_in_order() -> None:
    seen: list[str] = []

    class Record(StmtVisitor):
        def visit_bind(self, stmt: Bind) -> None:
            seen.append("bind " + stmt.name)

        def visit_effect(self, stmt: Effect) -> None:
            seen.append("effect " + _Kinds().visit_expr(stmt.value))

    module = parse_module(MODULE, "w.rx")
    Record().visit_function(module.functions[1])
    assert seen == [
        "bind s",
        "bind y",
        "effect invoke exp",
        "bind z",
        "effect call memory.kill_tensor",
    ]
    StmtVisitor().visit_function(module.functions[1])  # the default visits do nothing


def test_function_rewriter_maps_each_statement_to_its_replacements() -> None:
    module = parse_module(MODULE, "w.rx")
    main = module.functions[1]

    class DropEffectsDoubleBinds(FunctionRewriter):
        def rewrite_stmt(self, stmt):  # type: ignore[no-untyped-def]
            if isinstance(stmt, Effect):
                return ()
            return (stmt, stmt)

    assert FunctionRewriter().rewrite_function(main) == main
    out = DropEffectsDoubleBinds().rewrite_function(main)
    assert [s.name for s in out.body] == ["s", "s", "y", "y", "z", "z"]
    assert (out.name, out.params, out.ret_type, out.attrs, out.ret) == (
        main.name,
        main.params,
        main.ret_type,
        main.attrs,
        main.ret,
    )
    assert out.loc == main.loc and out.attr_locs == main.attr_locs
    assert len(main.body) == 5  # the input is not changed


def test_with_body_keeps_everything_else_including_locations() -> None:
    loc, attr_loc = Loc("w.rx", 3, 1), Loc("w.rx", 3, 40)
    fn = Function(
        "f", (), OBJECT, (("planned", True),), (Bind("a", None, X),), Var("a"), loc, (attr_loc,)
    )
    new = with_body(fn, [Bind("b", None, Y)])
    assert new.body == (Bind("b", None, Y),)
    assert type(new.body) is tuple
    assert new.loc is loc and new.attr_locs == (attr_loc,) and new.attr_loc("planned") is attr_loc
    assert dataclasses.replace(new, body=fn.body) == fn


def test_map_functions_keeps_order_and_the_module_location() -> None:
    module = parse_module(MODULE, "w.rx")
    seen: list[str] = []

    def rename(fn: Function) -> Function:
        seen.append(fn.name)
        return dataclasses.replace(fn, name=fn.name + "2")

    out = map_functions(module, rename)
    assert seen == ["g", "main"]
    assert [f.name for f in out.functions] == ["g2", "main2"]
    assert out.loc == module.loc
    assert [f.name for f in module.functions] == ["g", "main"]


# -- names ------------------------------------------------------------------------------


def test_function_names_are_parameters_and_bindings() -> None:
    main = parse_module(MODULE, "w.rx").functions[1]
    assert function_names(main) == {"x", "s", "y", "z"}
    assert NameSupply.for_function(main).taken == {"x", "s", "y", "z"}


def test_name_supply_counts_up_from_the_base() -> None:
    names = NameSupply({"a", "a_1", "b"})
    assert names.fresh("c") == "c"
    assert names.fresh("a") == "a_2"
    assert names.fresh("a") == "a_3"
    assert names.fresh("b") == "b_1"
    assert names.fresh("c") == "c_1"
    names.reserve("d")
    assert names.fresh("d") == "d_1"
    assert NameSupply().fresh("x") == "x"


_BASES = st.sampled_from(["a", "b", "a_1", "x_arg", "arena", "t"])
_TAKEN = st.sets(st.one_of(_BASES, st.builds(lambda b, i: f"{b}_{i}", _BASES, st.integers(1, 4))))


@given(taken=_TAKEN, bases=st.lists(_BASES, max_size=20))
def test_fresh_names_never_collide_with_taken_ones_or_each_other(
    taken: set[str], bases: list[str]
) -> None:
    names = NameSupply(taken)
    out = [names.fresh(b) for b in bases]
    assert not set(out) & taken
    assert len(set(out)) == len(out)
    for base, name in zip(bases, out):
        assert name == base or (name.startswith(base + "_") and name[len(base) + 1 :].isdigit())
    assert names.taken == taken | set(out)
    assert taken <= names.taken
