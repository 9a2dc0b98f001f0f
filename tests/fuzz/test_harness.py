"""The fuzzer's own checks must be able to fail: a bad plan, a wrong VM or C result, an
out-of-bounds write under the sanitizers, a model writing its inputs. And the generator is
deterministic, and the minimizer shrinks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from relaxc.frontend.parser import parse_module
from tests.backend.c.cbuild import needs_cc

from .gen import GenProgram, program_from_seed
from .harness import (
    CBatch,
    Mismatch,
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
