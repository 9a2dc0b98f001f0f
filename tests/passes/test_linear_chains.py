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
