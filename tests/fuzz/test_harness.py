"""The fuzzer's own checks must be able to fail: a bad plan, a wrong VM or C result, an
out-of-bounds write under the sanitizers, a model writing its inputs. And the generator is
deterministic, and the minimizer shrinks."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from relaxc.frontend.parser import parse_module
from relaxc.ir.nodes import Call, Module
from relaxc.ir.walk import map_functions, with_body
from relaxc.passes.base import Pass
from relaxc.passes.registry import PASSES
from tests.backend.c.cbuild import needs_cc

from .gen import GenProgram, program_from_seed
from .harness import (
    REORDER,
    CBatch,
    Compiled,
    Mismatch,
    _nan_canonical,
    check_vm,
    compile_all,
    emit_variants,
    plan_problems,
    reference,
)
from .minimize import minimize

PROGRAM = """
fn @main(%x: Tensor[(n, 4), f32]) -> Tuple[Tensor[(n, 4), f32], Tensor[(4,), f32]] attrs {upper_bounds = {n = 3}} {
  %a = exp(%x)
  %b = tanh(%a)
  %c = add(%b, %x)
  %s = sum(%c, axes=0)
  return (%c, %s)
}
"""  # noqa: E501


def program(text: str = PROGRAM, dims: dict | None = None) -> GenProgram:
    return GenProgram(
        parse_module(text, "t.rx"), text, {}, dims if dims is not None else {"n": 2}, True, ()
    )


def test_generation_is_deterministic() -> None:
    for seed in (0, 7, 12345):
        a, b = program_from_seed(seed), program_from_seed(seed)
        assert a.text == b.text and a.dims == b.dims and a.c_ok == b.c_ok
        assert a.weights.keys() == b.weights.keys()
        assert all(np.array_equal(a.weights[k], b.weights[k]) for k in a.weights)


def test_plan_checker_on_the_ir_finds_live_tensors_sharing_bytes() -> None:
    fn = parse_module(
        """
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] attrs {planned = true} {
  %arena = memory.alloc_storage(64, align=64, arena=true)
  %a = memory.alloc_tensor(%arena, 0, (4,), f32)
  invoke exp(%x) outs (%a)
  %b = memory.alloc_tensor(%arena, 8, (4,), f32)
  invoke tanh(%x) outs (%b)
  %y = add(%a, %b)
  memory.kill_tensor(%a)
  memory.kill_tensor(%b)
  return %y
}
""",
        "t.rx",
    ).get("main")
    problems = plan_problems(fn, {})
    assert len(problems) == 1 and "%b [8, 24) and %a [0, 16) overlap" in problems[0]
    killed_early = (
        fn.body[:3] + (fn.body[6],) + fn.body[3:5] + (fn.body[7],)
    )  # %a dies before %b is made
    assert plan_problems(dataclasses.replace(fn, body=killed_early), {}) == []


def test_vm_check_catches_a_wrong_result() -> None:
    prog = program()
    case = reference(prog)
    compiled = compile_all(prog, case.module, case.types, thorough=False)
    check_vm(case, compiled)
    case.want[1] = (case.want[1][0] + 1, case.want[1][1])
    with pytest.raises(Mismatch, match="input set 1.*values differ"):
        check_vm(case, compiled)


@needs_cc
def test_c_batch_catches_wrong_results_input_writes_build_errors_and_sanitizer_reports(
    tmp_path: Path,
) -> None:
    prog = program()
    case = reference(prog)
    compiled = compile_all(prog, case.module, case.types, thorough=False)
    best = [f"c/{compiled.canonical['best']}"]
    good = emit_variants(case, compiled, "ok", 0, best)[0]
    wrong_case = dataclasses.replace(
        case, want=[(case.want[0][0], case.want[0][1] * 2), case.want[1]]
    )
    wrong = dataclasses.replace(emit_variants(case, compiled, "wr", 1, best)[0], case=wrong_case)
    # Hand-broken C: one model writes past its output, another into its input.
    over = emit_variants(case, compiled, "ov", 2, best)[0]
    over.sources.files["ov_0.c"] = over.sources.files["ov_0.c"].replace(
        "return OV_0_OK;", "((volatile float *)c)[4 * n] = 1.0f;\n    return OV_0_OK;"
    )
    writes = emit_variants(case, compiled, "in", 3, best)[0]
    writes.sources.files["in_0.c"] = writes.sources.files["in_0.c"].replace(
        "return IN_0_OK;", "((float *)(void *)x)[0] = 0.0f;\n    return IN_0_OK;"
    )
    broken = emit_variants(case, compiled, "bk", 4, best)[0]
    broken.sources.files["bk_0.c"] = broken.sources.files["bk_0.c"].replace(
        "return BK_0_OK;", "int broken = ;\n    return BK_0_OK;"
    )
    batch = CBatch(tmp_path, sanitize=True, jobs=1)
    batch.add([good, wrong, broken, over, writes])
    result = batch.run()
    whats = sorted(
        m.where.split(" (")[1].split(",")[0].rstrip(")") + ": " + m.symptom.split("\n")[0][:40]
        for m in result.mismatches
    )
    assert [m.prefix for m in result.crashed] == ["ov_0"]
    assert any(w.startswith("bk_0") and "cc rejected" in w for w in whats), whats
    assert any(w.startswith("ov_0") and "crashed or the sanitizer" in w for w in whats), whats
    assert any(w.startswith("wr_0") and "output 1 differs" in w for w in whats), whats
    assert any(w.startswith("in_0") and "wrote into its input" in w for w in whats), whats
    assert not any(w.startswith("ok_0") for w in whats), whats
    assert "heap-buffer-overflow" in next(
        m.symptom
        for m in result.mismatches
        if m.prog is over.case.prog and "sanitizer" in m.symptom
    )


def test_minimizer_keeps_the_failure_and_shrinks() -> None:
    prog = next(p for p in map(program_from_seed, range(100)) if len(p.ops) >= 6)
    op = prog.ops[len(prog.ops) // 2]
    small = minimize(prog, lambda p: f"= {op}(" in p.text)
    assert f"= {op}(" in small.text
    assert len(small.text) < len(prog.text) and small.text.count("\n") <= prog.text.count("\n")
    parse_module(small.text, "small.rx")


def test_plan_checker_on_the_ir_finds_a_view_used_after_its_tensors_kill() -> None:
    fn = parse_module(
        """
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(2,), f32] attrs {planned = true} {
  %arena = memory.alloc_storage(64, align=64, arena=true)
  %a = memory.alloc_tensor(%arena, 0, (4,), f32)
  invoke exp(%x) outs (%a)
  %v = memory.view(%a, 8, (2,), f32)
  %t = (%v,)
  memory.kill_tensor(%a)
  %w = %t.0
  %y = tanh(%w)
  return %y
}
""",
        "t.rx",
    ).get("main")
    problems = plan_problems(fn, {})
    assert problems == [
        "%a is used at statement 6 (through %t) after its kill at statement 5",
        "%a is used at statement 7 (through %w) after its kill at statement 5",
    ]
    late = fn.body[:5] + fn.body[6:8] + (fn.body[5],)  # the kill after the last use
    assert plan_problems(dataclasses.replace(fn, body=late), {}) == []


def test_sharing_passes_are_run_counted_and_checked_on_the_vm() -> None:
    text = """
fn @main(%x: Tensor[(1, 2, 3), f32], %y: Tensor[(1, 3, 3), f32]) -> Tensor[(1, 5, 3), f32] {
  %a = exp(%x)
  %b = relu(%a)
  %c = tanh(%y)
  %r = concat(%b, %c, axis=1)
  %s = split(%r, indices_or_sections=(1,), axis=1)
  %s1 = %s.1
  %t = sigmoid(%s1)
  %u = add(%r, %r)
  return %u
}
"""
    prog = program(text, {})
    case = reference(prog)
    compiled = compile_all(prog, case.module, case.types, thorough=False)
    assert {"ElideConcatSplit", "ComputeInPlace"} <= set(compiled.vm)
    assert compiled.changes["ElideConcatSplit/concat"] == 1
    assert compiled.changes["ElideConcatSplit/split"] == 1
    assert compiled.changes["ComputeInPlace"] >= 2  # %b over %a, %u over %r
    check_vm(case, compiled)
    case.want[0] = case.want[0] + 1
    only = Compiled(vm={"ElideConcatSplit": compiled.vm["ElideConcatSplit"]})
    with pytest.raises(Mismatch, match="VM ElideConcatSplit, input set 0"):
        check_vm(case, only)


REORDERABLE = """
fn @main(%x: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32] attrs {upper_bounds = {n = 3}} {
  %a = exp(%x)
  %b = tanh(%x)
  %c = add(%a, %b)
  return %c
}
"""


@dataclasses.dataclass(frozen=True)
class _Reordered(Pass):
    """A stand-in for ReorderForMemory: swaps the first two statements of @main (independent
    in :data:`REORDERABLE`)."""

    name: ClassVar[str] = "ReorderForMemory"
    wrong: ClassVar[bool] = False

    def run(self, module: Module, types: Any = None) -> Module:
        fn = module.get("main")
        body = (fn.body[1], fn.body[0], *fn.body[2:])
        if self.wrong:  # and computes tanh where the program has exp
            body = tuple(
                dataclasses.replace(s, value=dataclasses.replace(s.value, op="tanh"))
                if isinstance(s.value, Call) and s.value.op == "exp"
                else s
                for s in body
            )
        return map_functions(module, lambda f: with_body(f, body) if f is fn else f)


@dataclasses.dataclass(frozen=True)
class _WronglyReordered(_Reordered):
    wrong: ClassVar[bool] = True


@pytest.mark.parametrize("cls", [_Reordered, _WronglyReordered])
def test_a_reordering_is_counted_and_run_on_the_vm(
    monkeypatch: pytest.MonkeyPatch, cls: type[Pass]
) -> None:
    """The harness counts a program ReorderForMemory put in another order, runs the IR it
    made on the VM (a wrong order shows there) and, with ``thorough``, builds the vm
    pipeline in the written order too."""
    monkeypatch.setitem(PASSES, REORDER, cls)
    prog = program(REORDERABLE)
    case = reference(prog)
    compiled = compile_all(prog, case.module, case.types, thorough=True)
    assert compiled.changes[REORDER] == 1
    assert {REORDER, "written-order/vm"} <= set(compiled.vm)
    if cls is _Reordered:
        check_vm(case, compiled)
    else:
        with pytest.raises(Mismatch, match=f"VM {REORDER}"):
            check_vm(case, compiled)


def test_the_written_order_is_not_counted_as_a_reordering() -> None:
    prog = program(REORDERABLE)
    case = reference(prog)
    compiled = compile_all(prog, case.module, case.types, thorough=True)
    assert compiled.changes[REORDER] == 0
    assert REORDER not in compiled.vm and "written-order/vm" not in compiled.vm


def test_c_builds_may_differ_only_in_the_bits_of_a_nan() -> None:
    a = np.array([1.0, np.nan, -0.0], np.float32)
    b = np.array([1.0, -np.nan, -0.0], np.float32)
    assert a.tobytes() != b.tobytes()
    assert _nan_canonical(a).tobytes() == _nan_canonical(b).tobytes()
    assert _nan_canonical(a).tobytes() != _nan_canonical(np.abs(b)).tobytes()  # -0.0 vs 0.0


FAN = """
fn @main(%x: Tensor[(4, 8, 8), f32]) -> Tensor[(), f32] {
  %a = exp(%x)
  %b = tanh(%x)
  %c = concat(%x, %x, axis=0)
  %ra = sum(%a)
  %rb = mean(%b)
  %rc = max(%c)
  %s = add(%ra, %rb)
  %t = add(%s, %rc)
  return %t
}
"""


def test_a_fan_written_breadth_first_is_reordered_and_checked() -> None:
    """The generator's fans (gen.py ``_fan``) in their usual, breadth-first order: the real
    ReorderForMemory reduces each large value before the next is made, the harness counts
    it, and the reordered IR and the pipeline in the written order agree on the VM."""
    prog = program(FAN, {})
    case = reference(prog)
    compiled = compile_all(prog, case.module, case.types, thorough=True)
    assert compiled.changes[REORDER] == 1
    assert {REORDER, "written-order/vm"} <= set(compiled.vm)
    check_vm(case, compiled)
