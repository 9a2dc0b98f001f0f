"""The reference interpreter: the semantic yardstick every pass and backend is checked against.

It walks the IR binding by binding with numpy, before or after any pass:

* kernel ops and primitive functions compute with the registry's numpy kernels;
* views (reshape, flatten, ...) return numpy views sharing memory with their input;
* ``memory.alloc_storage`` makes a real byte buffer and ``memory.alloc_tensor`` a view into
  it at its offset, so ``invoke ... outs (...)`` really writes into planned memory and a
  wrong plan really corrupts results;
* kills remove the name — any later use is an error — and, with ``poison=True`` (the
  default), overwrite the freed bytes, so an alias that outlives a kill reads garbage;
* live bytes are counted (storages and kernel results, until killed or returned), giving
  the current and peak bytes the interpreter itself held.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from relaxc.ir.diagnostics import InternalError, Loc, RxError
from relaxc.ir.nodes import (
    Bind,
    Call,
    CallFunc,
    Effect,
    Expr,
    Function,
    Invoke,
    Module,
    Project,
    TupleExpr,
    Var,
)
from relaxc.ir.ops import REGISTRY
from relaxc.ir.ops.memory import literal_to_array
from relaxc.ir.registry import OpError, Registry, bind_args
from relaxc.ir.types import (
    DTYPES,
    TensorType,
    TupleType,
    Type,
    numpy_dtype,
    type_to_str,
    tensor_leaves,
)
from relaxc.ir.verifier import ModuleTypes, verify_module
from relaxc.ir.ops.memory import view_bytes
from relaxc.ir.vocab import ALLOC_STORAGE, ALLOC_TENSOR, CONST, KILL_OBJECT, KILL_OPS, MEMORY_VIEW
from relaxc.ir.walk import ExprFunctor, StmtVisitor

from .deep_calls import call_depth, run_nested
from .inputs import bind_dims, check_alloc_size, concrete_shape, concrete_value
from .packed import C_TARGET_OPS, PACKED_IMPLS, PackedContext, c_target_only
from .values import as_arrays, copy_value, fresh

POISON_BYTE = 0xFF
"""Killed memory is filled with this byte: NaN for floats, -1 for signed integers."""


class Storage:
    """A block of bytes from ``memory.alloc_storage``."""

    __slots__ = ("buf", "nbytes", "align")

    def __init__(self, nbytes: int, align: int):
        # Over-allocate so the data pointer itself honours the requested alignment.
        raw = np.empty(nbytes + align, dtype=np.uint8)
        shift = (-raw.ctypes.data) % align
        self.buf = raw[shift : shift + nbytes]
        self.nbytes = nbytes
        self.align = align


@dataclass(frozen=True)
class Killed:
    """What a killed name holds: any read of it is a use-after-kill error."""

    name: str
    loc: Loc | None


@dataclass
class MemoryStats:
    """Bytes the interpreter held for values (storages and kernel results)."""

    current: int = 0
    peak: int = 0
    allocations: int = 0

    def alloc(self, n: int) -> None:
        self.current += n
        self.allocations += 1
        self.peak = max(self.peak, self.current)

    def free(self, n: int) -> None:
        self.current -= n


class Interpreter:
    """Runs functions of a verified module with numpy.

    ``weights`` holds the arrays named by ``const("name")``. ``poison`` overwrites killed
    memory. Memory counters accumulate in :attr:`stats` across calls.
    """

    def __init__(
        self,
        module: Module,
        weights: Mapping[str, np.ndarray] | None = None,
        *,
        poison: bool = True,
        registry: Registry = REGISTRY,
        types: ModuleTypes | None = None,
    ):
        self.module = module
        self.weights = {k: _readonly(v) for k, v in (weights or {}).items()}
        self.poison = poison
        self.registry = registry
        self.types = types if types is not None else verify_module(module, registry)
        self.functions = {f.name: f for f in module.functions}
        self.stats = MemoryStats()

    def run(
        self, fn_name: str = "main", args: Sequence[Any] = (), dims: Mapping[str, int] | None = None
    ) -> Any:
        """Call ``fn_name`` with ``args`` (numpy arrays); returns an array or a tuple."""
        fn = self.functions.get(fn_name)
        if fn is None:
            raise RxError(f"the module has no function @{fn_name}")
        args = [copy_value(a) for a in args]
        env = bind_dims(fn, args, dims)
        depth = call_depth([fn_name], self._callees)

        def work() -> tuple[Any, int]:
            # inf * 0 is nan, quietly: kernels follow IEEE, they do not warn (numpy's error
            # state is per thread: set where the work runs)
            with np.errstate(all="ignore"):
                return self._call(fn, args, env)

        result, held = run_nested(depth, fn_name, work)
        self.stats.free(held)  # the caller gets copies; the program holds nothing any more
        return copy_value(result)

    def _callees(self, name: str) -> list[str]:
        """The functions ``name`` calls (by ``call`` or ``invoke``), in written order."""
        fn = self.functions.get(name)
        out: list[str] = []
        for s in fn.body if fn is not None else ():
            e = s.value
            if isinstance(e, CallFunc):
                out.append(e.func)
            elif isinstance(e, Invoke) and e.is_func:
                out.append(e.target)
        return out

    # -- frames -----------------------------------------------------------------------
    def _call(self, fn: Function, args: Sequence[Any], dim_env: dict[str, int]) -> tuple[Any, int]:
        """Run ``fn``; return its result and the bytes still held for it (now the caller's)."""
        frame = _Frame(self, fn, dim_env)
        for p, a in zip(fn.params, args):
            frame.values[p.name] = a
        frame.visit_function(fn)
        result = frame.read_expr(fn.ret)
        return result, frame.release(result)


class _Frame(StmtVisitor, ExprFunctor[Any]):
    """The values of one function activation: walks its statements, evaluating each
    expression by its kind (``visit_*``) with the binding it belongs to in :attr:`bind`."""

    def __init__(self, interp: Interpreter, fn: Function, dims: dict[str, int]):
        self.interp = interp
        self.fn = fn
        self.dims = dims
        self.types = interp.types[fn.name]
        self.values: dict[str, Any] = {}
        self.owned: dict[str, int] = {}  # name -> bytes this frame allocated for it
        self.bind: Bind | None = None  # the statement being evaluated, when it binds a name

    # -- reading ----------------------------------------------------------------------
    def read(self, v: Var) -> Any:
        val = self.values.get(v.name)
        if isinstance(val, Killed):
            where = f" (killed at {val.loc.at})" if val.loc else ""
            raise RxError(f"use of %{v.name} after it was killed{where}", v.loc)
        if val is None and v.name not in self.values:
            raise InternalError(f"%{v.name} has no value")
        return val

    def read_expr(self, e: Expr) -> Any:
        """What a function returns: a %var or a tuple of them."""
        return _ReturnReader(self).visit_expr(e)

    def concrete(self, v: Any) -> Any:
        """An attribute value with every symbolic dim evaluated."""
        return concrete_value(v, self.dims)

    # -- statements -------------------------------------------------------------------
    def visit_bind(self, stmt: Bind) -> None:
        self.bind = stmt
        self.values[stmt.name] = self.visit_expr(stmt.value)

    def visit_effect(self, stmt: Effect) -> None:
        self.bind = None
        self.visit_expr(stmt.value)

    # -- expressions ------------------------------------------------------------------
    def visit_var(self, e: Var) -> Any:
        return self.read(e)

    def visit_tuple(self, e: TupleExpr) -> Any:
        return tuple(self.read(v) for v in e.fields)

    def visit_project(self, e: Project) -> Any:
        return self.read(e.tuple_var)[e.index]

    def visit_call_func(self, e: CallFunc) -> Any:
        bind = self.bind
        callee = self.interp.functions[e.func]
        args = [self.read(a) for a in e.args]
        result, held = self.interp._call(callee, args, bind_dims(callee, args))
        if callee.is_primitive:
            self._own(bind, result)  # a kernel's result is new memory of the caller's
        elif bind is not None and held:
            self.owned[bind.name] = held
        else:
            self.interp.stats.free(held)
        return result

    def visit_invoke(self, e: Invoke) -> Any:
        self.invoke(e)
        return None

    def visit_call(self, e: Call) -> Any:
        return self.call(e, self.bind)

    def _own(self, bind: Bind | None, value: Any) -> None:
        # Temporaries inside a primitive function are the kernel's own business (a fused
        # kernel never materializes them); only the caller's values are counted.
        if bind is None or self.fn.is_primitive:
            return
        n = _nbytes(value)
        if n:
            self.owned[bind.name] = n
            self.interp.stats.alloc(n)

    def call(self, e: Call, bind: Bind | None) -> Any:
        interp = self.interp
        op = interp.registry.get(e.op)
        assert op is not None, e.op
        name = e.op
        if name == CONST:
            return self.const(e, bind)
        if name == ALLOC_STORAGE:
            bound = bind_args(op, e.args, e.kwargs)
            size = int(self.concrete(bound.attrs["size"]))
            check_alloc_size(size, ALLOC_STORAGE)
            storage = Storage(size, bound.attrs["align"])
            if bind is not None:
                self.owned[bind.name] = size
                interp.stats.alloc(size)
            return storage
        if name == ALLOC_TENSOR:
            return self.alloc_tensor(e, op)
        if name in KILL_OPS:
            self.kill(e)
            return None
        if op.category == "runtime":
            return self.packed(e)
        bound = bind_args(op, e.args, e.kwargs)
        inputs = [self.read(v) for v in bound.inputs]
        attrs = {k: self.concrete(v) for k, v in bound.attrs.items()}
        if op.is_view:
            result = self.view(op.name, inputs, attrs, bind)
            return result
        expected = self.types.get(bind.name) if bind is not None else None
        result = self.kernel(op, inputs, attrs, expected, e.loc)
        self._own(bind, result)
        return result

    def kernel(
        self, op: Any, inputs: list, attrs: dict, expected: Type | None, loc: Loc | None
    ) -> Any:
        if expected is not None:
            for leaf in tensor_leaves(expected):
                shape = concrete_shape(leaf.shape, self.dims)
                check_alloc_size(math.prod(shape) * DTYPES[leaf.dtype].nbytes, f"{op.name}")
        try:
            result = fresh(as_arrays(_run_kernel(op, inputs, attrs, loc)), inputs)
        except MemoryError:
            raise RxError(f"{op.name}: out of memory", loc) from None
        if expected is not None:
            self.check_result(op.name, result, expected)
        return result

    def check_result(self, what: str, result: Any, expected: Type) -> None:
        if isinstance(expected, TupleType):
            if not isinstance(result, tuple) or len(result) != len(expected.fields):
                raise InternalError(
                    f"{what} returned {type(result).__name__}, expected a "
                    f"{len(expected.fields)}-tuple"
                )
            for r, t in zip(result, expected.fields):
                self.check_result(what, r, t)
            return
        if isinstance(expected, TensorType):
            shape = concrete_shape(expected.shape, self.dims)
            if (
                not isinstance(result, np.ndarray)
                or result.shape != shape
                or result.dtype != numpy_dtype(expected.dtype)
            ):
                got = (
                    f"{result.dtype}{result.shape}"
                    if isinstance(result, np.ndarray)
                    else type(result).__name__
                )
                raise InternalError(
                    f"kernel {what} produced {got}, expected {type_to_str(expected)} = {shape}"
                )

    def view(self, name: str, inputs: list, attrs: dict, bind: Bind | None) -> np.ndarray:
        x = inputs[0]
        assert bind is not None, "a view's result is always bound"
        t = self.types[bind.name]
        assert isinstance(t, TensorType)
        shape = concrete_shape(t.shape, self.dims)
        if name == MEMORY_VIEW:
            try:
                return view_bytes(x, int(attrs["offset"]), shape, t.dtype)
            except OpError as err:
                raise RxError(str(err), bind.loc) from None
        if not x.flags.c_contiguous:
            raise InternalError(f"{name}: input is not contiguous, a view would copy")
        out = x.reshape(shape)
        if not np.shares_memory(out, x) and x.size:
            raise InternalError(f"{name}: reshape copied")
        return out

    def const(self, e: Call, bind: Bind | None) -> np.ndarray:
        op = self.interp.registry.get(CONST)
        bound = bind_args(op, e.args, e.kwargs)  # type: ignore[arg-type]
        value = bound.attrs["value"]
        if isinstance(value, str):
            arr = self.interp.weights.get(value)
            if arr is None:
                raise RxError(
                    f"weight '{value}' was not provided (no .npz, or it lacks this array)", e.loc
                )
            return arr
        dtype = bound.attrs["dtype"]
        if bind is not None and isinstance(self.types.get(bind.name), TensorType):
            dtype = self.types[bind.name].dtype  # type: ignore[union-attr]
        return literal_to_array(value, dtype)

    def alloc_tensor(self, e: Call, op: Any) -> np.ndarray:
        bound = bind_args(op, e.args, e.kwargs)
        storage = self.read(bound.inputs[0])
        if not isinstance(storage, Storage):
            raise InternalError("alloc_tensor on something that is not a storage")
        offset = int(self.concrete(bound.attrs["offset"]))
        shape = tuple(int(d) for d in self.concrete(bound.attrs["shape"]))
        dtype = bound.attrs["dtype"]
        # Storage-only dtypes (bf16) are held as raw unsigned integers of the same width.
        dt = (
            numpy_dtype(dtype)
            if DTYPES[dtype].numpy is not None
            else np.dtype(f"u{DTYPES[dtype].nbytes}")
        )
        count = math.prod(shape)
        nbytes = count * dt.itemsize
        if offset < 0 or offset + nbytes > storage.nbytes:
            raise RxError(
                f"memory.alloc_tensor: bytes [{offset}, {offset + nbytes}) do not fit "
                f"in a storage of {storage.nbytes} bytes",
                e.loc,
            )
        if offset % dt.itemsize:
            raise RxError(
                f"memory.alloc_tensor: offset {offset} is not a multiple of {dt.itemsize}", e.loc
            )
        return storage.buf[offset : offset + nbytes].view(dt).reshape(shape)

    def invoke(self, e: Invoke) -> None:
        outs = [self.read(v) for v in e.outs]
        if e.is_func:
            callee = self.interp.functions[e.target]
            args = [self.read(a) for a in e.args]  # type: ignore[arg-type]
            if (
                callee.attr("outputs") is not None
            ):  # lowered: it writes the outs, its last parameters
                args += outs
            result, held = self.interp._call(callee, args, bind_dims(callee, args))
            self.interp.stats.free(held)  # copied into the outs below
        else:
            op = self.interp.registry.get(e.target)
            bound = bind_args(op, e.args, e.kwargs)  # type: ignore[arg-type]
            inputs = [self.read(v) for v in bound.inputs]
            attrs = {k: self.concrete(v) for k, v in bound.attrs.items()}
            result = as_arrays(_run_kernel(op, inputs, attrs, e.loc))
        results = list(result) if isinstance(result, tuple) else [result]
        if len(results) != len(outs):
            raise InternalError(f"invoke {e.target}: {len(results)} results for {len(outs)} outs")
        for out, res, var in zip(outs, results, e.outs):
            if not isinstance(out, np.ndarray) or out.shape != res.shape or out.dtype != res.dtype:
                raise RxError(
                    f"invoke {e.target}: output %{var.name} is "
                    f"{getattr(out, 'dtype', '?')}{getattr(out, 'shape', '')} but the kernel "
                    f"produced {res.dtype}{res.shape}",
                    e.loc,
                )
            np.copyto(out, res)

    def kill(self, e: Call) -> None:
        target = e.args[0]
        assert isinstance(target, Var)
        value = self.read(target)
        # kill_tensor and kill_storage free memory (poisoned here); vm.kill_object only
        # releases the name, whatever it holds (the kill checker's rule too).
        if self.interp.poison and e.op != KILL_OBJECT:
            if isinstance(value, Storage):
                value.buf.fill(POISON_BYTE)
            elif (
                isinstance(value, np.ndarray) and value.flags.writeable and value.flags.c_contiguous
            ):
                value.reshape(-1).view(np.uint8).fill(
                    POISON_BYTE
                )  # reshape: a 0-d array cannot change its itemsize
        self.values[target.name] = Killed(target.name, e.loc)
        n = self.owned.pop(target.name, 0)
        if n:
            self.interp.stats.free(n)

    def packed(self, e: Call) -> Any:
        if e.op in C_TARGET_OPS:
            raise c_target_only(e)
        fname = e.args[0] if e.args else None
        impl = PACKED_IMPLS.get(fname) if isinstance(fname, str) else None
        if impl is None:
            known = ", ".join(sorted(PACKED_IMPLS))
            raise RxError(
                f"{e.op}: no runtime function named {fname!r}", e.loc, notes=(f"known: {known}",)
            )
        args = [self.read(a) if isinstance(a, Var) else self.concrete(a) for a in e.args[1:]]
        return impl(PackedContext(self.dims), args)

    def release(self, result: Any) -> int:
        """Function exit: free what this frame allocated, except what backs its result.

        Returns the bytes kept for the result (a returned tensor keeps the storage it lives in).
        """
        returned = [x for x in _flatten(result) if isinstance(x, np.ndarray)]
        held = 0
        for name, n in self.owned.items():
            value = self.values.get(name)
            backing = value.buf if isinstance(value, Storage) else value
            if isinstance(backing, (np.ndarray, tuple)) and any(
                _shares(backing, r) for r in returned
            ):
                held += n
            else:
                self.interp.stats.free(n)
        return held


class _ReturnReader(ExprFunctor[Any]):
    """Reads a function's return value in a frame: a %var or a tuple of them, nothing else."""

    def __init__(self, frame: _Frame):
        self.frame = frame

    def visit_var(self, e: Var) -> Any:
        return self.frame.read(e)

    def visit_tuple(self, e: TupleExpr) -> Any:
        return tuple(self.frame.read(v) for v in e.fields)

    def visit_default(self, e: Expr) -> Any:
        raise InternalError(f"cannot read {e!r} as a value")


def _shares(value: Any, arr: np.ndarray) -> bool:
    return any(isinstance(x, np.ndarray) and np.may_share_memory(x, arr) for x in _flatten(value))


def _flatten(v: Any) -> list[Any]:
    if isinstance(v, tuple):
        return [x for f in v for x in _flatten(f)]
    return [v]


def _nbytes(v: Any) -> int:
    if isinstance(v, np.ndarray):
        return int(v.nbytes) if v.base is None else int(v.nbytes)
    if isinstance(v, tuple):
        return sum(_nbytes(x) for x in v)
    return 0


def _readonly(a: np.ndarray) -> np.ndarray:
    out = np.array(a, copy=True, order="C")
    out.flags.writeable = False
    return out


def _run_kernel(op: Any, inputs: list, attrs: dict, loc: Loc | None) -> Any:
    """``op``'s kernel on concrete inputs. A kernel refuses (OpError) what the verifier could
    not rule out for symbolic dims, e.g. a pooling window larger than an input of height n at
    n = 1: that is the run's error, at the statement, not an internal one."""
    try:
        return op.kernel(inputs, attrs)
    except OpError as e:
        raise RxError(str(e), loc) from None
