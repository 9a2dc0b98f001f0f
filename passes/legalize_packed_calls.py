"""LegalizePackedCalls: call every kernel of the runner through TVM's packed convention (C target).

Runs only **after** PlanMemory (it requires planned memory and the pipeline refuses the
other order): a planner that saw buffers only through the structs wrapping them would miss
their lifetimes and reuse live memory (class 21 of the design notes' memory bug classes; Apache
TVM tvm#8096 moved this step after storage planning for exactly that reason).

Stages, per non-primitive function (the *runner*):

1. **Kernel instances.** Every ``invoke op(...)`` of a kernel op is lowered to a call of a
   primitive function holding just that op with its attributes (TVM's lowered PrimFunc),
   one per distinct op, attributes and argument types, named after the op
   (``@conv2d``, ``@conv2d_1``, ...). Compound dims of the argument types become dims of
   their own (``n * 10`` becomes ``d0``), so the function binds every dim from its
   parameters; ``invoke @f(...)`` of an existing primitive function keeps ``@f``.
2. **Rewrite.** Each invoke becomes::

       %a_arg = tir.stack_alloca("array", 1)
       tir.struct_set(%a_arg, 0, "data", %a)
       tir.struct_set(%a_arg, 0, "device_type", 1)      # kDLCPU
       tir.struct_set(%a_arg, 0, "device_id", 0)
       tir.struct_set(%a_arg, 0, "ndim", 2)
       tir.struct_set(%a_arg, 0, "dtype", f32)
       tir.struct_set(%a_arg, 0, "shape", (n, 64))
       ...
       call_cpacked("f", %x, %a_arg, ..., n)

   The arguments are the callee's inputs, then its outputs, then the invoke's scratch when
   it has one (the made function then has ``attrs {scratch = N}``), then the value of each
   of the callee's symbolic dims (in the order they first appear in its parameters).

Guarantees: each buffer argument of a call is wrapped in one DLTensor struct of its own
(a buffer passed twice to the same call is wrapped once), filled completely (data, device,
ndim, dtype, shape; strides and byte offset are zero) — except the runner's own parameters,
which pass through as raw pointers; struct names are fresh (``%a_arg``, ``%a_arg_1``, ...)
and never collide with existing values; new function names never collide with existing
functions. Kills, allocations, views and constants are left as they are, so the memory
plan is unchanged. Running the pass twice changes nothing (the second run finds no
invoke). ``--unpacked`` leaves the pass out: the C backend then calls kernels directly with
raw pointers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Iterable, Mapping

from relaxc.ir import dims as D
from relaxc.ir.names import NameSupply
from relaxc.ir.nodes import (
    Arg,
    Bind,
    Call,
    DType,
    Effect,
    Function,
    Invoke,
    KwArgs,
    Module,
    Param,
    Stmt,
    Value,
    Var,
    call_dims,
    function_dims,
)
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import OpError, bind_args
from relaxc.ir.types import TensorType, TupleType, Type, tensor_leaves, type_to_str
from relaxc.ir.verifier import ModuleTypes
from relaxc.ir.vocab import CALL_CPACKED, STACK_ALLOCA, STRUCT_SET
from relaxc.ir.walk import FunctionRewriter

from .base import Pass, PassError, module_types
from .properties import EXPLICIT_MEMORY, PACKED_CALLS, PLANNED

KDL_CPU = 1
"""DLPack's device type of the host CPU."""


def _invoke_of(stmt: Stmt) -> Invoke | None:
    """The invoke of an ``invoke ...`` statement, else None."""
    return stmt.value if isinstance(stmt, Effect) and isinstance(stmt.value, Invoke) else None


def _generalize(types: list[TensorType]) -> tuple[list[TensorType], dict[str, D.Dim]]:
    """Parameter types for a kernel function: compound dims become dims of their own.

    Returns the new types and, for every dim name they use, the dim of the call site it
    stands for. Bare names keep their name; provably equal compound dims share one name.
    """
    env: dict[str, D.Dim] = {}
    compound: dict[str, str] = {}  # canonical text of a compound dim -> its name
    taken = {n for t in types for d in t.shape for n in D.free_vars(d)}
    names = NameSupply(taken)
    out = []
    for t in types:
        shape: list[D.Dim] = []
        for d in t.shape:
            if isinstance(d, int):
                shape.append(d)
            elif isinstance(d, D.Sym):
                env[d.name] = d
                shape.append(d)
            else:
                key = D.dim_to_str(D.simplify(d))
                if key not in compound:
                    compound[key] = names.fresh(f"d{len(compound)}")
                    env[compound[key]] = d
                shape.append(D.Sym(compound[key]))
        out.append(TensorType(tuple(shape), t.dtype))
    return out, env


@dataclass(frozen=True)
class LegalizePackedCalls(Pass):
    """Wrap the runner's kernel arguments into DLTensor structs and call kernels packed."""

    name: ClassVar[str] = "LegalizePackedCalls"
    summary: ClassVar[str] = (
        "call kernels packed (TVM convention): wrap buffer arguments in DLTensor structs; C "
        "target, after PlanMemory"
    )
    requires: ClassVar[frozenset[str]] = frozenset({EXPLICIT_MEMORY, PLANNED})
    provides: ClassVar[frozenset[str]] = frozenset({PACKED_CALLS})
    hints: ClassVar[dict[str, str]] = {
        EXPLICIT_MEMORY: "run ManifestAlloc and PlanMemory before it",
        PLANNED: (
            "run PlanMemory before it: a planner that sees buffers only through the "
            "structs that wrap them misses their lifetimes, so plan first and legalize after"
        ),
    }

    def run(self, module: Module, types: ModuleTypes | None = None) -> Module:
        types = module_types(module, types)
        state = _State(module)
        functions = [
            self._function(fn, types[fn.name], state) if not fn.is_primitive else fn
            for fn in module.functions
        ]
        return dataclasses.replace(module, functions=tuple(state.new_functions) + tuple(functions))

    # -- per runner ---------------------------------------------------------------------
    def _function(self, fn: Function, types: dict[str, Type], state: "_State") -> Function:
        if not any(_invoke_of(s) is not None for s in fn.body):
            return fn
        return _RunnerRewriter(fn, types, state).rewrite_function(fn)


class _RunnerRewriter(FunctionRewriter):
    """Turns each ``invoke`` of one runner into argument structs and a ``call_cpacked``."""

    def __init__(self, fn: Function, types: dict[str, Type], state: "_State"):
        self.types = types
        self.state = state
        self.names = NameSupply.for_function(fn)
        self.params = {p.name for p in fn.params}

    def rewrite_stmt(self, stmt: Stmt) -> Iterable[Stmt]:
        inv = _invoke_of(stmt)
        if inv is None:
            return (stmt,)
        types = self.types
        callee, inputs = self.state.callee(inv, types)
        body: list[Stmt] = []
        args: list[Arg] = []
        wrapped: dict[str, Var] = {}
        loc = inv.loc
        scratch = [inv.scratch] if inv.scratch is not None else []
        for v in list(inputs) + list(inv.outs) + scratch:
            t = types.get(v.name)
            if not isinstance(t, TensorType):
                raise PassError(
                    f"LegalizePackedCalls: argument %{v.name} of {_what(inv)} is "
                    f"{type_to_str(t) if t is not None else 'untyped'}; only tensors can be packed",
                    v.loc or loc,
                )
            if v.name in self.params:
                args.append(v)  # the runner's own parameters pass through
                continue
            if v.name not in wrapped:
                handle = self.names.fresh(f"{v.name}_arg")
                wrapped[v.name] = Var(handle, v.loc)
                body.append(Bind(handle, None, Call(STACK_ALLOCA, ("array", 1), (), loc), stmt.loc))
                for fld, value in (
                    ("data", Var(v.name, v.loc)),
                    ("device_type", KDL_CPU),
                    ("device_id", 0),
                    ("ndim", len(t.shape)),
                    ("dtype", DType(t.dtype)),
                    ("shape", tuple(t.shape)),
                ):
                    body.append(
                        Effect(
                            Call(STRUCT_SET, (Var(handle, v.loc), 0, fld, value), (), loc), stmt.loc
                        )
                    )
            args.append(wrapped[v.name])
        args.extend(_dim_values(callee, [types[v.name] for v in inputs], inv))
        body.append(Effect(Call(CALL_CPACKED, (callee.name, *args), (), loc), stmt.loc))
        return body


def _scratch_bytes(inv: Invoke, types: dict[str, Type]) -> int:
    """Bytes of the scratch an op's invoke passes (0: none), which its kernel function then
    takes (``attrs {scratch = N}``, after its outputs)."""
    if inv.scratch is None:
        return 0
    t = types.get(inv.scratch.name)
    n = t.shape[0] if isinstance(t, TensorType) and t.shape else None
    if not isinstance(n, int):
        raise PassError(
            f"LegalizePackedCalls: the scratch of {_what(inv)} must have a static size", inv.loc
        )
    return n


def _what(inv: Invoke) -> str:
    return f"invoke @{inv.target}" if inv.is_func else f"invoke {inv.target}"


def _dim_values(callee: Function, arg_types: list[Type], inv: Invoke) -> list[D.Dim]:
    """The call site's value of each dim ``callee`` binds from its parameters."""
    env = call_dims(callee, arg_types)
    out = []
    for name in function_dims(callee):
        if name not in env:  # pragma: no cover - the verifier binds every dim
            raise PassError(
                f"LegalizePackedCalls: cannot bind dim '{name}' of @{callee.name}", inv.loc
            )
        out.append(D.simplify(env[name]))
    return out


class _State:
    """The kernel functions made so far, shared by all runners of the module."""

    def __init__(self, module: Module):
        self.module = module
        self.names = NameSupply(f.name for f in module.functions)
        # (op, literal arguments, keywords, parameter types, scratch bytes) -> the function
        self.by_key: dict[
            tuple[str, tuple[Value, ...], KwArgs, tuple[TensorType, ...], int], Function
        ] = {}
        self.new_functions: list[Function] = []

    def callee(self, inv: Invoke, types: dict[str, Type]) -> tuple[Function, tuple[Var, ...]]:
        """The primitive function an invoke calls (made for a kernel op), and its input vars."""
        if inv.is_func:
            fn = self.module.get(inv.target)
            if fn is None or not fn.is_primitive:  # pragma: no cover - the verifier refuses these
                raise PassError(
                    f"LegalizePackedCalls: invoke @{inv.target} needs a primitive function", inv.loc
                )
            return fn, tuple(a for a in inv.args if isinstance(a, Var))
        op = REGISTRY.get(inv.target)
        assert op is not None
        try:
            bound = bind_args(op, inv.args, inv.kwargs)
        except OpError as e:  # pragma: no cover - the verifier checked the call
            raise PassError(str(e), inv.loc) from None
        in_types = []
        for v in bound.inputs:
            t = types.get(v.name)
            if not isinstance(t, TensorType):
                raise PassError(
                    f"LegalizePackedCalls: input %{v.name} of invoke {op.name} must be a tensor",
                    v.loc,
                )
            in_types.append(t)
        param_types, env = _generalize(in_types)
        literals = tuple(a for a in inv.args if not isinstance(a, Var))
        scratch = _scratch_bytes(inv, types)
        key = (op.name, literals, inv.kwargs, tuple(param_types), scratch)
        fn = self.by_key.get(key)
        if fn is None:
            fn = self._make(op.name, param_types, literals, inv, bound.attrs, scratch)
            self.by_key[key] = fn
        # The made function must compute exactly the outs' types at this call site.
        ret = fn.ret_type
        got = list(ret.fields) if isinstance(ret, TupleType) else [ret]
        for v, t in zip(inv.outs, got):
            want = types.get(v.name)
            assert isinstance(t, TensorType)
            if not (
                isinstance(want, TensorType)
                and want.dtype == t.dtype
                and len(want.shape) == len(t.shape)
                and all(D.dims_equal(D.substitute(a, env), b) for a, b in zip(t.shape, want.shape))
            ):
                raise PassError(
                    f"LegalizePackedCalls: cannot make a kernel function for {op.name}: its result "
                    f"{type_to_str(t)} does not provably match output %{v.name}",
                    inv.loc,
                )
        return fn, bound.inputs

    def _make(
        self,
        op_name: str,
        param_types: list[TensorType],
        literals: tuple[Value, ...],
        inv: Invoke,
        attrs: Mapping[str, Any],
        scratch: int,
    ) -> Function:
        op = REGISTRY.get(op_name)
        assert op is not None
        input_names = list(op.input_names) if len(op.input_names) >= len(param_types) else []
        pnames = NameSupply()
        # The kernel function is made for this invoke: what it is made of carries the invoke's
        # location, so a refusal of the C target (the op on a dtype it lacks) points at the call.
        loc = inv.loc
        params = tuple(
            Param(pnames.fresh(input_names[i] if input_names else f"x{i}"), t, loc)
            for i, t in enumerate(param_types)
        )
        try:
            ret = op.infer(param_types, attrs)
        except OpError as e:
            raise PassError(
                f"LegalizePackedCalls: cannot make a kernel function for {op_name}: {e}", inv.loc
            ) from None
        bound = {
            n
            for p in params
            for leaf in tensor_leaves(p.type)
            for d in leaf.shape
            for n in D.free_vars(d)
        }
        loose = sorted(
            {n for leaf in tensor_leaves(ret) for d in leaf.shape for n in D.free_vars(d)} - bound
        )
        if loose:
            raise PassError(
                f"LegalizePackedCalls: {op_name} has symbolic dims in its attributes "
                f"({', '.join(loose)}) that no tensor argument carries, so it cannot be called "
                "packed; build with --unpacked",
                inv.loc,
            )
        result = pnames.fresh("out")
        call = Call(op_name, tuple(Var(p.name, loc) for p in params) + literals, inv.kwargs, loc)
        name = self.names.fresh(op_name.replace(".", "_"))
        fn = Function(
            name,
            params,
            ret,
            (("primitive", True),) + ((("scratch", scratch),) if scratch else ()),
            (Bind(result, None, call, loc),),
            Var(result, loc),
            loc,
        )
        self.new_functions.append(fn)
        return fn


__all__ = ["LegalizePackedCalls", "function_dims"]
