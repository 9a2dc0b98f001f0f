"""KillAfterLastUse: Before/Expected pairs for the TVM regression shapes, and differential
tests in which a use after a kill would read poisoned memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from relaxc.frontend.parser import parse_module
from relaxc.frontend.weights import default_weights_path, load_npz
from relaxc.ir.diagnostics import RxError
from relaxc.ir.verifier import verify_module
from relaxc.passes.kill_after_last_use import KillAfterLastUse
from relaxc.passes.manifest_alloc import ManifestAlloc
from relaxc.passes.pipeline import Pipeline, VerifyInstrument
from relaxc.passes.plan_memory import PlanMemory
from tests.strategies import programs

from .util import assert_pass, assert_same_results, run_both

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "samples").glob("*.rx"))


def test_basic_storage_outlives_its_tensor_and_params_outputs_are_not_killed() -> None:
    # TVM test_basic, with relaxc's rule that a storage lives while a tensor carved from it does.
    assert_pass(
        KillAfterLastUse(),
        """
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %storage = memory.alloc_storage(16)
  %y = memory.alloc_tensor(%storage, 0, (4,), f32)
  invoke exp(%x) outs (%y)
  %z_storage = memory.alloc_storage(16, external=true)
  %z = memory.alloc_tensor(%z_storage, 0, (4,), f32)
  invoke add(%x, %y) outs (%z)
  return %z
}""",
        """
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %storage = memory.alloc_storage(16)
  %y = memory.alloc_tensor(%storage, 0, (4,), f32)
  invoke exp(%x) outs (%y)
  %z_storage = memory.alloc_storage(16, external=true)
  %z = memory.alloc_tensor(%z_storage, 0, (4,), f32)
  invoke add(%x, %y) outs (%z)
  memory.kill_tensor(%y)
  memory.kill_storage(%storage)
  return %z
}""",
    )


def test_trivial_rebinding_keeps_the_value_alive() -> None:
    # The MLC-LLM breakage (class 1): %y = %x, later uses only of %y; nothing dies before them.
    assert_pass(
        KillAfterLastUse(),
        """
fn @main(%p: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %x = exp(%p)
  %y = %x
  %a = relu(%p)
  %z = add(%y, %a)
  return %z
}""",
        """
fn @main(%p: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %x = exp(%p)
  %y = %x
  %a = relu(%p)
  %z = add(%y, %a)
  memory.kill_tensor(%x)
  memory.kill_tensor(%y)
  memory.kill_tensor(%a)
  return %z
}""",
    )


def test_view_keeps_its_source_alive() -> None:
    assert_pass(
        KillAfterLastUse(),
        """
fn @main(%p: Tensor[(4,), f32]) -> Tensor[(2, 2), f32] {
  %x = exp(%p)
  %v = reshape(%x, (2, 2))
  %b = tanh(%p)
  %c = reshape(%b, (2, 2))
  %z = add(%v, %c)
  return %z
}""",
        """
fn @main(%p: Tensor[(4,), f32]) -> Tensor[(2, 2), f32] {
  %x = exp(%p)
  %v = reshape(%x, (2, 2))
  %b = tanh(%p)
  %c = reshape(%b, (2, 2))
  %z = add(%v, %c)
  memory.kill_tensor(%x)
  memory.kill_tensor(%v)
  memory.kill_tensor(%b)
  memory.kill_tensor(%c)
  return %z
}""",
    )


def test_tuple_keeps_its_fields_alive_until_its_last_projection() -> None:
    # As in TVM's test_nested_tuple: a field lives until the last use of the tuple or of any
    # projection of it, so %a dies after %w = %t.1 even though %u's last use came earlier;
    # the tuple's own register is released right after its last use.
    assert_pass(
        KillAfterLastUse(),
        """
fn @main(%p: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %a = exp(%p)
  %b = tanh(%p)
  %t = (%a, %b)
  %u = %t.0
  %c = relu(%u)
  %w = %t.1
  %d = add(%w, %c)
  return %d
}""",
        """
fn @main(%p: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %a = exp(%p)
  %b = tanh(%p)
  %t = (%a, %b)
  %u = %t.0
  %c = relu(%u)
  %w = %t.1
  memory.kill_tensor(%a)
  vm.kill_object(%t)
  memory.kill_tensor(%u)
  %d = add(%w, %c)
  memory.kill_tensor(%b)
  memory.kill_tensor(%c)
  memory.kill_tensor(%w)
  return %d
}""",
    )


def test_value_returned_through_a_tuple_is_never_killed() -> None:
    assert_pass(
        KillAfterLastUse(),
        """
fn @main(%p: Tensor[(4,), f32]) -> Tuple[Tensor[(4,), f32], Tensor[(4,), f32]] {
  %a = exp(%p)
  %v = reshape(%a, (4,))
  %b = tanh(%v)
  %c = sigmoid(%p)
  %t = (%b, %a)
  return %t
}""",
        """
fn @main(%p: Tensor[(4,), f32]) -> Tuple[Tensor[(4,), f32], Tensor[(4,), f32]] {
  %a = exp(%p)
  %v = reshape(%a, (4,))
  %b = tanh(%v)
  %c = sigmoid(%p)
  memory.kill_tensor(%c)
  %t = (%b, %a)
  return %t
}""",
    )


def test_existing_kills_constants_and_parameters() -> None:
    assert_pass(
        KillAfterLastUse(),
        """
fn @main(%p: Tensor[(4,), f32], %q: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %w = const([1.0, 2.0, 3.0, 4.0], f32)
  %a = add(%p, %w)
  memory.kill_tensor(%a)
  %r = reshape(%q, (2, 2))
  %b = exp(%q)
  return %b
}""".replace("  memory.kill_tensor(%a)\n", "  %a2 = relu(%a)\n  memory.kill_tensor(%a)\n"),
        """
fn @main(%p: Tensor[(4,), f32], %q: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %w = const([1.0, 2.0, 3.0, 4.0], f32)
  %a = add(%p, %w)
  %a2 = relu(%a)
  memory.kill_tensor(%a2)
  memory.kill_tensor(%a)
  %r = reshape(%q, (2, 2))
  %b = exp(%q)
  return %b
}""",
    )


def test_running_twice_changes_nothing() -> None:
    m = parse_module("""
fn @main(%p: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32] {
  %a = exp(%p)
  %b = relu(%a)
  %c = tanh(%b)
  return %c
}""")
    m = ManifestAlloc()(m)
    once = KillAfterLastUse()(m)
    assert KillAfterLastUse()(once) == once


def test_dynamic_storages_are_freed_at_their_last_use() -> None:
    before = parse_module("""
fn @main(%p: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32] {
  %a = exp(%p)
  %b = relu(%a)
  %c = tanh(%b)
  %d = sigmoid(%c)
  return %d
}""")
    after = Pipeline([ManifestAlloc(), KillAfterLastUse()], [VerifyInstrument()]).run(before)
    body = [s.value for s in after.get("main").body]
    kill_storage = [i for i, v in enumerate(body) if getattr(v, "op", "") == "memory.kill_storage"]
    assert len(kill_storage) == 3  # a, b and c storages; d is the output
    from relaxc.backend.interpreter import Interpreter
    import numpy as np

    args = [np.ones((50, 4), np.float32)]
    with_kills = Interpreter(after)
    with_kills.run("main", args)
    without = Interpreter(ManifestAlloc()(before))
    without.run("main", args)
    # Freed at the last use: only the input and the output of the running kernel are live
    # (two 800-byte buffers, each rounded up to 832), instead of all four.
    assert with_kills.stats.peak == 2 * 832
    assert without.stats.peak == 4 * 832


def test_checker_rejects_kill_of_memory_still_in_use() -> None:
    bad = parse_module("""
fn @main(%p: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %x = exp(%p)
  %y = %x
  memory.kill_tensor(%x)
  %z = relu(%y)
  return %z
}""")
    with pytest.raises(RxError, match=r"%y is used after its memory was freed by the kill of %x"):
        verify_module(bad)
    twice = parse_module("""
fn @main(%p: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %x = exp(%p)
  %z = relu(%x)
  memory.kill_tensor(%x)
  memory.kill_tensor(%x)
  return %z
}""")
    with pytest.raises(RxError, match=r"%x is killed twice"):
        verify_module(twice)
    param = parse_module("""
fn @main(%p: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %v = reshape(%p, (2, 2))
  %z = relu(%p)
  memory.kill_tensor(%v)
  return %z
}""")
    with pytest.raises(RxError, match=r"frees memory of a parameter"):
        verify_module(param)


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_samples_same_results(path: Path) -> None:
    before = parse_module(path.read_text(), str(path))
    after = Pipeline(
        [ManifestAlloc(), PlanMemory(time_limit=0.1), KillAfterLastUse()], [VerifyInstrument()]
    ).run(before)
    wpath = default_weights_path(path)
    assert_same_results(*run_both(before, after, weights=load_npz(wpath) if wpath else None))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_generated_programs_with_poisoned_kills_same_results(prog) -> None:
    before = parse_module(prog.text, "gen.rx")
    for passes in (
        [KillAfterLastUse()],
        [ManifestAlloc(), KillAfterLastUse()],
        [ManifestAlloc(), PlanMemory(time_limit=0.05, check=True), KillAfterLastUse()],
    ):
        after = Pipeline(passes, [VerifyInstrument()]).run(before)
        assert_same_results(*run_both(before, after, prog.dims))
