"""The verifier: checks a module is well formed and infers the type of every value.

It checks that names are defined once and before use, every call matches its op or
function signature, attributes are valid, written types agree with inferred ones,
primitive functions hold only kernel ops, symbolic dims are bound by a parameter (and
``upper_bounds`` names real dims), tensor sizes are sane, and the call graph has no cycle.
The first problem found is raised as an :class:`RxError` at its source location.

:func:`verify_module` returns the inferred types (function name → value name → type),
which passes use instead of re-deriving them.
"""

from __future__ import annotations

import difflib
from typing import Any, Iterable, Mapping, cast

from . import dims as D
from . import nodes as _nodes, types as _types
from .diagnostics import Loc, RxError
from .io_arena import check_io_in_arena, is_io_in_arena
from .placement_check import check_placement
from .storage_bounds import check_tensors_fit_storage
from .kill_check import check_kills, has_kills
from .nodes import (
    Bind,
    Call,
    CallFunc,
    DictLit,
    Effect,
    Expr,
    Function,
    Invoke,
    Module,
    Project,
    TupleExpr,
    Var,
)
from .ops import REGISTRY
from .io_names import ONNX_INPUTS, ONNX_OUTPUTS, check_io_names, output_count
from .ops.memory import UNIT
from .registry import BoundCall, OpDef, OpError, Registry, bind_args
from .types import (
    OBJECT,
    TensorType,
    TupleType,
    Type,
    dtype_nbytes,
    type_free_vars,
    type_to_str,
    types_equal,
)
from .vocab import CONST, call_of
from .walk import ExprFunctor, StmtVisitor

MAX_TENSOR_BYTES = 1 << 40
"""The largest tensor (1 TiB) relaxc accepts; anything larger is surely a typo."""

KNOWN_FUNCTION_ATTRS = {
    "primitive": "true for a kernel function (bodies of kernel ops only)",
    "upper_bounds": "{name = bound, ...}: largest value of each symbolic dim",
    "planned": "set by PlanMemory: the allocations of this function are planned",
    "outputs": (
        "set by PlanWorkspace on a primitive function: its last N parameters are its output buffers"
    ),
    "workspace": (
        "set by PlanWorkspace: bytes of scratch the caller passes (a u8 tensor before the outputs)"
    ),
    "scratch": (
        "set by PlanKernelScratch on a primitive function: bytes of kernel scratch every invoke "
        "of it passes (scratch (%s)); each kernel of its body uses that memory in turn"
    ),
    "io_in_arena": (
        "set by PlanMemory{io_in_arena=true}: the inputs are copied into the arena at the top "
        "and the outputs carved from it (see relaxc.ir.io_arena)"
    ),
    "order_peak_written": (
        "set by ReorderForMemory: the most bytes live at once in the order it was given"
    ),
    "order_peak_chosen": "set by ReorderForMemory: the most bytes live at once in its order",
    ONNX_INPUTS: '["name", ...]: the ONNX name of each parameter (set by relaxc import)',
    ONNX_OUTPUTS: '["name", ...]: the ONNX name of each output leaf (set by relaxc import)',
}

FunctionTypes = dict[str, Type]
ModuleTypes = dict[str, FunctionTypes]


def verify_module(
    module: Module, registry: Registry = REGISTRY, *, kills: bool = True
) -> ModuleTypes:
    """Verify ``module``; return every value's type per function, or raise RxError.

    With ``kills`` (the default) the kill checker also runs (:mod:`relaxc.ir.kill_check`).
    """
    seen: dict[str, Function] = {}
    for fn in module.functions:
        if fn.name in seen:
            first = seen[fn.name].loc
            where = f" (first defined at line {first.line})" if first else ""
            raise RxError(f"function @{fn.name} is defined twice{where}", fn.loc)
        seen[fn.name] = fn
    _check_call_graph(module, seen)
    out: ModuleTypes = {}
    for fn in module.functions:
        out[fn.name] = _FunctionChecker(fn, seen, registry).run()
        check_tensors_fit_storage(fn)
        if fn.is_primitive and fn.attr("outputs") is not None:
            check_placement(fn, out[fn.name], registry)
        if is_io_in_arena(fn):
            check_io_in_arena(fn, module)
    for fn in module.functions if kills else ():
        if has_kills(fn):
            check_kills(fn, module)
    return out


def verify_function(fn: Function, module: Module, registry: Registry = REGISTRY) -> FunctionTypes:
    """Verify one function of ``module`` (callees are looked up in the module)."""
    table = {f.name: f for f in module.functions}
    types = _FunctionChecker(fn, table, registry).run()
    check_tensors_fit_storage(fn)
    if fn.is_primitive and fn.attr("outputs") is not None:
        check_placement(fn, types, registry)
    if is_io_in_arena(fn):
        check_io_in_arena(fn, module)
    return types


class _Callee(ExprFunctor["str | None"]):
    """The function an expression calls (``call @f``, ``invoke @f``), or None."""

    def visit_default(self, e: Expr) -> None:
        return None

    def visit_call_func(self, e: CallFunc) -> str:
        return e.func

    def visit_invoke(self, e: Invoke) -> str | None:
        return e.target if e.is_func else None


_CALLEE = _Callee()


def _callees(fn: Function) -> Iterable[tuple[str, Loc | None]]:
    for s in fn.body:
        callee = _CALLEE.visit_expr(s.value)
        if callee is not None:
            yield callee, s.value.loc


def _check_call_graph(module: Module, table: Mapping[str, Function]) -> None:
    """Refuse recursion. A depth-first walk with its own stack (not Python's), so a chain of
    thousands of functions calling each other is checked like any other."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done

    for fn in module.functions:
        if fn.name in state:
            continue
        state[fn.name] = 1
        path = [fn.name]
        stack = [iter(_callees(fn))]
        while stack:
            for callee, loc in stack[-1]:
                if callee not in table:
                    continue  # reported by the function checker with a did-you-mean
                if state.get(callee) == 1:
                    cycle = " -> ".join("@" + p for p in path[path.index(callee) :] + [callee])
                    message = f"recursive call: {cycle} (relaxc programs have no recursion)"
                    raise RxError(message, loc)
                if callee not in state:
                    state[callee] = 1
                    path.append(callee)
                    stack.append(iter(_callees(table[callee])))
                    break
            else:
                state[path.pop()] = 2
                stack.pop()


def _suggest(name: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


class _FunctionChecker(StmtVisitor, ExprFunctor[Type]):
    """Walks one function in order, keeping the type of every defined name.

    The statement methods check each statement; the expression methods return the type
    of the value.
    """

    def __init__(self, fn: Function, table: Mapping[str, Function], registry: Registry):
        self.fn = fn
        self.table = table
        self.registry = registry
        self.types: FunctionTypes = {}
        self.def_loc: dict[str, Loc | None] = {}
        self.dims: set[str] = set()
        self.bounds: dict[str, int] = {}
        # Tensor types already found sane under the bounds in _sane_bounds (see _check_type_sane).
        self._sane: set[TensorType] = set()
        self._sane_bounds: dict[str, int] = {}
        self._sane_ids: dict[int, TensorType] = {}  # the same, by identity
        # Results of op inference by (op, inputs, attributes), when those are plain (_strict).
        self._inferred: dict[tuple[Any, ...], Type] = {}
        self._tokens = _TypeTokens()
        self._lowered = fn.is_primitive and fn.attr("outputs") is not None

    # -- entry ------------------------------------------------------------------------
    def run(self) -> FunctionTypes:
        fn = self.fn
        self._check_params()
        self._check_attrs()
        for p in fn.params:
            self._check_type_sane(p.type, p.loc, f"%{p.name}")
        self._check_type_sane(fn.ret_type, fn.loc, "return type")
        self.visit_function(fn)
        ret_t = self.visit_expr(fn.ret)
        if not types_equal(ret_t, fn.ret_type):
            raise RxError(
                f"@{fn.name} returns {type_to_str(ret_t)} but is declared to return "
                f"{type_to_str(fn.ret_type)}",
                fn.ret.loc or fn.loc,
            )
        return self.types

    # -- signature ----------------------------------------------------------------------
    def _check_params(self) -> None:
        fn = self.fn
        plain: set[str] = set()
        for p in fn.params:
            if p.name in self.types:
                raise RxError(f"parameter %{p.name} is declared twice", p.loc)
            self.types[p.name] = p.type
            self.def_loc[p.name] = p.loc
            for leaf in _tensor_types(p.type):
                for d in leaf.shape:
                    if isinstance(d, D.Sym):
                        plain.add(d.name)
                    elif (aff := D.affine_in(d)) is not None:
                        plain.add(aff[0])  # read back from a * n + b
        for p in fn.params:
            for name in sorted(type_free_vars(p.type)):
                if name not in plain:
                    raise RxError(
                        f"symbolic dim '{name}' of %{p.name} must also appear alone as a "
                        f"dimension of some parameter, or in one of the form a * {name} + b, so "
                        "its value can be read from the inputs",
                        p.loc,
                    )
        self.dims = plain

    def _check_attrs(self) -> None:
        fn = self.fn
        for key, value in fn.attrs:
            if key not in KNOWN_FUNCTION_ATTRS:
                raise RxError(
                    f"unknown function attribute '{key}'{_suggest(key, KNOWN_FUNCTION_ATTRS)}",
                    fn.attr_loc(key),
                    notes=("known attributes: " + ", ".join(sorted(KNOWN_FUNCTION_ATTRS)),),
                )
            if key in ("primitive", "planned", "io_in_arena") and not isinstance(value, bool):
                raise RxError(f"attribute '{key}' must be true or false", fn.attr_loc(key))
            if key in ("order_peak_written", "order_peak_chosen") and (
                type(value) is not int or value < 0
            ):
                raise RxError(f"attribute '{key}' must be a byte count", fn.attr_loc(key))
            if key == "outputs":
                self._check_lowered(value)
            if key == "workspace" and fn.attr("outputs") is None:
                raise RxError(
                    "attribute 'workspace' belongs to a lowered primitive function "
                    "(with 'outputs')",
                    fn.attr_loc(key),
                )
            if key == "scratch" and (not fn.is_primitive or type(value) is not int or value < 1):
                raise RxError(
                    "attribute 'scratch' is a positive byte count on a primitive function",
                    fn.attr_loc(key),
                )
            if key == "upper_bounds":
                self._check_upper_bounds(value)
            if key == ONNX_INPUTS:
                check_io_names(key, value, len(fn.params), "parameters", fn.attr_loc(key))
            if key == ONNX_OUTPUTS:
                n = output_count(fn.ret_type)
                check_io_names(key, value, n, "outputs", fn.attr_loc(key))

    def _check_lowered(self, value: Any) -> None:
        """A lowered primitive function (PlanWorkspace's output): its last ``outputs``
        parameters are the output buffers it writes and returns; a workspace parameter,
        when ``workspace`` is not 0, comes just before them."""
        fn = self.fn
        where = fn.attr_loc("outputs")
        k = value
        if not fn.is_primitive:
            raise RxError("attribute 'outputs' belongs to a primitive function", where)
        if not isinstance(k, int) or isinstance(k, bool) or k < 1 or k > len(fn.params):
            raise RxError(
                f"attribute 'outputs' must be a count from 1 to {len(fn.params)} (the "
                "output parameters)",
                where,
            )
        outs = fn.params[len(fn.params) - k :]
        ret = [fn.ret] if isinstance(fn.ret, Var) else list(fn.ret.fields)
        if [v.name for v in ret] != [p.name for p in outs] or isinstance(
            fn.ret, TupleExpr
        ) != isinstance(fn.ret_type, TupleType):
            raise RxError(
                f"a lowered primitive function returns its output parameters "
                f"({', '.join('%' + p.name for p in outs)})",
                fn.ret.loc or where,
            )
        ws = fn.attr("workspace", 0)
        if not _plain_dim(ws) and not isinstance(ws, (D.Sym, D.BinOp, D.DimCall)):
            raise RxError("attribute 'workspace' must be a byte count", fn.attr_loc("workspace"))
        if ws != 0:
            if len(fn.params) <= k:
                raise RxError(
                    "a lowered primitive function with a workspace takes it as a parameter before "
                    "its outputs",
                    where,
                )
            p = fn.params[len(fn.params) - k - 1]
            want = TensorType((cast(D.Dim, ws),), "u8")  # a dim: checked above
            if not types_equal(p.type, want):
                raise RxError(
                    f"parameter %{p.name} must be the workspace, {type_to_str(want)}",
                    p.loc or where,
                )

    def _check_upper_bounds(self, value: Any) -> None:
        fn = self.fn
        if not isinstance(value, DictLit):
            raise RxError(
                "attribute 'upper_bounds' must be a mapping such as {n = 64}",
                fn.attr_loc("upper_bounds"),
            )
        locs = value.locs if len(value.locs) == len(value.items) else (None,) * len(value.items)
        for (name, bound), loc in zip(value.items, locs):
            loc = loc or fn.attr_loc("upper_bounds")
            if name not in self.dims:
                known = ", ".join(sorted(self.dims)) or "none"
                raise RxError(
                    f"upper_bounds names '{name}', which is not a symbolic dim of @{fn.name}"
                    f"{_suggest(name, self.dims)}",
                    loc,
                    notes=(f"symbolic dims of @{fn.name}: {known}",),
                )
            if not isinstance(bound, int) or isinstance(bound, bool) or bound <= 0:
                raise RxError(f"upper bound of '{name}' must be a positive integer", loc)
            self.bounds[name] = bound

    # -- statements -------------------------------------------------------------------
    def _define(self, name: str, t: Type, loc: Loc | None) -> None:
        if name in self.types:
            prev = self.def_loc.get(name)
            where = f" (first defined at line {prev.line})" if prev else ""
            raise RxError(f"%{name} is already defined{where}; every value is assigned once", loc)
        self.types[name] = t
        self.def_loc[name] = loc

    def visit_bind(self, stmt: Bind) -> None:
        value = stmt.value
        if isinstance(value, Invoke):
            raise RxError(
                "invoke writes into its outs and returns nothing; write it as a statement", stmt.loc
            )
        annotated = stmt.type
        if annotated is not None:
            self._check_type_sane(annotated, stmt.loc, f"%{stmt.name}")
            self._check_bound_dims(type_free_vars(annotated), stmt.loc)
        const = call_of(value, CONST)
        if const is not None and annotated is not None:
            t = self._const_annotated(const, annotated)
        else:
            t = self.visit_expr(value)
            if t.__class__ is TupleType and t == UNIT and isinstance(value, Call):
                raise RxError(
                    f"{value.op} returns nothing; write it as a statement without '%{stmt.name} ='",
                    stmt.loc,
                )
            if annotated is not None:
                if t == OBJECT and isinstance(value, Call):
                    t = annotated  # runtime calls return what their annotation says
                elif not types_equal(annotated, t):
                    raise RxError(
                        f"%{stmt.name} is declared {type_to_str(annotated)} but its value has type "
                        f"{type_to_str(t)}",
                        stmt.loc,
                    )
                else:
                    t = annotated
            self._check_type_sane(t, stmt.loc, f"%{stmt.name}")
        self._define(stmt.name, t, stmt.loc)

    def visit_effect(self, stmt: Effect) -> None:
        value = stmt.value
        if isinstance(value, Invoke):
            self._invoke(value)
        else:
            self.visit_expr(value)

    def _const_annotated(self, call: Call, annotated: Type) -> Type:
        op = self.registry.get(CONST)
        assert op is not None
        bound = self._bind_op(op, call)
        if not isinstance(annotated, TensorType):
            raise RxError("a constant must have a tensor type", call.loc)
        value = bound.attrs["value"]
        if isinstance(value, str):
            if not value:
                raise RxError("a weight name must not be empty", call.loc)
            return annotated
        inferred = self._infer(op, [], bound.attrs, call.loc)
        if not types_equal(inferred, annotated):
            raise RxError(
                f"constant is declared {type_to_str(annotated)} but its literal has type "
                f"{type_to_str(inferred)}",
                call.loc,
            )
        return annotated

    # -- expressions ------------------------------------------------------------------
    def _use(self, expr: Var) -> Type:
        t = self.types.get(expr.name)
        if t is None:
            raise RxError(f"%{expr.name} is not defined{_suggest(expr.name, self.types)}", expr.loc)
        return t

    visit_var = _use

    def visit_tuple(self, e: TupleExpr) -> Type:
        t = TupleType(tuple(self._use(v) for v in e.fields))
        if any(isinstance(f, TupleType) for f in t.fields):
            _check_tuple_depth(t, e.loc, "this tuple")
        return t

    def visit_project(self, e: Project) -> Type:
        t = self._use(e.tuple_var)
        if not isinstance(t, TupleType):
            raise RxError(
                f"%{e.tuple_var.name} is not a tuple; it has type {type_to_str(t)}", e.loc
            )
        if not 0 <= e.index < len(t.fields):
            raise RxError(
                f"tuple index {e.index} is out of range for %{e.tuple_var.name} with "
                f"{len(t.fields)} field(s)",
                e.loc,
            )
        return t.fields[e.index]

    def visit_invoke(self, e: Invoke) -> Type:
        # Statements handle invoke themselves (visit_bind refuses one, visit_effect checks it).
        raise RxError("invoke returns nothing and cannot be used as a value", e.loc)

    def _lookup_op(self, name: str, loc: Loc | None) -> OpDef:
        op = self.registry.get(name)
        if op is None:
            if name in self.table:
                raise RxError(
                    f"unknown op '{name}'; to call function @{name} write 'call @{name}(...)'", loc
                )
            raise RxError(f"unknown op '{name}'{_suggest(name, self.registry.names())}", loc)
        return op

    def _bind_op(self, op: OpDef, call: Call | Invoke) -> BoundCall:
        try:
            return bind_args(op, call.args, call.kwargs)
        except OpError as e:
            raise RxError(str(e), call.loc) from None

    def _infer(
        self, op: OpDef, inputs: list[Type], attrs: Mapping[str, Any], loc: Loc | None
    ) -> Type:
        # Inference is a pure function of the input types and attributes, and a big module
        # calls the same op on the same types over and over: remember each result.
        tokens = self._tokens
        seen = (id(op), *map(tokens.by_id.get, map(id, inputs)))  # inputs seen before
        key: tuple[Any, ...] | None = seen
        if None in seen or attrs:
            try:
                key = (id(op), _strict(inputs, tokens), _strict(tuple(attrs.items()), tokens))
            except _NotPlain:
                key = None
        if key is not None:
            t = self._inferred.get(key)
            if t is not None:
                return t
        try:
            t = op.infer(inputs, attrs)
        except OpError as e:
            raise RxError(str(e), loc) from None
        if key is not None:
            self._inferred[key] = t
        return t

    def visit_call(self, call: Call) -> Type:
        op = self._lookup_op(call.op, call.loc)
        if self.fn.is_primitive and not (op.is_kernel or op.category == "constant"):
            raise RxError(
                f"primitive function @{self.fn.name} may only contain kernel ops, not {call.op}",
                call.loc,
            )
        if self._lowered and op.category == "kernel":
            raise RxError(
                f"lowered primitive function @{self.fn.name} computes {call.op} by "
                f"destination passing only (invoke {call.op}(...) outs (...))",
                call.loc,
            )
        bound = self._bind_op(op, call)
        inputs = [self._use(v) for v in bound.inputs]
        attrs: Mapping[str, Any] = bound.attrs
        if op.free_args:
            attrs = dict(attrs)
            attrs["args"] = tuple(self._use(a) if isinstance(a, Var) else a for a in call.args)
        else:
            self._check_attr_dims(attrs, call.loc)
        return self._infer(op, inputs, attrs, call.loc)

    def _check_attr_dims(self, attrs: Mapping[str, Any], loc: Loc | None) -> None:
        for v in attrs.values():
            for x in v if isinstance(v, tuple) else (v,):
                if isinstance(x, (D.Sym, D.BinOp, D.DimCall)):
                    self._check_bound_dims(D.free_vars(x), loc)
                    if _divides_by_zero(x):
                        raise RxError(f"dimension {D.dim_to_str(x)} divides by zero", loc)

    def _check_bound_dims(self, names: Iterable[str], loc: Loc | None) -> None:
        for name in sorted(names):
            if name not in self.dims:
                raise RxError(
                    f"symbolic dim '{name}' is not bound by any parameter of @{self.fn.name}"
                    f"{_suggest(name, self.dims)}",
                    loc,
                )

    def _callee(self, name: str, loc: Loc | None) -> Function:
        callee = self.table.get(name)
        if callee is None:
            raise RxError(f"function @{name} is not defined{_suggest(name, self.table)}", loc)
        return callee

    def visit_call_func(self, call: CallFunc) -> Type:
        if self.fn.is_primitive:
            raise RxError(
                f"primitive function @{self.fn.name} may not call other functions", call.loc
            )
        callee = self._callee(call.func, call.loc)
        if callee.attr("outputs") is not None:
            raise RxError(
                f"@{callee.name} is a lowered primitive function (it writes its outputs): "
                f"invoke @{callee.name}(...) outs (...)",
                call.loc,
            )
        return self._apply_signature(callee, [self._use(v) for v in call.args], call.args, call.loc)

    def _apply_signature(
        self, callee: Function, arg_types: list[Type], args: tuple[Any, ...], loc: Loc | None
    ) -> Type:
        if len(arg_types) != len(callee.params):
            raise RxError(
                f"@{callee.name} takes {len(callee.params)} argument(s), got {len(arg_types)}", loc
            )
        env: dict[str, D.Dim] = {}
        for p, t, a in zip(callee.params, arg_types, args):
            msg = _unify(p.type, t, env)
            if msg:
                raise RxError(
                    f"argument %{a.name} of @{callee.name} has type {type_to_str(t)}, "
                    f"but parameter %{p.name} is {type_to_str(p.type)}: {msg}",
                    a.loc or loc,
                )
        return _subst_type(callee.ret_type, env)

    def _invoke(self, inv: Invoke) -> None:
        if self.fn.is_primitive and (not self._lowered or inv.is_func):
            raise RxError(
                f"primitive function @{self.fn.name} may not contain invoke"
                + (" of a function" if self._lowered else ""),
                inv.loc,
            )
        out_types = [self._use(v) for v in inv.outs]
        for v, t in zip(inv.outs, out_types):
            if not isinstance(t, TensorType):
                raise RxError(
                    f"output %{v.name} of invoke must be a tensor, not {type_to_str(t)}", v.loc
                )
        if inv.scratch is not None:
            self._invoke_scratch(inv)
        elif inv.is_func and (need := self._callee(inv.target, inv.loc).attr("scratch")):
            raise RxError(
                f"invoke @{inv.target} must pass scratch (%s) of {need} bytes "
                f"(@{inv.target} has attrs {{scratch = {need}}})",
                inv.loc,
            )
        if inv.is_func:
            callee = self._callee(inv.target, inv.loc)
            if not callee.is_primitive:
                raise RxError(
                    f"invoke needs a primitive function; @{inv.target} is not marked primitive "
                    f"(use call @{inv.target}(...) instead)",
                    inv.loc,
                )
            if inv.kwargs or any(not isinstance(a, Var) for a in inv.args):
                raise RxError(
                    f"invoke @{inv.target}: a function takes only %var arguments", inv.loc
                )
            if callee.attr("outputs") is not None:  # lowered: the outs are its last parameters
                result = self._apply_signature(
                    callee,
                    [self._use(cast(Var, a)) for a in inv.args] + out_types,
                    inv.args + inv.outs,
                    inv.loc,
                )
            else:
                result = self._apply_signature(
                    callee, [self._use(cast(Var, a)) for a in inv.args], inv.args, inv.loc
                )
        else:
            op = self._lookup_op(inv.target, inv.loc)
            if not op.is_kernel or op.is_view:
                raise RxError(
                    f"invoke needs a kernel op; {inv.target} is a {op.category} op", inv.loc
                )
            bound = self._bind_op(op, inv)
            self._check_attr_dims(bound.attrs, inv.loc)
            result = self._infer(op, [self._use(v) for v in bound.inputs], bound.attrs, inv.loc)
        expected = list(result.fields) if isinstance(result, TupleType) else [result]
        if len(expected) != len(out_types):
            raise RxError(
                f"invoke {'@' if inv.is_func else ''}{inv.target} produces "
                f"{len(expected)} output(s) but has {len(out_types)} in outs",
                inv.loc,
            )
        for v, want, got in zip(inv.outs, expected, out_types):
            if not types_equal(want, got):
                raise RxError(
                    f"output %{v.name} has type {type_to_str(got)} but the kernel produces "
                    f"{type_to_str(want)}",
                    v.loc or inv.loc,
                )

    def _invoke_scratch(self, inv: Invoke) -> None:
        """``scratch (%s)``: a one-dimensional u8 tensor, none of the call's inputs or outs,
        at least as large as a callee function asks (``attrs {scratch = N}``)."""
        s = inv.scratch
        assert s is not None
        t = self._use(s)
        if any(isinstance(a, Var) and a.name == s.name for a in inv.args) or any(
            v.name == s.name for v in inv.outs
        ):
            raise RxError(
                f"scratch %{s.name} of invoke is also one of its inputs or outs", s.loc or inv.loc
            )
        if not (isinstance(t, TensorType) and t.dtype == "u8" and len(t.shape) == 1):
            raise RxError(
                f"scratch %{s.name} of invoke must be a Tensor[(n,), u8], not {type_to_str(t)}",
                s.loc or inv.loc,
            )
        if inv.is_func:
            want = self._callee(inv.target, inv.loc).attr("scratch")
            if want is None:
                raise RxError(
                    f"invoke @{inv.target} passes scratch, but @{inv.target} takes none "
                    "(attrs {scratch = N})",
                    inv.loc,
                )
            have = t.shape[0]
            if isinstance(have, int) and isinstance(want, int) and have < want:
                raise RxError(
                    f"scratch %{s.name} has {have} bytes, but @{inv.target} needs {want}",
                    s.loc or inv.loc,
                )

    # -- sanity of sizes --------------------------------------------------------------
    def _check_type_sane(self, t: Type, loc: Loc | None, what: str) -> None:
        if isinstance(t, TupleType):
            _check_tuple_depth(t, loc, f"the type of {what}")
        # Most values share a handful of types, and the size bound needs a symbolic product,
        # so a tensor type that passed is remembered (while the bounds stay the same). Only
        # types of plain dims are: equal ones are then identical, and check the same.
        sane_ids = self._sane_ids
        if id(t) in sane_ids and self.bounds == self._sane_bounds:  # (a tensor type seen sane)
            return
        sane = self._sane
        if self.bounds != self._sane_bounds:
            sane.clear()
            sane_ids.clear()
            self._sane_bounds = dict(self.bounds)
        for leaf in _tensor_types(t):
            if id(leaf) in sane_ids:
                continue
            plain = _plain_tensor(leaf)
            if plain:
                if leaf in sane:
                    sane_ids[id(leaf)] = leaf
                    continue
            for d in leaf.shape:
                if isinstance(d, int) and d < 0:
                    raise RxError(f"{what}: negative dimension {d}", loc)
                if not isinstance(d, int) and _divides_by_zero(d):
                    raise RxError(f"{what}: dimension {D.dim_to_str(d)} divides by zero", loc)
            elems = D.upper_bound(leaf.num_elements(), self.bounds)
            if elems is not None and elems * dtype_nbytes(leaf.dtype) > MAX_TENSOR_BYTES:
                raise RxError(
                    f"{what}: tensor {type_to_str(leaf)} would take "
                    f"{elems * dtype_nbytes(leaf.dtype):,} bytes, more than the "
                    f"{MAX_TENSOR_BYTES:,}-byte limit",
                    loc,
                )
            if plain:
                sane.add(leaf)
                sane_ids[id(leaf)] = leaf


def _plain_dim(d: Any) -> bool:
    """An int, a name, or max/min/arithmetic of those (no bool, float or other lookalike)."""
    k = type(d)
    if k is int or k is D.Sym:
        return True
    if k is D.BinOp:
        return _plain_dim(d.lhs) and _plain_dim(d.rhs)
    if k is D.DimCall:
        return all(_plain_dim(a) for a in d.args)
    return False


def _plain_tensor(t: TensorType) -> bool:
    return type(t.dtype) is str and type(t.shape) is tuple and all(_plain_dim(d) for d in t.shape)


class _NotPlain(Exception):
    pass


_BOOL = object()  # tags that keep True/1 and 1.0/1 apart in a _strict key
_FLOAT = object()


class _TypeTokens:
    """Stand-ins for plain tensor types in cache keys: equal types get the same token.

    A token hashes and compares by identity, where a TensorType hashes through Python code.
    ``by_id`` maps ``id(t)`` to the token of ``t``; ``seen`` holds every such ``t``, so that
    its id stays unique.
    """

    __slots__ = ("by_id", "by_value", "seen")

    def __init__(self) -> None:
        self.by_id: dict[int, object] = {}
        self.by_value: dict[TensorType, object] = {}
        self.seen: list[TensorType] = []

    def token(self, t: TensorType) -> object:
        token = self.by_id.get(id(t))
        if token is not None:
            return token
        if not _plain_tensor(t):
            raise _NotPlain
        token = self.by_value.get(t)
        if token is None:
            token = self.by_value[t] = object()
        self.by_id[id(t)] = token
        self.seen.append(t)
        return token


def _strict(v: Any, tokens: _TypeTokens) -> Any:
    """A key for ``v`` that is equal only for identical values (True is not 1, 1.0 is not 1).

    Raises _NotPlain for anything else than ints, strings, bools, floats, None, dtypes,
    plain dims and types, and lists or tuples of those; a tensor type is its token.
    """
    k = type(v)
    if k is TensorType:
        return tokens.token(v)
    if k is int or k is str or v is None:
        return v
    elif k is tuple or k is list:
        return (k, *[_strict(x, tokens) for x in v])
    elif k is TupleType:
        return (k, *[_strict(f, tokens) for f in v.fields])
    elif k is bool:
        return (_BOOL, v)
    elif k is float:
        return (_FLOAT, repr(v))
    elif k is D.Sym or k is D.BinOp or k is D.DimCall:
        if _plain_dim(v):
            return v
    elif k is _nodes.DType:
        if type(v.name) is str:
            return v
    elif k is _types.StorageType or k is _types.ObjectType:
        return v
    raise _NotPlain


def _divides_by_zero(d: D.Dim) -> bool:
    """True if ``d`` divides (or takes a remainder) by the literal 0 anywhere."""
    if isinstance(d, D.BinOp):
        if d.op in ("/", "%") and d.rhs == 0:
            return True
        return _divides_by_zero(d.lhs) or _divides_by_zero(d.rhs)
    if isinstance(d, D.DimCall):
        return any(_divides_by_zero(a) for a in d.args)
    return False


MAX_TUPLE_DEPTH = 256
"""How deeply tuples may nest in a type (the analyses and backends walk types recursively)."""


def _check_tuple_depth(t: TupleType, loc: Loc | None, what: str) -> None:
    """Refuse a tuple type nested deeper than MAX_TUPLE_DEPTH (counted level by level, with
    no recursion, and only as far as the limit)."""
    depth, level = 1, list(t.fields)
    while True:
        level = [f for x in level if isinstance(x, TupleType) for f in x.fields]
        if not level:
            return
        depth += 1
        if depth > MAX_TUPLE_DEPTH:
            raise RxError(
                f"{what} nests tuples more than {MAX_TUPLE_DEPTH} levels deep (the most "
                "relaxc allows); keep the inner tuples in values of their own, or "
                "flatten them",
                loc,
            )


def _tensor_types(t: Type) -> list[TensorType]:
    if isinstance(t, TensorType):
        return [t]
    if isinstance(t, TupleType):
        return [x for f in t.fields for x in _tensor_types(f)]
    return []


def _unify(param: Type, arg: Type, env: dict[str, D.Dim]) -> str | None:
    """Match an argument type to a parameter type, binding the callee's bare symbolic dims."""
    if isinstance(param, TensorType):
        if not isinstance(arg, TensorType):
            return "not a tensor"
        if param.dtype != arg.dtype:
            return f"dtype {arg.dtype} is not {param.dtype}"
        if len(param.shape) != len(arg.shape):
            return f"rank {len(arg.shape)} is not {len(param.shape)}"
        for pd, ad in zip(param.shape, arg.shape):
            if isinstance(pd, D.Sym) and pd.name not in env:
                env[pd.name] = ad
        for pd, ad in zip(param.shape, arg.shape):
            solved = D.solve_affine(pd, ad) if not isinstance(pd, (int, D.Sym)) else None
            if solved is not None and solved[0] not in env:
                env[solved[0]] = solved[1]  # checked below: a * n + b must give the argument's dim
        for pd, ad in zip(param.shape, arg.shape):
            want = D.substitute(pd, env)
            if not D.dims_equal(want, ad):
                return f"dimension {D.dim_to_str(ad)} does not match {D.dim_to_str(want)}"
        return None
    if isinstance(param, TupleType):
        if not isinstance(arg, TupleType) or len(arg.fields) != len(param.fields):
            return "not a tuple of the same length"
        for p, a in zip(param.fields, arg.fields):
            msg = _unify(p, a, env)
            if msg:
                return msg
        return None
    return None if type(param) is type(arg) else "kind differs"


def _subst_type(t: Type, env: Mapping[str, D.Dim]) -> Type:
    if isinstance(t, TensorType):
        if t.is_static():
            return t
        return TensorType(tuple(D.simplify(D.substitute(d, env)) for d in t.shape), t.dtype)
    if isinstance(t, TupleType):
        return TupleType(tuple(_subst_type(f, env) for f in t.fields))
    return t
