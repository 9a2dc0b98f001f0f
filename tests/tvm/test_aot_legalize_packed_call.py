"""Port of tests/python/micro/test_aot_legalize_packed_call.py::test_aot_packed_call
(Apache TVM)."""

from __future__ import annotations

import pytest

from relaxc.ir.nodes import Bind, Call, Effect, Var
from relaxc.passes.base import PassError
from relaxc.passes.plan_memory import PlanMemory

from .common import memory_safe
from .harness import compiled, function, placements


def structs(m):
    """struct name -> {field: value} of every tir.stack_alloca/struct_set in @main."""
    out: dict[str, dict] = {}
    for s in function(m).body:
        if isinstance(s, Bind) and isinstance(s.value, Call) and s.value.op == "tir.stack_alloca":
            out[s.name] = {}
        if isinstance(s, Effect) and isinstance(s.value, Call) and s.value.op == "tir.struct_set":
            h, _, fieldname, v = s.value.args
            out[h.name][fieldname] = v.name if isinstance(v, Var) else v
    return out


def test_aot_packed_call(tmp_path, c_check):
    # TVM: A, B, C each wrapped as an array of shape (1,), ndim 1, float32; the device
    # context raw. relaxc: every non-parameter buffer gets one complete struct; %x passes raw.
    name = "aot_packed_call"
    memory_safe(name, tmp_path)
    m = compiled(name, "c")
    st = structs(m)
    calls = [
        s.value
        for s in function(m).body
        if isinstance(s, Effect) and isinstance(s.value, Call) and s.value.op == "call_cpacked"
    ]
    assert [c.args[0] for c in calls] == ["exp", "tanh", "tvm_test_cpacked", "tvm_test_cpacked"]
    wrapped = set()
    for c in calls:
        for a in c.args[1:]:
            if a.name == "x":
                continue  # the parameter: a raw pointer
            f = st[a.name]
            assert (f["ndim"], f["shape"], f["device_type"], f["device_id"]) == (1, (1,), 1, 0)
            assert f["dtype"].name == "f32"
            wrapped.add(f["data"])
    assert wrapped == {"a", "b", "c", "d"}
    # Legalized after planning: the plan is the plan of the raw buffers.
    planned = compiled(name, passes="ManifestAlloc,PlanMemory")
    assert {k: (v.storage, v.offset) for k, v in placements(planned).items()} == {
        k: (v.storage, v.offset) for k, v in placements(m).items()
    }
    # And a planner handed wrapped buffers refuses rather than plan wrongly.
    with pytest.raises(PassError, match="before LegalizePackedCalls"):
        PlanMemory()(m)
    c_check(name)
