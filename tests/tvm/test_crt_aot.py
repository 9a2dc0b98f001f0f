"""Ports of the output and tuple cases of tests/python/relay/aot/test_crt_aot.py (Apache TVM):
test_concatenate, test_nested_tuples, test_tuple_getitem, test_id, test_add_const,
test_subtract, test_multiply, test_tuple_output. TVM's AOT executor gives each graph output
its own caller-provided buffer of exactly its size; the programs run on the VM and in C
(packed calls, ASan/UBSan) against the reference."""

from __future__ import annotations


import pytest


from .common import memory_safe
from .harness import ALIGN, assert_no_kill_of_live_value, compiled, kills, placements, storages


def assert_outputs_own_exact_buffers(m, outputs: list[str]) -> None:
    """Each output tensor: an external storage of its own, its size rounded to the alignment."""
    st, p = storages(m), placements(m)
    seen = set()
    for o in outputs:
        s = st[p[o].storage]
        assert s.external and not s.arena, o
        assert s.size == -(-p[o].nbytes // ALIGN) * ALIGN, (o, s.size)
        assert s.name not in seen
        seen.add(s.name)
    for o in outputs:
        assert ("memory.kill_tensor", o) not in kills(m)


def test_concatenate(tmp_path, c_check):
    m = memory_safe("crt_concatenate", tmp_path)
    assert placements(m)["c"].storage == "arena"
    assert_outputs_own_exact_buffers(m, ["out"])
    c_check("crt_concatenate")


def test_nested_tuples_outputs(tmp_path, c_check):
    m = memory_safe("crt_nested_tuples", tmp_path, kill_walk=False)
    assert_outputs_own_exact_buffers(m, ["o1", "o2", "o3", "o4"])
    c_check("crt_nested_tuples")


def test_nested_tuples():
    assert_no_kill_of_live_value(compiled("crt_nested_tuples"))


@pytest.mark.parametrize(
    "name", ["crt_tuple_getitem", "crt_id", "crt_add_const", "crt_subtract", "crt_multiply"]
)
def test_scalar_and_const_outputs(name, tmp_path, c_check):
    # test_tuple_getitem, test_id (a constant / the input copied out), test_add_const,
    # test_subtract, test_multiply (one computed output).
    m = memory_safe(name, tmp_path)
    computed = [n for n in placements(m)]
    assert_outputs_own_exact_buffers(m, computed)
    c_check(name)


def test_tuple_output(tmp_path, c_check):
    # The returned split fields are outputs of their own; the third field is dead (its
    # planning is test_tuple_and_scalar_lifetimes.py::test_item3_dead_split_output_is_planned).
    m = memory_safe("crt_tuple_output", tmp_path)
    assert_outputs_own_exact_buffers(m, ["y_0", "y_1"])
    c_check("crt_tuple_output")
