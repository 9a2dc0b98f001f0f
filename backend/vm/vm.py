"""The virtual machine: runs a loaded :class:`~relaxc.backend.vm.program.Executable`.

Execution model
---------------
Every function activation has a *frame*: one register per parameter and per binding
(``regs``), and beside each register the blocks its value refers to (``blks``, see
:mod:`relaxc.backend.vm.memory`). Instructions run in order (there are no branches); each
is turned once per function and per set of dim values into a small Python closure with
its symbolic sizes, shapes and attributes already evaluated (a *specialization*, cached),
so the dispatch loop is ``for step in steps: step(regs, blks)``.

What each instruction does — the same as the reference interpreter:

* ``alloc_storage`` takes a block from the pooled allocator (arena, dynamic or external);
  ``alloc_tensor`` is a numpy view of a storage at its offset (bounds and alignment
  checked);
* ``invoke`` runs the registry's numpy kernel (or a primitive function) and copies the
  result into the ``outs`` tensors; ``kernel`` (no destination passing) keeps the fresh
  result, which never aliases the kernel's inputs;
* views (reshape, flatten, squeeze, expand_dims), ``move``, ``tuple`` and ``project``
  share memory with their source; ``call_packed`` reaches the runtime functions of
  :mod:`relaxc.backend.packed`;
* ``call`` runs another function in a new frame; the callee's symbolic dims are bound
  from its arguments and checked against its ``upper_bounds``;
* a kill clears its register (like Python's ``del``) and never touches another one; memory
  is freed when no register refers to it any more (see :mod:`relaxc.backend.vm.memory`);
* ``ret`` ends the function; every register of the frame is then cleared, so what the
  program never killed is freed at the return, except the blocks backing the result.

The caller's inputs are copied in (the program may write into its parameters); the
result arrays are the caller's (memory that backs them is handed over, constants are
copied). A function planned with its inputs and outputs in the arena (``io_in_arena``)
copies each input into the arena at its offset (the ``relaxc.copy`` at the top of its
body), and its outputs are copied out of the arena at the end, which then goes back to
the pool: nothing is handed over.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.diagnostics import InternalError, RxError
from relaxc.ir.io_arena import IO_IN_ARENA
from relaxc.ir.nodes import Var
from relaxc.ir.ops import REGISTRY
from relaxc.ir.ops.memory import view_bytes
from relaxc.ir.registry import OpError, bind_args
from relaxc.ir.types import (
    DTYPES,
    TensorType,
    TupleType,
    Type,
    numpy_dtype,
    type_to_str,
    tensor_leaves,
)
from relaxc.ir.vocab import ALLOC_STORAGE, MEMORY_VIEW

from ..deep_calls import call_depth, run_nested
from ..inputs import bind_dims, check_alloc_size, concrete_shape, concrete_value
from ..packed import PACKED_IMPLS, PackedContext
from ..values import as_arrays, copy_value, fresh
from . import format as F
from .memory import ARENA, DYNAMIC, EXTERNAL, Block, MemoryStats, PooledAllocator, poison_array
from .program import Executable, Instr, Reg, VMFunction

MAX_SPECIALIZATIONS = 16
"""Specializations kept per function (one per distinct set of dim values, oldest dropped)."""

Step = Callable[[list, list], None]


class VirtualMachine:
    """Runs functions of ``exe``. ``poison`` overwrites freed and killed memory with 0xFF.

    The allocator (and its free lists) lives as long as the VM, so later runs reuse the
    blocks of earlier ones; :attr:`stats` holds the counters of the last run.
    """

    def __init__(self, exe: Executable, *, poison: bool = False):
        self.exe = exe
        self.poison = poison
        self.pool = PooledAllocator(poison)
        self.stats = self.pool.stats
        self.consts = [c.array for c in exe.constants]
        self._fns = [_Function(self, f) for f in exe.functions]
        self._depths: dict[int, int] = {}  # entry -> how deep its calls nest (deep_calls)

    def trim(self) -> int:
        """Give the pool's free memory back (and drop the cached specializations, whose views
        refer to pooled blocks); returns the bytes dropped from the free lists."""
        for f in self._fns:
            f.specs.clear()
        return self.pool.trim()

    def _callees(self, index: int) -> list[int]:
        """The functions (by index) that function ``index`` calls or invokes."""
        return [ins.func for ins in self._fns[index].vf.instrs if ins.func is not None]

    def run(
        self, fn_name: str = "main", args: Sequence[Any] = (), dims: Mapping[str, int] | None = None
    ) -> Any:
        """Call ``fn_name`` with ``args`` (numpy arrays); returns an array or a tuple."""
        vf = self.exe.function(fn_name)
        if vf is None:
            raise RxError(f"the program has no function @{fn_name}")
        f = self._fns[vf.index]
        args = [copy_value(a) for a in args]
        self.stats = self.pool.stats = MemoryStats()
        env = bind_dims(vf.ir, args, dims)  # type: ignore[arg-type]
        depth = self._depths.get(vf.index)
        if depth is None:
            depth = self._depths[vf.index] = call_depth([vf.index], self._callees)
        if f.primitive:
            with np.errstate(all="ignore"):  # as the interpreter: IEEE results, no warnings
                return _copy_out(fresh(f.call_primitive(args, env), args))

        def work() -> tuple[Any, tuple]:
            with np.errstate(all="ignore"):  # per thread: set where the work runs
                return f.call(args, [()] * len(args), env)

        result, blocks = run_nested(depth, fn_name, work)
        if f.io_in_arena:
            # Inputs and outputs in the arena: the outputs are read from it at the end, and
            # the arena goes back to the pool like any other block.
            result = copy_value(_copy_out(result))
            for blk in blocks:
                blk.rc -= 1
                if blk.rc == 0:
                    self.pool.release(blk)
            return result
        for blk in blocks:
            blk.rc -= 1
            if blk.rc == 0:
                self.pool.hand_over(blk)
        return _copy_out(result)


def _copy_out(v: Any) -> Any:
    """The caller may keep and write its results: copy what the VM shares (constants)."""
    if isinstance(v, np.ndarray):
        return v if v.flags.writeable else np.array(v, copy=True, order="C")
    if isinstance(v, tuple):
        return tuple(_copy_out(x) for x in v)
    if isinstance(v, Block):  # a returned storage: its bytes (handed over with the result)
        return v.buf if v.buf is not None else np.empty(0, np.uint8)
    return v


def _union(groups: Sequence[tuple]) -> tuple:
    out: list = []
    for g in groups:
        for b in g:
            if b not in out:
                out.append(b)
    return tuple(out)


def _arg_vars(args: tuple) -> tuple:
    """Operands as the registry's binder wants them: registers become ``Var("<index>")``."""
    return tuple(Var(str(a.index)) if isinstance(a, Reg) else a for a in args)


class _Function:
    """A function of the program and its cached specializations."""

    def __init__(self, vm: VirtualMachine, vf: VMFunction):
        self.vm = vm
        self.vf = vf
        self.primitive = vf.is_primitive
        self.types = vm.exe.types[vf.name]
        self.ret = vf.instrs[-1]
        self.nregs = vf.nregs
        self.nparams = vf.nparams
        self.io_in_arena = (IO_IN_ARENA, True) in vf.attrs
        self.specs: dict[tuple, list[Step]] = {}
        # Operands bound to their ops once (the env-independent part).
        self.bound: list[Any] = []
        for ins in vf.instrs:
            b = None
            if ins.op is not None and ins.opcode != F.CONST:
                op = REGISTRY.get(ins.op)
                try:
                    b = (op, bind_args(op, _arg_vars(ins.args), ins.kwargs))  # type: ignore[arg-type]
                except OpError as e:  # pragma: no cover - the loader verified the program
                    raise InternalError(f"@{vf.name}: {e}") from None
            self.bound.append(b)

    # -- calls --------------------------------------------------------------------------------
    def steps(self, env: dict[str, int]) -> list[Step]:
        key = tuple(sorted(env.items()))
        steps = self.specs.get(key)
        if steps is None:
            steps = _Specializer(self, env).build()
            if len(self.specs) >= MAX_SPECIALIZATIONS:
                self.specs.pop(next(iter(self.specs)))
            self.specs[key] = steps
        return steps

    def call(self, args: list, argblocks: list, env: dict[str, int]) -> tuple[Any, tuple]:
        """Run in a new frame; returns the result and the blocks backing it, each already
        counted once for the caller's reference."""
        steps = self.steps(env)
        regs: list = [None] * self.nregs
        blks: list = [()] * self.nregs
        regs[: self.nparams] = args
        for i, bl in enumerate(argblocks):
            if bl:
                blks[i] = bl
                for b in bl:
                    b.rc += 1
        pc = 0
        try:
            for pc, step in enumerate(steps):
                step(regs, blks)
        except RxError as e:
            self._teardown(blks)
            raise self._context(e, pc) from None
        except (
            OpError
        ) as e:  # a kernel refused concrete inputs (as the interpreter's _run_kernel does)
            self._teardown(blks)
            raise self._context(RxError(str(e)), pc) from None
        except BaseException:
            self._teardown(blks)
            raise
        ret = self.ret.regs
        result = tuple(regs[i] for i in ret) if self.ret.ret_tuple else regs[ret[0]]
        held = _union([blks[i] for i in ret])
        for b in held:
            b.rc += 1
        self._teardown(blks)
        return result, held

    def _teardown(self, blks: list) -> None:
        release = self.vm.pool.release
        for bl in blks:
            for b in bl:
                b.rc -= 1
                if b.rc == 0:
                    release(b)

    def call_primitive(self, args: list, env: dict[str, int]) -> Any:
        """A primitive function: its temporaries are the kernel's own business (not counted)."""
        steps = self.steps(env)
        regs: list = [None] * self.nregs
        regs[: self.nparams] = args
        pc = 0
        try:
            for pc, step in enumerate(steps):
                step(regs, None)  # type: ignore[arg-type]
        except RxError as e:
            raise self._context(e, pc) from None
        except OpError as e:
            raise self._context(RxError(str(e)), pc) from None
        ret = self.ret.regs
        return tuple(regs[i] for i in ret) if self.ret.ret_tuple else regs[ret[0]]

    def _context(self, e: RxError, pc: int) -> RxError:
        ins = self.vf.instrs[pc]
        what = F.OPCODES[ins.opcode] + (
            f" {ins.op}" if ins.op and ins.opcode not in F.FIXED_OPS else ""
        )
        note = f"in @{self.vf.name}, instruction {pc} ({what})"
        return RxError(e.message, e.loc, e.notes + (note,), e.snippet)


def _raiser(e: RxError) -> Step:
    def fail(r: list, k: list) -> None:
        raise e

    return fail


class _Specializer:
    """Builds the closures of one function for one set of dim values."""

    def __init__(self, fn: _Function, env: dict[str, int]):
        self.fn = fn
        self.vm = fn.vm
        self.env = env
        self.names = fn.vf.reg_names
        self.counted = not fn.primitive  # blocks are tracked in non-primitive frames only

    def conc(self, v: Any) -> Any:
        """An attribute with every symbolic dim evaluated (as the interpreter does)."""
        return concrete_value(v, self.env)

    def build(self) -> list[Step]:
        out = []
        for pc, ins in enumerate(self.fn.vf.instrs[:-1]):
            try:
                out.append(self.step(ins, self.fn.bound[pc]))
            except RxError as e:
                # Raised when the instruction is reached, as the interpreter does: an earlier
                # instruction may fail first (a kernel refusing these dims, say).
                out.append(_raiser(e))
                break
        return out

    def step(self, ins: Instr, bound: Any) -> Step:
        op = ins.opcode
        if op == F.ALLOC_STORAGE:
            return self.alloc_storage(ins, bound[1])
        if op == F.ALLOC_TENSOR:
            return self.alloc_tensor(ins, bound[1])
        if op == F.INVOKE:
            return self.invoke(ins, bound)
        if op == F.INVOKE_FUNC:
            return self.invoke_func(ins)
        if op == F.KERNEL:
            return self.kernel(ins, bound)
        if op == F.VIEW:
            return self.view(ins, bound[1])
        if op in (F.KILL_TENSOR, F.KILL_STORAGE, F.KILL_OBJECT):
            return self.kill(ins, bound[1])
        if op == F.PACKED:
            return self.packed(ins)
        if op == F.CALL_FUNC:
            return self.call_func(ins)
        if op == F.CONST:
            return self.const(ins)
        if op == F.TUPLE:
            return self.tuple_(ins)
        if op == F.PROJECT:
            return self.project(ins)
        if op == F.MOVE:
            return self.move(ins)
        raise InternalError(f"opcode {op} has no implementation")  # pragma: no cover

    def expected(self, ins: Instr) -> Type | None:
        return self.fn.types.get(self.names[ins.dst]) if ins.dst is not None else None

    # -- memory -------------------------------------------------------------------------------
    def alloc_storage(self, ins: Instr, b: Any) -> Step:
        size = int(self.conc(b.attrs["size"]))
        check_alloc_size(size, ALLOC_STORAGE)
        if size < 0:
            raise RxError(f"memory.alloc_storage: size {size} is negative")
        align = b.attrs["align"]
        kind = ARENA if b.attrs["arena"] else EXTERNAL if b.attrs["external"] else DYNAMIC
        d = ins.dst
        if d is None:
            return _nop
        alloc = self.vm.pool.alloc
        counted = self.counted

        def alloc_storage(r: list, k: list) -> None:
            blk = alloc(size, align, kind)
            r[d] = blk
            if counted:
                k[d] = (blk,)
            else:  # a storage in a primitive frame (the verifier forbids it): not tracked
                blk.rc = 0

        return alloc_storage

    def alloc_tensor(self, ins: Instr, b: Any) -> Step:
        s = int(b.inputs[0].name)
        offset = int(self.conc(b.attrs["offset"]))
        shape = tuple(int(x) for x in self.conc(b.attrs["shape"]))
        dtype = b.attrs["dtype"]
        if DTYPES[dtype].numpy is None:
            raise RxError(
                f"memory.alloc_tensor: dtype {dtype} is storage-only; the VM cannot "
                "make a tensor of it"
            )
        dt = numpy_dtype(dtype)
        if any(x < 0 for x in shape):
            raise RxError(f"memory.alloc_tensor: negative dimension in {shape}")
        end = offset + math.prod(shape) * dt.itemsize
        if offset % dt.itemsize:
            raise RxError(
                f"memory.alloc_tensor: offset {offset} is not a multiple of {dt.itemsize}"
            )
        d = ins.dst
        if d is None:
            return _nop

        cache: list = [
            None,
            None,
        ]  # (raw memory, view): a pooled block comes back with the same memory

        def alloc_tensor(r: list, k: list) -> None:
            st = r[s]
            if type(st) is not Block:
                raise InternalError("alloc_tensor on something that is not a storage")
            if st.raw is cache[0]:
                r[d] = cache[1]
            else:
                if offset < 0 or end > st.nbytes:
                    raise RxError(
                        f"memory.alloc_tensor: bytes [{offset}, {end}) do not fit in a storage of "
                        f"{st.nbytes} bytes"
                    )
                r[d] = cache[1] = st.buf[offset:end].view(dt).reshape(shape)
                cache[0] = st.raw
            if k is not None:
                bl = k[s]
                k[d] = bl
                for x in bl:
                    x.rc += 1

        return alloc_tensor

    def kill(self, ins: Instr, b: Any) -> Step:
        t = int(b.inputs[0].name)
        release = self.vm.pool.release
        poison = self.vm.poison
        opcode = ins.opcode

        def kill(r: list, k: list) -> None:
            if poison:
                v = r[t]
                if opcode == F.KILL_STORAGE and type(v) is Block and v.buf is not None:
                    v.buf.fill(0xFF)
                elif opcode == F.KILL_TENSOR and k is not None and k[t]:
                    poison_array(v)  # memory the VM owns (never a parameter or a constant)
            r[t] = None
            if k is not None:
                bl = k[t]
                if bl:
                    k[t] = ()
                    for x in bl:
                        x.rc -= 1
                        if x.rc == 0:
                            release(x)

        return kill

    # -- kernels ------------------------------------------------------------------------------
    def _attrs(self, b: Any) -> dict:
        return {k: self.conc(v) for k, v in b.attrs.items()}

    def invoke(self, ins: Instr, bound: Any) -> Step:
        op, b = bound
        kernel = op.kernel
        if kernel is None:
            raise RxError(f"op {op.name} has no kernel")
        inputs = tuple(int(v.name) for v in b.inputs)
        attrs = self._attrs(b)
        store = _store_outs(ins.op, ins.outs, self.names)
        if len(ins.outs) != 1:

            def invoke(r: list, k: list) -> None:
                store(r, kernel([r[i] for i in inputs], attrs))

            return invoke
        (o0,) = ins.outs
        ndarray = np.ndarray
        into = self._prepared_into(op, b, attrs)

        def invoke1(r: list, k: list) -> None:
            o = r[o0]
            xs = [r[i] for i in inputs]
            if (
                into is not None
                and type(o) is ndarray
                and o.flags.c_contiguous
                and o.flags.writeable
                and into(xs, o)
            ):
                return  # written where the plan put it
            res = kernel(xs, attrs)
            # The common case: one array of the output's exact shape and dtype.
            if (
                type(res) is ndarray
                and type(o) is ndarray
                and res.shape == o.shape
                and res.dtype is o.dtype
            ):
                try:
                    o[...] = res
                    return
                except ValueError:
                    pass  # read-only: the slow path says so
            store(r, res)

        return invoke1

    def _prepared_into(self, op: Any, b: Any, attrs: dict) -> Callable[[list, Any], bool] | None:
        """The op's ``kernel_into`` for this instruction: prepared once for its inputs'
        shapes and dtypes (``OpDef.prepare_into``) when the op has that and every input's
        type is known, else called with the attributes each time."""
        into = op.kernel_into
        if into is None:
            return None
        if op.prepare_into is not None:
            ts = [self.fn.types.get(self.names[int(v.name)]) for v in b.inputs]
            if all(isinstance(t, TensorType) and DTYPES[t.dtype].numpy for t in ts):
                shapes = [concrete_shape(t.shape, self.env) for t in ts]  # type: ignore[union-attr]
                dtypes = [numpy_dtype(t.dtype) for t in ts]  # type: ignore[union-attr]
                try:
                    prepared = op.prepare_into(shapes, dtypes, attrs)
                except OpError:
                    prepared = None  # the kernel raises it when the instruction runs
                if prepared is None:
                    return None
                return _checked_prepared(prepared, shapes, dtypes)
        return lambda xs, o: into(xs, attrs, o)

    def invoke_func(self, ins: Instr) -> Step:
        callee = self.vm._fns[ins.func]
        args = ins.regs
        ir = callee.vf.ir
        store = _store_outs("@" + callee.vf.name, ins.outs, self.names)

        if any(k == "outputs" for k, _ in callee.vf.attrs):
            # A lowered primitive function (PlanWorkspace): the outs are its last parameters
            # and it writes them where it was told; there is nothing to copy back.
            outs = ins.outs

            def invoke_lowered(r: list, k: list) -> None:
                a = [r[i] for i in args] + [r[o] for o in outs]
                callee.call_primitive(a, bind_dims(ir, a))  # type: ignore[arg-type]

            return invoke_lowered

        def invoke_func(r: list, k: list) -> None:
            a = [r[i] for i in args]
            store(r, callee.call_primitive(a, bind_dims(ir, a)))  # type: ignore[arg-type]

        return invoke_func

    def kernel(self, ins: Instr, bound: Any) -> Step:
        op, b = bound
        kernel = op.kernel
        if kernel is None:
            raise RxError(f"op {op.name} has no kernel")
        inputs = tuple(int(v.name) for v in b.inputs)
        attrs = self._attrs(b)
        expected = self.expected(ins)
        check = None
        if expected is not None:
            shapes = [
                (concrete_shape(leaf.shape, self.env), leaf.dtype)
                for leaf in tensor_leaves(expected)
            ]
            for shape, dtype in shapes:
                check_alloc_size(math.prod(shape) * DTYPES[dtype].nbytes, op.name)
            check = _result_checker(op.name, expected, self.env)
        d = ins.dst
        adopt = self.vm.pool.adopt if self.counted else None
        name = op.name

        def kernel_step(r: list, k: list) -> None:
            xs = [r[i] for i in inputs]
            try:
                res = fresh(as_arrays(kernel(xs, attrs)), xs)
            except MemoryError:
                raise RxError(f"{name}: out of memory") from None
            if check is not None:
                check(res)
            if d is not None:
                r[d] = res
                if adopt is not None:
                    k[d] = adopt(res)

        return kernel_step

    def view(self, ins: Instr, b: Any) -> Step:
        s = int(b.inputs[0].name)
        d = ins.dst
        if d is None:
            return _nop
        t = self.expected(ins)
        assert isinstance(t, TensorType)
        shape = concrete_shape(t.shape, self.env)
        name = ins.op
        if name == MEMORY_VIEW:
            offset = D.evaluate(b.attrs["offset"], self.env)
            dtype = t.dtype

            def make(x: np.ndarray) -> np.ndarray:
                try:
                    return view_bytes(x, offset, shape, dtype)
                except OpError as err:
                    raise RxError(str(err)) from None

        else:

            def make(x: np.ndarray) -> np.ndarray:
                if not x.flags.c_contiguous:
                    raise InternalError(f"{name}: input is not contiguous, a view would copy")
                return x.reshape(shape)

        # (source array, its view): a view of the same array object is the same view (an
        # array's memory, shape and dtype never change), and the tensors of pooled storage
        # (the planned arena's) are the same objects from run to run (alloc_tensor caches
        # them), so most runs reuse it. Only those are kept: the view holds its source's
        # memory, which a fresh kernel result should not outlive its run by.
        cache: list = [None, None]

        def view(r: list, k: list) -> None:
            x = r[s]
            if x is cache[0]:
                r[d] = cache[1]
            else:
                v = r[d] = make(x)
                if k is not None and _in_pooled_storage(k[s]):
                    cache[0], cache[1] = x, v
                else:
                    cache[0] = cache[1] = None
            if k is not None:
                bl = k[s]
                k[d] = bl
                for y in bl:
                    y.rc += 1

        return view

    def packed(self, ins: Instr) -> Step:
        fname = ins.args[0] if ins.args else None
        impl = PACKED_IMPLS.get(fname) if isinstance(fname, str) else None
        opname = ins.op
        if impl is None:
            known = ", ".join(sorted(PACKED_IMPLS))
            err = RxError(
                f"{opname}: no runtime function named {fname!r}", notes=(f"known: {known}",)
            )

            def missing(r: list, k: list) -> None:
                raise err

            return missing
        args = tuple(
            (True, a.index) if isinstance(a, Reg) else (False, self.conc(a)) for a in ins.args[1:]
        )
        ctx = PackedContext(dict(self.env))
        d = ins.dst
        blocks_of = self.vm.pool.blocks_of

        def packed(r: list, k: list) -> None:
            res = impl(ctx, [r[v] if is_reg else v for is_reg, v in args])
            if d is not None:
                r[d] = res
                if k is not None:
                    bl = blocks_of(res)
                    k[d] = bl
                    for y in bl:
                        y.rc += 1

        return packed

    # -- calls and values ---------------------------------------------------------------------
    def call_func(self, ins: Instr) -> Step:
        callee = self.vm._fns[ins.func]
        args = ins.regs
        ir = callee.vf.ir
        d = ins.dst
        if callee.primitive:
            adopt = self.vm.pool.adopt if self.counted else None

            def call_primitive(r: list, k: list) -> None:
                a = [r[i] for i in args]
                res = fresh(callee.call_primitive(a, bind_dims(ir, a)), a)  # type: ignore[arg-type]
                if d is not None:
                    r[d] = res
                    if adopt is not None:
                        k[d] = adopt(res)

            return call_primitive
        release = self.vm.pool.release

        def call(r: list, k: list) -> None:
            a = [r[i] for i in args]
            res, held = callee.call(a, [k[i] for i in args], bind_dims(ir, a))  # type: ignore[arg-type]
            if d is not None:
                r[d] = res
                k[d] = held
            else:
                for x in held:
                    x.rc -= 1
                    if x.rc == 0:
                        release(x)

        return call

    def const(self, ins: Instr) -> Step:
        value = self.vm.consts[ins.const]
        d = ins.dst
        if d is None:
            return _nop

        def const(r: list, k: list) -> None:
            r[d] = value

        return const

    def tuple_(self, ins: Instr) -> Step:
        fields = ins.regs
        d = ins.dst
        if d is None:
            return _nop

        def tuple_(r: list, k: list) -> None:
            r[d] = tuple(r[i] for i in fields)
            if k is not None:
                bl = _union([k[i] for i in fields])
                k[d] = bl
                for y in bl:
                    y.rc += 1

        return tuple_

    def project(self, ins: Instr) -> Step:
        s, idx, d = ins.src, ins.index, ins.dst
        if d is None:
            return _nop
        blocks_of = self.vm.pool.blocks_of

        def project(r: list, k: list) -> None:
            v = r[s][idx]
            r[d] = v
            if k is not None and k[s]:
                bl = blocks_of(v)
                k[d] = bl
                for y in bl:
                    y.rc += 1

        return project

    def move(self, ins: Instr) -> Step:
        s, d = ins.src, ins.dst
        if d is None:
            return _nop

        def move(r: list, k: list) -> None:
            r[d] = r[s]
            if k is not None:
                bl = k[s]
                k[d] = bl
                for y in bl:
                    y.rc += 1

        return move


def _nop(r: list, k: list) -> None:
    return None


def _in_pooled_storage(blocks: tuple) -> bool:
    """Whether a value's blocks are all storage of the VM's pool (not fresh kernel results)."""
    return bool(blocks) and all(b.buf is not None for b in blocks)


def _checked_prepared(
    prepared: Callable[[list, Any], bool], shapes: list[tuple[int, ...]], dtypes: list[np.dtype]
) -> Callable[[list, Any], bool]:
    """``prepared`` for the inputs it was prepared for; any other inputs (the types are the
    program's promise) go to the kernel."""
    want = [(tuple(s), np.dtype(d)) for s, d in zip(shapes, dtypes)]

    def into(xs: list, o: Any) -> bool:
        return [(x.shape, x.dtype) for x in xs] == want and prepared(xs, o)

    return into


def _result_checker(what: str, expected: Type, env: Mapping[str, int]) -> Callable[[Any], None]:
    """A kernel that returns the wrong shape or dtype is a bug in relaxc (as in the interpreter)."""

    def spec(t: Type) -> Any:
        if isinstance(t, TupleType):
            return tuple(spec(f) for f in t.fields)
        if isinstance(t, TensorType):
            return (concrete_shape(t.shape, env), numpy_dtype(t.dtype))
        return None

    want = spec(expected)

    def check(res: Any) -> None:
        _check(what, res, want, expected)

    return check


def _check(what: str, res: Any, want: Any, expected: Type) -> None:
    if isinstance(expected, TupleType):
        if not isinstance(res, tuple) or len(res) != len(expected.fields):
            raise InternalError(
                f"{what} returned {type(res).__name__}, expected a {len(expected.fields)}-tuple"
            )
        for r, w, t in zip(res, want, expected.fields):
            _check(what, r, w, t)
        return
    if isinstance(expected, TensorType):
        shape, dt = want
        if not isinstance(res, np.ndarray) or res.shape != shape or res.dtype != dt:
            got = f"{res.dtype}{res.shape}" if isinstance(res, np.ndarray) else type(res).__name__
            raise InternalError(
                f"kernel {what} produced {got}, expected {type_to_str(expected)} = {shape}"
            )


def _store_outs(
    target: str, outs: tuple[int, ...], names: tuple[str, ...]
) -> Callable[[list, Any], None]:
    """Copy a kernel's result(s) into the ``outs`` registers, checking shape and dtype."""

    def mismatch(o: Any, res: Any, reg: int) -> RxError:
        return RxError(
            f"invoke {target}: output %{names[reg]} is "
            f"{getattr(o, 'dtype', '?')}{getattr(o, 'shape', '')} but the kernel produced "
            f"{res.dtype}{res.shape}"
        )

    def copy(o: Any, res: Any, reg: int) -> None:
        if type(o) is not np.ndarray or o.shape != res.shape or o.dtype != res.dtype:
            raise mismatch(o, res, reg)
        try:
            o[...] = res
        except ValueError as e:
            raise RxError(f"invoke {target}: cannot write output %{names[reg]}: {e}") from None

    if len(outs) == 1:
        (o0,) = outs

        def store_one(r: list, res: Any) -> None:
            if type(res) is not np.ndarray:
                res = as_arrays(res)
                if isinstance(res, tuple):
                    if len(res) != 1:
                        raise InternalError(f"invoke {target}: {len(res)} results for 1 outs")
                    res = res[0]
            copy(r[o0], res, o0)

        return store_one

    def store_many(r: list, res: Any) -> None:
        res = as_arrays(res)
        results = list(res) if isinstance(res, tuple) else [res]
        if len(results) != len(outs):
            raise InternalError(f"invoke {target}: {len(results)} results for {len(outs)} outs")
        for reg, x in zip(outs, results):
            copy(r[reg], x, reg)

    return store_many
