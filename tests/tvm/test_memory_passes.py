"""Ports of tests/python/relay/test_memory_passes.py (Apache TVM), all 5: check_memory_plan runs
each program with and without memory planning and compares the results."""

from __future__ import annotations

import pytest

from relaxc.frontend.parser import parse_module

from .common import memory_safe
from .harness import compiled, refusal, storages, vm_check

UNPLANNED = "ManifestAlloc,PlanMemory{planner=none},KillAfterLastUse"


@pytest.mark.parametrize("name", ["mem_add", "mem_add_sub", "mem_no_fuse"])
def test_with_and_without_planning(name, tmp_path, c_check):
    # TVM test_add, test_add_sub, test_no_fuse: planned == unplanned results.
    memory_safe(name, tmp_path)
    vm_check(name, tmp_path, passes=UNPLANNED)

    def held(m):
        return sum(s.size for s in storages(m).values() if not s.external)

    assert held(compiled(name)) <= held(compiled(name, passes=UNPLANNED))
    c_check(name)


def test_no_fuse_intermediate_is_planned_and_freed(tmp_path):
    m = compiled("mem_no_fuse")
    from .harness import kills, placements

    assert placements(m)["z"].storage == "arena" and ("memory.kill_tensor", "z") in kills(m)


def test_tyck_alloc_storage(tmp_path):
    # TVM: alloc_storage type-checks (a Storage).
    text = """fn @main(%x: Tensor[(2,), i64]) -> Tensor[(2,), i64] {
  %s: Storage = memory.alloc_storage(64)
  return %x
}
"""
    parse_module(text, "s.rx")
    assert "Storage" in refusal(text.replace("%s: Storage", "%s: Object"), tmp_path)


def test_tyck_alloc_tensor(tmp_path):
    # TVM: alloc_tensor(storage, 0, [1, 2]) type-checks as a (1, 2) tensor.
    text = """fn @main(%x: Tensor[(1, 2), i64]) -> Tensor[(1, 2), i64] {
  %s = memory.alloc_storage(64)
  %t: Tensor[(1, 2), i64] = memory.alloc_tensor(%s, 0, (1, 2), i64)
  return %x
}
"""
    (tmp_path / "t.rx").write_text(text)
    from .harness import invoke

    assert invoke("check", tmp_path / "t.rx").exit_code == 0
    refusal(text.replace("%t: Tensor[(1, 2), i64]", "%t: Tensor[(2, 1), i64]"), tmp_path)
