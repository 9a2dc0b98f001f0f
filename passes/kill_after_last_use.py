"""KillAfterLastUse: free every value right after its last use, and never a moment earlier.

Stages (per non-primitive function):

1. **Analysis.** Alias-aware liveness per buffer (:mod:`relaxc.ir.alias`). A value
   refers to a set of root buffers; it may be killed only after the last use of *every*
   value sharing one of those buffers: ``%y = %x``, views, tuples and their projections,
   values stored into tuples, results of functions that return their argument, and values
   passed to runtime functions that may keep them (those live to the end).
2. **Rewrite.** After that statement, insert the kill that fits the value's type:
   ``memory.kill_tensor`` for tensors, ``memory.kill_storage`` for storages (a storage is
   live while any tensor carved from it is), ``vm.kill_object`` for tuples and objects.

Never killed: parameters, constants, anything returned, and any tensor or storage aliased
to one of those. Tuples and objects are released with ``vm.kill_object``, which frees no
memory, right after the last use of their own name. Values that already have a kill
(placed by PlanMemory or an earlier run) are left alone, so running the pass twice changes
nothing.

This is the pass that, in Apache TVM, broke an LLM build on its first day: a register was
killed while another name still referred to it (class 1 of the design notes' memory bug classes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from relaxc.ir.alias import CONST, PARAM, analyze_aliases, buffer_liveness
from relaxc.ir.nodes import Bind, Call, Effect, Function, Module, Stmt, Var
from relaxc.ir.objects import object_groups, returned_objects, same_object, tuple_holders
from relaxc.ir.types import StorageType, TensorType, TupleType, Type
from relaxc.ir.verifier import ModuleTypes
from relaxc.ir.vocab import KILL_OBJECT, KILL_STORAGE, KILL_TENSOR, killed_var
from relaxc.ir.walk import map_functions, with_body

from .base import Pass, module_types


def kill_op_for(t: Type) -> str:
    """The kill that fits a value of type ``t``."""
    if isinstance(t, TensorType):
        return KILL_TENSOR
    if isinstance(t, StorageType):
        return KILL_STORAGE
    return KILL_OBJECT


def existing_kills(fn: Function) -> set[str]:
    """Names that some kill statement of ``fn`` already frees."""
    return {v.name for v in map(killed_var, fn.body) if v is not None}


@dataclass(frozen=True)
class KillAfterLastUse(Pass):
    """Insert kills after the last use of each value, alias-aware."""

    name: ClassVar[str] = "KillAfterLastUse"
    summary: ClassVar[str] = (
        "free each value after the last use of any alias of it (kill_tensor/storage/object)"
    )

    def run(self, module: Module, types: ModuleTypes | None = None) -> Module:
        types = module_types(module, types)
        return map_functions(
            module, lambda fn: fn if fn.is_primitive else self._function(fn, module, types[fn.name])
        )

    def _function(self, fn: Function, module: Module, types: dict[str, Type]) -> Function:
        info = analyze_aliases(fn, module)
        live = buffer_liveness(fn, info)
        end = len(fn.body)
        returned = info.returned(fn)
        protected = (
            {r for r, k in info.kind.items() if k in (PARAM, CONST)} | set(returned) | info.escaping
        )
        # A storage holding a returned or protected tensor is protected too.
        protected |= {s for t, s in info.storage_of.items() if t in protected}
        done = existing_kills(fn)
        groups = object_groups(fn)
        holders = tuple_holders(fn)

        def holders_of(names: frozenset[str]) -> frozenset[str]:
            out: set[str] = set()
            todo = list(names)
            while todo:
                for h in holders.get(todo.pop(), ()):
                    for n in same_object(groups, h):
                        if n not in out:
                            out.add(n)
                            todo.append(n)
            return frozenset(out)

        order = {p.name: -1 for p in fn.params} | {
            s.name: k for k, s in enumerate(fn.body) if isinstance(s, Bind)
        }
        ret_names = returned_objects(fn, groups)
        kills_after: dict[int, list[str]] = {}
        for i, stmt in enumerate(fn.body):
            if not isinstance(stmt, Bind) or stmt.name in done:
                continue
            t = types.get(stmt.name)
            if t is None or t == TupleType(()):
                continue
            roots = info.roots(stmt.name) | {stmt.name}
            # vm.kill_object only releases the name (a tuple, an object), never memory: a tuple
            # is released after the last use of its names, whatever its fields hold.
            if kill_op_for(t) == KILL_OBJECT:
                # Only the object's register is released, but every name of the object
                # (``%u = %t``) is that register: kill it once, after the last use of any of
                # them, and never when one of them is returned.
                names = same_object(groups, stmt.name)
                if (
                    names & ret_names
                    or names & done
                    or min(names, key=order.__getitem__) != stmt.name
                ):
                    continue
                # ... and not before the last use of a tuple holding it: that tuple's fields
                # are read through it (``%nt = (%t, %y)``, ``%p = %nt.0``).
                names = names | holders_of(names)
                last = max(live.last_use.get(n, i) for n in names)
            elif roots & protected:
                continue
            else:
                last = max(live.last_use.get(r, i) for r in roots)
            if last >= end:
                continue
            kills_after.setdefault(last, []).append(stmt.name)
        if not kills_after:
            return fn
        body: list[Stmt] = []
        for i, stmt in enumerate(fn.body):
            body.append(stmt)
            # Tensors and objects first, then the storages they live in.
            for name in sorted(
                kills_after.get(i, []), key=lambda n: isinstance(types[n], StorageType)
            ):
                body.append(Effect(Call(kill_op_for(types[name]), (Var(name),))))
        return with_body(fn, body)
