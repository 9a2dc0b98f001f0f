"""The primitive-function emitter: ``static void f(inputs, outputs, dims)`` for ``@f``.

A primitive function's intermediates live in its output buffers when that is safe, and
nowhere else: :meth:`PrimitiveEmitter._place` decides where each value is computed (it fits,
nothing else lives in that buffer meanwhile, or it is computed in place over an input the op
record's ``inplace`` names). (The decision belongs in a pass, so that the IR shows it; until
then it stays here.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from relaxc.ir import dims as D
from relaxc.ir.alias import FRESH, analyze_aliases, buffer_liveness
from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Call, Effect, Expr, Function, Invoke, expr_vars, function_dims
from relaxc.ir.ops import REGISTRY
from relaxc.ir.sizes import tensor_nbytes
from relaxc.ir.types import TensorType, TupleType, tensor_leaves, type_to_str
from relaxc.ir.vocab import CONST, kernel_scratch, lowered_outputs

from . import dtypes as T
from .body import BodyEmitter, bindings, bound_call, var_args
from .kernels import same_shape
from .model import CTensor, CValue, flat, rebuild, ret_vars, single_ret, tree_leaves
from .names import comment, word_counts

if TYPE_CHECKING:
    from .module import ModuleEmitter


class PrimitiveEmitter(BodyEmitter):
    """A primitive function: ``static void f(inputs, outputs, dims)`` whose intermediates live
    in its output buffers when that is safe, and nowhere else."""

    def __init__(self, m: "ModuleEmitter", fn: Function, cname: str):
        super().__init__(m, fn)
        self.cname = cname
        self.direct: dict[int, str] = {}
        self.tuple_outs: dict[str, list[CTensor]] = {}
        self.placement: dict[str, CTensor] = {}
        self.info: Any = None  # the alias analysis of the function (set by _place)
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
        self.placement = self._place(out_vars)
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

    # -- placement of values computed inside ------------------------------------------------
    def _place(self, out_vars: list[CTensor]) -> dict[str, CTensor]:
        """Root name -> the output buffer it is computed in (final results and intermediates)."""
        fn = self.fn
        info = self.info = analyze_aliases(fn, self.m.module)
        live = buffer_liveness(fn, info)
        end = len(fn.body)
        placement: dict[str, CTensor] = {}
        occupants: dict[int, list[tuple[str, int, int]]] = {k: [] for k in range(len(out_vars))}
        ret = single_ret(fn)
        for _i, stmt in bindings(fn):
            if (
                ret is not None
                and bound_call(stmt) is not None
                and stmt.name == ret.name
                and isinstance(self.types.get(stmt.name), TupleType)
            ):
                # A multi-output kernel whose tuple is the result: it writes every output.
                self.direct = {k: stmt.name for k in range(len(out_vars))}
                self.tuple_outs = {stmt.name: out_vars}
                return placement
        ret_roots = self._ret_roots(info)
        for k, roots in enumerate(ret_roots):
            r = next(iter(roots)) if len(roots) == 1 else None
            if r is not None and info.kind.get(r) == FRESH and r not in placement:
                placement[r] = out_vars[k]
                self.direct[k] = r
                occupants[k].append((r, live.defined[r], end))
        producer: dict[str, int] = {}
        inputs_of: dict[int, set[str]] = {}
        for i, stmt in bindings(fn):
            producer[stmt.name] = i
            inputs_of[i] = {r for v in expr_vars(stmt.value) for r in info.roots(v.name)}
        for i, stmt in bindings(fn):
            if info.kind.get(stmt.name) != FRESH or stmt.name in placement:
                continue
            t = self.types.get(stmt.name)
            leaves = tensor_leaves(t) if t is not None else []
            if len(leaves) != 1:
                raise RxError(
                    f"the C target cannot keep the tuple %{stmt.name} inside primitive function "
                    f"@{fn.name}",
                    stmt.loc,
                )
            t = leaves[0]
            d, u = live.defined[stmt.name], live.last_use.get(stmt.name, live.defined[stmt.name])
            for k, out in enumerate(out_vars):
                if not self._fits(t, out.type):
                    continue
                if all(
                    self._disjoint((stmt.name, d, u), occ, producer, inputs_of)
                    for occ in occupants[k]
                ):
                    occupants[k].append((stmt.name, d, u))
                    placement[stmt.name] = self._retype(out, t)  # the output's C type may differ
                    break
            else:
                raise RxError(
                    f"the C target cannot place %{stmt.name} ({type_to_str(t)}) inside "
                    f"primitive function @{fn.name}: no output buffer is free for its whole life, "
                    "and a kernel gets no scratch memory (split the function, or "
                    "build the VM target)",
                    stmt.loc,
                )
        return placement

    def _ret_roots(self, info: Any) -> list[frozenset]:
        out: list[frozenset] = []
        for v in ret_vars(self.fn):
            out += tree_leaves(info.trees.get(v.name, frozenset()))
        return out

    def _fits(self, t: TensorType, out: TensorType) -> bool:
        if T.nbytes(t.dtype) > T.nbytes(out.dtype):
            return False
        a, b = tensor_nbytes(t), tensor_nbytes(out)
        if isinstance(a, int) and isinstance(b, int):
            return a <= b
        return D.dims_equal(a, b)

    def _disjoint(
        self,
        a: tuple[str, int, int],
        b: tuple[str, int, int],
        producer: dict[str, int],
        inputs_of: dict[int, set[str]],
    ) -> bool:
        (ra, da, ua), (rb, db, ub) = a, b
        if ua < db or ub < da:
            return True
        # Touching at one statement: the later value is computed in place over the earlier one.
        for (r1, _d1, u1), (r2, d2, _u2) in (
            ((ra, da, ua), (rb, db, ub)),
            ((rb, db, ub), (ra, da, ua)),
        ):
            if u1 == d2 and self._in_place(r1, r2, d2, inputs_of):
                # and no overlap otherwise
                return True
        return False

    def _in_place(self, src: str, dst: str, at: int, inputs_of: dict[int, set[str]]) -> bool:
        """May ``dst``, bound at statement ``at``, be computed over ``src``? When ``src`` is the
        buffer of an input the op's record lets its output overwrite (``OpDef.inplace``) and
        has ``dst``'s dtype and shape."""
        call = bound_call(self.fn.body[at])
        op = REGISTRY.get(call.op) if call is not None else None
        if call is None or op is None or not op.inplace or src not in inputs_of.get(at, set()):
            return False
        inputs = var_args(call.args)
        if not any(i < len(inputs) and src in self.info.roots(inputs[i].name) for i in op.inplace):
            return False
        a, b = self.types.get(src), self.types.get(dst)
        return (
            isinstance(a, TensorType)
            and isinstance(b, TensorType)
            and a.dtype == b.dtype
            and same_shape(a, b)
        )

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
                f"the C target cannot place %{name} inside primitive function @{fn.name}", e.loc
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
