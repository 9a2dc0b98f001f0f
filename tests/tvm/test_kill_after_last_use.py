"""Ports of tests/python/relax/test_kill_after_last_use.py (Apache TVM), all 3.

TVM's Expected kills are compared with relaxc's by position: every value TVM kills is killed
by relaxc too, no earlier than TVM kills it, and nothing still used is killed (the kill
checker of the verifier and the walk of harness.py); the VM with poisoned kills is
bit-identical to the interpreter.
"""

from __future__ import annotations

from relaxc.ir.nodes import Effect, Invoke

from .common import memory_safe
from .harness import compiled, function, kills, vm_check


def position(m, pred) -> int:
    return next(i for i, s in enumerate(function(m).body) if pred(s))


def kill_at(m, op: str, name: str) -> int:
    return position(
        m,
        lambda s: (
            isinstance(s, Effect)
            and getattr(s.value, "op", None) == op
            and s.value.args[0].name == name
        ),
    )


def invoke_of(m, out: str) -> int:
    return position(
        m,
        lambda s: (
            isinstance(getattr(s, "value", None), Invoke)
            and any(o.name == out for o in s.value.outs)
        ),
    )


def test_basic(tmp_path):
    # TVM: kill_storage(storage) after the alloc_tensor, kill_tensor(y) after z = add(x, y);
    # never x or z. relaxc: y after z, then its storage (planned into the arena).
    name = "kalu_basic"
    m = memory_safe(name, tmp_path)
    assert kill_at(m, "memory.kill_tensor", "y") > invoke_of(m, "z")
    assert kill_at(m, "memory.kill_storage", "arena") > kill_at(m, "memory.kill_tensor", "y")
    assert not {"x", "z", "z_storage"} & {n for _, n in kills(m)}
    # KillAfterLastUse alone on the input as TVM runs it (already explicit memory):
    k = compiled(name, passes="KillAfterLastUse")
    assert kill_at(k, "memory.kill_tensor", "y") > invoke_of(k, "z")
    assert kill_at(k, "memory.kill_storage", "storage") > kill_at(k, "memory.kill_tensor", "y")
    vm_check(name, tmp_path, passes="KillAfterLastUse")


def test_track_usage_across_trivial_rebindings(tmp_path, c_check):
    # TVM: x killed after z = add(y, 1) (y = x folded away).
    name = "kalu_track_usage_across_trivial_rebindings"
    m = memory_safe(name, tmp_path)
    assert kill_at(m, "memory.kill_tensor", "x") > invoke_of(m, "z")
    assert kill_at(m, "memory.kill_tensor", "y") > invoke_of(m, "z")
    c_check(name)


def test_track_usage_across_trivial_rebindings_in_match_cast(tmp_path, c_check):
    # TVM: x killed right after the match_cast (its register), y after z. relaxc: both after z
    # (the same buffer): no earlier than TVM frees the memory.
    name = "kalu_track_usage_across_trivial_rebindings_in_match_cast"
    m = memory_safe(name, tmp_path)
    assert kill_at(m, "memory.kill_tensor", "x") > invoke_of(m, "z")
    assert kill_at(m, "memory.kill_tensor", "y") > invoke_of(m, "z")
    c_check(name)
