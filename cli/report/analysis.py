"""The memory report: what a function needs, read off the IR after planning.

Everything is derived from the final IR (bug class 20: sizes computed before the last
rewrite are wrong): arenas are the ``alloc_storage(..., arena=true)`` bindings, placed
buffers are the tensors carved from them, dynamic allocations are the other
non-external storages, and lifetimes come from the same alias-aware liveness the passes
use. Sizes that may depend on symbolic dims are a :class:`Size`: the expression and its value
at the upper bounds (None when unbounded). With inputs and outputs in the arena
(``io_in_arena``) the arena, the lower bound and the placed buffers include them, and the
report says how many of their bytes the arena holds.

The totals a deployer needs come with it: RAM (the arena, bounded storages left unplanned,
what the functions it calls hold, and the inputs and outputs unless the arena holds them)
and ROM (the constants; the code size is the C build's to fill). The saving is measured
against one baseline no pass can move, one buffer per tensor
(:mod:`relaxc.cli.report.baseline`), read off the program as given to the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from relaxc.ir import dims as D
from relaxc.ir.call_graph import called, callees_first
from relaxc.ir.alias import TENSOR, AliasInfo, analyze_aliases, buffer_liveness
from relaxc.ir.io_arena import arena_inputs, is_io_in_arena
from relaxc.ir.nodes import Bind, Call, CallFunc, Effect, Function, Invoke, Module, TupleExpr, Var
from relaxc.ir.sizes import round_up, value_nbytes
from relaxc.ir.types import TensorType, Type, tensor_leaves
from relaxc.ir.verifier import verify_module
from relaxc.ir.vocab import (
    ALLOC_TENSOR,
    CALL_CPACKED,
    CONST,
    MEMORY_VIEW,
    call_of,
    kernel_io,
    kernel_scratch,
)

from relaxc.passes.candidates import storages
from relaxc.passes.planning.model import Buffer, lower_bound
from relaxc.passes.properties import has_explicit_memory
from .baseline import CONCAT, baselines, explicit_values, source_ops


@dataclass(frozen=True)
class Size:
    """Bytes that may depend on symbolic dims: ``expr`` in the .rx spelling (a plain number
    when static) and ``bound``, its value at the function's upper bounds (None: unbounded)."""

    expr: str
    bound: int | None

    @classmethod
    def of(cls, d: D.Dim, bounds: dict[str, int]) -> "Size":
        if isinstance(d, int):
            return cls(str(d), d)
        ub = D.upper_bound(d, bounds)
        return cls(D.dim_to_str(d), max(ub, 0) if ub is not None else None)


@dataclass
class BufferRow:
    """A tensor placed in an arena."""

    name: str
    shape: tuple[D.Dim, ...]
    dtype: str
    bytes: int
    offset: int
    first: int
    last: int
    arena: str
    op: str = ""  # the kernel op that writes it (a primitive function: its first kernel op)
    line: int = 0  # the source line of the statement that writes it (0: unknown)


@dataclass
class DynamicRow:
    """An allocation whose size is only known at run time."""

    name: str
    size: Size
    scope: str
    first: int
    last: int
    op: str = ""  # the kernel op that writes its first tensor ("" if none does)
    line: int = 0  # the source line of its allocation (0: unknown)


@dataclass
class FunctionReport:
    name: str
    planned: bool  # PlanMemory planned it (the function's ``planned`` attribute)
    program_points: int
    # Every value it computes is written into an allocated tensor (ManifestAlloc ran): when
    # false, its memory is implicit and none of it is counted here.
    explicit: bool = True
    arena_bytes: int = 0
    lower_bound: int = 0
    proven_bound: int = 0  # the planner's proven bound on the arena (0: none stated)
    clock_stopped: bool = False  # a safety clock ended the planner's search: may vary by run
    naive_bytes: int = 0
    arenas: list[dict[str, Any]] = field(default_factory=list)
    input_bytes: Size = Size("0", 0)
    output_bytes: Size = Size("0", 0)
    io_in_arena: bool = False  # PlanMemory planned the inputs and outputs into the arena
    inputs_in_arena_bytes: int = 0  # ... of the input bytes, those the arena holds
    outputs_in_arena_bytes: int = 0  # ... of the output bytes, those the arena holds
    constant_bytes: int = 0
    unplanned_static_bytes: int = 0
    buffers: list[BufferRow] = field(default_factory=list)
    dynamic: list[DynamicRow] = field(default_factory=list)
    # ReorderForMemory's model of the most bytes live at once, in the order it was given and
    # in the order it chose (None: the pass did not run on this function).
    order_peak_written: int | None = None
    order_peak_chosen: int | None = None
    # Values an op writes into the bytes of another value (a memory.view in the outs of an
    # invoke: computed in place over an input, or straight into a concat's slice), which
    # hold no buffer of their own.
    written_into_views: int = 0
    # Kernel calls given working memory of their own (PlanKernelScratch: ``invoke ... scratch
    # (%s)``), and the largest such scratch; its bytes are in the buffers like any other.
    kernel_scratch_calls: int = 0
    kernel_scratch_max_bytes: int = 0
    # The source line of each program point (statements the passes made carry the line of
    # the statement they came from; 0 where no line is known), so pictures can name them.
    point_lines: list[int] = field(default_factory=list)
    # One buffer per tensor: the bytes of every value the function computes, each in its
    # own buffer, read off the program as given to the pipeline (baseline.py); plus the
    # inputs the arena holds when it holds them. None: unknown (a value without a bound).
    baseline_bytes: int | None = None
    # Bytes of the external storages (the outputs this function allocates for its caller).
    output_storage_bytes: int = 0
    # What the non-primitive functions it calls hold (their workspace during the call, and
    # their results while this function holds them), at the most at once; ``calls``: how
    # many such calls; ``callees_bounded``: False when a callee's memory has no bound.
    calls: int = 0
    callee_bytes: int = 0
    callees_bounded: bool = True
    # The peak: the first program point where the placed buffers (at their arena's
    # alignment) hold the most bytes (-1: nothing placed), the statement there (the name it
    # binds or writes), and the buffers live at it.
    peak_point: int = -1
    peak_bytes: int = 0
    peak_binding: str = ""
    peak_buffers: list[str] = field(default_factory=list)

    @property
    def ram_inputs(self) -> int | None:
        """Bytes of the inputs outside the arena (the caller's memory), at the upper bounds."""
        b = self.input_bytes.bound
        return None if b is None else max(b - self.inputs_in_arena_bytes, 0)

    @property
    def ram_outputs(self) -> int | None:
        """Bytes of the outputs outside the arena, at the upper bounds."""
        b = self.output_bytes.bound
        return None if b is None else max(b - self.outputs_in_arena_bytes, 0)

    @property
    def ram_bytes(self) -> int | None:
        """Everything a call holds in RAM at the most: workspace (arena and unplanned
        storages), what its callees hold, inputs and outputs outside the arena. None when
        some of it has no upper bound (a dynamic allocation, a symbolic input)."""
        if self.dynamic or not self.callees_bounded:
            return None
        ins, outs = self.ram_inputs, self.ram_outputs
        if ins is None or outs is None:
            return None
        return self.workspace_bytes + self.callee_bytes + ins + outs

    @property
    def rom_bytes(self) -> int:
        """Read-only bytes: the constants (the C build adds its code)."""
        return self.constant_bytes

    @property
    def values_bytes(self) -> int | None:
        """The memory the plan gives the values the function computes: its RAM less the
        inputs held outside the arena (what the baseline is compared with)."""
        ram, ins = self.ram_bytes, self.ram_inputs
        return None if ram is None or ins is None else ram - ins

    @property
    def workspace_bytes(self) -> int:
        """Bytes the function itself needs for temporaries: arena plus bounded storages left
        unplanned (dynamic allocations are not counted: their size is known only at run time)."""
        return self.arena_bytes + self.unplanned_static_bytes

    @property
    def optimal(self) -> bool:
        """The planner proved no arena smaller than this one exists."""
        return bool(self.arena_bytes) and self.proven_bound >= self.arena_bytes

    @property
    def ratio(self) -> float | None:
        """Arena over lower bound (1.0 is optimal)."""
        return self.arena_bytes / self.lower_bound if self.lower_bound else None

    @property
    def saving(self) -> float | None:
        """Fraction of the baseline (one buffer per tensor) the plan saves: 1 - values_bytes /
        baseline_bytes (None when either is unknown or the baseline is 0)."""
        held, base = self.values_bytes, self.baseline_bytes
        if held is None or not base or not self.explicit:
            return None
        return 1 - held / base


def _bytes(t: Type, bounds: dict[str, int]) -> int | str:
    """Bytes of every tensor in ``t`` at the upper bound, or the size expression if unbounded."""
    size = Size.of(value_nbytes(t), bounds)
    return size.bound if size.bound is not None else size.expr


def function_report(
    fn: Function,
    module: Module,
    types: dict[str, Type],
    primitive: frozenset[str] | None = None,
    callees: dict[str, FunctionReport] | None = None,
    baseline: int | None = None,
    made_by: dict[str, str] | None = None,
) -> FunctionReport:
    """The report of ``fn`` (``primitive``: the names of ``module``'s primitive functions,
    when the caller reports on many functions of one module; ``callees``: the reports of the
    non-primitive functions it calls; ``baseline``: its one-buffer-per-tensor bytes, from
    the program as given; ``made_by``: the op of each value of that program)."""
    if primitive is None:
        primitive = frozenset(f.name for f in module.functions if f.is_primitive)
    bounds = fn.upper_bounds()
    rep = FunctionReport(fn.name, fn.attr("planned") is True, len(fn.body))
    rep.explicit = has_explicit_memory(fn, primitive)
    rep.order_peak_written, rep.order_peak_chosen = _order_peaks(fn)
    rep.written_into_views = _written_into_views(fn)
    rep.point_lines = _point_lines(fn)
    writer = _writers(fn, module, made_by or {})
    info = analyze_aliases(fn, module)
    rep.kernel_scratch_calls, rep.kernel_scratch_max_bytes = _kernel_scratch(
        fn, module, types, info
    )
    live = buffer_liveness(fn, info)
    all_storages = storages(fn)
    arenas = {s.name: s for s in all_storages if s.arena}
    in_total: D.Dim = 0
    for p in fn.params:
        in_total = D.add(in_total, value_nbytes(p.type))
    rep.input_bytes = Size.of(in_total, bounds)
    rep.output_bytes = Size.of(value_nbytes(fn.ret_type), bounds)
    if is_io_in_arena(fn):
        rep.io_in_arena = True
        for a in arena_inputs(fn):
            n = _bytes(a.type, bounds)
            if a.storage in arenas and isinstance(n, int):
                rep.inputs_in_arena_bytes += n
        rep.outputs_in_arena_bytes = _outputs_in(fn, info, types, set(arenas), bounds)
    binds = [s for s in fn.body if isinstance(s, Bind)]
    for s in binds:
        if call_of(s.value, CONST):
            rep.constant_bytes += int(_bytes(types[s.name], bounds) or 0)
    for a in arenas.values():
        size = a.size if isinstance(a.size, int) else D.upper_bound(a.size, bounds) or 0
        rep.arenas.append(
            {
                "name": a.name,
                "scope": a.scope,
                "bytes": size,
                "align": a.align,
                "proven_bound": a.proven_bound,
            }
        )
        rep.arena_bytes += size
        rep.proven_bound += a.proven_bound
        rep.clock_stopped = rep.clock_stopped or a.clock_stopped
    planned_buffers: list[Buffer] = []
    for s in binds:
        carve = call_of(s.value, ALLOC_TENSOR)
        storage = info.storage_of.get(s.name)
        if carve is None or storage not in arenas:
            continue
        t = types[s.name]
        assert isinstance(t, TensorType)
        nbytes = _bytes(t, bounds)
        nbytes = nbytes if isinstance(nbytes, int) else 0
        offset = carve.args[1] if len(carve.args) > 1 else 0
        offset = offset if isinstance(offset, int) else D.upper_bound(offset, bounds) or 0
        first = live.defined[s.name]
        last = live.last_use.get(s.name, first)
        rep.buffers.append(
            BufferRow(
                s.name,
                t.shape,
                t.dtype,
                nbytes,
                offset,
                first,
                last,
                storage,
                *writer.get(s.name, ("", 0)),
            )
        )
        align = arenas[storage].align
        planned_buffers.append(Buffer(first, last + 1, round_up(nbytes, align), align, s.name))
    rep.lower_bound = lower_bound(planned_buffers)
    naive = 0
    for b in planned_buffers:
        naive += b.size
    rep.naive_bytes = naive
    _peak(rep, fn, planned_buffers)
    for s in all_storages:
        if s.arena or s.external:
            continue
        ub = s.size if isinstance(s.size, int) else D.upper_bound(s.size, bounds)
        first = live.defined[s.name]
        last = live.last_use.get(s.name, first)
        if ub is None:
            op = next(
                (writer[t][0] for t, st in info.storage_of.items() if st == s.name and t in writer),
                "",
            )
            line = rep.point_lines[first] if first < len(rep.point_lines) else 0
            rep.dynamic.append(
                DynamicRow(s.name, Size(D.dim_to_str(s.size), None), s.scope, first, last, op, line)
            )
        else:
            rep.unplanned_static_bytes += max(ub, 0)  # negative for every allowed dim: never made
    for s in all_storages:
        if s.external and not s.arena:
            ub = s.size if isinstance(s.size, int) else D.upper_bound(s.size, bounds)
            rep.output_storage_bytes += max(ub or 0, 0)
    _callees(rep, fn, info, live, callees or {})
    if baseline is not None and rep.io_in_arena:
        baseline += rep.inputs_in_arena_bytes
    rep.baseline_bytes = baseline
    return rep


def _callees(
    rep: FunctionReport,
    fn: Function,
    info: AliasInfo,
    live,
    callees: dict[str, FunctionReport],
) -> None:
    """``rep.callee_bytes``: the most bytes the non-primitive functions ``fn`` calls hold at
    once: at a call, the callee's workspace and what its own callees hold; from the call to
    the last use of its result, the result's storage (unless ``fn`` returns it: then it is
    ``fn``'s output, counted there)."""
    returned = info.returned(fn)
    end = len(fn.body)
    transient = [0] * (end + 1)
    diff = [0] * (end + 2)
    for i, s in enumerate(fn.body):
        if not isinstance(s, (Bind, Effect)) or not isinstance(s.value, CallFunc):
            continue
        callee = callees.get(s.value.func)
        if callee is None:
            continue  # a primitive function (its memory is the caller's storages)
        rep.calls += 1
        if callee.dynamic or not callee.callees_bounded:
            rep.callees_bounded = False
        transient[i] += callee.workspace_bytes + callee.callee_bytes
        if isinstance(s, Bind) and s.name not in returned:
            last = live.last_use.get(s.name, i)
            diff[i] += callee.output_storage_bytes
            diff[min(last, end) + 1] -= callee.output_storage_bytes
    held = 0
    for i in range(end + 1):
        held += diff[i]
        rep.callee_bytes = max(rep.callee_bytes, held + transient[i])


def _peak(rep: FunctionReport, fn: Function, buffers: list[Buffer]) -> None:
    """The first program point where ``buffers`` hold the most bytes, and what is there."""
    if not buffers:
        return
    end = max(b.end for b in buffers)
    diff = [0] * (end + 2)
    for b in buffers:
        diff[max(b.start, 0)] += b.size
        diff[b.end] -= b.size
    best, cur = -1, 0
    for i in range(end + 1):
        cur += diff[i]
        if best < 0 or cur > rep.peak_bytes:
            best, rep.peak_bytes = i, cur
    rep.peak_point = best
    rep.peak_buffers = [b.name for b in buffers if b.start <= best < b.end]
    if 0 <= best < len(fn.body):
        stmt = fn.body[best]
        if isinstance(stmt, Bind):
            rep.peak_binding = stmt.name
        elif isinstance(stmt.value, Invoke) and stmt.value.outs:
            rep.peak_binding = stmt.value.outs[0].name


def _outputs_in(
    fn: Function, info: AliasInfo, types: dict[str, Type], arenas: set[str], bounds: dict
) -> int:
    """Bytes of the outputs that are tensors carved from one of ``arenas``."""
    total = 0
    ret = list(fn.ret.fields) if isinstance(fn.ret, TupleExpr) else [fn.ret]
    for v in ret:
        assert isinstance(v, Var)
        leaves = tensor_leaves(types[v.name])
        tree = info.trees.get(v.name, frozenset())
        per_leaf = _tree_leaves(tree)
        if len(per_leaf) != len(leaves):
            continue
        for leaf, roots in zip(leaves, per_leaf):
            if roots and all(
                info.kind.get(r) == TENSOR and info.storage_of.get(r) in arenas for r in roots
            ):
                n = _bytes(leaf, bounds)
                total += n if isinstance(n, int) else 0
    return total


def _tree_leaves(tree) -> list[frozenset]:
    if isinstance(tree, frozenset):
        return [tree]
    return [x for t in tree for x in _tree_leaves(t)]


def _point_lines(fn: Function) -> list[int]:
    """The source line of each statement; a statement without one (a kill a pass inserted)
    takes the line of the nearest located statement before it."""
    out: list[int] = []
    last = 0
    for s in fn.body:
        line = s.loc.line if s.loc is not None else 0
        last = line or last
        out.append(line or last)
    return out


def _writers(fn: Function, module: Module, made_by: dict[str, str]) -> dict[str, tuple[str, int]]:
    """Tensor name -> (the kernel op of the first invoke that writes it, that invoke's line).

    A primitive function counts as its first kernel op (a fused ``conv2d`` + ``relu`` is a
    ``conv2d``). A tensor no invoke writes itself, only through views of it (the joined
    value of an elided concat, whose producers write its slices) is made by the op that
    computed it in the program as given (``made_by``: ``concat``), else by the first op that
    writes one of its views."""
    out: dict[str, tuple[str, int]] = {}
    base_of: dict[str, str] = {}  # a memory.view -> the tensor it is a view of
    invokes: list[tuple[Invoke, int]] = []
    bound_at: dict[str, int] = {}  # a binding -> its line
    for s in fn.body:
        inv = s.value
        if isinstance(s, Bind) and s.loc is not None:
            bound_at[s.name] = s.loc.line
        view = call_of(inv, MEMORY_VIEW) if isinstance(s, Bind) else None
        if view is not None and view.args and isinstance(view.args[0], Var):
            base_of[s.name] = view.args[0].name
        if isinstance(inv, Invoke):
            invokes.append((inv, s.loc.line if s.loc is not None else 0))
    first_ops: dict[str, str] = {}  # callee -> its first kernel op (each callee read once)
    for inv, line in invokes:
        op = inv.target
        if inv.is_func:
            if op not in first_ops:
                callee = module.get(op)
                body = callee.body if callee is not None else ()
                ops = [b.value.op for b in body if isinstance(b.value, Call)]
                first_ops[op] = next((o for o in ops if o not in (CONST, ALLOC_TENSOR)), op)
            op = first_ops[op]
        for v in inv.outs:
            out.setdefault(v.name, (op, line))
        if inv.scratch is not None:
            out.setdefault(inv.scratch.name, (f"{op} scratch", line))
    # A tensor written only through views of it (the slices of an elided concat) is made by
    # the op of the program as given; failing that, a concat when its views are written at
    # two offsets or more, else the first op that writes one of them. Each chain of views
    # is walked once (memoised), so a long chain of in-place views stays linear.
    root_of: dict[str, str] = {}  # a view -> the tensor at the end of its chain of views
    for view in base_of:
        chain = [view]
        while chain[-1] in base_of and chain[-1] not in root_of:
            chain.append(base_of[chain[-1]])
        root = root_of.get(chain[-1], chain[-1])
        for v in chain[:-1]:
            root_of[v] = root
    joined, _ = explicit_values(fn)
    for view in base_of:
        base = root_of[view]
        if view in out and base not in out:
            if base in made_by or joined.get(base, 0) > 1:  # its own op, on its own line
                out[base] = (made_by.get(base, CONCAT), bound_at.get(base, out[view][1]))
            else:
                out[base] = out[view]
    return out


def _kernel_scratch(
    fn: Function, module: Module, types: dict[str, Type], info: AliasInfo
) -> tuple[int, int]:
    """How many kernel calls of ``fn`` pass a scratch (``invoke ... scratch (%s)``, or, after
    LegalizePackedCalls, the struct after the outputs of a ``call_cpacked`` of a function
    with ``attrs {scratch = N}``: the tensor it wraps is its alias root), and the largest one
    (bytes, at the upper bounds)."""
    scratch: set[str] = set()
    for s in fn.body:
        e = s.value
        if isinstance(e, Invoke) and e.scratch is not None:
            scratch.add(e.scratch.name)
        elif (c := call_of(e, CALL_CPACKED)) is not None and c.args:
            callee = module.get(c.args[0]) if isinstance(c.args[0], str) else None
            if callee is not None and kernel_scratch(callee) is not None:
                ins, outs = kernel_io(callee)
                arg = c.args[1 + len(ins) + len(outs)]
                if isinstance(arg, Var):
                    scratch |= {r for r in info.roots(arg.name) if info.kind.get(r) == TENSOR}
    sizes = []
    for name in sorted(scratch):
        b = _bytes(types[name], fn.upper_bounds()) if name in types else 0
        sizes.append(b if isinstance(b, int) else 0)
    return len(sizes), max(sizes, default=0)


def _written_into_views(fn: Function) -> int:
    views = {
        s.name for s in fn.body if isinstance(s, Bind) and call_of(s.value, MEMORY_VIEW) is not None
    }
    written = {v.name for s in fn.body if isinstance(s.value, Invoke) for v in s.value.outs}
    return len(views & written)


def _order_peaks(fn: Function) -> tuple[int | None, int | None]:
    """The ``order_peak_written`` and ``order_peak_chosen`` attributes ReorderForMemory sets."""
    out = []
    for key in ("order_peak_written", "order_peak_chosen"):
        v = fn.attr(key)
        out.append(v if type(v) is int else None)
    return out[0], out[1]


def memory_report(module: Module, source: Module | None = None) -> list[FunctionReport]:
    """A report for every non-primitive function of ``module``. ``source``: the program as
    given to the pipeline that made ``module`` (default: ``module`` itself), which the
    baseline and the names of the ops that made each value are read from."""
    types = verify_module(module)
    source_types = types if source is None else verify_module(source)
    source = module if source is None else source
    base = baselines(source, source_types)
    made_by = source_ops(source)
    primitive = frozenset(f.name for f in module.functions if f.is_primitive)
    done: dict[str, FunctionReport] = {}
    for fn in callees_first(module):  # every callee's report before its callers'
        callees = {name: done[name] for name in called(fn) if name in done}
        done[fn.name] = function_report(
            fn,
            module,
            types[fn.name],
            primitive,
            callees,
            base.get(fn.name),
            made_by.get(fn.name, {}),
        )
    return [done[fn.name] for fn in module.functions if not fn.is_primitive]
