"""Inputs and outputs in the arena: what ``attrs {io_in_arena = true}`` means, and its check.

PlanMemory with ``io_in_arena=true`` plans the inputs and outputs of an entry function
(one no other function calls) into its arena, as TFLite Micro does. The IR says where
they live with ordinary statements, so every analysis sees them as arena tensors:

* an **input** ``%x`` is copied, at the top of the body, into a tensor carved from the
  arena; the body reads that tensor, never ``%x``::

      %arena = memory.alloc_storage(8192, align=64, scope="global", arena=true)
      %x_in = memory.alloc_tensor(%arena, 0, (8, 64), f32)
      call_packed("relaxc.copy", %x, %x_in)

  The VM and the interpreter run the copy; the C target hands the caller a pointer to
  ``%x_in`` to fill before the run (the copy is the caller's write). Its bytes are reused
  once ``%x_in`` is dead.
* an **output** is a tensor carved from the arena and returned (not an ``external``
  storage): the caller reads it there after the run.

:func:`check_io_in_arena` (run by the verifier on every function with the attribute)
checks that the backends may rely on this: each parameter copied into the arena is read by
nothing but its one copy, the copies come before anything that computes, and no other
tensor carved from the same storage shares a byte with an input while the input is live,
or with an output once the output is made (a tensor whose last read is the statement
that writes the output, at the same offset, may be overwritten by it: in-place execution).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from . import dims as D
from .alias import TENSOR, AliasInfo, analyze_aliases, buffer_liveness
from .diagnostics import Loc, RxError
from .nodes import (
    Bind,
    CallFunc,
    Effect,
    Function,
    Invoke,
    Module,
    Project,
    Stmt,
    TupleExpr,
    Var,
    expr_vars,
)
from .sizes import tensor_nbytes
from .storage_bounds import provably_le
from .types import TensorType, Type, tensor_leaves, types_equal
from .vocab import ALLOC_STORAGE, ALLOC_TENSOR, CALL_CPACKED, CALL_PACKED, KILL_OPS, call_of

IO_IN_ARENA = "io_in_arena"
"""The function attribute PlanMemory sets on a function whose inputs and outputs it planned
into the arena."""

COPY = "relaxc.copy"
"""The runtime function that copies an input into the arena (``call_packed``)."""

PROLOGUE_OPS = frozenset({ALLOC_STORAGE, ALLOC_TENSOR, CALL_PACKED}) | KILL_OPS


@dataclass(frozen=True)
class ArenaInput:
    """A tensor leaf of a parameter that lives in the arena."""

    param: str  # the parameter
    leaf: int  # its position among the parameter's tensor leaves (0 for a tensor parameter)
    label: str  # "x", or "t.1" for a leaf of a tuple parameter
    tensor: str  # the tensor it is copied into
    storage: str  # the storage that tensor is carved from
    offset: D.Dim  # ... at this byte offset
    copy_at: int  # the index of the copy in the body
    type: TensorType


def _leaf_label(param: str, ptype: Type, i: int) -> str:
    return param if isinstance(ptype, TensorType) else f"{param}.{i}"


def _param_leaves(fn: Function) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Every name that is a parameter or (a projection or alias of) part of one: the
    parameter and the path of tuple indices to the part."""
    leaves: dict[str, tuple[str, tuple[int, ...]]] = {p.name: (p.name, ()) for p in fn.params}
    for s in fn.body:
        if not isinstance(s, Bind):
            continue
        v = s.value
        if isinstance(v, Var) and v.name in leaves:
            leaves[s.name] = leaves[v.name]
        elif isinstance(v, Project) and v.tuple_var.name in leaves:
            p, path = leaves[v.tuple_var.name]
            leaves[s.name] = (p, path + (v.index,))
    return leaves


def _flat_index(t: Type, path: tuple[int, ...]) -> int | None:
    """The position among ``t``'s tensor leaves of the tensor at ``path``, or None when the
    path does not end at a tensor."""
    index = 0
    for step in path:
        fields = getattr(t, "fields", None)
        if fields is None or step >= len(fields):
            return None
        index += sum(len(tensor_leaves(f)) for f in fields[:step])
        t = fields[step]
    return index if isinstance(t, TensorType) else None


def arena_inputs(fn: Function) -> list[ArenaInput]:
    """The parameter leaves ``fn`` copies into a tensor carved from one of its storages (with
    ``call_packed("relaxc.copy", %param, %tensor)``), in body order."""
    leaves = _param_leaves(fn)
    params = {p.name: p for p in fn.params}
    carved: dict[str, tuple[str, D.Dim, TensorType]] = {}
    storages: set[str] = set()
    out: list[ArenaInput] = []
    for i, s in enumerate(fn.body):
        if isinstance(s, Bind):
            c = call_of(s.value, ALLOC_STORAGE, ALLOC_TENSOR)
            if c is not None and c.op == ALLOC_STORAGE:
                storages.add(s.name)
            elif c is not None and c.args and isinstance(c.args[0], Var):
                if c.args[0].name in storages and len(c.args) >= 4:
                    shape, dtype = c.args[2], c.args[3]
                    if isinstance(shape, tuple):
                        t = TensorType(tuple(shape), getattr(dtype, "name", str(dtype)))
                        carved[s.name] = (c.args[0].name, cast(D.Dim, c.args[1]), t)
            continue
        c = call_of(s.value, CALL_PACKED)
        if c is None or len(c.args) != 3 or c.args[0] != COPY:
            continue
        src, dst = c.args[1], c.args[2]
        if not (isinstance(src, Var) and isinstance(dst, Var)):
            continue
        if src.name not in leaves or dst.name not in carved:
            continue
        pname, path = leaves[src.name]
        ptype = params[pname].type
        idx = _flat_index(ptype, path)
        if idx is None:
            continue
        storage, offset, t = carved[dst.name]
        label = _leaf_label(pname, ptype, idx)
        out.append(ArenaInput(pname, idx, label, dst.name, storage, offset, i, t))
    return out


def entry_functions(module: Module) -> set[str]:
    """The non-primitive functions no function of ``module`` calls (``call @f``)."""
    called = {
        s.value.func for f in module.functions for s in f.body if isinstance(s.value, CallFunc)
    }
    return {f.name for f in module.functions if not f.is_primitive and f.name not in called}


def check_io_in_arena(fn: Function, module: Module) -> None:
    """RxError at the first statement of ``fn`` (``attrs {io_in_arena = true}``) that breaks
    the rules of inputs and outputs in the arena (see the module docstring)."""
    where = fn.attr_loc(IO_IN_ARENA)
    if fn.is_primitive:
        raise RxError("attribute 'io_in_arena' belongs to a non-primitive function", where)
    inputs = arena_inputs(fn)
    leaves = _param_leaves(fn)
    copied: dict[tuple[str, int], ArenaInput] = {}
    params_by_name = {p.name: p for p in fn.params}
    for a in inputs:
        if (a.param, a.leaf) in copied:
            raise RxError(
                f"input %{a.label} is copied into the arena twice (io_in_arena)",
                fn.body[a.copy_at].loc,
            )
        copied[(a.param, a.leaf)] = a
        want = tensor_leaves(params_by_name[a.param].type)[a.leaf]
        if not types_equal(a.type, want):
            raise RxError(
                f"input %{a.label} is copied into a tensor of another type (io_in_arena): the "
                "caller writes the input's bytes there",
                fn.body[a.copy_at].loc,
            )
    copied_params = {a.param for a in inputs}
    copies = {a.copy_at for a in inputs}
    last_copy = max(copies, default=-1)
    for i, s in enumerate(fn.body):
        if i in copies:
            continue
        if i < last_copy and not _prologue(s):
            raise RxError(
                "with io_in_arena, the inputs are copied into the arena before anything is "
                "computed (the caller writes them there)",
                s.loc,
            )
        if isinstance(s, Bind) and isinstance(s.value, (Var, Project)):
            continue  # a name for (part of) a parameter: reading it is not a use of its data
        for v in expr_vars(s.value):
            if v.name in leaves and leaves[v.name][0] in copied_params:
                pname, path = leaves[v.name]
                idx = _flat_index(params_by_name[pname].type, path)
                if idx is None or (pname, idx) in copied:
                    raise RxError(
                        f"with io_in_arena, input %{v.name} lives in the arena: read its copy "
                        "there, not the parameter",
                        v.loc or s.loc,
                    )
    for v in expr_vars(fn.ret):
        if v.name in leaves and leaves[v.name][0] in copied_params:
            raise RxError(
                f"with io_in_arena, input %{v.name} lives in the arena: return its copy there",
                v.loc or fn.ret.loc,
            )
    _check_regions(fn, module, inputs)


def _prologue(s: Stmt) -> bool:
    """A statement that may come before the last input copy: it allocates, names part of a
    parameter, frees what is dead, or is another copy; none of them writes memory."""
    if isinstance(s, Bind) and isinstance(s.value, (Var, Project, TupleExpr)):
        return True  # names only (a tuple of the copies of a tuple input, a part of one)
    c = call_of(s.value, *PROLOGUE_OPS)
    if c is None:
        return False
    return c.op != CALL_PACKED or (bool(c.args) and c.args[0] == COPY)


@dataclass(frozen=True)
class _Carve:
    name: str
    storage: str
    offset: D.Dim
    nbytes: D.Dim
    at: int
    loc: Loc | None


def _check_regions(fn: Function, module: Module, inputs: list[ArenaInput]) -> None:
    info = analyze_aliases(fn, module)
    live = buffer_liveness(fn, info)
    carves: list[_Carve] = []
    for i, s in enumerate(fn.body):
        if not isinstance(s, Bind):
            continue
        c = call_of(s.value, ALLOC_TENSOR)
        if c is None or s.name not in info.storage_of or len(c.args) < 4:
            continue
        shape, dtype = c.args[2], c.args[3]
        if not isinstance(shape, tuple):
            continue
        t = TensorType(tuple(shape), getattr(dtype, "name", str(dtype)))
        carves.append(
            _Carve(
                s.name, info.storage_of[s.name], cast(D.Dim, c.args[1]), tensor_nbytes(t), i, s.loc
            )
        )
    by_name = {c.name: c for c in carves}
    ranges = {k: (0, v) for k, v in fn.upper_bounds().items()}

    def intersect(a: _Carve, b: _Carve) -> bool:
        if a.storage != b.storage:
            return False
        if D.dims_equal(a.nbytes, 0) or D.dims_equal(b.nbytes, 0):
            return False
        a_end, b_end = D.simplify(D.add(a.offset, a.nbytes)), D.simplify(D.add(b.offset, b.nbytes))
        return not (provably_le(a_end, b.offset, ranges) or provably_le(b_end, a.offset, ranges))

    def last(name: str) -> int:
        return live.last_use.get(name, live.defined.get(name, -1))

    for a in inputs:
        ca = by_name.get(a.tensor)
        if ca is None:
            continue
        la = last(a.tensor)
        for b in carves:
            if b.name == ca.name or not intersect(ca, b):
                continue
            if b.at <= la and last(b.name) >= ca.at:
                raise RxError(
                    f"%{b.name} shares bytes of the arena with input %{a.label} (in %{a.tensor}) "
                    "while the input is still live (io_in_arena)",
                    b.loc,
                )
    returned = info.returned(fn)
    for name in sorted(returned):
        ca = by_name.get(name)
        if ca is None or info.kind.get(name) != TENSOR:
            continue
        written = _first_write(fn, info, ca)
        for b in carves:
            if b.name == ca.name or not intersect(ca, b):
                continue
            lb = last(b.name)
            if b.at > ca.at or lb >= ca.at:
                if b.at < ca.at and lb == written and D.dims_equal(b.offset, ca.offset):
                    continue  # overwritten in place by the statement that makes the output
                raise RxError(
                    f"%{b.name} shares bytes of the arena with output %{name} while the output "
                    "is live (io_in_arena: an output is not overwritten once it is made)",
                    b.loc if b.at > ca.at else ca.loc,
                )


def _first_write(fn: Function, info: AliasInfo, carve: _Carve) -> int:
    """The first statement after the carving of ``carve`` that may write it: an invoke,
    a packed call or a copy reading a value that refers to it."""
    for i in range(carve.at + 1, len(fn.body)):
        s = fn.body[i]
        if not isinstance(s, Effect):
            continue
        if not (isinstance(s.value, Invoke) or call_of(s.value, CALL_PACKED, CALL_CPACKED)):
            continue
        for v in expr_vars(s.value):
            if carve.name in info.roots(v.name):
                return i
    return -1


def is_io_in_arena(fn: Function) -> bool:
    return fn.attr(IO_IN_ARENA) is True


__all__ = [
    "COPY",
    "IO_IN_ARENA",
    "ArenaInput",
    "arena_inputs",
    "check_io_in_arena",
    "entry_functions",
    "is_io_in_arena",
]
