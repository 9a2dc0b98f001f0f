"""The kill checker: no value is used after it, or memory it refers to, was killed.

Independent of KillAfterLastUse (it checks placements, it does not compute them), and run
by the verifier on every function that contains a kill. It reports:

* a use of a name after that name was killed;
* a use of a value whose memory was freed through another name (a view, an alias, a
  tuple field, a tensor carved from a killed storage);
* a second kill of the same name;
* a kill of memory the function does not own: a parameter, a constant, or a returned value
  (directly or through an alias);
* a ``vm.kill_object`` of an object that another name of it (``%u = %t``: the same
  register) uses later or returns, or that is released twice through two of its names.

Killing a name whose memory is already freed is allowed (it only releases the name); kill
statements are not uses.
"""

from __future__ import annotations

from typing import Callable

from .alias import CONST, PARAM, analyze_aliases
from .diagnostics import Loc, RxError
from .nodes import Function, Module, Stmt, Var, expr_vars
from .objects import object_groups, returned_objects, same_object
from .vocab import KILL_OBJECT, KILL_STORAGE, KILL_TENSOR, kill_of, killed_var


def _kill_target(stmt: Stmt) -> tuple[str, Var] | None:
    """The kill op of a kill statement and the variable it ends (None for other statements)."""
    kill, target = kill_of(stmt), killed_var(stmt)
    return (kill.op, target) if kill is not None and target is not None else None


def has_kills(fn: Function) -> bool:
    return any(killed_var(s) is not None for s in fn.body)


def check_kills(fn: Function, module: Module) -> None:
    """Raise RxError at the first misplaced kill or use after kill in ``fn``."""
    info = analyze_aliases(fn, module)
    owned_elsewhere = {r for r, k in info.kind.items() if k in (PARAM, CONST)}
    returned = info.returned(fn)
    groups = object_groups(fn)
    ret_names = returned_objects(fn, groups)
    killed_names: dict[str, Loc | None] = {}
    released: dict[
        str, tuple[str, Loc | None]
    ] = {}  # every name of a released object -> (killed name, where)
    dead_roots: dict[str, tuple[str, Loc | None]] = {}  # root -> (name killed, where)

    def line(loc: Loc | None) -> str:
        return f" at {loc.at}" if loc else ""

    for stmt in fn.body:
        kill = _kill_target(stmt)
        if kill is not None:
            op, target = kill
            if target.name in killed_names:
                raise RxError(
                    f"%{target.name} is killed twice (first{line(killed_names[target.name])})",
                    target.loc,
                )
            roots = info.roots(target.name) | {target.name}
            if op != KILL_OBJECT:
                foreign = roots & owned_elsewhere
                if foreign:
                    what = (
                        "a parameter"
                        if any(info.kind.get(r) == PARAM for r in foreign)
                        else "a constant"
                    )
                    raise RxError(
                        f"{op}(%{target.name}) frees memory of {what} (%{sorted(foreign)[0]}), "
                        "which this function does not own",
                        target.loc,
                    )
                if roots & returned:
                    raise RxError(
                        f"{op}(%{target.name}) frees memory that the function returns", target.loc
                    )
            if op == KILL_OBJECT:
                names = same_object(groups, target.name)
                if target.name in released:
                    by, where = released[target.name]
                    raise RxError(
                        f"vm.kill_object(%{target.name}) releases again the object "
                        f"that the kill of %{by}{line(where)} released (%{target.name} = %{by} is "
                        "the same object)",
                        target.loc,
                    )
                if names & ret_names:
                    held = names & ret_names
                    direct = held & {v.name for v in expr_vars(fn.ret)}
                    other = sorted(
                        direct - {target.name} or direct or held - {target.name} or held
                    )[0]
                    raise RxError(
                        f"vm.kill_object(%{target.name}) releases an object the function returns "
                        f"(as %{other})",
                        target.loc,
                    )
                for n in names:
                    if n != target.name:
                        released[n] = (target.name, stmt.loc or target.loc)
            killed_names[target.name] = stmt.loc or target.loc
            if op == KILL_TENSOR:
                for r in roots:
                    dead_roots.setdefault(r, (target.name, stmt.loc or target.loc))
            elif op == KILL_STORAGE:
                # The storage itself (through any alias of it) and every tensor carved from it.
                for r in roots:
                    dead_roots.setdefault(r, (target.name, stmt.loc or target.loc))
                for t, s in info.storage_of.items():
                    if s in roots:
                        dead_roots.setdefault(t, (target.name, stmt.loc or target.loc))
            continue
        for v in expr_vars(stmt.value):
            _check_released(v, released, line)
            _check_use(v, killed_names, dead_roots, info.roots(v.name) | {v.name}, line)
    for v in expr_vars(fn.ret):
        _check_use(v, killed_names, dead_roots, info.roots(v.name) | {v.name}, line)


def _check_released(
    v: Var, released: dict[str, tuple[str, Loc | None]], line: Callable[[Loc | None], str]
) -> None:
    if v.name in released:
        by, where = released[v.name]
        raise RxError(
            f"%{v.name} is used after the kill of %{by}{line(where)} released it "
            f"(%{v.name} and %{by} are the same object)",
            v.loc,
        )


def _check_use(
    v: Var,
    killed_names: dict[str, Loc | None],
    dead_roots: dict[str, tuple[str, Loc | None]],
    roots: frozenset[str],
    line: Callable[[Loc | None], str],
) -> None:
    if v.name in killed_names:
        raise RxError(f"%{v.name} is used after it was killed{line(killed_names[v.name])}", v.loc)
    for r in sorted(roots):
        if r in dead_roots:
            by, where = dead_roots[r]
            raise RxError(
                f"%{v.name} is used after its memory was freed by the kill of %{by}{line(where)}",
                v.loc,
            )
