"""Differential checks of one generated program through every pipeline, planner and backend.

For a program (:class:`tests.fuzz.gen.GenProgram`):

1. it parses back to the module it was printed from, verifies, and the reference
   interpreter runs it on two input sets (the second at the upper bounds of the dims);
2. the passes of the vm pipeline before PlanMemory run once, in order (ReorderForMemory,
   ManifestAlloc, PlanWorkspace, ElideConcatSplit, ComputeInPlace: :data:`PRE_PLAN`), then
   PlanMemory once per planner (with ``check=true``: the independent checker of
   passes/planning/checker.py vets each plan), then KillAfterLastUse; for C, PlanKernelScratch
   on the same input, PlanMemory once per planner again, and LegalizePackedCalls (and
   KillAfterLastUse) on each plan; the verifier after every pass: so every named
   pipeline of passes/registry.py runs with every planner. With ``thorough``, the vm
   pipeline also runs in the written order (when ReorderForMemory changed it), without the
   sharing passes, and with ElideConcatSplit eliding where it saves nothing;
3. the plan is checked again from the *output* IR, by the same independent checker: every
   tensor carved from an arena or shared storage is live from its ``alloc_tensor`` to its
   kill, no two live ones overlap, and nothing refers to a tensor's bytes after its kill
   (through a ``memory.view``, a view op, an alias, a tuple or a projection); the VM's
   poisoning proves the kills are not early;
4. the VM (``poison=True``: killed and freed memory is overwritten with 0xFF) runs the
   source program, the IR after ReorderForMemory and after each sharing pass that changed
   it, and each planner's vm
   pipeline output (with ``thorough``, also the IR after every other pass before
   PlanMemory and PlanMemory's output), both input sets on one VM (so the second run
   reuses pooled memory), and must give the interpreter's outputs bit for bit, hold no
   memory after the run and never less than the plan promises;
5. for programs the C target accepts, the c pipeline output (packed), its unpacked form and
   the vm pipeline output are emitted as C (:class:`CBatch` compiles many programs with one
   cc call per core and runs them in one process); every variant must match the
   interpreter within the per-dtype tolerance of tests/backend/c and all variants of a
   program must agree bit for bit (but for the bits of a NaN, which C leaves open).

What ReorderForMemory and the sharing passes did is counted per program
(:func:`sharing_changes`), so a run can show that they were exercised.

Everything wrong is a :class:`Mismatch` naming the program, the variant and the symptom.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from relaxc.backend.c import CSources, emit_c
from relaxc.backend.c import dtypes as T
from relaxc.backend.inputs import concrete_shape, random_inputs, resolve_dims
from relaxc.backend.interpreter import Interpreter
from relaxc.backend.vm import VirtualMachine, compile_module, load_bytes, predict_memory
from relaxc.frontend.parser import parse_module
from relaxc.ir import dims as D
from relaxc.ir.diagnostics import InternalError, RxError
from relaxc.ir.nodes import (
    Bind,
    Call,
    Effect,
    Function,
    Invoke,
    Module,
    Project,
    TupleExpr,
    Var,
    expr_vars,
)
from relaxc.ir.ops import REGISTRY
from relaxc.ir.types import DTYPES, TensorType, numpy_dtype, tensor_leaves
from relaxc.ir.verifier import ModuleTypes, verify_module
from relaxc.ir.vocab import is_kill, killed_var
from relaxc.cli.target_facts import pipeline_context
from relaxc.passes.elide_concat_split import ElideConcatSplit
from relaxc.passes.kill_after_last_use import KillAfterLastUse
from relaxc.passes.legalize_packed_calls import LegalizePackedCalls
from relaxc.passes.pipeline import Pipeline, VerifyInstrument
from relaxc.passes.plan_memory import PlanMemory
from relaxc.passes.planning.checker import check_plan
from relaxc.passes.planning.model import Buffer
from relaxc.passes.planning.planners import PLANNERS
from relaxc.passes.registry import PASSES, PIPELINES
from tests.backend.c.cbuild import SAN_ENV, SANITIZE, TOLERANCE

from .gen import GenProgram

CC = shutil.which("cc")
FAST = ["-std=c99", "-O0", "-Wall", "-Wextra", "-Werror", "-pedantic"]
"""Flags of the fixed-seed fuzz builds: warning-free like tests/backend/c's strict build, at
-O0 to compile hundreds of models quickly (the long campaign compiles at -O2)."""

# Pipelines the fuzzer covers: every named one, each with every planner. The passes before
# PlanMemory (:data:`PRE_PLAN`) run once, in the vm pipeline's order, and the VM runs the
# program before them ("none") and after every one of ReorderForMemory and the sharing passes
# (ElideConcatSplit, ComputeInPlace) that changed it (with ``thorough``, after each pass);
# then PlanMemory runs once per planner, and the VM runs each plan after KillAfterLastUse
# (with ``thorough``, also before it). The C target runs the c pipeline (packed and
# unpacked) and the vm pipeline. ("c" cannot run on the VM: packed-call structs are the C
# target's.)
assert set(PIPELINES) == {"vm", "c", "none"}, (
    "a new named pipeline: teach tests/fuzz/harness.py to run it"
)
REORDER = "ReorderForMemory"
SHARING = ("ElideConcatSplit", "ComputeInPlace")
PRE_PLAN: tuple[str, ...] = (REORDER, "ManifestAlloc", "PlanWorkspace", *SHARING)
"""The passes both named pipelines run before PlanMemory, in order."""
WATCHED = (REORDER, *SHARING)
"""The passes after which the VM runs the IR when they changed it, and whose changes are
counted (:func:`sharing_changes`)."""
assert PIPELINES["vm"] == (*PRE_PLAN, "PlanMemory", "KillAfterLastUse"), PIPELINES["vm"]
SCRATCH = "PlanKernelScratch"
"""The pass only the c pipeline adds before PlanMemory: the C kernels' working memory. The C
builds plan the output of :data:`PRE_PLAN` with it (every C variant of a planner shares one
plan: the c pipeline, unpacked, and with KillAfterLastUse as the vm pipeline's C build)."""
assert PIPELINES["c"] == (*PRE_PLAN, SCRATCH, "PlanMemory", "LegalizePackedCalls"), PIPELINES["c"]

C_REFUSALS = (
    # What the C target refuses by design (docs/c.md), and the generator may still produce.
    # A primitive function PlanWorkspace leaves unlowered (a nested tuple result, a size
    # negative for some dims) although it computes an intermediate: the emitter places nothing.
    r"the C target needs lowered primitive functions",
    r"attributes carry a symbolic dim",
    r"does not support \w+ on bool: bool arithmetic",
)


class Mismatch(AssertionError):
    """A program on which relaxc disagrees with itself."""

    def __init__(self, prog: GenProgram, where: str, symptom: str):
        self.prog, self.where, self.symptom = prog, where, symptom
        super().__init__(
            f"{where}: {symptom}\n--- program (dims {prog.dims}, weights "
            f"{sorted(prog.weights)}) ---\n{prog.text}"
        )


@dataclass
class Case:
    """A program with its input sets and the interpreter's outputs on them."""

    prog: GenProgram
    module: Module
    inputs: list[list[Any]]
    dims: list[dict[str, int]]
    want: list[Any]
    errors: list[str | None]  # the interpreter's RxError on an input set, if it refused it
    types: ModuleTypes = None  # type: ignore[assignment]

    @property
    def loosest_float(self) -> str | None:
        """The least precise float dtype of any value: an f32 result one ulp off (numpy's
        float32 exp is not C's (float)exp(double)) stays that far off after a cast to f64,
        so C outputs are compared at that dtype's tolerance or looser."""
        found = {
            leaf.dtype
            for fn in self.types.values()
            for t in fn.values()
            for leaf in tensor_leaves(t)
            if leaf.dtype in TOLERANCE
        }
        return max(found, key=lambda d: TOLERANCE[d][0], default=None)


def input_dims(prog: GenProgram, module: Module) -> list[dict[str, int]]:
    """Dims of the two runs: as generated, then each bounded dim at its upper bound."""
    bounds = module.get("main").upper_bounds()
    second = {k: bounds.get(k, v + 1) for k, v in prog.dims.items()}
    return [dict(prog.dims), second]


def reference(prog: GenProgram, seed: int = 0) -> Case:
    module = parse_module(prog.text, "gen.rx")
    if module != prog.module:
        raise Mismatch(prog, "printer/parser", "parse(print(m)) != m")
    fn = module.get("main")
    case = Case(prog, module, [], [], [], [], verify_module(module))
    for k, dims in enumerate(input_dims(prog, module)):
        env = resolve_dims(fn, dims)
        args = random_inputs(fn, env, seed + k)
        case.inputs.append(args)
        case.dims.append(dims)
        try:
            case.want.append(Interpreter(module, prog.weights).run("main", args, dims or None))
            case.errors.append(None)
        except RxError as e:
            case.want.append(None)
            case.errors.append(e.message)
        except Exception as e:  # noqa: BLE001 - a crash of the reference is a finding too
            raise Mismatch(
                prog, f"interpreter (input set {k})", f"crashed: {type(e).__name__}: {e}"
            ) from e
    return case


# ---------------------------------------------------------------------------------------
# Compilation: every pipeline with every planner.


PACKED_REFUSALS = (
    # LegalizePackedCalls refuses, by design (docs/c.md), ops whose attributes carry a
    # symbolic dim no tensor argument carries; the unpacked build still runs.
    r"has symbolic dims in its attributes",
    # resize's `sizes` attribute carries the output's dims; the packed kernel sees the input's
    # as fresh dims (d0, ...) and cannot tell a symbolic axis is kept, so it needs static ones.
    r"resize: axis \d+ is resized \(.*\) and needs static lengths",
)


@dataclass
class _VerifyChanged(VerifyInstrument):
    """The pipeline's verifier, but a module equal to the one it verified last (a pass that
    changed nothing) keeps its types: verifying it again would give the same answer."""

    def after_pass(self, index: int, p: Any, module: Module) -> None:
        if self._last is not None and (self._last[0] is module or self._last[0] == module):
            self._last = (module, self._last[1])
            return
        super().after_pass(index, p, module)


def _run_pass(
    prog: GenProgram, p: Any, m: Module, types: ModuleTypes | None, what: str
) -> tuple[Module, ModuleTypes]:
    """Run one pass as the pipeline does (verifier after it); the output and its types."""
    verify = _VerifyChanged((m, types) if types is not None else None)
    try:
        out = Pipeline([p], [verify]).run(m, types)
    except (RxError, InternalError) as e:  # InternalError: PassBrokeIR
        raise Mismatch(
            prog, what, f"the pass failed or produced IR the verifier rejects: {e}"
        ) from e
    out_types = verify.types_for(out)
    assert out_types is not None
    return out, out_types


@dataclass
class Compiled:
    """The compiled forms of one program, by variant name, with their verified types.

    Planners that make the same plan share one entry: ``canonical[planner]`` names the first
    planner with that plan (the later passes are deterministic, so their outputs are equal
    too and run once). ``changes`` counts what the sharing passes (and ReorderForMemory)
    did to the program (see :func:`sharing_changes`)."""

    vm: dict[str, tuple[Module, ModuleTypes]] = field(default_factory=dict)  # run on the VM
    c: dict[str, tuple[Module, ModuleTypes]] = field(default_factory=dict)  # emitted as C
    canonical: dict[str, str] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)  # C variants refused by design
    changes: Counter = field(default_factory=Counter)


FULL_VM = re.compile(r"^vm/|/vm$")
"""VM variants that are a whole vm pipeline's output (the VM must hold what it predicts)."""


def compile_all(
    prog: GenProgram,
    module: Module,
    types: ModuleTypes,
    planners: Sequence[str] = PLANNERS,
    thorough: bool = True,
) -> Compiled:
    """Every named pipeline with every planner (sharing the passes they have in common: the
    passes before PlanMemory run once, PlanMemory once per planner); with ``thorough`` also
    the vm pipeline in the written order (without ReorderForMemory), without the sharing
    passes, and with ElideConcatSplit eliding where it does not save memory."""
    out = Compiled()
    out.vm["none"] = (module, types)
    lowered, ltypes = _before_planning(prog, module, types, "", out, thorough)
    scratched = _with_scratch(prog, lowered, ltypes) if prog.c_ok else None
    plans: list[tuple[str, Module]] = []
    for planner in planners:
        what = f"PlanMemory{{planner={planner}}}"
        try:
            planned = PlanMemory(planner=planner, check=True).run(lowered, ltypes)
        except (RxError, InternalError) as e:
            raise Mismatch(prog, what, f"the pass failed: {e}") from e
        same = next((q for q, m in plans if m == planned), None)
        if same is not None:
            out.canonical[planner] = same
            continue
        plans.append((planner, planned))
        out.canonical[planner] = planner
        try:
            ptypes = verify_module(planned)
        except RxError as e:
            raise Mismatch(prog, what, f"produced IR the verifier rejects: {e}") from e
        check_plans(prog, planned, f"{what} output", arenas_only=True)
        killed, ktypes = _run_pass(
            prog, KillAfterLastUse(), planned, ptypes, f"vm pipeline, planner {planner}"
        )
        check_plans(prog, killed, f"vm pipeline output, planner {planner}")
        if thorough:
            out.vm[f"planned/{planner}"] = (planned, ptypes)
        out.vm[f"vm/{planner}"] = (killed, ktypes)
        if scratched is not None:
            cplanned, cptypes = _plan(prog, planner, *scratched, f"c pipeline: {what}")
            try:
                packed, ctypes = _run_pass(
                    prog, LegalizePackedCalls(), cplanned, cptypes, f"c pipeline, planner {planner}"
                )
                out.c[f"c/{planner}"] = (packed, ctypes)
            except Mismatch as e:
                if not any(re.search(r, e.symptom) for r in PACKED_REFUSALS):
                    raise
                out.refused.append(f"c/{planner}")
            out.c[f"c-unpacked/{planner}"] = (cplanned, cptypes)
            ckilled = _run_pass(
                prog, KillAfterLastUse(), cplanned, cptypes, f"c pipeline with kills, {planner}"
            )
            out.c[f"vm/{planner}"] = ckilled
    if thorough:
        if out.changes[REORDER]:
            _extra(prog, module, types, out, "written-order", skip=(REORDER,))
        _extra(prog, module, types, out, "unshared", skip=SHARING)
        _extra(
            prog,
            module,
            types,
            out,
            "elide-always",
            config={"ElideConcatSplit": ElideConcatSplit(only_if_smaller=False)},
        )
    return out


def _before_planning(
    prog: GenProgram,
    module: Module,
    types: ModuleTypes,
    name: str,
    out: Compiled,
    thorough: bool,
    skip: Sequence[str] = (),
    config: Mapping[str, Any] | None = None,
) -> tuple[Module, ModuleTypes]:
    """The passes of :data:`PRE_PLAN` on ``module`` (but ``skip``; ``config``: instances to
    run instead of the defaults), the VM variants after them (named ``name/PASS``, or just
    ``PASS`` for the named pipelines) and the counts of :func:`sharing_changes`."""
    m, t = module, types
    for pass_name in PRE_PLAN:
        if pass_name in skip:
            continue
        p = (config or {}).get(pass_name) or PASSES[pass_name]()
        what = f"{name} + {pass_name}" if name else pass_name
        new, new_types = _run_pass(prog, p, m, t, what)
        changed = new != m
        if pass_name == REORDER:  # (which sets attributes on a function it left in order)
            changed = sharing_changes(pass_name, m, new)[pass_name] > 0
        if pass_name in WATCHED and not name:
            out.changes.update(sharing_changes(pass_name, m, new))
        if changed and (thorough or (pass_name in WATCHED and not name)):
            out.vm[f"{name}/{pass_name}" if name else pass_name] = (new, new_types)
        m, t = new, new_types
    return m, t


def _extra(
    prog: GenProgram,
    module: Module,
    types: ModuleTypes,
    out: Compiled,
    name: str,
    skip: Sequence[str] = (),
    config: Mapping[str, Any] | None = None,
    planner: str = "best",
) -> None:
    """One more variant of the vm pipeline, planner ``planner``: ``skip`` left out of it,
    ``config`` instead of its defaults: run on the VM (the IR between the passes too), its
    plans checked, built for C (``name/vm``). Skipped when its output is a named
    pipeline's."""
    lowered, ltypes = _before_planning(prog, module, types, name, out, True, skip, config)
    what = f"{name}: PlanMemory{{planner={planner}}}"
    planned, ptypes = _plan(prog, planner, lowered, ltypes, what)
    killed, ktypes = _run_pass(prog, KillAfterLastUse(), planned, ptypes, f"{name}: vm pipeline")
    if any(killed == k for k, _ in (out.vm.get(f"vm/{q}", (None, None)) for q in PLANNERS)):
        return
    check_plans(prog, killed, f"{name}: vm pipeline output")
    out.vm[f"{name}/vm"] = (killed, ktypes)
    if prog.c_ok:
        cplanned, cptypes = _plan(prog, planner, *_with_scratch(prog, lowered, ltypes), what)
        out.c[f"{name}/vm"] = _run_pass(
            prog, KillAfterLastUse(), cplanned, cptypes, f"{name}: c pipeline with kills"
        )


def _with_scratch(
    prog: GenProgram, lowered: Module, ltypes: ModuleTypes | None
) -> tuple[Module, ModuleTypes]:
    """:data:`SCRATCH` on the output of :data:`PRE_PLAN`, for the C builds."""
    return _run_pass(prog, PASSES[SCRATCH](context=pipeline_context()), lowered, ltypes, SCRATCH)


def _plan(
    prog: GenProgram, planner: str, module: Module, types: ModuleTypes | None, what: str
) -> tuple[Module, ModuleTypes]:
    """PlanMemory with ``planner`` (and its checker) on ``module``, verified and checked."""
    try:
        planned = PlanMemory(planner=planner, check=True).run(module, types)
        ptypes = verify_module(planned)
    except (RxError, InternalError) as e:
        raise Mismatch(prog, what, f"the pass failed or its IR was rejected: {e}") from e
    check_plans(prog, planned, f"{what} output", arenas_only=True)
    return planned, ptypes


def sharing_changes(pass_name: str, before: Module, after: Module) -> Counter:
    """What a pass of :data:`WATCHED` did to the non-primitive functions:
    ``ReorderForMemory``, the functions whose statements it put in another order;
    ``ElideConcatSplit/concat`` and ``.../split``, the concats and splits it removed;
    ``ComputeInPlace``, the tensors it turned from an allocation into a view
    (``.../into-place``: of those, views of an output or of a concat's slice, whose place
    was fixed)."""
    found: Counter = Counter()
    olds = {f.name: f for f in before.functions}
    for fn in after.functions:
        old = olds.get(fn.name)
        if fn.is_primitive or old is None or old == fn:
            continue
        if pass_name == REORDER:
            if fn.body != old.body:
                found[pass_name] += 1
        elif pass_name == "ElideConcatSplit":
            for op in ("concat", "split"):
                k = _count_invokes(old, op) - _count_invokes(fn, op)
                if k > 0:
                    found[f"{pass_name}/{op}"] += k
        else:
            views = _views(fn)
            made = {v for v in views if v not in _views(old)}
            if made:
                found[pass_name] += len(made)
            fixed = {v for v in made if _fixed_source(fn, views[v], views)}
            if fixed:
                found[f"{pass_name}/into-place"] += len(fixed)
    return found


def _count_invokes(fn: Function, op: str) -> int:
    return sum(
        1
        for st in fn.body
        if isinstance(st.value, Invoke) and not st.value.is_func and st.value.target == op
    )


def _views(fn: Function) -> dict[str, str]:
    """``memory.view`` bindings: name -> the name of the tensor viewed."""
    out = {}
    for st in fn.body:
        if isinstance(st, Bind) and isinstance(st.value, Call) and st.value.op == "memory.view":
            src = st.value.args[0] if st.value.args else None
            if isinstance(src, Var):
                out[st.name] = src.name
    return out


def _fixed_source(fn: Function, src: str, views: Mapping[str, str]) -> bool:
    """``src`` is a view itself (a concat's slice) or carved from an output's storage."""
    if src in views:
        return True
    storage = {
        st.name: st.value for st in fn.body if isinstance(st, Bind) and isinstance(st.value, Call)
    }
    c = storage.get(src)
    if c is None or c.op != "memory.alloc_tensor" or not isinstance(c.args[0], Var):
        return False
    s = storage.get(c.args[0].name)
    return s is not None and dict(s.kwargs).get("external") is True


def c_variants(compiled: Compiled, rotate: int | None) -> list[str]:
    """The C variants to build: all of them, or (``rotate`` given) the c pipeline for every
    distinct plan plus the unpacked and vm pipeline builds of one planner, chosen by
    ``rotate`` so that a run of many programs covers every planner with every pipeline."""
    if rotate is None:
        return list(compiled.c)
    planner = compiled.canonical[PLANNERS[rotate % len(PLANNERS)]]
    keep = [v for v in compiled.c if v.startswith("c/")]
    keep += [f"c-unpacked/{planner}", f"vm/{planner}"]
    keep += [v for v in compiled.c if v.endswith("/vm")]  # the extra variants, if any
    if f"c/{planner}" in compiled.refused:
        keep += [v for v in compiled.c if v.startswith("c-unpacked/")]
    return list(dict.fromkeys(v for v in keep if v in compiled.c))


# ---------------------------------------------------------------------------------------
# The plan, checked again on the output IR.


def check_plans(prog: GenProgram, module: Module, where: str, arenas_only: bool = False) -> None:
    """Dynamic storages that PlanMemory lets a later allocation reuse are only checked after
    KillAfterLastUse (before it, their tensors have no kills to end their lives)."""
    for fn in module.functions:
        if fn.is_primitive:
            continue
        # Sizes at the upper bounds (what the plan must hold); unbounded dims of @main at
        # their values in the first run.
        env = {**(prog.dims if fn.name == "main" else {}), **fn.upper_bounds()}
        problems = plan_problems(fn, env, arenas_only)
        if problems:
            raise Mismatch(
                prog,
                f"{where}, @{fn.name}",
                "the independent checker rejects the plan: " + "; ".join(problems),
            )


def plan_problems(fn: Function, env: Mapping[str, int], arenas_only: bool = False) -> list[str]:
    """Overlaps of live tensors carved from one storage, read off the IR: a tensor lives from
    its ``alloc_tensor`` to its ``kill_tensor`` (or its storage's kill, or the end)."""
    storages: dict[str, tuple[int, bool]] = {}  # name -> (size, arena)
    carved: dict[
        str, list[tuple[str, int, int, int]]
    ] = {}  # storage -> (tensor, offset, bytes, start)
    kill_at: dict[str, int] = {}
    for i, st in enumerate(fn.body):
        v = st.value
        if not isinstance(v, Call):
            continue
        if isinstance(st, Bind) and v.op == "memory.alloc_storage":
            kw = dict(v.kwargs)
            size = v.args[0] if v.args else kw.get("size")
            if kw.get("external"):
                continue
            try:
                storages[st.name] = (_evaluate(size, env), bool(kw.get("arena")))
            except D.DimError:
                continue  # a dynamic storage of a callee: its dims are known only at run time
        elif isinstance(st, Bind) and v.op == "memory.alloc_tensor" and isinstance(v.args[0], Var):
            s = v.args[0].name
            if s not in storages:
                continue
            kw = dict(v.kwargs)
            rest = list(v.args[1:])
            offset = rest[0] if rest else kw["offset"]
            shape = rest[1] if len(rest) > 1 else kw["shape"]
            dtype = rest[2] if len(rest) > 2 else kw["dtype"]
            try:
                nbytes = DTYPES[dtype.name].nbytes * int(
                    np.prod([_evaluate(d, env) for d in shape])
                )
                carved.setdefault(s, []).append((st.name, _evaluate(offset, env), nbytes, i))
            except D.DimError:
                storages.pop(s)
                carved.pop(s, None)
        elif (
            isinstance(st, Effect)
            and v.op in ("memory.kill_tensor", "memory.kill_storage")
            and v.args
        ):
            if isinstance(v.args[0], Var):
                kill_at.setdefault(v.args[0].name, i)
    problems: list[str] = []
    end = len(fn.body)
    for s, tensors in carved.items():
        if s not in storages:
            continue
        size, arena = storages[s]
        if (len(tensors) < 2 or arenas_only) and not arena:
            continue
        buffers, offsets = [], []
        for name, off, nbytes, start in tensors:
            stop = min(kill_at.get(name, end), kill_at.get(s, end)) + 1
            buffers.append(Buffer(start, stop, nbytes, 1, f"%{name}"))
            offsets.append(off)
        problems += [f"in %{s}: {p}" for p in check_plan(buffers, offsets, size)]
    if not arenas_only:
        problems += used_after_kill(fn)
    return problems


VIEW_OPS = frozenset(op.name for op in REGISTRY.ops() if op.is_view)


def used_after_kill(fn: Function) -> list[str]:
    """Uses of a tensor's bytes after its kill (or its storage's), read off the IR: through
    the tensor itself, a view of it (``memory.view`` and the view ops, as ElideConcatSplit
    and ComputeInPlace make them), an alias, a tuple holding it or a projection. A tensor's
    bytes must outlive every value that refers to them; the plan's overlaps are checked
    between kills, so a kill before such a use would let two live values share bytes."""
    roots: dict[str, frozenset[str]] = {}  # name -> the allocated tensors it may refer to
    fields: dict[str, tuple[frozenset[str], ...]] = {}  # tuple -> its fields' roots
    storage_of: dict[str, str] = {}
    kill_at: dict[str, int] = {}
    for i, st in enumerate(fn.body):
        v = st.value
        if is_kill(st):
            k = killed_var(st)
            if k is not None:
                kill_at.setdefault(k.name, i)
            continue
        if not isinstance(st, Bind):
            continue
        if isinstance(v, Call) and v.op == "memory.alloc_tensor" and isinstance(v.args[0], Var):
            roots[st.name] = frozenset({st.name})
            storage_of[st.name] = v.args[0].name
        elif isinstance(v, Call) and v.op in VIEW_OPS and v.args and isinstance(v.args[0], Var):
            roots[st.name] = roots.get(v.args[0].name, frozenset())
        elif isinstance(v, Var):
            roots[st.name] = roots.get(v.name, frozenset())
            if v.name in fields:
                fields[st.name] = fields[v.name]
        elif isinstance(v, TupleExpr):
            fields[st.name] = tuple(roots.get(f.name, frozenset()) for f in v.fields)
            roots[st.name] = frozenset().union(*fields[st.name])
        elif isinstance(v, Project) and v.tuple_var.name in fields:
            fs = fields[v.tuple_var.name]
            roots[st.name] = fs[v.index] if v.index < len(fs) else frozenset()
    end = len(fn.body)

    def dead_at(t: str) -> int:
        return min(kill_at.get(t, end), kill_at.get(storage_of.get(t, ""), end))

    problems = []
    uses = [(i, st.value) for i, st in enumerate(fn.body) if not is_kill(st)] + [(end, fn.ret)]
    for i, value in uses:
        for var in expr_vars(value):
            for t in sorted(roots.get(var.name, ())):
                if dead_at(t) < i:
                    via = "" if var.name == t else f" (through %{var.name})"
                    where = f"statement {i}" if i < end else "the return"
                    problems.append(
                        f"%{t} is used at {where}{via} after its kill at statement {dead_at(t)}"
                    )
    return problems


def _evaluate(d: Any, env: Mapping[str, int]) -> int:
    if isinstance(d, int):
        return d
    return D.evaluate(d, {k: env[k] for k in D.free_vars(d) if k in env})


# ---------------------------------------------------------------------------------------
# The VM.


def same_bits(a: Any, b: Any) -> str | None:
    """None when ``a`` and ``b`` are the same structure, shapes, dtypes and bytes."""
    if isinstance(a, tuple):
        if not isinstance(b, tuple) or len(a) != len(b):
            return (
                f"structure differs: {type(b).__name__} of {len(b) if isinstance(b, tuple) else 1}"
            )
        for i, (x, y) in enumerate(zip(a, b)):
            msg = same_bits(x, y)
            if msg:
                return f"field {i}: {msg}"
        return None
    if not isinstance(b, np.ndarray):
        return f"expected an array, got {type(b).__name__}"
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"{b.dtype}{b.shape} instead of {a.dtype}{a.shape}"
    if a.tobytes() != b.tobytes() and _nan_canonical(a).tobytes() == _nan_canonical(b).tobytes():
        return f"only the bits of a NaN differ:\nwant {a!r}\ngot  {b!r}"
    if a.tobytes() != b.tobytes():
        # (bytes of a copy: a 0-d array cannot be viewed as bytes of another itemsize)
        bad = np.flatnonzero(
            np.frombuffer(a.tobytes(), np.uint8) != np.frombuffer(b.tobytes(), np.uint8)
        )
        return (
            f"values differ (first differing byte {bad[0] if len(bad) else '?'}):\nwant "
            f"{a!r}\ngot  {b!r}"
        )
    return None


def check_vm(case: Case, compiled: Compiled) -> None:
    prog = case.prog
    for variant, (module, types) in compiled.vm.items():
        try:
            exe = load_bytes(compile_module(module, prog.weights, types), "fuzz.rxb")
        except RxError as e:
            raise Mismatch(prog, f"VM {variant}", f"bytecode does not build or load: {e}") from e
        if exe.module != module:
            raise Mismatch(prog, f"VM {variant}", "the bytecode does not hold the program exactly")
        vm = VirtualMachine(exe, poison=True)
        for k, (args, dims, want, err) in enumerate(
            zip(case.inputs, case.dims, case.want, case.errors)
        ):
            where = f"VM {variant}, input set {k} (dims {dims})"
            try:
                got = vm.run("main", args, dims or None)
            except RxError as e:
                # The source program must fail with the interpreter's very message; a compiled
                # one may fail earlier (at an allocation the source does not have).
                if err is not None and (e.message == err or variant != "none"):
                    continue
                raise Mismatch(
                    prog,
                    where,
                    f"error {e.message!r}" + (f", the interpreter: {err!r}" if err else ""),
                ) from e
            except Exception as e:  # noqa: BLE001
                raise Mismatch(prog, where, f"crashed: {type(e).__name__}: {e}") from e
            if err is not None:
                raise Mismatch(prog, where, f"ran, but the interpreter refused: {err}")
            msg = same_bits(want, got)
            if msg:
                raise Mismatch(prog, where, msg)
            if vm.stats.current != 0:
                raise Mismatch(prog, where, f"{vm.stats.current} bytes still held after the run")
            if FULL_VM.search(variant):
                pred = predict_memory(module, "main", {**dims})
                if vm.stats.working_peak < pred.peak:
                    raise Mismatch(
                        prog,
                        where,
                        f"working peak {vm.stats.working_peak} is below the promise {pred.peak}",
                    )


def check_program(
    prog: GenProgram, planners: Sequence[str] = PLANNERS, seed: int = 0, thorough: bool = True
) -> tuple[Case, Compiled]:
    """Steps 1-4 of the module docstring; returns what the C batch needs. Without
    ``thorough`` the VM skips the IR between passes (ManifestAlloc's output, PlanMemory's
    before KillAfterLastUse), which the full pipelines' outputs contain."""
    case = reference(prog, seed)
    compiled = compile_all(prog, case.module, case.types, planners, thorough)
    check_vm(case, compiled)
    return case, compiled


# ---------------------------------------------------------------------------------------
# The C target, many programs per cc call.


@dataclass
class CModel:
    """One emitted variant of one program in a batch."""

    prefix: str
    case: Case
    variant: str
    sources: CSources
    group: int  # models of one program share a group (their outputs must agree bit for bit)


def emit_variants(
    case: Case, compiled: Compiled, prefix: str, group: int, variants: Iterable[str] | None = None
) -> list[CModel]:
    """The C models of ``compiled`` (identical planned programs emitted once)."""
    prog = case.prog
    models = []
    texts: set[tuple[str, ...]] = set()
    for variant, (module, types) in compiled.c.items():
        if variants is not None and variant not in variants:
            continue
        p = f"{prefix}_{len(models)}"
        try:
            sources = emit_c(module, prog.weights, prefix=p, source=f"{p}.rx", types=types)
        except RxError as e:
            if any(re.search(r, e.message) for r in C_REFUSALS):
                continue
            raise Mismatch(prog, f"C {variant}", f"emit_c refused the program: {e}") from e
        # The vm pipeline's kills free nothing in C: its build is often the unpacked one's,
        # character for character. Compile each distinct text once. (Only names made from the
        # prefix, ``PREFIX_...`` and ``PREFIX.h``, are the prefix: a plain replace also hit
        # locals such as the blocked kernels' accumulators ``s0_1`` under the prefix "s0_1",
        # and equal builds of the samples were compiled twice.)
        own = re.compile(rf"(?<![A-Za-z0-9_])(?:{re.escape(p)}|{re.escape(p.upper())})(?=[_.])")
        text = tuple(own.sub("\0", t) for _, t in sorted(sources.files.items()))
        if text in texts:
            continue
        texts.add(text)
        models.append(CModel(p, case, variant, sources, group))
    return models


def c_size(t: TensorType, dims: Mapping[str, int]) -> int:
    return int(np.prod(concrete_shape(t.shape, dims))) * DTYPES[t.dtype].nbytes


def _leaves(v: Any) -> list[np.ndarray]:
    if isinstance(v, tuple):
        return [x for f in v for x in _leaves(f)]
    return [v]


@dataclass
class BatchResult:
    mismatches: list[Mismatch]
    crashed: list[CModel]
    compile_seconds: float = 0.0
    run_seconds: float = 0.0


class CBatch:
    """Many C models compiled into one executable and run in one process.

    Each model is its own translation unit (``PREFIX.c``; only ``PREFIX_run`` and
    ``PREFIX_strerror`` are external, so distinct prefixes never collide); a generated
    ``driver.c`` calls every model on every input set. Inputs and outputs get a malloc
    block each of exactly their size (so AddressSanitizer sees any overrun), outputs are
    filled with 0xFF before the call (an output never written shows as NaN / -1), and
    inputs are compared with their original after the call (a model must not write them).
    """

    def __init__(
        self,
        folder: Path,
        sanitize: bool = False,
        jobs: int | None = None,
        flags: Sequence[str] | None = None,
    ):
        self.folder = folder
        self.sanitize = sanitize
        self.flags = list(flags) if flags is not None else (SANITIZE if sanitize else FAST)
        self.jobs = jobs or max(1, min(4, os.cpu_count() or 1))
        self.models: list[CModel] = []

    def add(self, models: Sequence[CModel]) -> None:
        self.models.extend(models)

    # -- files -------------------------------------------------------------------------
    def _driver(self) -> str:
        lines = [
            "/* fuzz driver: runs every model of the batch on every input set. */",
            "#include <stdint.h>",
            "#include <stdio.h>",
            "#include <stdlib.h>",
            "#include <string.h>",
            "",
        ]
        for m in self.models:
            lines.append(f'#include "{m.prefix}.h"')
        lines.append("")
        lines.append("typedef int32_t (*call_fn)(void **bufs, int run);")
        for m in self.models:
            info = m.sources.info
            nin = len(info.inputs)
            args = [f"(const {_ctype(p.type.dtype)} *)b[{k}]" for k, p in enumerate(info.inputs)]
            args += [f"({_ctype(p.type.dtype)} *)b[{nin + k}]" for k, p in enumerate(info.outputs)]
            dims_by_run = [
                [int(m.case.dims[r].get(ir, 0)) for ir, _, _ in info.dims]
                for r in range(len(m.case.dims))
            ]
            for j in range(len(info.dims)):
                table = ", ".join(str(d[j]) for d in dims_by_run)
                lines.append(f"static const size_t {m.prefix}_dim{j}[] = {{{table}}};")
                args.append(f"{m.prefix}_dim{j}[run]")
            lines.append(f"static int32_t call_{m.prefix}(void **b, int run)")
            lines.append("{")
            if not info.dims:
                lines.append("    (void)run;")
            lines.append(f"    return {m.prefix}_run({', '.join(args)});")
            lines.append("}")
        lines.append("struct model { call_fn fn; int nin, nout; };")
        lines.append("static const struct model models[] = {")
        for m in self.models:
            lines.append(
                f"    {{call_{m.prefix}, {len(m.sources.info.inputs)}, "
                f"{len(m.sources.info.outputs)}}},"
            )
        lines.append("    {NULL, 0, 0}")
        lines.append("};")
        lines.append(
            DRIVER_MAIN.replace("NMODELS", str(len(self.models))).replace("SKIP", f"{SKIP}u")
        )
        return "\n".join(lines) + "\n"

    def _write_inputs(self, path: Path, runs: int) -> list[list[tuple[int, int]]]:
        """inputs.bin: per model and run, a u64 count of sizes, the sizes (inputs then
        outputs) and the input bytes. Returns the output sizes per (model, run)."""
        out_sizes = []
        with open(path, "wb") as f:
            for m in self.models:
                info = m.sources.info
                for r in range(runs):
                    if m.case.errors[r] is not None:
                        # The interpreter refused this input set (a kernel cannot take these dim
                        # values); the C target has no error for it, so it is not run.
                        f.write(np.array([SKIP], "<u8").tobytes())
                        out_sizes.append([])
                        continue
                    dims = m.case.dims[r]
                    args = [np.ascontiguousarray(a) for a in _leaves(tuple(m.case.inputs[r]))]
                    ins = [c_size(p.type, dims) for p in info.inputs]
                    outs = [c_size(p.type, dims) for p in info.outputs]
                    f.write(np.array([len(ins) + len(outs), *ins, *outs], "<u8").tobytes())
                    for a, n in zip(args, ins):
                        data = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
                        assert len(data) == n, (m.prefix, len(data), n)
                        f.write(data)
                    out_sizes.append(outs)
        return out_sizes

    # -- build and run -----------------------------------------------------------------
    def run(self, runs: int = 2) -> BatchResult:
        import time

        assert CC is not None
        folder = self.folder
        folder.mkdir(parents=True, exist_ok=True)
        for m in self.models:
            for name, text in m.sources.files.items():
                (folder / name).write_text(text)
        result = BatchResult([], [])
        t0 = time.perf_counter()
        exe = folder / ("fuzz_san" if self.sanitize else "fuzz_run")
        while True:
            (folder / "driver.c").write_text(self._driver())
            try:
                self._compile(self.flags, exe.name)
                break
            except AssertionError as e:
                # Models cc rejects are mismatches of their own; the others still run.
                stderr = str(e)
                bad = [m for m in self.models if f"{m.prefix}.c:" in stderr]
                if not bad:
                    raise
                for m in bad:
                    mine = "\n".join(ln for ln in stderr.splitlines() if f"{m.prefix}" in ln)
                    result.mismatches.append(
                        Mismatch(
                            m.case.prog,
                            f"C {m.variant} ({m.prefix}{self._tag()})",
                            f"cc rejected the generated C:\n{mine[-3000:]}",
                        )
                    )
                self.models = [m for m in self.models if m not in bad]
                if not self.models:
                    return result
        out_sizes = self._write_inputs(folder / "inputs.bin", runs)
        result.compile_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        start = 0
        env = dict(os.environ, **SAN_ENV) if self.sanitize else None
        while start < len(self.models):
            p = subprocess.run(
                [str(exe), "inputs.bin", "outputs.bin", str(runs), str(start)],
                cwd=folder,
                capture_output=True,
                text=True,
                env=env,
                timeout=600,
            )
            done = [int(x) for x in p.stdout.split()]  # the models that finished, in order
            assert done == list(range(start, start + len(done))), done
            self._compare(folder / "outputs.bin", start, start + len(done), runs, out_sizes, result)
            if p.returncode == 0 and p.stderr == "":
                break
            crashed = start + len(done)
            if crashed >= len(self.models):
                raise AssertionError(
                    f"the fuzz driver failed after all models ({p.returncode}):\n{p.stderr}"
                )
            m = self.models[crashed]
            result.crashed.append(m)
            result.mismatches.append(
                Mismatch(
                    m.case.prog,
                    f"C {m.variant} ({m.prefix}{', sanitized' if self.sanitize else ''})",
                    f"the program crashed or the sanitizer reported (exit {p.returncode}):\n"
                    f"{p.stderr[-4000:]}",
                )
            )
            start = crashed + 1
        self._agree(runs, result)
        result.run_seconds = time.perf_counter() - t0
        return result

    def _compile(self, flags: list[str], exe: str) -> None:
        """One translation unit per core holding its share of the models (their common
        packed-call preamble once), compiled in parallel, then linked with the driver. If a
        unit does not compile, its models are compiled one by one for the diagnostics."""
        folder = self.folder
        chunks = [self.models[i :: self.jobs] for i in range(self.jobs)]
        chunks = [c for c in chunks if c]
        units = []
        for j, chunk in enumerate(chunks):
            parts, preamble = [], None
            for m in chunk:
                text = m.sources.files[f"{m.prefix}.c"]
                a, b = text.find(PREAMBLE_START), text.find(PREAMBLE_END)
                if a >= 0 and b > a:
                    block = text[a : b + len(PREAMBLE_END)]
                    if preamble is None:
                        preamble = block
                    elif block == preamble:
                        text = text[:a] + text[b + len(PREAMBLE_END) :]
                parts.append(f'#line 1 "{m.prefix}.c"\n{text}')
            (folder / f"unit{j}.c").write_text("\n".join(parts))
            units.append((f"unit{j}.c", [f"{m.prefix}.c" for m in chunk]))
        units.append(("driver.c", ["driver.c"]))

        def compile_unit(unit: tuple[str, list[str]]) -> tuple[list[str], str]:
            name, files = unit
            r = subprocess.run([CC, *flags, "-c", name], cwd=folder, capture_output=True, text=True)
            if r.returncode == 0 and not r.stderr:
                return [name[:-2] + ".o"], ""
            r = subprocess.run(
                [CC, *flags, "-c", *files], cwd=folder, capture_output=True, text=True
            )
            return [f[:-2] + ".o" for f in files], r.stderr if (r.returncode or r.stderr) else ""

        with ThreadPoolExecutor(len(units)) as pool:
            done = list(pool.map(compile_unit, units))
        problems = [p for _, p in done if p]
        if problems:
            raise AssertionError(self._compile_failure("\n".join(problems)))
        objs = [o for os_, _ in done for o in os_]
        r = subprocess.run(
            [CC, *flags, *objs, "-lm", "-o", exe], cwd=folder, capture_output=True, text=True
        )
        if r.returncode != 0 or r.stderr:
            raise AssertionError(f"linking the fuzz batch failed:\n{r.stderr}")

    def _tag(self) -> str:
        return ", sanitized" if self.sanitize else ""

    def _compile_failure(self, stderr: str) -> str:
        prefixes = sorted({m.prefix for m in self.models if f"{m.prefix}.c:" in stderr})
        texts = [m.case.prog.text for m in self.models if m.prefix in prefixes][:2]
        return (
            f"cc rejected generated C ({', '.join(prefixes)}):\n{stderr[-200000:]}\n"
            + "\n".join(texts)
        )

    def _compare(
        self,
        path: Path,
        lo: int,
        hi: int,
        runs: int,
        out_sizes: list[list[int]],
        result: BatchResult,
    ) -> None:
        if hi <= lo:
            return
        data = path.read_bytes()
        pos = 0
        for i in range(lo, hi):
            m = self.models[i]
            m.outputs = []  # type: ignore[attr-defined]
            for r in range(runs):
                rc, modified = np.frombuffer(data, "<i4", 2, pos)
                pos += 8
                outs = []
                for port, n in zip(m.sources.info.outputs, out_sizes[i * runs + r]):
                    dt = numpy_dtype(port.type.dtype).newbyteorder("<")
                    shape = concrete_shape(port.type.shape, m.case.dims[r])
                    outs.append(
                        np.frombuffer(data, dt, n // dt.itemsize, pos)
                        .reshape(shape)
                        .astype(dt.newbyteorder("="))
                    )
                    pos += n
                m.outputs.append(outs)  # type: ignore[attr-defined]
                where = (
                    f"C {m.variant} ({m.prefix}{', sanitized' if self.sanitize else ''}), input "
                    f"set {r} (dims {m.case.dims[r]})"
                )
                err = m.case.errors[r]
                if err is not None:
                    continue  # skipped (see _write_inputs)
                if rc != 0:
                    if err is None:
                        result.mismatches.append(
                            Mismatch(m.case.prog, where, f"{m.prefix}_run returned {rc}")
                        )
                    continue
                if modified:
                    result.mismatches.append(
                        Mismatch(m.case.prog, where, "the model wrote into its input buffers")
                    )
                msg = close(outs, m.case.want[r], m.case.loosest_float)
                if msg:
                    result.mismatches.append(Mismatch(m.case.prog, where, msg))

    def _agree(self, runs: int, result: BatchResult) -> None:
        crashed = {id(m) for m in result.crashed}
        first: dict[int, CModel] = {}
        for m in self.models:
            if id(m) in crashed or not hasattr(m, "outputs"):
                continue
            ref = first.setdefault(m.group, m)
            if ref is m:
                continue
            for r in range(runs):
                if m.case.errors[r] is not None:
                    continue
                for k, (a, b) in enumerate(zip(ref.outputs[r], m.outputs[r])):  # type: ignore[attr-defined]
                    if _nan_canonical(a).tobytes() != _nan_canonical(b).tobytes():
                        result.mismatches.append(
                            Mismatch(
                                m.case.prog,
                                f"C {m.variant} vs {ref.variant}, input set {r}, output {k}",
                                f"variants of one program differ:\n{ref.variant}: "
                                f"{a!r}\n{m.variant}: {b!r}",
                            )
                        )


def _nan_canonical(a: np.ndarray) -> np.ndarray:
    """``a`` with every NaN the same NaN. C leaves the sign and payload of a NaN that an
    operation on two NaNs gives unspecified, and cc may swap the operands of ``+``: builds of
    one program may differ there (seed 701154 of the third issue-15 campaign: ``add(%v,
    negative(%v))`` over NaNs). Everything else must agree bit for bit."""
    if a.dtype.kind != "f" or not np.isnan(a).any():
        return a
    return np.where(np.isnan(a), np.array(np.nan, a.dtype), a)


def close(got: Sequence[np.ndarray], want: Any, loosest: str | None = None) -> str | None:
    """None when ``got`` matches ``want`` within tests/backend/c's tolerance (of each output's
    dtype, or of ``loosest`` if that is looser)."""
    wants = _leaves(want)
    if len(got) != len(wants):
        return f"{len(got)} outputs instead of {len(wants)}"
    for i, (g, w) in enumerate(zip(got, wants)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"output {i}: {g.dtype}{g.shape} instead of {w.dtype}{w.shape}"
        if w.dtype.kind == "f":
            rtol, atol = TOLERANCE[
                {"float16": "f16", "float32": "f32", "float64": "f64"}[w.dtype.name]
            ]
            if loosest is not None:
                rtol, atol = max(rtol, TOLERANCE[loosest][0]), max(atol, TOLERANCE[loosest][1])
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
            ok = np.isclose(g64, w64, rtol=rtol, atol=atol, equal_nan=True)
            if not ok.all():
                k = int(np.flatnonzero(~ok.reshape(-1))[0])
                return (
                    f"output {i} differs beyond tolerance at flat index {k}: got "
                    f"{g.reshape(-1)[k]!r}, want {w.reshape(-1)[k]!r}\ngot  {g!r}\nwant {w!r}"
                )
        elif g.tobytes() != w.tobytes():
            return f"output {i} differs:\ngot  {g!r}\nwant {w!r}"
    return None


def _ctype(dtype: str) -> str:
    return T.c_type(dtype)


SKIP = 0xFFFFFFFF
"""The count of an input record the driver skips (an input set the interpreter refused)."""

PREAMBLE_START = "typedef struct {\n    int32_t device_type;"
PREAMBLE_END = "enum { kDLCPU = 1 };\n"
"""The packed-call convention every packed model defines (typedefs cannot repeat in C99)."""

DRIVER_MAIN = r"""
static unsigned char *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    unsigned char *data;
    long end;
    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (end = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
    data = (unsigned char *)malloc((size_t)end + 1);
    if (data == NULL || fread(data, 1, (size_t)end, f) != (size_t)end) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
    fclose(f);
    *size = (size_t)end;
    return data;
}

int main(int argc, char **argv)
{
    size_t size, pos = 0;
    unsigned char *data;
    FILE *out;
    int runs, start, i, r, k;
    if (argc != 5) {
        fprintf(stderr, "usage: %s INPUTS OUTPUTS RUNS START\n", argv[0]);
        return 2;
    }
    data = read_all(argv[1], &size);
    runs = atoi(argv[3]);
    start = atoi(argv[4]);
    out = fopen(argv[2], "wb");  /* outputs of models START... (the caller read the others) */
    if (out == NULL) {
        fprintf(stderr, "cannot write %s\n", argv[2]);
        return 2;
    }
    for (i = 0; i < NMODELS; ++i) {
        int32_t status[2];
        for (r = 0; r < runs; ++r) {
            uint64_t count, sizes[64];
            void *bufs[64];
            memcpy(&count, data + pos, 8);
            pos += 8;
            if (count == SKIP) {
                if (i >= start) {
                    status[0] = -999;
                    status[1] = 0;
                    fwrite(status, 4, 2, out);
                }
                continue;
            }
            memcpy(sizes, data + pos, 8 * (size_t)count);
            pos += 8 * (size_t)count;
            if (i < start) {
                for (k = 0; k < models[i].nin; ++k) pos += (size_t)sizes[k];
                continue;
            }
            for (k = 0; k < (int)count; ++k) {
                bufs[k] = malloc(sizes[k] ? (size_t)sizes[k] : 1);
                if (bufs[k] == NULL) return 3;
                if (k < models[i].nin) memcpy(bufs[k], data + pos, (size_t)sizes[k]);
                else memset(bufs[k], 0xFF, (size_t)sizes[k]);
                if (k < models[i].nin) pos += (size_t)sizes[k];
            }
            status[0] = models[i].fn(bufs, r);
            status[1] = 0;
            {
                size_t p = pos;
                for (k = models[i].nin - 1; k >= 0; --k) {
                    p -= (size_t)sizes[k];
                    if (memcmp(bufs[k], data + p, (size_t)sizes[k]) != 0) status[1] = 1;
                }
            }
            fwrite(status, 4, 2, out);
            for (k = models[i].nin; k < (int)count; ++k) fwrite(bufs[k], 1, (size_t)sizes[k], out);
            for (k = 0; k < (int)count; ++k) free(bufs[k]);
        }
        if (i >= start) {
            fflush(out);
            printf("%d\n", i);
            fflush(stdout);
        }
    }
    fclose(out);
    free(data);
    return 0;
}
"""  # noqa: E501
