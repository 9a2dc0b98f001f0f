"""ManifestAlloc: Before/Expected pairs and differential tests against the interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from relaxc.frontend.parser import parse_module
from relaxc.frontend.weights import default_weights_path, load_npz
from relaxc.ir.types import DTYPES
from relaxc.passes.manifest_alloc import ManifestAlloc
from tests.strategies import programs

from .util import assert_pass, assert_same_results, run_both, run_pass

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "samples").glob("*.rx"))


def test_kernel_results_get_storage_and_destination_passing() -> None:
    assert_pass(
        ManifestAlloc(),
        """
fn @main(%x: Tensor[(10,), f32]) -> Tensor[(10,), f32] {
  %a = exp(%x)
  %b = relu(%a)
  return %b
}""",
        """
fn @main(%x: Tensor[(10,), f32]) -> Tensor[(10,), f32] {
  %a_storage = memory.alloc_storage(64, align=64, scope="global")
  %a = memory.alloc_tensor(%a_storage, 0, (10,), f32)
  invoke exp(%x) outs (%a)
  %b_storage = memory.alloc_storage(64, align=64, scope="global", external=true)
  %b = memory.alloc_tensor(%b_storage, 0, (10,), f32)
  invoke relu(%a) outs (%b)
  return %b
}""",
    )


@pytest.mark.parametrize("dtype", sorted(d for d in DTYPES if DTYPES[d].numpy is not None))
def test_exact_byte_size_for_every_dtype(dtype: str) -> None:
    after = run_pass(
        ManifestAlloc(align=1),
        f"""
fn @main(%x: Tensor[(2, 3), {dtype}]) -> Tensor[(2, 3), {dtype}] {{
  %a = maximum(%x, %x)
  %b = minimum(%a, %x)
  return %b
}}""",
    )
    size = after.functions[0].body[0].value.args[0]
    assert size == 6 * DTYPES[dtype].nbytes  # bool is one byte per element, not one bit


def test_views_tuples_aliases_constants_allocate_nothing() -> None:
    assert_pass(
        ManifestAlloc(),
        """
fn @main(%x: Tensor[(2, 4), f32]) -> Tensor[(8,), f32] {
  %c = const([1.0, 2.0, 3.0, 4.0], f32)
  %a = add(%x, %c)
  %r = reshape(%a, (8,))
  %t = (%r, %x)
  %p = %t.0
  %q = %p
  return %q
}""",
        """
fn @main(%x: Tensor[(2, 4), f32]) -> Tensor[(8,), f32] {
  %c = const([1.0, 2.0, 3.0, 4.0], f32)
  %a_storage = memory.alloc_storage(64, align=64, scope="global", external=true)
  %a = memory.alloc_tensor(%a_storage, 0, (2, 4), f32)
  invoke add(%x, %c) outs (%a)
  %r = reshape(%a, (8,))
  %t = (%r, %x)
  %p = %t.0
  %q = %p
  return %q
}""",
    )


def test_tuple_output_kernel_gets_one_storage_per_field() -> None:
    assert_pass(
        ManifestAlloc(),
        """
fn @main(%x: Tensor[(4, 6), f32]) -> Tensor[(4, 2), f32] {
  %s = split(%x, 3, axis=1)
  %b = %s.1
  %c = exp(%b)
  return %c
}""",
        """
fn @main(%x: Tensor[(4, 6), f32]) -> Tensor[(4, 2), f32] {
  %s_0_storage = memory.alloc_storage(64, align=64, scope="global")
  %s_0 = memory.alloc_tensor(%s_0_storage, 0, (4, 2), f32)
  %s_1_storage = memory.alloc_storage(64, align=64, scope="global")
  %s_1 = memory.alloc_tensor(%s_1_storage, 0, (4, 2), f32)
  %s_2_storage = memory.alloc_storage(64, align=64, scope="global")
  %s_2 = memory.alloc_tensor(%s_2_storage, 0, (4, 2), f32)
  invoke split(%x, 3, axis=1) outs (%s_0, %s_1, %s_2)
  %s = (%s_0, %s_1, %s_2)
  %b = %s.1
  %c_storage = memory.alloc_storage(64, align=64, scope="global", external=true)
  %c = memory.alloc_tensor(%c_storage, 0, (4, 2), f32)
  invoke exp(%b) outs (%c)
  return %c
}""",
    )


def test_symbolic_shapes_give_symbolic_sizes() -> None:
    assert_pass(
        ManifestAlloc(align=4),
        """
fn @main(%x: Tensor[(n, 3), f32]) -> Tensor[(n, 3), f32] {
  %a = exp(%x)
  %b = add(%a, %x)
  return %b
}""",
        """
fn @main(%x: Tensor[(n, 3), f32]) -> Tensor[(n, 3), f32] {
  %a_storage = memory.alloc_storage(12 * n, align=4, scope="global")
  %a = memory.alloc_tensor(%a_storage, 0, (n, 3), f32)
  invoke exp(%x) outs (%a)
  %b_storage = memory.alloc_storage(12 * n, align=4, scope="global", external=true)
  %b = memory.alloc_tensor(%b_storage, 0, (n, 3), f32)
  invoke add(%a, %x) outs (%b)
  return %b
}""",
    )


OUTPUTS_BEFORE = """
fn @main(%x: Tensor[(4,), f32]) -> Tuple[Tensor[(4,), f32], Tensor[(2, 2), f32], Tensor[(4,), f32]] {
  %a = exp(%x)
  %b = add(%a, %a)
  %c = tanh(%x)
  %v = reshape(%c, (2, 2))
  %t = (%a, %v)
  %u = %t.1
  %d = relu(%x)
  %e = %d
  return (%a, %u, %e)
}"""  # noqa: E501


def test_output_used_inside_and_outputs_reached_through_views_and_tuples() -> None:
    after = assert_pass(
        ManifestAlloc(),
        OUTPUTS_BEFORE,
        """
fn @main(%x: Tensor[(4,), f32]) -> Tuple[Tensor[(4,), f32], Tensor[(2, 2), f32], Tensor[(4,), f32]] {
  %a_storage = memory.alloc_storage(64, align=64, scope="global", external=true)
  %a = memory.alloc_tensor(%a_storage, 0, (4,), f32)
  invoke exp(%x) outs (%a)
  %b_storage = memory.alloc_storage(64, align=64, scope="global")
  %b = memory.alloc_tensor(%b_storage, 0, (4,), f32)
  invoke add(%a, %a) outs (%b)
  %c_storage = memory.alloc_storage(64, align=64, scope="global", external=true)
  %c = memory.alloc_tensor(%c_storage, 0, (4,), f32)
  invoke tanh(%x) outs (%c)
  %v = reshape(%c, (2, 2))
  %t = (%a, %v)
  %u = %t.1
  %d_storage = memory.alloc_storage(64, align=64, scope="global", external=true)
  %d = memory.alloc_tensor(%d_storage, 0, (4,), f32)
  invoke relu(%x) outs (%d)
  %e = %d
  return (%a, %u, %e)
}""",  # noqa: E501
    )
    a, b = run_both(parse_module(OUTPUTS_BEFORE), after)
    assert_same_results(a, b)


def test_primitive_calls_become_invokes_other_calls_stay() -> None:
    assert_pass(
        ManifestAlloc(),
        """
fn @k(%p: Tensor[(m,), f32]) -> Tensor[(m,), f32] attrs {primitive = true} {
  %e = exp(%p)
  return %e
}

fn @g(%p: Tensor[(m,), f32]) -> Tensor[(m,), f32] {
  %r = relu(%p)
  return %r
}

fn @main(%x: Tensor[(3,), f32]) -> Tensor[(3,), f32] {
  %a = call @k(%x)
  %b = call @g(%a)
  return %b
}""",
        """
fn @k(%p: Tensor[(m,), f32]) -> Tensor[(m,), f32] attrs {primitive = true} {
  %e = exp(%p)
  return %e
}

fn @g(%p: Tensor[(m,), f32]) -> Tensor[(m,), f32] {
  %r_storage = memory.alloc_storage(64 * ((4 * m + 63) / 64), align=64, scope="global", external=true)
  %r = memory.alloc_tensor(%r_storage, 0, (m,), f32)
  invoke relu(%p) outs (%r)
  return %r
}

fn @main(%x: Tensor[(3,), f32]) -> Tensor[(3,), f32] {
  %a_storage = memory.alloc_storage(64, align=64, scope="global")
  %a = memory.alloc_tensor(%a_storage, 0, (3,), f32)
  invoke @k(%x) outs (%a)
  %b = call @g(%a)
  return %b
}""",  # noqa: E501
    )


def test_fresh_names_never_collide() -> None:
    after = run_pass(
        ManifestAlloc(),
        """
fn @main(%a_storage: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  %a = exp(%a_storage)
  %a_storage_1 = relu(%a)
  return %a_storage_1
}""",
    )
    names = [s.name for s in after.functions[0].body if hasattr(s, "name")]
    assert len(names) == len(set(names))
    assert "a_storage_2" in names


def test_unused_kernel_statement_is_dropped() -> None:
    assert_pass(
        ManifestAlloc(),
        """
fn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  exp(%x)
  return %x
}""",
        """
fn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  return %x
}""",
    )


def test_bad_alignment_is_refused() -> None:
    with pytest.raises(ValueError, match="power of two"):
        ManifestAlloc(align=48)


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_samples_same_results_and_idempotent(path: Path) -> None:
    before = parse_module(path.read_text(), str(path))
    after = ManifestAlloc()(before)
    assert ManifestAlloc()(after) == after
    wpath = default_weights_path(path)
    weights = load_npz(wpath) if wpath else None
    a, b = run_both(before, after, weights=weights)
    assert_same_results(a, b)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_generated_programs_same_results(prog) -> None:
    before = parse_module(prog.text, "gen.rx")
    after = ManifestAlloc()(before)
    a, b = run_both(before, after, prog.dims)
    assert_same_results(a, b)
