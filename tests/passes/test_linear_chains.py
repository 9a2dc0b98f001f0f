"""Issue 28, item 7 and defect 2: the passes are linear in the length of a chain.

ComputeInPlace took 0.24 / 1.29 / 4.86 s on chains of 1,000 / 2,000 / 4,000 statements:
each in-place op made its output a view of its input, and every question "which tensor's
bytes is this" walked the whole chain of views again. Work is counted here, not timed:
the lookups of a tensor's place, on chains of n and 4n in-place ops.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from relaxc.frontend.parser import parse_module
from relaxc.ir.verifier import verify_module
from relaxc.passes import storage_tenants
from relaxc.passes.compute_in_place import ComputeInPlace
from relaxc.passes.manifest_alloc import ManifestAlloc
from relaxc.passes.plan_workspace import PlanWorkspace

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "generate.py"


def chain_program(n: int) -> str:
    spec = importlib.util.spec_from_file_location("_generate", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.chain_program(n)


class CountingDict(dict):
    lookups = 0

    def get(self, key, default=None):
        CountingDict.lookups += 1
        return super().get(key, default)


def place_lookups(n: int, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """(lookups of a tensor's place by ComputeInPlace on a chain of n ops, views made)."""
    m = parse_module(chain_program(n), "chain.rx")
    lowered = PlanWorkspace()(ManifestAlloc()(m))
    types = verify_module(lowered)
    made = storage_tenants.Layout.of.__func__

    def counted(cls, fn, types):
        lay = made(cls, fn, types)
        lay.place = CountingDict(lay.place)
        return lay

    CountingDict.lookups = 0
    with monkeypatch.context() as patch:
        patch.setattr(storage_tenants.Layout, "of", classmethod(counted))
        after = ComputeInPlace().run(lowered, types)
    views = sum(1 for s in after.get("main").body if "memory.view" in str(s.value))
    return CountingDict.lookups, views


def test_compute_in_place_on_a_chain_is_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    small, views_small = place_lookups(500, monkeypatch)
    large, views_large = place_lookups(2000, monkeypatch)
    assert views_large > 3 * views_small > 0  # the chain does run in place, more and more
    # Linear: 4x the statements, about 4x the lookups (walking the chain: about 16x).
    assert large <= 5 * small


def primitive_chain(n: int) -> str:
    """A primitive function of n ops (every fourth an add of the two before), called by
    @main: PlanWorkspace places each intermediate in the output or the workspace."""
    lines = ["  %v0 = relu(%x)"]
    for i in range(1, n):
        op = f"add(%v{i - 1}, %v{i - 2})" if i % 4 == 0 else f"tanh(%v{i - 1})"
        lines.append(f"  %v{i} = {op}")
    sig = "(%x: Tensor[(16, 16), f32]) -> Tensor[(16, 16), f32]"
    return (
        f"fn @k{sig} attrs {{primitive = true}} {{\n"
        + "\n".join(lines)
        + f"\n  return %v{n - 1}\n}}\n"
        + f"fn @main{sig} {{\n  %y = call @k(%x)\n  return %y\n}}\n"
    )


def workspace_comparisons(n: int, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """(pairs of lifetimes PlanWorkspace compares on a primitive chain of n ops, the result)."""
    from relaxc.frontend.printer import print_module
    from relaxc.passes import plan_workspace

    m = ManifestAlloc()(parse_module(primitive_chain(n), "chain.rx"))
    calls = [0]
    disjoint = plan_workspace._Planner._disjoint

    def counted(self, a, b):
        calls[0] += 1
        return disjoint(self, a, b)

    with monkeypatch.context() as patch:
        patch.setattr(plan_workspace._Planner, "_disjoint", counted)
        after = PlanWorkspace().run(m, verify_module(m))
    return calls[0], print_module(after)


def test_plan_workspace_on_a_long_primitive_function_is_linear(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each value placed in the output's bytes was compared with every one placed there
    # before (4,000 ops: 6 million comparisons, 5.5 s at 8,000).
    small, text = workspace_comparisons(500, monkeypatch)
    large, _ = workspace_comparisons(2000, monkeypatch)
    assert "memory.view(%" in text  # values are placed in the output and the workspace
    assert 0 < large <= 5 * small
