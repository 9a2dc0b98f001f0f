"""Helpers for the ports of Apache TVM's memory tests (see README.md).

Each case is an ``.rx`` program in ``programs/`` whose first lines say where it comes from:

    # tvm: tests/python/relax/test_transform_static_plan_block_memory.py::test_basic
    # c: yes            (also build it for C and run it under ASan/UBSan; the default is no;
                        `unpacked`: the same with --unpacked)
    # dims: n=3 m=2     (dim values for the runs; the default is the upper bounds)

The checks use only public entry points: the parser, the named pipelines through
``assemble_pipeline``/``Pipeline`` with the verifier after every pass, the memory report,
the plan checker, and the CLI in-process (``relaxc build``/``run --check --poison``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from click.testing import CliRunner

from relaxc.cli.main import cli
from relaxc.frontend.parser import parse_module
from relaxc.ir.nodes import (
    Bind,
    Call,
    CallFunc,
    Effect,
    Function,
    Invoke,
    Module,
    Project,
    TupleExpr,
    Var,
)
from relaxc.cli.target_facts import pipeline_context
from relaxc.passes.assemble import assemble_pipeline
from relaxc.cli.report.analysis import memory_report
from relaxc.passes.pipeline import Pipeline, VerifyInstrument
from relaxc.passes.planning.checker import check_plan
from relaxc.passes.planning.model import Buffer

PROGRAMS = Path(__file__).resolve().parent / "programs"
ALIGN = 64
"""ManifestAlloc's default alignment: TVM's storages are compared at the sizes relaxc gives them."""

NBYTES = {
    "bool": 1,
    "i8": 1,
    "u8": 1,
    "i16": 2,
    "u16": 2,
    "f16": 2,
    "bf16": 2,
    "i32": 4,
    "u32": 4,
    "f32": 4,
    "i64": 8,
    "f64": 8,
}
"""Bytes per element of each dtype (docs/ir.md)."""

VIEW_OPS = {"reshape", "flatten", "squeeze", "expand_dims"}
KILLS = {"memory.kill_tensor", "memory.kill_storage", "vm.kill_object"}


# --------------------------------------------------------------------------- programs


@dataclass(frozen=True)
class Program:
    name: str
    path: Path
    text: str
    tvm: str
    c: bool
    dims: dict[str, int]
    c_unpacked: bool = False


@lru_cache(maxsize=None)
def program(name: str) -> Program:
    path = PROGRAMS / f"{name}.rx"
    text = path.read_text()
    head = {}
    for line in text.splitlines():
        m = re.match(r"#\s*(tvm|c|dims):\s*(.*)$", line)
        if m:
            head[m.group(1)] = m.group(2).strip()
    dims = dict((k, int(v)) for k, v in (kv.split("=") for kv in head.get("dims", "").split()))
    c = head.get("c", "no").split()[0]
    return Program(
        name, path, text, head.get("tvm", ""), c in ("yes", "unpacked"), dims, c == "unpacked"
    )


def all_programs() -> list[Program]:
    return [program(p.stem) for p in sorted(PROGRAMS.glob("*.rx"))]


# --------------------------------------------------------------------------- compiling


SHARING_PASSES = ("ReorderForMemory", "ElideConcatSplit", "ComputeInPlace")
"""Passes TVM's Relax pipeline has no counterpart of (it never reorders for memory, computes
in place or elides a concat): the ports compare with TVM's results, so the named pipelines
run without them here (tests/passes/test_reorder_for_memory.py, test_compute_in_place.py and
test_elide_concat_split.py cover them)."""


@lru_cache(maxsize=None)
def compiled(name: str, pipeline: str = "vm", passes: str | None = None) -> Module:
    """The program after ``pipeline`` (without :data:`SHARING_PASSES`) or the spec
    ``passes``, verified after every pass."""
    prog = program(name)
    before = parse_module(prog.text, str(prog.path))
    disable = [",".join(SHARING_PASSES)] if passes is None else []
    passes_ = assemble_pipeline(pipeline, passes, disable=disable, context=pipeline_context())
    return Pipeline(passes_, [VerifyInstrument()]).run(before)


def function(m: Module, fn: str = "main") -> Function:
    f = m.get(fn)
    assert f is not None, f"no function @{fn}"
    return f


@dataclass
class Storage:
    name: str
    size: object
    arena: bool
    external: bool


@dataclass
class Placement:
    tensor: str
    storage: str
    offset: int
    nbytes: int | None  # None when symbolic

    def overlaps(self, other: "Placement") -> bool:
        if self.storage != other.storage:
            return False
        if self.nbytes is None or other.nbytes is None:
            return True
        return (
            self.offset < other.offset + other.nbytes and other.offset < self.offset + self.nbytes
        )


def storages(m: Module, fn: str = "main") -> dict[str, Storage]:
    out = {}
    for s in function(m, fn).body:
        if (
            isinstance(s, Bind)
            and isinstance(s.value, Call)
            and s.value.op == "memory.alloc_storage"
        ):
            kw = dict(s.value.kwargs)
            out[s.name] = Storage(
                s.name, s.value.args[0], bool(kw.get("arena")), bool(kw.get("external"))
            )
    return out


def placements(m: Module, fn: str = "main") -> dict[str, Placement]:
    out = {}
    for s in function(m, fn).body:
        if (
            isinstance(s, Bind)
            and isinstance(s.value, Call)
            and s.value.op == "memory.alloc_tensor"
        ):
            st, off, shape, dt = s.value.args[:4]
            n = math.prod(shape) if all(isinstance(d, int) for d in shape) else None
            nbytes = None if n is None else n * NBYTES[dt.name]
            out[s.name] = Placement(s.name, st.name, off, nbytes)
    return out


def shares(m: Module, a: str, b: str, fn: str = "main") -> bool:
    """Do tensors ``a`` and ``b`` occupy overlapping bytes of one storage?"""
    p = placements(m, fn)
    return p[a].overlaps(p[b])


def arena_bytes(m: Module, fn: str = "main") -> int:
    return sum(s.size for s in storages(m, fn).values() if s.arena)


def report(m: Module, fn: str = "main"):
    return {r.name: r for r in memory_report(m)}[fn]


def tvm_bytes(groups: Sequence[Sequence[int]], align: int = ALIGN) -> int:
    """The bytes TVM's plan implies at relaxc's alignment: one block per TVM storage, as large
    as the largest tensor TVM put in it (``groups``: the byte sizes of the tensors of each
    storage)."""
    return sum(-(-max(g) // align) * align for g in groups)


def assert_plan_valid(m: Module) -> None:
    """The independent plan checker agrees with every arena of the final IR."""
    for rep in memory_report(m):
        buffers = [Buffer(b.first, b.last + 1, b.bytes, 1, b.name) for b in rep.buffers]
        problems = check_plan(buffers, [b.offset for b in rep.buffers], rep.arena_bytes)
        assert not problems, problems
        assert rep.arena_bytes >= rep.lower_bound


def assert_reuse_at_least_tvm(m: Module, groups: Sequence[Sequence[int]], fn: str = "main") -> int:
    """relaxc's arena is no larger than the blocks TVM's sharing implies; returns the arena."""
    got, want = arena_bytes(m, fn), tvm_bytes(groups)
    assert got <= want, f"@{fn}: relaxc's arena {got} B > the {want} B TVM's plan implies"
    return got


# --------------------------------------------------------------------------- kills


def _uses(stmt) -> list[str]:
    v = stmt.value
    names: list[str] = []

    def add(a) -> None:
        if isinstance(a, Var):
            names.append(a.name)
        elif isinstance(a, tuple):
            for x in a:
                add(x)

    if isinstance(v, Var):
        add(v)
    elif isinstance(v, Call):
        add(v.args)
        for _, x in v.kwargs:
            add(x)
    elif isinstance(v, CallFunc):
        add(v.args)
    elif isinstance(v, Invoke):
        add(v.args)
        add(v.outs)
    elif isinstance(v, TupleExpr):
        add(v.fields)
    elif isinstance(v, Project):
        add(v.tuple_var)
    return names


def buffers_of(fn: Function, module: Module | None = None) -> dict[str, frozenset[str]]:
    """name -> the allocations (and tuple objects) a value refers to; written here from the
    IR rules of docs/ir.md, independent of relaxc's alias analysis."""
    bufs: dict[str, frozenset[str]] = {p.name: frozenset({p.name}) for p in fn.params}
    fields: dict[str, tuple[str, ...]] = {}
    for s in fn.body:
        if not isinstance(s, Bind):
            continue
        v, n = s.value, s.name
        if isinstance(v, Var):
            bufs[n] = bufs[v.name]
            if v.name in fields:
                fields[n] = fields[v.name]
        elif isinstance(v, TupleExpr):
            fields[n] = tuple(f.name for f in v.fields)
            bufs[n] = frozenset({n}).union(*(bufs[f.name] for f in v.fields))
        elif isinstance(v, Project):
            src = fields.get(v.tuple_var.name)
            if src is not None:
                bufs[n] = bufs[src[v.index]]
                if src[v.index] in fields:
                    fields[n] = fields[src[v.index]]
            else:
                bufs[n] = bufs[v.tuple_var.name] - {v.tuple_var.name}
        elif isinstance(v, Call) and v.op == "memory.alloc_tensor":
            bufs[n] = frozenset({n}) | bufs[v.args[0].name]
        elif isinstance(v, Call) and (
            v.op in VIEW_OPS or (v.op == "call_packed" and v.args[0] == "vm.builtin.reshape")
        ):
            src = next(a for a in v.args if isinstance(a, Var))
            bufs[n] = frozenset({n}) | bufs[src.name]
        elif isinstance(v, CallFunc):  # the result aliases the arguments the callee returns
            callee = module.get(v.func) if module is not None else None
            if callee is None:
                kept = range(len(v.args))
            else:
                cb = buffers_of(callee, module)
                rets = [callee.ret] if isinstance(callee.ret, Var) else list(callee.ret.fields)
                reached = frozenset().union(*(cb[r.name] for r in rets))
                kept = [i for i, p in enumerate(callee.params) if p.name in reached]
            bufs[n] = frozenset({n}).union(*(bufs[v.args[i].name] for i in kept))
        elif isinstance(v, Call) and v.op in ("call_packed", "call_cpacked"):
            bufs[n] = frozenset({n}).union(*(bufs[a.name] for a in v.args if isinstance(a, Var)))
        else:
            bufs[n] = frozenset({n})
    return bufs


def kills(m: Module, fn: str = "main") -> list[tuple[str, str]]:
    """(kill op, name) in program order."""
    out = []
    for s in function(m, fn).body:
        if isinstance(s, Effect) and isinstance(s.value, Call) and s.value.op in KILLS:
            out.append((s.value.op, s.value.args[0].name))
    return out


def assert_no_kill_of_live_value(m: Module) -> None:
    """Walk the output IR: no value is used (directly or through anything sharing its buffer)
    after a kill of it, nothing returned, no parameter and no constant is killed."""
    for fn in m.functions:
        if fn.attr("primitive"):
            continue
        bufs = buffers_of(fn, m)
        ident: dict[str, str] = {}  # a tuple, or an alias of one -> the tuple's binding
        for s in fn.body:
            if isinstance(s, Bind) and isinstance(s.value, TupleExpr):
                ident[s.name] = s.name
            elif isinstance(s, Bind) and isinstance(s.value, Var) and s.value.name in ident:
                ident[s.name] = ident[s.value.name]
        consts = {
            s.name
            for s in fn.body
            if isinstance(s, Bind) and isinstance(s.value, Call) and s.value.op == "const"
        }
        storages_ = {
            s.name
            for s in fn.body
            if isinstance(s, Bind)
            and isinstance(s.value, Call)
            and s.value.op == "memory.alloc_storage"
        }
        ret = [fn.ret.name] if isinstance(fn.ret, Var) else [f.name for f in fn.ret.fields]
        dead: dict[str, str] = {}  # buffer -> killed name
        for i, s in enumerate(fn.body):
            if isinstance(s, Effect) and isinstance(s.value, Call) and s.value.op in KILLS:
                k = s.value.args[0].name
                assert k not in {p.name for p in fn.params}, f"@{fn.name}: parameter %{k} killed"
                assert k not in consts, f"@{fn.name}: constant %{k} killed"
                if s.value.op == "memory.kill_storage":
                    killed = {k}
                elif s.value.op == "vm.kill_object":  # the object itself (a tuple: not its fields)
                    killed = {ident.get(k, k)}
                else:
                    killed = set(bufs[k]) - storages_
                for b in killed:
                    dead.setdefault(b, k)
                continue
            for u in _uses(s):
                hit = bufs.get(u, frozenset()) & dead.keys()
                assert not hit, f"@{fn.name}: %{u} used after the kill of %{dead[min(hit)]}"
        for r in ret:
            hit = bufs[r] & dead.keys()
            assert not hit, (
                f"@{fn.name}: returned %{r} shares the buffer of killed %{dead[min(hit)]}"
            )


# --------------------------------------------------------------------------- the CLI


def invoke(*args: object):
    return CliRunner().invoke(
        cli, [str(a) for a in args], prog_name="relaxc", catch_exceptions=True
    )


def vm_check(
    name: str,
    tmp: Path,
    dims: Mapping[str, int] | None = None,
    passes: str | None = None,
    seeds: Iterable[int] = (0,),
) -> None:
    """``relaxc build X.rx -o X.rxb --allow-unbounded`` then
    ``relaxc run X.rxb --check --poison --source X.rx``: the VM (killed memory poisoned) is
    bit-identical to the interpreter on the lowered and on the original program."""
    prog = program(name)
    rxb = tmp / f"{name}.rxb"
    extra = ["-p", passes] if passes else []
    # Some of these programs keep dims unbounded on purpose (the VM allocates at run time):
    # relaxc build refuses that without --allow-unbounded (docs/build.md).
    r = invoke("build", prog.path, "-o", rxb, "-q", "--allow-unbounded", *extra)
    assert r.exit_code == 0, r.output
    dims = dict(prog.dims if dims is None else dims)
    dim_args = [a for k, v in dims.items() for a in ("--dim", f"{k}={v}")]
    for seed in seeds:
        r = invoke(
            "run", rxb, "--check", "--poison", "--source", prog.path, "--seed", seed, *dim_args
        )
        assert r.exit_code == 0, r.output
        assert r.output.count("bit-identical") == 2, r.output


def refusal(text: str, tmp: Path, *cmd: str) -> str:
    """Run ``relaxc check`` (or ``cmd``) on ``text``: exit 1, ``file:line:col: error:``, no
    traceback. Returns the error line."""
    path = tmp / "refused.rx"
    path.write_text(text)
    r = invoke(*(cmd or ("check",)), path)
    assert r.exit_code == 1, (r.exit_code, r.output)
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    m = re.search(rf"{re.escape(str(path))}:\d+:\d+: error: .*", r.output)
    assert m, r.output
    return m.group(0)
