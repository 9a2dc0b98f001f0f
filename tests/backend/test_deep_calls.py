"""Issue 28, item 8, defect 3: a chain of calls thousands deep runs (it checked and built,
but the interpreter and the VM recursed past Python's limit and ``run`` said "nests too
deeply ... dimension expression?", with no location)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from relaxc.backend.deep_calls import (
    FRAMES_PER_CALL,
    MAX_CALL_DEPTH,
    call_depth,
    check_call_depth,
    run_nested,
)
from relaxc.backend.interpreter import Interpreter
from relaxc.backend.vm import VirtualMachine, compile_module
from relaxc.backend.vm.loader import load_bytes
from relaxc.frontend.parser import parse_module
from relaxc.ir.diagnostics import RxError
from relaxc.passes.assemble import assemble_pipeline
from relaxc.passes.pipeline import Pipeline


def call_chain(n: int) -> str:
    """@main calls @f1 calls ... @fn; each adds 1 to what its callee returns (the last: x)."""
    sig = "(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32]"
    one = "%one = const(1.0, dtype=f32)"
    fns = [
        f"fn @f{i}{sig} {{\n  %y = call @f{i + 1}(%x)\n  {one}\n  %z = add(%y, %one)\n"
        "  return %z\n}\n"
        for i in range(1, n)
    ]
    fns.append(f"fn @f{n}{sig} {{\n  %z = negative(%x)\n  return %z\n}}\n")
    fns.append(f"fn @main{sig} {{\n  %r = call @f1(%x)\n  return %r\n}}\n")
    return "".join(fns)


X = np.arange(4, dtype=np.float32)


def test_a_2000_deep_chain_runs_in_the_interpreter_and_the_vm() -> None:
    n = 2000
    assert n * FRAMES_PER_CALL > sys.getrecursionlimit()  # deeper than the limit as it is
    m = parse_module(call_chain(n), "chain.rx")
    want = -X + (n - 1)
    np.testing.assert_array_equal(Interpreter(m).run("main", [X]), want)
    lowered = Pipeline(assemble_pipeline("vm", None, (), ())).run(m)
    np.testing.assert_array_equal(Interpreter(lowered).run("main", [X]), want)
    exe = load_bytes(compile_module(lowered), "chain.rxb")
    vm = VirtualMachine(exe)
    np.testing.assert_array_equal(vm.run("main", [X]), want)
    np.testing.assert_array_equal(vm.run("main", [X]), want)  # and again, on the same VM
    assert vm.stats.working == 0 and vm.stats.frees > 0  # every block came back
    limit = sys.getrecursionlimit()
    assert limit < n * FRAMES_PER_CALL  # restored after the runs


def test_call_depth_counts_the_longest_chain_without_recursion() -> None:
    n = 100_000  # far deeper than Python's recursion limit
    graph = {i: [i + 1] for i in range(n)}
    graph[n] = []
    assert call_depth([0], graph.__getitem__) == n
    diamond = {"a": ["b", "c"], "b": ["d"], "c": ["b"], "d": []}
    assert call_depth(["a"], diamond.__getitem__) == 3  # a -> c -> b -> d
    assert call_depth(["d"], diamond.__getitem__) == 0


def test_a_chain_deeper_than_the_limit_is_refused_with_its_depth_and_the_limit() -> None:
    check_call_depth(MAX_CALL_DEPTH, "main")
    with pytest.raises(RxError) as e:
        check_call_depth(MAX_CALL_DEPTH + 1, "main")
    assert f"{MAX_CALL_DEPTH + 1:,} deep" in e.value.message
    assert f"({MAX_CALL_DEPTH:,})" in e.value.message and "@main" in e.value.message
    with pytest.raises(RxError):
        run_nested(MAX_CALL_DEPTH + 1, "main", lambda: None)


def test_run_nested_returns_and_raises_what_the_work_does() -> None:
    def deep(k: int) -> int:
        return 0 if k == 0 else 1 + deep(k - 1)

    assert run_nested(5000 // FRAMES_PER_CALL + 1, "main", lambda: deep(5000)) == 5000
    with pytest.raises(ValueError, match="boom"):
        run_nested(3000, "main", lambda: (_ for _ in ()).throw(ValueError("boom")))


def test_a_deep_run_keeps_ieee_results_quiet() -> None:
    # numpy's error state is per thread: the worker thread of a deep run sets it too, so
    # log(0) is -inf without "RuntimeWarning: divide by zero", as in a shallow run.
    import warnings

    m = parse_module(call_chain(1500).replace("negative(%x)", "log(%x)"), "chain.rx")
    lowered = Pipeline(assemble_pipeline("vm", None, (), ())).run(m)
    vm = VirtualMachine(load_bytes(compile_module(lowered), "chain.rxb"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for out in (Interpreter(m).run("main", [X]), vm.run("main", [X])):
            assert out[0] == -np.inf and out[1] == 1499.0
