"""Ports of tests/python/relay/test_pass_manifest_lifetimes.py (Apache TVM), all 3."""

from __future__ import annotations

import pytest

from .common import assert_clear_refusal, memory_safe
from .harness import compiled, kills, refusal
from .test_kill_after_last_use import invoke_of, kill_at

SIMPLE_IF = """# tvm: tests/python/relay/test_pass_manifest_lifetimes.py::test_simple_if
fn @main(%x: Tensor[(), i32]) -> Tensor[(), i32] {
  %y = cast(%x, dtype=bool)
  %z = if (%y) {
    %v0 = add(%x, %x)
    %v1 = multiply(%v0, %v0)
    return %v1
  } else {
    return %x
  }
  return %z
}
"""

SIMPLE_MATCH = """# tvm: tests/python/relay/test_pass_manifest_lifetimes.py::test_simple_match
type List = Cons(Tensor[(), i32], List) | Nil
fn @main(%x: Tensor[(), i32]) -> Tensor[(), i32] {
  %l = Nil
  %m = match %l {
    Cons(%head, %rest) => add(%x, %x)
    Nil => const(-1, i32)
  }
  return %m
}
"""


def _linear_kills(m) -> None:
    # TVM: kill y after z, z after w (and x, a parameter, which relaxc never kills).
    assert kill_at(m, "memory.kill_tensor", "y") > invoke_of(m, "z")
    assert kill_at(m, "memory.kill_tensor", "z") > invoke_of(m, "w")
    assert not {"x", "w"} & {n for _, n in kills(m)}


def test_simple_linear(tmp_path):
    m = memory_safe("lifetimes_simple_linear", tmp_path)
    _linear_kills(m)


def test_simple_linear_0d_kills():
    _linear_kills(compiled("lifetimes_simple_linear_0d"))


def test_simple_linear_0d_runs(tmp_path, c_check):
    memory_safe("lifetimes_simple_linear_0d", tmp_path)
    c_check("lifetimes_simple_linear_0d")


def test_simple_linear_0d_c(c_check):
    # C has no poisoning: the 0-d program runs under ASan/UBSan.
    c_check("lifetimes_simple_linear_0d")


@pytest.mark.parametrize("text", [SIMPLE_IF, SIMPLE_MATCH], ids=["simple_if", "simple_match"])
def test_control_flow_is_refused(text, tmp_path):
    # TVM: kills inside the branches. relaxc bodies are straight-line: if and match (and
    # algebraic data types) are refused with a location.
    refusal(text, tmp_path)


def test_simple_if(tmp_path):
    assert_clear_refusal(SIMPLE_IF, tmp_path, "if")


def test_simple_match(tmp_path):
    assert_clear_refusal(SIMPLE_MATCH, tmp_path, "match")
