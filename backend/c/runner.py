"""The runner emitter: ``int32_t <prefix>_run(inputs, outputs, dims)`` for the entry function.

Values of the runner are resolved at compile time: a tensor is a pointer expression (an
input, an output, an arena offset, a constant), views and aliases are the same pointer,
tuples are tracked by the emitter, and kills free nothing (the arena is static). The
storages PlanMemory left ``external`` are the caller's output buffers; an output that is not
computed in place (a parameter, a constant, a value returned twice) is copied at the end.
Packed calls (after LegalizePackedCalls) fill DLTensor structs and call the packed wrapper of
a primitive function.

With inputs and outputs in the arena (``attrs {io_in_arena = true}``, see
:mod:`relaxc.ir.io_arena`), an input copied into the arena and an output that lives in
static memory (the arena, or a constant) are no parameters of the run function: for each,
``<prefix>_input_<name>()`` / ``<prefix>_output_<name>()`` returns the pointer into the arena
the caller fills before the run / reads after it, and the copy of the input is the caller's
write (it emits nothing).
"""

from __future__ import annotations

import re

from typing import TYPE_CHECKING, Mapping

from relaxc.ir import dims as D
from relaxc.ir.alias import TENSOR, analyze_aliases, tree_leaves
from relaxc.ir.diagnostics import Loc, RxError
from relaxc.ir.io_arena import ArenaInput, arena_inputs, is_io_in_arena
from relaxc.ir.io_names import onnx_input_names, onnx_output_names
from relaxc.ir.nodes import (
    Call,
    CallFunc,
    DType,
    Effect,
    Expr,
    Function,
    Invoke,
    Project,
    TupleExpr,
    Var,
    call_dims,
    expr_vars,
    function_dims,
)
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import bind_args
from relaxc.ir.sizes import tensor_nbytes
from relaxc.ir.types import TensorType, TupleType, Type, tensor_leaves, type_to_str
from relaxc.ir.vocab import (
    kernel_io,
    kernel_scratch,
    lowered_outputs,
    ALLOC_STORAGE,
    ALLOC_TENSOR,
    CALL_CPACKED,
    CALL_PACKED,
    CONST,
    KILL_OPS,
    MEMORY_VIEW,
    STACK_ALLOCA,
    STRUCT_SET,
    call_of,
    is_dim,
    is_int,
)
from relaxc.ir.walk import ExprFunctor

from . import dtypes as T
from .body import BodyEmitter, bindings, bound_call, effect_call, var_args
from .model import (
    UNBOUNDED_DIM_LIMIT,
    CStorage,
    CStruct,
    CTensor,
    CValue,
    Port,
    flat,
    rebuild,
    ret_vars,
)
from .names import comment, is_identifier, macro_name, sanitize, word_counts

if TYPE_CHECKING:
    from .module import ModuleEmitter

BUILTIN_RESHAPE = "vm.builtin.reshape"
COPY = "relaxc.copy"
"""The runtime functions (``call_packed``) the C target implements: a view and a copy."""

IN_ARENA = "<an input the caller writes into the arena>"
"""The C value of an input parameter that lives in the arena: nothing may read it but its copy
into the arena (the verifier's rule for io_in_arena), which the caller makes."""

Place = tuple[str, str, D.Dim]
"""Where a value lives for good: ("storage", storage name, byte offset) or ("const", name, 0)."""


class RunnerEmitter(BodyEmitter):
    """``int32_t <prefix>_run(inputs, outputs, dims)``."""

    m: ModuleEmitter  # the whole module emitter: the runner also names the file's API

    def __init__(self, m: ModuleEmitter, fn: Function):
        super().__init__(m, fn)
        self.inputs: list[Port] = []
        self.outputs: list[Port] = []
        self.dims: list[tuple[str, str, int | None]] = []
        self.err_codes: list[tuple[str, int, str]] = []  # (macro, value, message)
        self.storage_output: dict[str, int] = {}
        self.direct_outputs: set[int] = set()
        self._packed_here = False  # some call of this function is packed
        self.io = is_io_in_arena(fn)
        self._arena_in: dict[tuple[str, int], ArenaInput] = (
            {(a.param, a.leaf): a for a in arena_inputs(fn)} if self.io else {}
        )
        self._out_places: dict[int, Place] = {}  # output index -> where it lives (io_in_arena)
        self._defs = {st.name: st.value for _, st in bindings(fn)}
        self.accessors: list[str] = []  # definitions of <prefix>_input_/_output_ functions
        # Fixed locals of the run function: IR names never take them.
        self.ret_value = self.scope.reserve("ret_value")
        self.ret_code = self.scope.reserve("ret_code")
        self.status = self.scope.reserve("status")  # of the exported wrapper (run_wrapper)

    def api_name(self, text: str, fallback: str) -> str:
        """A readable parameter name for an input, output or dim: the IR name when it is a
        plain identifier that no generated name can take (those start with the prefix)."""

        def own(name: str) -> bool:
            p = self.m.prefix.lower()
            return name.lower() == p or name.lower().startswith(p + "_")

        s = sanitize(text)
        if s and s[0].isalpha() and is_identifier(s) and not own(s) and not self.scope.taken(s):
            return self.scope.name("", s)
        for pre in (fallback, "arg_", "param_"):
            if not own(pre + "x"):
                return self.scope.name(pre, text)
        raise AssertionError("unreachable: a prefix cannot start all three fallbacks")

    def run(self) -> tuple[str, str]:
        fn = self.fn
        m = self.m
        pfx = m.prefix.upper()
        bounds = fn.upper_bounds()
        # -- signature: inputs, outputs, dims --------------------------------------------
        params: list[str] = []
        onnx_in = onnx_input_names(fn) or ("",) * len(fn.params)
        for p, onnx_name in zip(fn.params, onnx_in):
            leaves = tensor_leaves(p.type)
            if not leaves or not isinstance(p.type, (TensorType, TupleType)):
                raise RxError(
                    f"the C target cannot take parameter %{p.name} of type {type_to_str(p.type)}",
                    p.loc,
                )
            vals = []
            for i, leaf in enumerate(leaves):
                ir = p.name if isinstance(p.type, TensorType) else f"{p.name}.{i}"
                onnx = onnx_name if isinstance(p.type, TensorType) else ""
                name = self.api_name(ir, "in_")
                ctype = T.c_type(leaf.dtype, f"input %{ir}", p.loc)
                if (p.name, i) in self._arena_in:
                    acc = m.scope.name(f"{m.prefix}_input_", name)
                    self.inputs.append(Port(name, ir, leaf, accessor=acc, onnx_name=onnx))
                    vals.append(CTensor(IN_ARENA, leaf, const=True))
                    continue
                params.append(f"const {ctype} *{name}")
                self.inputs.append(Port(name, ir, leaf, onnx_name=onnx))
                vals.append(CTensor(name, leaf, const=True))
            self.values[p.name] = (
                vals[0] if isinstance(p.type, TensorType) else rebuild(p.type, iter(vals))
            )
        ret_names = [v.name for v in ret_vars(fn)]
        out_ir: list[str] = []
        for v in ret_names:
            leaves = tensor_leaves(self.types[v])
            out_ir += (
                [v]
                if len(leaves) == 1 and isinstance(self.types[v], TensorType)
                else [f"{v}.{i}" for i in range(len(leaves))]
            )
        out_leaves = tensor_leaves(fn.ret_type)
        leaf_vars = [x for v in ret_names for x in self._leaf_vars(v)] if self.io else []
        seen: set[str] = set()
        onnx_out = onnx_output_names(fn) or ()
        if len(onnx_out) != len(out_leaves):
            onnx_out = ("",) * len(out_leaves)
        for k, (ir, leaf) in enumerate(zip(out_ir, out_leaves)):
            label = ir if ir not in seen else f"{ir}_out"
            seen.add(ir)
            name = self.api_name(label, "out_")
            ctype = T.c_type(leaf.dtype, f"output %{ir}", fn.ret.loc)
            place = self._place(leaf_vars[k]) if k < len(leaf_vars) else None
            if place is not None:
                self._out_places[k] = place
                acc = m.scope.name(f"{m.prefix}_output_", name)
                self.outputs.append(Port(name, ir, leaf, accessor=acc, onnx_name=onnx_out[k]))
                continue
            params.append(f"{ctype} *{name}")
            self.outputs.append(Port(name, ir, leaf, onnx_name=onnx_out[k]))
        dim_names = function_dims(fn)
        err = 1
        self.err_codes.append(
            (f"{pfx}_ERR_NULL_ARGUMENT", err, "an input or output pointer is NULL")
        )
        err += 1
        self.err_codes.append((f"{pfx}_ERR_KERNEL", err, "a packed kernel refused its arguments"))
        checks: list[str] = []
        for d in dim_names:
            cparam = self.api_name(d, "dim_")
            params.append(f"size_t {cparam}")
            self.dimvars[d] = self.scope.name("d_", d)
            err += 1
            macro = m.macros.name(f"{pfx}_ERR_DIM_", macro_name(d))
            bound = bounds.get(d)
            limit = bound if bound is not None else UNBOUNDED_DIM_LIMIT
            what = (
                f"larger than its upper bound {bound}"
                if bound is not None
                else f"larger than {limit}"
            )
            self.err_codes.append((macro, err, f"dimension '{d}' is {what}"))
            checks.append(f"if ({cparam} > (size_t){limit}u) return {macro};")
            checks.append(f"{self.dimvars[d]} = (int64_t){cparam};")
            self.dims.append((d, cparam, bound))
        # -- outputs: which external storage is which output -------------------------------
        info = analyze_aliases(fn, m.module)
        leaf_roots: list[frozenset] = []
        for v in ret_names:
            leaf_roots += tree_leaves(info.trees.get(v, frozenset()))
        # An output buffer is the storage of the tensor it returns when that output covers the
        # whole tensor: a view of the same bytes (which can only start at offset 0); an
        # output that is a part of it (a view at an offset) is copied out at the end.
        leaf_types = [leaf for v in ret_names for leaf in tensor_leaves(self.types[v])]
        for k, roots in enumerate(leaf_roots):
            if len(roots) != 1:
                continue
            r = next(iter(roots))
            if info.kind.get(r) == TENSOR:
                s = info.storage_of.get(r)
                whole = r in self.types and D.dims_equal(
                    tensor_nbytes(leaf_types[k]),
                    tensor_nbytes(self.types[r]),  # type: ignore[arg-type]
                )
                if (
                    whole
                    and s is not None
                    and s not in self.storage_output
                    and self._is_external(s)
                ):
                    self.storage_output[s] = k
                    self.direct_outputs.add(k)
        # -- body -----------------------------------------------------------------------
        ptrs = [p.name for p in self.inputs + self.outputs if p.accessor is None]
        body_start = len(self.lines)
        # The last statement reading each value (a packed call's structs must be read by
        # nothing after it), indexed once: looking a group up is then linear in its length.
        self._last_read: dict[str, int] = {}
        for k, st in enumerate(fn.body):
            for v in expr_vars(st.value):
                self._last_read[v.name] = k
        self._ret_reads = {v.name for v in expr_vars(fn.ret)}
        progress = m.progress
        i = 0
        while i < len(fn.body):
            if progress is not None:
                progress("statements", i, len(fn.body))
            j = self._packed_group(i)
            if j is None:
                self.visit_stmt(fn.body[i])
                i += 1
                continue
            # The structs of one packed call live in a block of their own: their stack is reused.
            self.emit("{")
            self.depth += 1
            for stmt in fn.body[i : j + 1]:
                self.visit_stmt(stmt)
            self.depth -= 1
            self.emit("}")
            i = j + 1
        if progress is not None:
            progress("statements", len(fn.body), len(fn.body))
        self._copy_outputs()
        self.emit(f"return {pfx}_OK;")
        self._emit_accessors()
        self.finish_locals()
        head: list[str] = []
        if dim_names:
            head.append(f"    int64_t {', '.join(self.dimvars[d] for d in dim_names)};")
        if m.uses_packed and self._packed_here:
            head.append(f"    TVMValue {self.ret_value};")
            head.append(f"    int32_t {self.ret_code};")
        if ptrs:
            head.append(
                "    if ("
                + " || ".join(f"{p} == NULL" for p in ptrs)
                + f") return {pfx}_ERR_NULL_ARGUMENT;"
            )
        head += ["    " + c for c in checks]
        body_words = word_counts("\n".join(self.lines[body_start:]))
        head += [
            f"    (void){self.dimvars[d]};" for d in dim_names if not body_words[self.dimvars[d]]
        ]
        self.lines[body_start:body_start] = head
        sig = f"int32_t {m.run_name}({', '.join(params) or 'void'})"
        body_sig = f"static int32_t {m.run_body_name}({', '.join(params) or 'void'})"
        body_def = body_sig + "\n{\n" + "\n".join(self.lines) + "\n}"
        arg_names = [re.search(r"\w+$", p).group(0) for p in params]  # type: ignore[union-attr]
        return sig, "\n\n".join([body_def, self.run_wrapper(sig, arg_names)] + self.accessors)

    def run_wrapper(self, sig: str, arg_names: list[str]) -> str:
        """The exported run function: the body (static), then, in a build that uses AVX, the
        upper halves of the vector registers cleared on every way out (a compiler inserts
        ``vzeroupper`` itself, but not on every path: GCC 12 at -O3 -march=native returned
        error codes with them dirty), so that the SSE code the caller runs next is not
        slowed. One place, whatever ``return`` the body takes."""
        m = self.m
        return (
            f"{sig}\n{{\n"
            f"    int32_t {self.status} = {m.run_body_name}({', '.join(arg_names)});\n"
            "#if defined(__AVX__)\n"
            "    _mm256_zeroupper(); /* the caller's SSE code runs at full speed */\n"
            "#endif\n"
            f"    return {self.status};\n}}"
        )

    # -- inputs and outputs in the arena ------------------------------------------------------
    def _leaf_vars(self, v: str) -> list[str | None]:
        """The variables holding the tensor leaves of ``v`` (through tuples and aliases), or
        None for a leaf that cannot be traced to one."""
        t = self.types.get(v)
        if isinstance(t, TensorType):
            return [v]
        n = len(tensor_leaves(t)) if t is not None else 0
        e = self._defs.get(v)
        if isinstance(e, Var):
            return self._leaf_vars(e.name)
        if isinstance(e, TupleExpr):
            return [x for f in e.fields for x in self._leaf_vars(f.name)]
        return [None] * n

    def _place(self, v: str | None) -> Place | None:
        """Where the tensor ``v`` lives for good, when that is static memory."""
        return _StaticPlace(self._defs, len(self.fn.body)).of(v)

    def _emit_accessors(self) -> None:
        """``<prefix>_input_<name>`` and ``<prefix>_output_<name>``: pointers into the arena."""
        arena_tensor = {a.label: a for a in self._arena_in.values()}
        items: list[tuple[Port, Place, bool]] = []
        for port in self.inputs:
            if port.accessor is not None:
                a = arena_tensor[port.ir_name]
                place = self._place(a.tensor)
                if place is None:
                    raise RxError(
                        f"input %{port.ir_name} is copied into %{a.tensor}, which the C target "
                        "cannot place in static memory at a constant offset",
                        self.fn.body[a.copy_at].loc,
                    )
                items.append((port, place, True))
        for k, port in enumerate(self.outputs):
            if port.accessor is not None:
                items.append((port, self._out_places[k], False))
        for port, (kind, name, offset), writable in items:
            base = self.values.get(name)
            if kind == "const":
                assert isinstance(base, CTensor)
                expr, port.location = base.expr, f"the constant %{name}"
            else:
                if not isinstance(base, CStorage) or base.output is not None:
                    raise RxError(f"%{name} is not static memory the C target made", self.fn.loc)
                expr = base.expr if offset == 0 else f"{base.expr} + {D.dim_to_str(offset)}"
                what = "the arena" if self.m.is_arena(base.expr) else f"allocation %{name}"
                port.location = f"byte {D.dim_to_str(offset)} of {what}"
            ctype = T.c_type(port.type.dtype)
            q = "" if writable else "const "
            what = (
                f"input %{port.ir_name}: fill it before {self.m.run_name}"
                if writable
                else f"output %{port.ir_name}: read it after {self.m.run_name}"
            )
            self.accessors.append(
                f"/* {comment(what)} ({comment(port.location)}) */\n"
                f"{q}{ctype} *{port.accessor}(void)\n{{\n"
                f"    return ({q}{ctype} *)({q}void *)({expr});\n}}"
            )

    def _packed_group(self, i: int) -> int | None:
        """If statement ``i`` starts the structs of one packed call (stack_alloca, struct_set, then
        call_cpacked, the structs used nowhere else), the index of that call."""
        body = self.fn.body
        handles: set[str] = set()
        j = i
        while j < len(body):
            st = body[j]
            if bound_call(st, STACK_ALLOCA) is not None:
                handles.add(st.name)  # type: ignore[union-attr]
            elif (
                (s := effect_call(st, STRUCT_SET)) is not None
                and s.args
                and isinstance(s.args[0], Var)
                and s.args[0].name in handles
            ):
                pass
            else:
                break
            j += 1
        if not handles or j >= len(body):
            return None
        if effect_call(body[j], CALL_CPACKED) is None:
            return None
        if any(self._last_read.get(h, -1) > j or h in self._ret_reads for h in handles):
            return None  # a struct read after the call
        return j

    def _is_external(self, storage: str) -> bool:
        for s in self.fn.body:
            call = bound_call(s, ALLOC_STORAGE)
            if call is not None and s.name == storage:  # type: ignore[union-attr]
                return bool(_storage_attrs(call)["external"])
        return False

    def tensor(self, v: Var, what: str) -> CTensor:
        val = super().tensor(v, what)
        if val.expr is IN_ARENA:
            raise RxError(
                f"{what}: input %{v.name} lives in the arena (io_in_arena): read its copy there",
                v.loc,
            )
        return val

    # -- statements -----------------------------------------------------------------------
    def visit_effect(self, stmt: Effect) -> None:
        _RunnerEffect(self, stmt).visit_expr(stmt.value)

    def visit_default(self, expr: Expr) -> CValue:
        assert self.binding is not None
        raise RxError("the C target cannot emit this statement", self.binding.loc)

    def visit_call_func(self, e: CallFunc) -> CValue:
        callee = self.m.module.get(e.func)
        if callee is not None and callee.is_primitive:
            raise _needs_planning(f"call @{e.func}", e.loc)
        raise RxError(
            f"the C target cannot call @{e.func}: only primitive functions become C functions "
            f"(inline @{e.func} into its caller, or mark it primitive)",
            e.loc,
        )

    def visit_call(self, e: Call) -> CValue:
        assert self.binding is not None
        name = self.binding.name
        return self._bind_call(name, e, self.types.get(name))

    def _bind_call(self, name: str, e: Call, t: Type | None) -> CValue:
        m = self.m
        op = REGISTRY.get(e.op)
        if e.op == CONST:
            assert isinstance(t, TensorType)
            return CTensor(m.constant(self.fn, name, e, t), t, const=True)
        if e.op == ALLOC_STORAGE:
            return self._alloc_storage(name, e)
        if e.op == ALLOC_TENSOR:
            st = self.read(e.args[0]) if e.args and isinstance(e.args[0], Var) else None
            if not isinstance(st, CStorage):
                raise RxError("memory.alloc_tensor needs a storage", e.loc)
            a = _alloc_tensor_attrs(e)
            assert isinstance(t, TensorType)
            if st.output is not None:
                out = self.outputs[st.output]
                if a["offset"] != 0 or not _fits_bytes(t, out.type):
                    raise RxError(
                        f"%{name} does not fit the output buffer {out.name} it is carved from",
                        e.loc,
                    )
            offset = a["offset"]
            init = st.expr if offset == 0 else f"{st.expr} + {self.dimc(offset)}"
            return self.local_ptr(name, t, init)
        if op is not None and op.is_view:
            assert isinstance(t, TensorType)
            return self.view(e, t)
        if e.op == STACK_ALLOCA:
            count = e.args[1] if len(e.args) > 1 else 1
            var = self.scope.name("v_", name)
            self.emit(f"DLTensor {var}[{count}];")
            self.emit(f"memset({var}, 0, sizeof {var});")
            return CStruct(var, int(count))  # type: ignore[arg-type]
        if e.op == CALL_PACKED:
            return self._call_packed(e, t)
        if e.op == CALL_CPACKED:
            self._call_cpacked(e)
            return None
        if op is not None and op.category == "kernel":
            raise _needs_planning(e.op, e.loc)
        raise RxError(f"the C target cannot emit {e.op}", e.loc)

    def _alloc_storage(self, name: str, e: Call) -> CStorage:
        a = _storage_attrs(e)
        size = a["size"]
        if name in self.storage_output:
            k = self.storage_output[name]
            return CStorage(f"((uint8_t *)(void *){self.outputs[k].name})", size, output=k)
        bounds = self.fn.upper_bounds()
        ub = size if isinstance(size, int) else D.upper_bound(size, bounds)
        if ub is None:
            free = sorted(D.free_vars(size) - set(bounds))
            if not free:  # every dim is bounded, but no bound of the expression could be derived
                raise RxError(
                    "the C target needs every allocation planned into static memory, but "
                    f"no upper bound of the size {D.dim_to_str(size)} of %{name} follows from the "
                    f"upper bounds of @{self.fn.name}",
                    e.loc,
                )
            raise RxError(
                "the C target needs every allocation planned into static memory, but "
                f"%{name} has the unbounded size {D.dim_to_str(size)} ({', '.join(free)} without "
                f"an upper bound); give @{self.fn.name} attrs {{upper_bounds = "
                f"{{{free[0] if free else 'n'} = ...}}}} (for an ONNX model: relaxc build "
                f"--bound {free[0] if free else 'N'}=...)",
                e.loc,
            )
        cname = self.m.static_buffer(name, max(int(ub), 0), int(a["align"]), bool(a["arena"]))
        return CStorage(cname, size)

    def _call_packed(self, e: Call, t: Type | None) -> CValue:
        fname = e.args[0] if e.args else None
        if fname == BUILTIN_RESHAPE:
            src = (
                self.tensor(e.args[1], "vm.builtin.reshape")
                if len(e.args) > 1 and isinstance(e.args[1], Var)
                else None
            )
            if src is None or not isinstance(t, TensorType):
                raise RxError("vm.builtin.reshape needs a tensor and a typed result", e.loc)
            return CTensor(src.expr, t, src.const)
        if fname == COPY:
            self._effect_call(e)
            return None
        raise RxError(f"the C target has no runtime function {fname!r} (call_packed)", e.loc)

    def _effect_call(self, e: Call) -> None:
        if e.op in KILL_OPS:
            return  # static memory: nothing to free
        if e.op == STRUCT_SET:
            self._struct_set(e)
            return
        if e.op == CALL_CPACKED:
            self._call_cpacked(e)
            return
        if e.op == CALL_PACKED and e.args and e.args[0] == COPY:
            if len(e.args) != 3 or not all(isinstance(a, Var) for a in e.args[1:]):
                raise RxError("relaxc.copy expects two tensors", e.loc)
            src_val = self.read(e.args[1])  # type: ignore[arg-type]
            if isinstance(src_val, CTensor) and src_val.expr is IN_ARENA:
                # An input copied into the arena: the caller wrote it there, through the
                # pointer <prefix>_input_<name>() gives (the verifier checked that this is the
                # input's one copy, made before anything is computed).
                dst_name = e.args[2].name  # type: ignore[union-attr]
                ports = {p.ir_name: p for p in self.inputs}
                acc = [
                    ports[a.label].accessor for a in self._arena_in.values() if a.tensor == dst_name
                ]
                if not acc:
                    raise RxError(f"relaxc.copy: %{dst_name} is not an input's place", e.loc)
                self.emit(f"/* %{comment(dst_name)}: written by the caller, at {acc[0]}() */")
                return
            src, dst = self.tensor(e.args[1], "relaxc.copy"), self.tensor(e.args[2], "relaxc.copy")
            if dst.const:
                raise RxError("relaxc.copy would write into read-only memory", e.loc)
            self.emit(f"memcpy({dst.expr}, {src.expr}, {self.nbytes_c(dst.type)});")
            return
        if e.op == CALL_PACKED:
            self._call_packed(e, None)
            return
        op = REGISTRY.get(e.op)
        if op is not None and op.category == "kernel":
            raise _needs_planning(e.op, e.loc)
        raise RxError(f"the C target cannot emit {e.op}", e.loc)

    def _struct_set(self, e: Call) -> None:
        if len(e.args) != 4 or not isinstance(e.args[0], Var):
            raise RxError('tir.struct_set expects (%handle, index, "field", value)', e.loc)
        st = self.read(e.args[0])
        if not isinstance(st, CStruct):
            raise RxError(
                f"tir.struct_set: %{e.args[0].name} is not a tir.stack_alloca array", e.loc
            )
        idx, fld, value = e.args[1], e.args[2], e.args[3]
        if not isinstance(idx, int) or not 0 <= idx < st.count:
            raise RxError(f"tir.struct_set: index {idx} is outside the array of {st.count}", e.loc)
        at = f"{st.var}[{idx}]"
        if fld == "data":
            if not isinstance(value, Var):
                raise RxError("tir.struct_set: data must be a tensor", e.loc)
            tv = self.tensor(value, STRUCT_SET)
            self.emit(f"{at}.data = (void *){tv.expr};")
        elif fld in ("device_type", "device_id", "ndim", "byte_offset"):
            if not isinstance(value, int) or isinstance(value, bool):
                raise RxError(f"tir.struct_set: {fld} must be an integer", e.loc)
            target = {"device_type": "device.device_type", "device_id": "device.device_id"}.get(
                fld, fld
            )
            self.emit(f"{at}.{target} = {T.int_literal(value)};")
        elif fld == "dtype":
            if not isinstance(value, DType):
                raise RxError("tir.struct_set: dtype must be a dtype such as f32", e.loc)
            T.c_type(value.name, STRUCT_SET)
            code, bits = T.dl_type(value.name)
            self.emit(f"{at}.dtype.code = {code};")
            self.emit(f"{at}.dtype.bits = {bits};")
            self.emit(f"{at}.dtype.lanes = 1;")
        elif fld in ("shape", "strides"):
            if not isinstance(value, tuple) or any(not is_dim(d) for d in value):
                raise RxError(f"tir.struct_set: {fld} must be a tuple of dims", e.loc)
            if value:
                arr = self.scope.name("v_", f"{e.args[0].name}_{fld}")
                self.emit(f"int64_t {arr}[{len(value)}];")
                for i, d in enumerate(value):
                    self.emit(f"{arr}[{i}] = {self.dimc(d)};")
                self.emit(f"{at}.{fld} = {arr};")
        else:
            raise RxError(
                f"tir.struct_set: unknown field {fld!r} (data, device_type, "
                f"device_id, ndim, dtype, shape, strides, byte_offset)",
                e.loc,
            )
        st.fields[(idx, str(fld))] = value

    def _call_cpacked(self, e: Call) -> None:
        fname = e.args[0] if e.args else None
        callee = self.m.module.get(fname) if isinstance(fname, str) else None
        if callee is None or not callee.is_primitive:
            raise RxError(
                f"call_cpacked: {fname!r} is not a primitive function of the module", e.loc
            )
        wrapper = self.m.packed_wrapper(callee.name, e.loc)
        self._packed_here = True
        args = e.args[1:]
        ins, outs = kernel_io(callee)
        nin = len(ins)
        nout = len(outs) + (kernel_scratch(callee) is not None)  # the scratch is written too
        ndims = len(function_dims(callee))
        if len(args) != nin + nout + ndims:
            scratch = " (its scratch included)" if kernel_scratch(callee) is not None else ""
            raise RxError(
                f"call_cpacked @{callee.name}: {len(args)} arguments, the kernel takes "
                f"{nin} input(s), {nout} output(s){scratch} and {ndims} dim(s)",
                e.loc,
            )
        vals = self.scope.name("v_args")
        codes = self.scope.name("v_codes")
        n = len(args)
        self.emit(f"TVMValue {vals}[{n}];")
        self.emit(f"int32_t {codes}[{n}];")
        for i, a in enumerate(args):
            if i < nin + nout:
                if not isinstance(a, Var):
                    raise RxError(
                        f"call_cpacked @{callee.name}: argument {i + 1} must be a buffer", e.loc
                    )
                v = self.read(a)
                if isinstance(v, CStruct):
                    self.emit(f"{vals}[{i}].v_handle = (void *){v.var};")
                    self.emit(f"{codes}[{i}] = kTVMDLTensorHandle;")
                elif isinstance(v, CTensor):
                    if i >= nin and v.const:
                        raise RxError(
                            f"call_cpacked @{callee.name} would write into read-only memory", e.loc
                        )
                    self.emit(f"{vals}[{i}].v_handle = (void *){v.expr};")
                    self.emit(f"{codes}[{i}] = kTVMOpaqueHandle;")
                else:
                    raise RxError(f"call_cpacked @{callee.name}: %{a.name} is not a buffer", e.loc)
            else:
                if not is_dim(a):
                    raise RxError(
                        f"call_cpacked @{callee.name}: argument {i + 1} must be a dim", e.loc
                    )
                self.emit(f"{vals}[{i}].v_int64 = {self.dimc(a)};")
                self.emit(f"{codes}[{i}] = kTVMArgInt;")
        self.emit(
            f"if ({wrapper}({vals}, {codes}, {n}, &{self.ret_value}, &{self.ret_code}, NULL) != 0) "
            f"return {self.m.prefix.upper()}_ERR_KERNEL;"
        )

    def _invoke(self, inv: Invoke) -> None:
        outs = [self.tensor(v, f"invoke {inv.target}") for v in inv.outs]
        for o, v in zip(outs, inv.outs):
            if o.const:
                raise RxError(f"invoke {inv.target} would write into read-only %{v.name}", v.loc)
        scratch = self.tensor(inv.scratch, "scratch") if inv.scratch is not None else None
        if not inv.is_func:
            self.kernel_call(inv.target, inv.args, inv.kwargs, outs, inv.loc, scratch)
            return
        callee = self.m.module.get(inv.target)
        if callee is None or not callee.is_primitive:
            raise RxError(f"invoke @{inv.target}: not a primitive function", inv.loc)
        args = [self.read(a) for a in var_args(inv.args)]
        arg_types = [self.types[a.name] for a in var_args(inv.args)]
        if lowered_outputs(callee) is not None:  # the outs are its last parameters
            arg_types += [o.type for o in outs]
        where = f"invoke @{inv.target}"
        env = bind_callee_dims(callee, arg_types, where, inv.loc)
        _check_outs(callee, env, [o.type for o in outs], where, inv.loc)
        cname = self.m.primitive(callee.name, inv.loc)
        cargs = [x.expr for a in args for x in flat(a)]  # type: ignore[union-attr]
        cargs += [o.expr for o in outs]
        need = kernel_scratch(callee)
        if need is not None:
            cargs.append(self.scratch_arg(f"@{callee.name}", need.shape[0], scratch, inv.loc))
        cargs += [self.dimc(D.simplify(env[d])) for d in function_dims(callee)]
        self.emit(f"{cname}({', '.join(cargs)});")

    def _copy_outputs(self) -> None:
        vals: list[CValue] = []
        for v in ret_vars(self.fn):
            vals += flat(self.read(v))
        for k, (port, val) in enumerate(zip(self.outputs, vals)):
            if k in self.direct_outputs or port.accessor is not None:
                continue
            if not isinstance(val, CTensor):
                raise RxError(f"output {port.name} is not a tensor the C target can copy", None)
            self.emit(f"memcpy({port.name}, {val.expr}, {self.nbytes_c(port.type)});")


class _RunnerEffect(ExprFunctor[None]):
    """An expression statement of the runner: an ``invoke`` or a call whose result is unused."""

    def __init__(self, runner: RunnerEmitter, stmt: Effect):
        self.runner = runner
        self.stmt = stmt

    def visit_invoke(self, e: Invoke) -> None:
        self.runner._invoke(e)

    def visit_call(self, e: Call) -> None:
        self.runner._effect_call(e)

    def visit_default(self, expr: Expr) -> None:
        raise RxError("the C target cannot emit this statement", self.stmt.loc)


class _StaticPlace(ExprFunctor["Place | None"]):
    """Where a tensor of the runner lives for good when that is static memory, read off the
    definitions ``defs`` (through aliases, projections of tuple expressions and views): a
    storage of the function that is not the caller's (the arena, or another static buffer) at
    a constant offset, or a constant. None otherwise (an input, a dynamic or external storage,
    a chain of definitions longer than ``limit``)."""

    def __init__(self, defs: Mapping[str, Expr], limit: int):
        self.defs = defs
        self.limit = limit
        self.name = ""  # the value whose definition is being visited
        self.depth = 0

    def of(self, v: str | None) -> Place | None:
        e = self.defs.get(v) if v is not None else None
        if v is None or e is None or self.depth > self.limit:
            return None
        outer = self.name, self.depth
        self.name, self.depth = v, self.depth + 1
        try:
            return self.visit_expr(e)
        finally:
            self.name, self.depth = outer

    def visit_default(self, expr: Expr) -> Place | None:
        return None

    def visit_var(self, e: Var) -> Place | None:
        return self.of(e.name)

    def visit_project(self, e: Project) -> Place | None:
        tup = self.defs.get(e.tuple_var.name)
        if isinstance(tup, TupleExpr) and e.index < len(tup.fields):
            return self.of(tup.fields[e.index].name)
        return None

    def visit_call(self, e: Call) -> Place | None:
        if e.op == CONST:
            return ("const", self.name, 0)
        if e.op == ALLOC_TENSOR:
            a = _alloc_tensor_attrs(e)
            st = e.args[0] if e.args and isinstance(e.args[0], Var) else None
            while st is not None and isinstance(self.defs.get(st.name), Var):
                st = self.defs[st.name]  # type: ignore[assignment]
            alloc = call_of(self.defs.get(st.name), ALLOC_STORAGE) if st is not None else None
            if alloc is None or _storage_attrs(alloc)["external"] or not is_int(a["offset"]):
                return None
            return ("storage", st.name, a["offset"])  # type: ignore[union-attr]
        op = REGISTRY.get(e.op)
        src = next((x for x in e.args if isinstance(x, Var)), None)
        if e.op == CALL_PACKED and e.args and e.args[0] == BUILTIN_RESHAPE:
            src = e.args[1] if len(e.args) > 1 and isinstance(e.args[1], Var) else None
        elif op is None or not op.is_view:
            return None
        inner = self.of(src.name if src is not None else None)
        if inner is None:
            return None
        extra: D.Dim = 0
        if e.op == MEMORY_VIEW:
            extra = _view_offset(e)
            if not is_int(extra) or inner[0] == "const":
                return None if extra != 0 else inner
        return (inner[0], inner[1], D.simplify(D.add(inner[2], extra)))


def bind_callee_dims(
    callee: Function, arg_types: list[Type], where: str, loc: Loc | None
) -> dict[str, D.Dim]:
    """The call site's dim for each dim ``callee`` binds; RxError if the types do not match."""
    env: dict[str, D.Dim] = {}
    pleaves = [leaf for p in callee.params for leaf in tensor_leaves(p.type)]
    aleaves = [leaf for t in arg_types for leaf in tensor_leaves(t)]
    if len(pleaves) != len(aleaves):
        raise RxError(
            f"{where}: @{callee.name} takes {len(pleaves)} tensor(s), got {len(aleaves)}", loc
        )
    for p, a in zip(pleaves, aleaves):
        if p.dtype != a.dtype or len(p.shape) != len(a.shape):
            raise RxError(
                f"{where}: argument {type_to_str(a)} does not fit {type_to_str(p)} "
                f"of @{callee.name}",
                loc,
            )
    env.update(call_dims(callee, arg_types))
    for p, a in zip(pleaves, aleaves):
        for pd, ad in zip(p.shape, a.shape):
            if not D.dims_equal(D.substitute(pd, env), ad):
                raise RxError(
                    f"{where}: argument {type_to_str(a)} does not fit {type_to_str(p)} "
                    f"of @{callee.name}",
                    loc,
                )
    return env


def _check_outs(
    callee: Function, env: Mapping[str, D.Dim], outs: list[TensorType], where: str, loc: Loc | None
) -> None:
    want = tensor_leaves(callee.ret_type)
    if len(want) != len(outs):
        raise RxError(
            f"{where}: @{callee.name} returns {len(want)} tensor(s), {len(outs)} output(s) given",
            loc,
        )
    for w, o in zip(want, outs):
        if (
            w.dtype != o.dtype
            or len(w.shape) != len(o.shape)
            or not all(D.dims_equal(D.substitute(a, env), b) for a, b in zip(w.shape, o.shape))
        ):
            raise RxError(
                f"{where}: output {type_to_str(o)} does not fit the result {type_to_str(w)} "
                f"of @{callee.name}",
                loc,
            )


def _needs_planning(what: str, loc: Loc | None) -> RxError:
    return RxError(
        f"the C target needs explicit, planned memory, but {what} computes a value without an "
        f"allocation; build with the c pipeline (ManifestAlloc,PlanMemory[,LegalizePackedCalls])",
        loc,
    )


def _storage_attrs(call: Call) -> dict:
    bound = bind_args(REGISTRY.get(ALLOC_STORAGE), call.args, call.kwargs)  # type: ignore[arg-type]
    return dict(bound.attrs)


def _alloc_tensor_attrs(call: Call) -> dict:
    bound = bind_args(REGISTRY.get(ALLOC_TENSOR), call.args, call.kwargs)  # type: ignore[arg-type]
    return dict(bound.attrs)


def _view_offset(call: Call) -> D.Dim:
    bound = bind_args(REGISTRY.get(MEMORY_VIEW), call.args, call.kwargs)  # type: ignore[arg-type]
    return dict(bound.attrs)["offset"]


def _fits_bytes(t: TensorType, out: TensorType) -> bool:
    a, b = tensor_nbytes(t), tensor_nbytes(out)
    if isinstance(a, int) and isinstance(b, int):
        return a <= b
    return D.dims_equal(a, b)


__all__ = ["RunnerEmitter", "bind_callee_dims"]
