"""Shrink a failing generated program to a small one that fails the same way.

Greedy delta debugging on the IR: drop uncalled functions and dead statements, return
fewer values, delete single statements (of @main and of the functions it calls), drop
unused parameters and turn parameters into smaller ones; each candidate must still verify
and still fail with the same kind of mismatch. Used by tests/fuzz/run_campaign.py.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Callable

from relaxc.frontend.printer import print_module
from relaxc.ir import dims as D
from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Bind, CallFunc, Function, Module, TupleExpr, expr_vars
from relaxc.ir.types import TupleType, type_free_vars
from relaxc.ir.verifier import verify_module

from .gen import GenProgram
from .harness import CBatch, Mismatch, check_program, emit_variants

Predicate = Callable[[GenProgram], bool]


def signature(m: Mismatch) -> tuple[str, str]:
    """What a mismatch is about, without the details that change as a program shrinks."""
    where = m.where.split(",")[0].split(" (")[0]
    backend = where.split(" ")[0]
    symptom = m.symptom.split("\n")[0]
    for cut in (":", "(", " at ", " %", "'"):
        symptom = symptom.split(cut)[0]
    return backend, symptom.strip()[:40]


def fails_like(sig: tuple[str, str], with_c: bool = True) -> Predicate:
    """A predicate: the program fails with a mismatch of signature ``sig``."""

    def pred(prog: GenProgram) -> bool:
        for m in mismatches(prog, with_c):
            if signature(m) == sig:
                return True
        return False

    return pred


def mismatches(prog: GenProgram, with_c: bool = True) -> list[Mismatch]:
    """Every mismatch of one program: its VM checks, then (if it gets there) its C builds."""
    try:
        case, compiled = check_program(prog)
    except Mismatch as m:
        return [m]
    if not (with_c and prog.c_ok):
        return []
    try:
        models = emit_variants(case, compiled, "fzmin", 0)
    except Mismatch as m:
        return [m]
    if not models:
        return []
    with tempfile.TemporaryDirectory() as d:
        out = []
        for sanitize in (False, True):
            batch = CBatch(Path(d) / str(sanitize), sanitize=sanitize, jobs=1)
            batch.add(models)
            try:
                out += batch.run().mismatches
            except AssertionError as e:
                out.append(Mismatch(prog, "C build", str(e).split("\n")[0]))
        return out


def rebuild(prog: GenProgram, module: Module) -> GenProgram | None:
    """``prog`` with ``module`` (unused weights dropped), or None if it does not verify."""
    try:
        verify_module(module)
    except (RxError, D.DimError):
        return None
    text = print_module(module)
    used = {name for name in prog.weights if f'"{name}"' in text}
    main = module.get("main")
    syms = set().union(*(type_free_vars(p.type) for p in main.params)) if main.params else set()
    dims = {k: v for k, v in prog.dims.items() if k in syms}
    return dataclasses.replace(
        prog,
        module=module,
        text=text,
        weights={k: prog.weights[k] for k in used},
        dims=dims,
        label="minimized",
    )


def _with_fn(module: Module, fn: Function) -> Module:
    return Module(tuple(fn if f.name == fn.name else f for f in module.functions))


def _live(fn: Function) -> Function:
    """``fn`` without statements nothing returned depends on."""
    need = {v.name for v in expr_vars(fn.ret)}
    keep = []
    for st in reversed(fn.body):
        if isinstance(st, Bind) and st.name not in need:
            continue
        keep.append(st)
        need |= {v.name for v in expr_vars(st.value)}
    return dataclasses.replace(fn, body=tuple(reversed(keep)))


def _called(module: Module) -> Module:
    """Only the functions @main reaches."""
    table = {f.name: f for f in module.functions}
    seen, todo = set(), ["main"]
    while todo:
        f = table.get(todo.pop())
        if f is None or f.name in seen:
            continue
        seen.add(f.name)
        todo += [st.value.func for st in f.body if isinstance(st.value, CallFunc)]
    return Module(tuple(f for f in module.functions if f.name in seen))


def candidates(prog: GenProgram):
    """Smaller variants of ``prog``, most promising first."""
    m = prog.module
    main = m.get("main")
    yield _called(_with_fn(m, _live(main)))
    yield _called(m)
    # Return fewer values.
    if isinstance(main.ret, TupleExpr):
        fields = main.ret.fields
        types = main.ret_type.fields if isinstance(main.ret_type, TupleType) else ()
        for i in range(len(fields)):
            yield _with_fn(m, dataclasses.replace(main, ret=fields[i], ret_type=types[i]))
        for i in range(len(fields)):
            rest = fields[:i] + fields[i + 1 :]
            if rest:
                yield _with_fn(
                    m,
                    dataclasses.replace(
                        main, ret=TupleExpr(rest), ret_type=TupleType(types[:i] + types[i + 1 :])
                    ),
                )
    # Delete one statement, in any function (later ones first: fewer dependents).
    for fn in m.functions:
        for i in reversed(range(len(fn.body))):
            yield _with_fn(m, dataclasses.replace(fn, body=fn.body[:i] + fn.body[i + 1 :]))
    # Drop unused parameters of @main.
    used = {v.name for st in main.body for v in expr_vars(st.value)} | {
        v.name for v in expr_vars(main.ret)
    }
    for i, p in enumerate(main.params):
        if p.name not in used:
            yield _with_fn(
                m, dataclasses.replace(main, params=main.params[:i] + main.params[i + 1 :])
            )
    # Drop the attributes of @main (upper bounds).
    if main.attrs:
        yield _with_fn(m, dataclasses.replace(main, attrs=()))


def minimize(prog: GenProgram, pred: Predicate, max_rounds: int = 50) -> GenProgram:
    """The smallest program found that still satisfies ``pred`` (``prog`` must)."""
    best = prog
    for _ in range(max_rounds):
        for cand in candidates(best):
            if cand == best.module:
                continue
            small = rebuild(best, cand)
            if small is None or len(small.text) >= len(best.text):
                continue
            try:
                ok = pred(small)
            except Exception:  # noqa: BLE001 - a candidate that breaks the harness differently
                ok = False
            if ok:
                best = small
                break
        else:
            return best
    return best


__all__ = ["fails_like", "minimize", "mismatches", "signature"]
