"""The independent kill walk of harness.py rejects what it must (so a passing port means
something) and accepts a kill followed by reuse of the storage."""

from __future__ import annotations

import pytest

from relaxc.frontend.parser import parse_module

from .harness import assert_no_kill_of_live_value, tvm_bytes

BAD = {
    "alias returned": (
        """fn @main(%x: Tensor[(4,), f32]) -> Tuple[Tensor[(4,), f32], Tensor[(4,), f32]] {
  %a = exp(%x)
  %t = (%a, %x)
  %u = %t
  vm.kill_object(%t)
  return %u
}""",
        "returned %u",
    ),
    "view used": (
        """fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %s = memory.alloc_storage(64)
  %a = memory.alloc_tensor(%s, 0, (4,), f32)
  invoke exp(%x) outs (%a)
  %v = reshape(%a, (2, 2))
  memory.kill_tensor(%a)
  %w = reshape(%v, (4,))
  return %w
}""",
        "%v used",
    ),
    "storage killed": (
        """fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %s = memory.alloc_storage(64)
  %a = memory.alloc_tensor(%s, 0, (4,), f32)
  memory.kill_storage(%s)
  invoke exp(%x) outs (%a)
  %o = relu(%a)
  return %o
}""",
        "%a used",
    ),
    "parameter": (
        """fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %o = relu(%x)
  memory.kill_tensor(%x)
  return %o
}""",
        "parameter %x",
    ),
    "callee returns its argument": (
        """fn @id(%p: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %q = reshape(%p, (4,))
  return %q
}

fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %a = exp(%x)
  %b = call @id(%a)
  memory.kill_tensor(%a)
  %o = relu(%b)
  return %o
}""",
        "%b used",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_walk_rejects(case):
    text, what = BAD[case]
    with pytest.raises(AssertionError, match=what):
        assert_no_kill_of_live_value(parse_module(text, "bad.rx"))


def test_walk_accepts_reuse_after_a_kill():
    assert_no_kill_of_live_value(
        parse_module(
            """fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %s = memory.alloc_storage(64)
  %a = memory.alloc_tensor(%s, 0, (4,), f32)
  invoke exp(%x) outs (%a)
  %b = memory.alloc_tensor(%s, 0, (4,), f32)
  memory.kill_tensor(%a)
  invoke exp(%x) outs (%b)
  %o = relu(%b)
  return %o
}""",
            "ok.rx",
        )
    )


def test_tvm_bytes_rounds_each_storage_to_the_alignment():
    assert tvm_bytes([[32, 32], [32, 40]]) == 128
    assert tvm_bytes([[8000], [8000]]) == 16000
    assert tvm_bytes([[65]]) == 128
