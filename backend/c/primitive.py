"""The primitive-function emitter: ``static void f(inputs, outputs, dims)`` for ``@f``.

The emitter decides no memory: it prints where the IR says each value lives
(:mod:`relaxc.ir.lowered`). A lowered primitive function (PlanWorkspace's output) states the
place of every value; an unlowered one may compute only its results, each written into its
output buffer. Any other value is an intermediate only a pass may place: the C target refuses
it, located, with the hint to run PlanWorkspace.
"""

from __future__ import annotations

from relaxc.ir.diagnostics import RxError
from relaxc.ir.lowered import LOWERED_HINT, result_places
from relaxc.ir.nodes import Call, Effect, Expr, Function, Invoke, function_dims
from relaxc.ir.ops import REGISTRY
from relaxc.ir.types import TensorType, TupleType, tensor_leaves, type_to_str
from relaxc.ir.vocab import CONST, kernel_scratch, lowered_outputs

from . import dtypes as T
from .body import BodyEmitter, ModuleParts
from .model import CTensor, CValue, flat, rebuild, ret_vars
from .names import comment, word_counts


class PrimitiveEmitter(BodyEmitter):
    """A primitive function: ``static void f(inputs, outputs, dims)``, each value where the IR
    places it (lowered), or each result computed in its output buffer."""

    def __init__(self, m: ModuleParts, fn: Function, cname: str):
        super().__init__(m, fn)
        self.cname = cname
        self.direct: dict[int, str] = {}
        self.tuple_outs: dict[str, list[CTensor]] = {}
        self.placement: dict[str, CTensor] = {}
        self.lowered = False
        self.scratch: CTensor | None = None  # the caller's scratch (attrs {scratch = N})

    def build(self) -> str:
        if lowered_outputs(self.fn) is not None:
            return self._build_lowered()
        fn = self.fn
        params: list[str] = []
        param_vars: list[str] = []
        for d in function_dims(fn):
            self.dimvars[d] = self.scope.name("d_", d)
        for p in fn.params:
            leaves = tensor_leaves(p.type)
            vals = []
            for i, leaf in enumerate(leaves):
                var = self.scope.name(
                    "v_", p.name if isinstance(p.type, TensorType) else f"{p.name}_{i}"
                )
                params.append(f"const {T.c_type(leaf.dtype, f'parameter %{p.name}')} *{var}")
                vals.append(CTensor(var, leaf, const=True))
                param_vars.append(var)
            if isinstance(p.type, TensorType):
                self.values[p.name] = vals[0]
            elif isinstance(p.type, TupleType):
                self.values[p.name] = rebuild(p.type, iter(vals))
            else:
                raise RxError(
                    f"the C target cannot pass parameter %{p.name} of type {type_to_str(p.type)}",
                    p.loc,
                )
        outs = tensor_leaves(fn.ret_type)
        out_vars = []
        for leaf in outs:
            var = self.scope.name("out")
            params.append(f"{T.c_type(leaf.dtype)} *{var}")
            out_vars.append(CTensor(var, leaf))
        self._scratch_param(params)
        params += [f"int64_t {self.dimvars[d]}" for d in function_dims(fn)]
        self.placement = self._results(out_vars)
        self.visit_function(fn)
        self._copy_outputs(out_vars)
        self._void_unread(param_vars)
        self.finish_locals()
        sig = f"static void {self.cname}({', '.join(params) or 'void'})"
        return f"/* @{comment(fn.name)} */\n{sig}\n{{\n" + "\n".join(self.lines) + "\n}"

    def _build_lowered(self) -> str:
        """A lowered primitive function (PlanWorkspace's output): every value already has its
        place, a view of the workspace or of an output; this prints it, deciding nothing."""
        fn = self.fn
        k = lowered_outputs(fn)
        assert k is not None
        self.lowered = True
        written = {p.name for p in fn.params[len(fn.params) - k :]}
        if fn.attr("workspace", 0) != 0:
            written.add(fn.params[len(fn.params) - k - 1].name)
        params: list[str] = []
        param_vars: list[str] = []
        for d in function_dims(fn):
            self.dimvars[d] = self.scope.name("d_", d)
        for p in fn.params:
            if not isinstance(p.type, TensorType):
                raise RxError(
                    f"the C target cannot pass parameter %{p.name} of type {type_to_str(p.type)}",
                    p.loc,
                )
            var = self.scope.name("v_", p.name)
            ctype = T.c_type(p.type.dtype, f"parameter %{p.name}")
            const = p.name not in written
            params.append(f"{'const ' if const else ''}{ctype} *{var}")
            self.values[p.name] = CTensor(var, p.type, const=const)
            param_vars.append(var)
        self._scratch_param(params)
        params += [f"int64_t {self.dimvars[d]}" for d in function_dims(fn)]
        self.visit_function(fn)
        self._void_unread(param_vars)
        self.finish_locals()
        sig = f"static void {self.cname}({', '.join(params) or 'void'})"
        return f"/* @{comment(fn.name)} */\n{sig}\n{{\n" + "\n".join(self.lines) + "\n}"

    def _scratch_param(self, params: list[str]) -> None:
        """The scratch parameter (after the outputs) of a function with ``attrs {scratch =
        N}``: its kernels use it in turn."""
        t = kernel_scratch(self.fn)
        if t is not None:
            var = self.scope.name("scratch")
            params.append(f"unsigned char *{var}")
            self.scratch = CTensor(var, t)
            self.locals.append(var)  # (void)scratch; when no kernel of the body needs it

    def _void_unread(self, param_vars: list[str]) -> None:
        """``(void)x;`` at the top for each dim and parameter the body never reads
        (-Wunused-parameter)."""
        words = word_counts("\n".join(self.lines))
        head = [f"    (void){v};" for v in param_vars if not words[v]]
        head += [
            f"    (void){self.dimvars[d]};"
            for d in reversed(function_dims(self.fn))
            if not words[self.dimvars[d]]
        ]
        self.lines[0:0] = head

    # -- where the values computed inside go ----------------------------------------------
    def _results(self, out_vars: list[CTensor]) -> dict[str, CTensor]:
        """Root name -> the output buffer it is computed in: the function's results, each in
        its output (the IR says so); RxError at the first intermediate (only a pass places
        those: PlanWorkspace)."""
        fn = self.fn
        places = result_places(fn, self.m.module, self.types)
        if places.unplaced is not None:
            stmt = places.unplaced
            raise RxError(
                f"the C target needs lowered primitive functions, but @{fn.name} computes "
                f"%{stmt.name}, which is none of its results and has no place in the IR: "
                f"{LOWERED_HINT}",
                stmt.loc,
            )
        if places.whole is not None:
            # A multi-output kernel whose tuple is the result: it writes every output.
            self.direct = {k: places.whole for k in range(len(out_vars))}
            self.tuple_outs = {places.whole: out_vars}
            return {}
        self.direct = {k: r for r, k in places.outputs.items()}
        return {r: out_vars[k] for r, k in places.outputs.items()}

    # -- statements -----------------------------------------------------------------------
    def visit_effect(self, stmt: Effect) -> None:
        e = stmt.value
        if self.lowered and isinstance(e, Invoke) and not e.is_func:
            outs = [self.tensor(v, f"invoke {e.target}") for v in e.outs]
            for o, v in zip(outs, e.outs):
                if o.const:
                    raise RxError(f"invoke {e.target} would write into read-only %{v.name}", v.loc)
            self.kernel_call(e.target, e.args, e.kwargs, outs, e.loc, self.scratch)
            return
        raise RxError(
            f"the C target cannot emit this statement in primitive function @{self.fn.name}",
            stmt.loc,
        )

    def visit_default(self, expr: Expr) -> CValue:
        assert self.binding is not None
        raise RxError(
            f"the C target cannot emit this statement in primitive function @{self.fn.name}",
            self.binding.loc,
        )

    def visit_call(self, e: Call) -> CValue:
        assert self.binding is not None
        fn = self.fn
        name = self.binding.name
        t = self.types.get(name)
        op = REGISTRY.get(e.op)
        if e.op == CONST:
            assert isinstance(t, TensorType)
            return CTensor(self.m.constant(fn, name, e, t), t, const=True)
        if op is not None and op.is_view:
            assert isinstance(t, TensorType)
            return self.view(e, t)
        if name in self.tuple_outs:
            outs = self.tuple_outs[name]
            self.kernel_call(e.op, e.args, e.kwargs, outs, e.loc, self.scratch)
            return tuple(outs)
        dst = self.placement.get(name)
        if dst is None or not isinstance(t, TensorType):
            raise RxError(
                f"the C target cannot place %{name} inside primitive function @{fn.name}: "
                f"{LOWERED_HINT}",
                e.loc,
            )
        out = dst if dst.type == t and dst.type.dtype == t.dtype else self._retype(dst, t)
        self.kernel_call(e.op, e.args, e.kwargs, [out], e.loc, self.scratch)
        return out

    def _retype(self, dst: CTensor, t: TensorType) -> CTensor:
        if T.c_type(dst.type.dtype) == T.c_type(t.dtype):
            return CTensor(dst.expr, t)
        ctype = T.c_type(t.dtype)
        return CTensor(f"(({ctype} *)(void *){dst.expr})", t)

    def _copy_outputs(self, out_vars: list[CTensor]) -> None:
        vals = [x for v in ret_vars(self.fn) for x in flat(self.read(v))]
        for k, (out, val) in enumerate(zip(out_vars, vals)):
            if k in self.direct:
                continue
            assert isinstance(val, CTensor)
            self.emit(f"memcpy({out.expr}, {val.expr}, {self.nbytes_c(out.type)});")


__all__ = ["PrimitiveEmitter"]
