"""One way to walk the IR: dispatch on expression and statement kinds, rebuild functions.

:class:`ExprFunctor` replaces ``isinstance`` chains: a subclass overrides the ``visit_*``
methods for the kinds it handles; the rest fall to :meth:`ExprFunctor.visit_default`, which
raises. :class:`StmtVisitor` walks a function's body, :class:`FunctionRewriter` maps each
statement to the statements that replace it and returns a new function (nodes are
immutable: nothing is changed in place).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Generic, Iterable, TypeVar

from .nodes import (
    Bind,
    Call,
    CallFunc,
    Effect,
    Expr,
    Function,
    Invoke,
    Module,
    Project,
    Stmt,
    TupleExpr,
    Var,
)

R = TypeVar("R")

_EXPR_METHODS: dict[type, str] = {
    Var: "visit_var",
    Call: "visit_call",
    CallFunc: "visit_call_func",
    Invoke: "visit_invoke",
    TupleExpr: "visit_tuple",
    Project: "visit_project",
}


class ExprFunctor(Generic[R]):
    """Calls the method for the kind of an expression and returns what it returns."""

    def visit_expr(self, expr: Expr) -> R:
        method = _EXPR_METHODS.get(type(expr))
        if method is None:
            raise TypeError(f"not an IR expression: {type(expr).__name__}")
        return getattr(self, method)(expr)

    def visit_default(self, expr: Expr) -> R:
        raise NotImplementedError(
            f"{type(self).__name__} does not handle {type(expr).__name__} expressions"
        )

    def visit_var(self, expr: Var) -> R:
        return self.visit_default(expr)

    def visit_call(self, expr: Call) -> R:
        return self.visit_default(expr)

    def visit_call_func(self, expr: CallFunc) -> R:
        return self.visit_default(expr)

    def visit_invoke(self, expr: Invoke) -> R:
        return self.visit_default(expr)

    def visit_tuple(self, expr: TupleExpr) -> R:
        return self.visit_default(expr)

    def visit_project(self, expr: Project) -> R:
        return self.visit_default(expr)


class StmtVisitor:
    """Walks the statements of a function in order: ``visit_bind`` and ``visit_effect``."""

    def visit_function(self, fn: Function) -> None:
        for stmt in fn.body:
            self.visit_stmt(stmt)

    def visit_stmt(self, stmt: Stmt) -> None:
        if isinstance(stmt, Bind):
            self.visit_bind(stmt)
        else:
            self.visit_effect(stmt)

    def visit_bind(self, stmt: Bind) -> None:
        pass

    def visit_effect(self, stmt: Effect) -> None:
        pass


class FunctionRewriter:
    """Rebuilds a function statement by statement; override :meth:`rewrite_stmt`."""

    def rewrite_function(self, fn: Function) -> Function:
        body: list[Stmt] = []
        for stmt in fn.body:
            body.extend(self.rewrite_stmt(stmt))
        return with_body(fn, body)

    def rewrite_stmt(self, stmt: Stmt) -> Iterable[Stmt]:
        return (stmt,)


def with_body(fn: Function, body: Iterable[Stmt]) -> Function:
    """``fn`` with a new body (everything else, its location included, kept)."""
    return dataclasses.replace(fn, body=tuple(body))


def map_functions(module: Module, f: Callable[[Function], Function]) -> Module:
    """A new module whose every function is ``f`` of the old one, in the same order."""
    return dataclasses.replace(module, functions=tuple(f(fn) for fn in module.functions))


__all__ = ["ExprFunctor", "FunctionRewriter", "StmtVisitor", "map_functions", "with_body"]
