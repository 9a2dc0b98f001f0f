"""The memory report: what a function needs, read off the IR after planning.

Everything is derived from the final IR (bug class 20: sizes computed before the last
rewrite are wrong): arenas are the ``alloc_storage(..., arena=true)`` bindings, placed
buffers are the tensors carved from them, dynamic allocations are the other
non-external storages, and lifetimes come from the same alias-aware liveness the passes
use. Sizes that may depend on symbolic dims are a :class:`Size`: the expression and its value
at the upper bounds (None when unbounded). With inputs and outputs in the arena
(``io_in_arena``) the arena, the lower bound and the placed buffers include them, and the
report says how many of their bytes the arena holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from relaxc.ir import dims as D
from relaxc.ir.alias import TENSOR, AliasInfo, analyze_aliases, buffer_liveness
from relaxc.ir.io_arena import arena_inputs, is_io_in_arena
from relaxc.ir.nodes import Bind, Call, Function, Invoke, Module, TupleExpr, Var
from relaxc.ir.types import TensorType, Type, dtype_nbytes, tensor_leaves
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

from .plan_memory import round_up, storages
from .planning.model import Buffer, lower_bound
from .properties import has_explicit_memory


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
        """Fraction of the naive total that planning saves."""
        return 1 - self.arena_bytes / self.naive_bytes if self.naive_bytes else None


def _size_dim(t: Type) -> D.Dim:
    """Bytes of every tensor in ``t``, as a dim expression."""
    total: D.Dim = 0
    for leaf in tensor_leaves(t):
        total = D.add(total, D.mul(D.product(leaf.shape), dtype_nbytes(leaf.dtype)))
    return total


def _bytes(t: Type, bounds: dict[str, int]) -> int | str:
    """Bytes of every tensor in ``t`` at the upper bound, or the size expression if unbounded."""
    size = Size.of(_size_dim(t), bounds)
    return size.bound if size.bound is not None else size.expr


def function_report(
    fn: Function,
    module: Module,
    types: dict[str, Type],
    primitive: frozenset[str] | None = None,
) -> FunctionReport:
    """The report of ``fn`` (``primitive``: the names of ``module``'s primitive functions,
    when the caller reports on many functions of one module)."""
    if primitive is None:
        primitive = frozenset(f.name for f in module.functions if f.is_primitive)
    bounds = fn.upper_bounds()
    rep = FunctionReport(fn.name, fn.attr("planned") is True, len(fn.body))
    rep.explicit = has_explicit_memory(fn, primitive)
    rep.order_peak_written, rep.order_peak_chosen = _order_peaks(fn)
    rep.written_into_views = _written_into_views(fn)
    rep.point_lines = _point_lines(fn)
    writer = _writers(fn, module)
    info = analyze_aliases(fn, module)
    rep.kernel_scratch_calls, rep.kernel_scratch_max_bytes = _kernel_scratch(
        fn, module, types, info
    )
    live = buffer_liveness(fn, info)
    all_storages = storages(fn)
    arenas = {s.name: s for s in all_storages if s.arena}
    in_total: D.Dim = 0
    for p in fn.params:
        in_total = D.add(in_total, _size_dim(p.type))
    rep.input_bytes = Size.of(in_total, bounds)
    rep.output_bytes = Size.of(_size_dim(fn.ret_type), bounds)
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
    return rep


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


def _writers(fn: Function, module: Module) -> dict[str, tuple[str, int]]:
    """Tensor name -> (the kernel op of the first invoke that writes it, that invoke's line).

    A primitive function counts as its first kernel op (a fused ``conv2d`` + ``relu`` is a
    ``conv2d``)."""
    out: dict[str, tuple[str, int]] = {}
    base_of: dict[str, str] = {}  # a memory.view -> the tensor it is a view of
    invokes: list[tuple[Invoke, int]] = []
    for s in fn.body:
        inv = s.value
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
    # A tensor written only through views of it (the slices of an elided concat) counts as
    # made by the first op that writes one of them.
    root_of: dict[str, str] = {}  # a view -> the tensor at the end of its chain of views
    for view in base_of:
        chain = [view]
        while chain[-1] in base_of and chain[-1] not in root_of:
            chain.append(base_of[chain[-1]])
        root = root_of.get(chain[-1], chain[-1])
        for v in chain[:-1]:
            root_of[v] = root
    for view in base_of:
        if view in out:
            out.setdefault(root_of[view], out[view])
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


def memory_report(module: Module) -> list[FunctionReport]:
    """A report for every non-primitive function of ``module``."""
    types = verify_module(module)
    primitive = frozenset(f.name for f in module.functions if f.is_primitive)
    return [
        function_report(fn, module, types[fn.name], primitive)
        for fn in module.functions
        if not fn.is_primitive
    ]
