"""Ports of the memory cases of tests/python/relax/test_vm_build.py (Apache TVM):
test_lower_memory_alloc_storage_tensor, test_vm_tuple, test_vm_tuplegetitem."""

from __future__ import annotations


from .common import memory_safe
from .harness import assert_no_kill_of_live_value, compiled, kills, storages


def test_lower_memory_alloc_storage_tensor(tmp_path):
    # TVM: the explicit storage and the tensor carved from it are returned: never killed,
    # never planned.
    m = memory_safe("build_lower_memory_alloc_storage_tensor", tmp_path)
    assert not {"y", "storage"} & {n for _, n in kills(m)}
    assert not storages(m)["storage"].arena


def test_vm_tuple_runs(tmp_path):
    # TVM: ((x, y), x) of the parameters; nothing allocated.
    m = memory_safe("build_vm_tuple", tmp_path, kill_walk=False)
    assert not any(op.startswith("memory.") for op, _ in kills(m, "rx_func"))


def test_vm_tuple():
    m = compiled("build_vm_tuple")
    assert ("vm.kill_object", "tup") not in kills(m, "rx_func")
    assert_no_kill_of_live_value(m)


def test_vm_tuplegetitem(tmp_path, c_check):
    # TVM: c = add(t[0], t[1]) is the output; the tuple of parameters holds no memory.
    m = memory_safe("build_vm_tuplegetitem", tmp_path)
    assert storages(m)["c_storage"].external
    c_check("build_vm_tuplegetitem")
