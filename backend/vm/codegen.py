"""Code generation: a verified (usually planned) module → the bytes of an ``.rxb`` file.

One register per binding: a function's parameters are registers ``0..p-1`` and every
``%name = ...`` of its body gets the next register, so no two names ever share one and a
kill of one name can never clear another. Each statement becomes one instruction (see
:mod:`relaxc.backend.vm.format`); the program keeps every detail of the IR, so the loader
can rebuild it exactly (and verify it) and ``--check`` can run the reference interpreter on
the very program the VM runs.

Constants (named weights and inline literals) go into the constant pool as raw
little-endian bytes with their dtype and shape, each stored once. The output depends only
on the module and the weights it uses: the same input always gives the same bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.diagnostics import InternalError, RxError
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
    Project,
    TupleExpr,
    Var,
)
from relaxc.ir.ops import REGISTRY
from relaxc.ir.ops.memory import literal_to_array
from relaxc.ir.registry import OpError, bind_args
from relaxc.ir.types import (
    ObjectType,
    StorageType,
    TensorType,
    TupleType,
    Type,
    dtype_from_numpy,
    numpy_dtype,
    type_to_str,
)
from relaxc.ir.verifier import ModuleTypes, verify_module
from relaxc.ir.vocab import CONST, is_dim
from relaxc.ir.walk import ExprFunctor, StmtVisitor

from ..packed import C_TARGET_OPS, c_target_only
from . import format as F
from .program import MAX_DIM_TERMS, MAX_INLINE_ELEMENTS, MAX_NDIM, TooComplex, shape_terms

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_U32_MAX = 0xFFFFFFFE  # NONE_REG is reserved


class _Strings:
    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.items: list[str] = []

    def __call__(self, s: str) -> int:
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.items)
            self.items.append(s)
        return i


class _Constants:
    """The pool: named weights once per name, inline literals once per distinct content."""

    def __init__(self, strings: _Strings, weights: Mapping[str, np.ndarray]):
        self.strings = strings
        self.weights = weights
        self.w = F.Writer()
        self.count = 0
        self.named: dict[str, int] = {}
        self.inline: dict[tuple, int] = {}

    def _add(self, kind: int, name: str, arr: np.ndarray) -> int:
        """Append a constant (kind 0 weight, 1 literal); a weight whose elements are all the
        same bytes is written as a splat (kind 2: one element), so a folded
        ``ConstantOfShape`` costs its element, not its size."""
        code = dtype_from_numpy(arr.dtype)
        if code is None:
            raise RxError(f"constant '{name}' has dtype {arr.dtype}, which relaxc does not support")
        what = f"weight '{name}'" if name else "the literal"
        if arr.ndim > MAX_NDIM:
            raise _TooBig(
                f"{what} has rank {arr.ndim}; .rxb files hold arrays of rank at most {MAX_NDIM}"
            )
        if kind == 1 and arr.size > MAX_INLINE_ELEMENTS:
            raise _TooBig(
                f"{what} has {arr.size:,} elements; .rxb files hold inline literals of at most "
                f"{MAX_INLINE_ELEMENTS:,} (make it a named weight)"
            )
        w = self.w
        data = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
        if kind == F.CONST_WEIGHT and is_splat(data):
            kind, data = F.CONST_SPLAT, data.reshape(-1)[:1]  # one element stands for all
        w.u8(kind)
        w.u32(self.strings(name))
        w.u8(F.DTYPE_CODES.index(code))
        w.u32(arr.ndim)
        for d in arr.shape:
            w.u64(d)
        w.u64(data.nbytes)
        # as bytes without an intermediate copy (a uint8 view: buffers refuse bf16)
        w.buf += memoryview(data.reshape(-1).view(np.uint8)) if data.nbytes else b""
        self.count += 1
        return self.count - 1

    def named_weight(self, name: str, annotated: Type | None) -> int:
        if name in self.named:
            return self.named[name]
        arr = self.weights.get(name)
        if arr is None:
            raise RxError(f"weight '{name}' was not provided (no .npz, or it lacks this array)")
        arr = np.asarray(arr)
        if isinstance(annotated, TensorType) and annotated.is_static():
            want = (tuple(annotated.shape), numpy_dtype(annotated.dtype))
            if (arr.shape, arr.dtype) != want:
                raise RxError(
                    f"weight '{name}' is {arr.dtype}{arr.shape}, but the program declares "
                    f"{type_to_str(annotated)}"
                )
        self.named[name] = i = self._add(0, name, arr)
        return i

    def literal(self, arr: np.ndarray) -> int:
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in self.inline:
            self.inline[key] = self._add(1, "", arr)
        return self.inline[key]


class _TooBig(Exception):
    """A program the loader would refuse (a limit of the .rxb format); made an RxError at the
    statement or function that holds it."""


def _check_depth(depth: int, what: str) -> None:
    if depth > F.MAX_DEPTH:
        raise _TooBig(f"{what} nests deeper than the {F.MAX_DEPTH} levels .rxb files hold")


def _check_terms(dims: tuple) -> None:
    """The loader's limit on the canonical size of a dim or a shape's product."""
    try:
        shape_terms(dims)
    except TooComplex:
        raise _TooBig(
            f"a dimension expression (or a shape's product) expands to more than {MAX_DIM_TERMS:,} "
            "terms, more than .rxb files hold"
        ) from None


def _value(w: F.Writer, v: Any, strings: _Strings, depth: int = 0, top: bool = True) -> None:
    """Encode a value (``top``: a value of its own, not an operand of a dim expression, which
    the loader checks for size as a whole)."""
    _check_depth(depth, "a value")
    if v is True:
        w.u8(F.V_TRUE)
    elif v is False:
        w.u8(F.V_FALSE)
    elif isinstance(v, int):
        if not _I64_MIN <= v <= _I64_MAX:
            raise RxError(f"the integer {v} does not fit in the bytecode's 64-bit integers")
        w.u8(F.V_INT)
        w.i64(v)
    elif isinstance(v, float):
        w.u8(F.V_FLOAT)
        w.f64(v)
    elif isinstance(v, str):
        w.u8(F.V_STR)
        w.u32(strings(v))
    elif isinstance(v, tuple):
        if v and all(is_dim(x) for x in v):
            _check_terms(v)
        w.u8(F.V_TUPLE)
        w.u32(len(v))
        for x in v:
            _value(w, x, strings, depth + 1)
    elif isinstance(v, ListLit):
        w.u8(F.V_LIST)
        w.u32(len(v.items))
        for x in v.items:
            _value(w, x, strings, depth + 1)
    elif isinstance(v, DictLit):
        w.u8(F.V_DICT)
        w.u32(len(v.items))
        for k, x in v.items:
            w.u32(strings(k))
            _value(w, x, strings, depth + 1)
    elif isinstance(v, DType):
        w.u8(F.V_DTYPE)
        w.u8(F.DTYPE_CODES.index(v.name))
    elif isinstance(v, D.Sym):
        w.u8(F.V_SYM)
        w.u32(strings(v.name))
    elif isinstance(v, D.BinOp):
        if top:
            _check_terms((v,))
        w.u8(F.V_BINOP)
        w.u8(D.BIN_OPS.index(v.op))
        _value(w, v.lhs, strings, depth + 1, False)
        _value(w, v.rhs, strings, depth + 1, False)
    elif isinstance(v, D.DimCall):
        if top:
            _check_terms((v,))
        w.u8(F.V_DIMCALL)
        w.u8(D.DIM_FUNCS.index(v.func))
        w.u32(len(v.args))
        for x in v.args:
            _value(w, x, strings, depth + 1, False)
    else:
        raise InternalError(f"cannot encode the value {v!r}")


def _type(w: F.Writer, t: Type, strings: _Strings, depth: int = 0) -> None:
    _check_depth(depth, "a type")
    if isinstance(t, TensorType):
        if len(t.shape) > MAX_NDIM:
            raise _TooBig(
                f"a tensor type has rank {len(t.shape)}; .rxb files hold tensors of rank at "
                f"most {MAX_NDIM}"
            )
        _check_terms(t.shape)
        w.u8(F.T_TENSOR)
        w.u8(F.DTYPE_CODES.index(t.dtype))
        w.u32(len(t.shape))
        for d in t.shape:
            _value(w, d, strings, depth + 1, False)
    elif isinstance(t, TupleType):
        w.u8(F.T_TUPLE)
        w.u32(len(t.fields))
        for f in t.fields:
            _type(w, f, strings, depth + 1)
    elif isinstance(t, StorageType):
        w.u8(F.T_STORAGE)
    elif isinstance(t, ObjectType):
        w.u8(F.T_OBJECT)
    else:
        raise InternalError(f"cannot encode the type {t!r}")


def _annotation(w: F.Writer, t: Type | None, strings: _Strings) -> None:
    if t is None:
        w.u8(0)
    else:
        w.u8(1)
        _type(w, t, strings)


class _BindingNames(StmtVisitor):
    """The names a function's body binds, in order."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def visit_bind(self, stmt: Bind) -> None:
        self.names.append(stmt.name)


class _Returned(ExprFunctor["tuple[bool, tuple[Var, ...]]"]):
    """What ``ret`` encodes of a function's return value: whether it is a tuple, and its %vars."""

    def visit_var(self, e: Var) -> tuple[bool, tuple[Var, ...]]:
        return False, (e,)

    def visit_tuple(self, e: TupleExpr) -> tuple[bool, tuple[Var, ...]]:
        return True, e.fields


class _FunctionCode(StmtVisitor, ExprFunctor[None]):
    """Encodes the body of one function into the CODE section: one instruction per
    statement, chosen by the kind of its expression (``visit_*``)."""

    def __init__(
        self,
        fn: Function,
        funcs: dict[str, int],
        consts: _Constants,
        strings: _Strings,
        types: Mapping[str, Type],
        w: F.Writer,
    ):
        self.fn = fn
        self.funcs = funcs
        self.consts = consts
        self.strings = strings
        self.types = types
        self.w = w
        self.regs: dict[str, int] = {}
        self.names: list[str] = []
        for p in fn.params:
            self._new_reg(p.name)
        bound = _BindingNames()
        bound.visit_function(fn)
        for name in bound.names:
            self._new_reg(name)
        self.count = 0
        self.bind: Bind | None = None  # the statement being encoded, when it binds a name

    def _new_reg(self, name: str) -> None:
        if name in self.regs:
            raise InternalError(f"%{name} is bound twice in @{self.fn.name}")
        if len(self.names) >= _U32_MAX:
            raise RxError(f"@{self.fn.name} has too many values for the bytecode format")
        self.regs[name] = len(self.names)
        self.names.append(name)

    def reg(self, v: Var) -> int:
        return self.regs[v.name]

    def regs_list(self, vs: tuple[Var, ...]) -> None:
        self.w.u32(len(vs))
        for v in vs:
            self.w.u32(self.reg(v))

    def operands(self, args: tuple) -> None:
        w = self.w
        w.u32(len(args))
        for a in args:
            if isinstance(a, Var):
                w.u8(F.O_REG)
                w.u32(self.reg(a))
            else:
                w.u8(F.O_VALUE)
                _value(w, a, self.strings)

    def kwargs(self, kwargs: tuple) -> None:
        w = self.w
        w.u32(len(kwargs))
        for k, v in kwargs:
            w.u32(self.strings(k))
            _value(w, v, self.strings)

    def head(self, opcode: int) -> None:
        """Opcode, destination register and annotation (none for an expression statement)."""
        w = self.w
        w.u8(opcode)
        if self.bind is not None:
            w.u32(self.regs[self.bind.name])
            _annotation(w, self.bind.type, self.strings)
        else:
            w.u32(F.NONE_REG)
            _annotation(w, None, self.strings)

    # -- statements -------------------------------------------------------------------------
    def statement(self, stmt: Bind | Effect) -> None:
        self.count += 1
        self.visit_stmt(stmt)

    def visit_bind(self, stmt: Bind) -> None:
        self.bind = stmt
        self.visit_expr(stmt.value)

    def visit_effect(self, stmt: Effect) -> None:
        self.bind = None
        self.visit_expr(stmt.value)

    # -- expressions: one instruction each --------------------------------------------------
    def visit_invoke(self, e: Invoke) -> None:
        w = self.w
        if e.is_func:
            w.u8(F.INVOKE_FUNC)
            w.u32(self.funcs[e.target])
            self.regs_list(e.args)  # type: ignore[arg-type]  (the verifier allows only %vars)
        else:
            w.u8(F.INVOKE)
            w.u32(self.strings(e.target))
            self.operands(e.args)
            self.kwargs(e.kwargs)
        self.regs_list(e.outs)

    def visit_call_func(self, e: CallFunc) -> None:
        self.head(F.CALL_FUNC)
        self.w.u32(self.funcs[e.func])
        self.regs_list(e.args)

    def visit_tuple(self, e: TupleExpr) -> None:
        self.head(F.TUPLE)
        self.regs_list(e.fields)

    def visit_project(self, e: Project) -> None:
        self.head(F.PROJECT)
        self.w.u32(self.reg(e.tuple_var))
        self.w.u32(e.index)

    def visit_var(self, e: Var) -> None:
        self.head(F.MOVE)
        self.w.u32(self.reg(e))

    def visit_call(self, e: Call) -> None:
        if e.op == CONST:
            self.head(F.CONST)
            self.w.u32(self.const(e))
            return
        self.head(self.call_opcode(e))
        self.w.u32(self.strings(e.op))
        self.operands(e.args)
        self.kwargs(e.kwargs)

    def visit_default(self, e: Any) -> None:  # pragma: no cover
        raise InternalError(f"cannot compile {e!r}")

    def call_opcode(self, e: Call) -> int:
        for code, name in F.FIXED_OPS.items():
            if name == e.op:
                return code
        op = REGISTRY.get(e.op)
        if op is None:  # pragma: no cover - verified modules only name known ops
            raise InternalError(f"unknown op {e.op}")
        if op.category == "view":
            return F.VIEW
        if op.category == "runtime":
            if e.op in C_TARGET_OPS:
                raise c_target_only(e)
            return F.PACKED
        if op.category == "kernel":
            return F.KERNEL
        raise InternalError(f"op {e.op} ({op.category}) has no instruction")

    def const(self, e: Call) -> int:
        op = REGISTRY.get(CONST)
        try:
            bound = bind_args(op, e.args, e.kwargs)  # type: ignore[arg-type]
        except OpError as err:  # pragma: no cover - verified
            raise RxError(str(err), e.loc) from None
        value = bound.attrs["value"]
        bind = self.bind
        annotated = bind.type if bind is not None else None
        if isinstance(value, str):
            return self.consts.named_weight(value, annotated)
        dtype = bound.attrs["dtype"]
        if bind is not None and isinstance(self.types.get(bind.name), TensorType):
            dtype = self.types[bind.name].dtype  # type: ignore[union-attr]  (as the interpreter does)
        return self.consts.literal(literal_to_array(value, dtype))

    def ret(self) -> None:
        w = self.w
        w.u8(F.RET)
        is_tuple, regs = _Returned().visit_expr(self.fn.ret)
        w.u8(1 if is_tuple else 0)
        self.regs_list(regs)
        self.count += 1


@contextlib.contextmanager
def _at(loc: Any, fn: Function) -> Iterator[None]:
    """Turn a format limit hit while encoding part of ``fn`` into an RxError at ``loc``."""
    try:
        yield
    except _TooBig as e:
        raise RxError(f"@{fn.name} cannot be written as VM bytecode: {e}", loc) from None


def compile_module(
    module: Module,
    weights: Mapping[str, np.ndarray] | None = None,
    types: ModuleTypes | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> bytes:
    """The ``.rxb`` bytes of ``module`` (verified here unless ``types`` are given).

    Named constants are taken from ``weights``; a missing one is an RxError.
    ``progress(done, total)``, if given, is called as statements are compiled.
    """
    if types is None:
        types = verify_module(module)
    strings = _Strings()
    consts = _Constants(strings, weights or {})
    funcs = {f.name: i for i, f in enumerate(module.functions)}
    ftab = F.Writer()
    code = F.Writer()
    ftab.u32(len(module.functions))
    total = sum(len(fn.body) for fn in module.functions)
    done = 0
    for fn in module.functions:
        start = len(code)
        fc = _FunctionCode(fn, funcs, consts, strings, types[fn.name], code)
        for st in fn.body:
            if progress is not None:
                progress(done, total)
            done += 1
            with _at(st.loc, fn):
                fc.statement(st)
        with _at(fn.ret.loc, fn):
            fc.ret()
        ftab.u32(strings(fn.name))
        ftab.u32(len(fn.attrs))
        for i, (k, v) in enumerate(fn.attrs):
            ftab.u32(strings(k))
            with _at(fn.attr_locs[i] if i < len(fn.attr_locs) else fn.loc, fn):
                _value(ftab, v, strings)
        ftab.u32(len(fc.names))
        for name in fc.names:
            ftab.u32(strings(name))
        ftab.u32(len(fn.params))
        for p in fn.params:
            with _at(p.loc, fn):
                _type(ftab, p.type, strings)
        with _at(fn.loc, fn):
            _type(ftab, fn.ret_type, strings)
        ftab.u64(start)
        ftab.u64(len(code) - start)
        ftab.u32(fc.count)
    strs = F.Writer()
    strs.u32(len(strings.items))
    for s in strings.items:
        try:
            b = s.encode("utf-8")
        except UnicodeEncodeError:
            raise RxError(f"the name {s!r} cannot be written as UTF-8") from None
        strs.u32(len(b))
        strs.raw(b)
    cnst = F.Writer()
    cnst.u32(consts.count)
    cnst.buf += consts.w.buf
    # Large models carry hundreds of MB of constants: hash the sections piece by piece and
    # join everything once, instead of copying the payload into a buffer and then again.
    parts: list[bytes | bytearray] = []
    for tag, body in zip(F.SECTIONS, (strs, cnst, ftab, code)):
        parts += [tag, len(body).to_bytes(8, "little"), body.buf]
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part)
    size = sum(len(part) for part in parts)
    return b"".join([F.HEADER.pack(F.MAGIC, F.FORMAT_VERSION, 0, size, sha.digest()), *parts])


def is_splat(data: np.ndarray, chunk: int = 1 << 20) -> bool:
    """Whether every element of ``data`` (C-contiguous) has the bytes of its first, for more
    than one element (compared in chunks: no temporary the size of ``data``)."""
    if data.size < 2:
        return False
    rows = data.reshape(-1).view(np.uint8).reshape(data.size, data.dtype.itemsize)
    first = rows[0]
    return all(bool((rows[i : i + chunk] == first).all()) for i in range(0, data.size, chunk))
