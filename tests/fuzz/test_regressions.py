"""Minimized programs of the mismatches the fuzzer found, each through the whole harness:
every pipeline and planner on the VM, every C variant strict and sanitized. docs/fuzzing.md
lists each with its symptom, cause and fix (the fixes have focused tests of their own in
the test files of the parts they fixed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from relaxc.frontend.parser import parse_module
from tests.backend.c.cbuild import needs_cc

from .gen import GenProgram
from .harness import CBatch, check_program, emit_variants

pytestmark = needs_cc


def check_everything(
    text: str,
    dims: dict[str, int],
    folder: Path,
    c_refuses: bool = False,
    vm_only: bool = False,
    c_flags: list[str] | None = None,
) -> None:
    prog = GenProgram(
        parse_module(text, "regression.rx"), text, {}, dims, not vm_only, (), "regression"
    )
    case, compiled = check_program(prog, thorough=True)
    if vm_only:
        return
    models = emit_variants(case, compiled, "rg", 0)
    assert bool(models) != c_refuses, (
        "the C target built no variant" if not c_refuses else "C built it"
    )
    if not models:
        return
    for sanitize in (False, True):
        batch = CBatch(
            folder / str(sanitize), sanitize=sanitize, jobs=1, flags=None if sanitize else c_flags
        )
        batch.add(models)
        result = batch.run()
        assert not result.mismatches, "\n\n".join(str(m) for m in result.mismatches[:3])


def test_empty_split_field_of_an_argument(tmp_path: Path) -> None:
    """VM, pipeline none: the prim's empty result kept %x's buffer as its base; the VM adopted
    that buffer as the result's block and poisoned it on release, so %v read 0xFF (-1)."""
    check_everything(
        """
fn @prim1(%arg0: Tensor[(4, 5, 4, 4), f32], %arg1: Tensor[(5, 4), i16]) -> Tuple[Tensor[(5, 0), i16], Tensor[(5, 0), i16]]
    attrs {primitive = true} {
  %s1 = split(%arg1, indices_or_sections=(4,), axis=1)
  %f2 = %s1.1
  return (%f2, %f2)
}

fn @main(%x: Tensor[(4, 5, 4, 4), f32], %x1: Tensor[(5, 4), i16]) -> Tuple[Tensor[(5, 4, 1), i16]] {
  %r5 = call @prim1(%x, %x1)
  %v9 = expand_dims(%x1, axis=-1)
  return (%v9,)
}
""",  # noqa: E501
        {},
        tmp_path,
    )  # PlanWorkspace places the tuple's fields, so C builds it too


def test_primitive_function_with_unused_parameters(tmp_path: Path) -> None:
    """C: -Wunused-parameter (an error under -Werror) for a primitive that ignores an input."""
    check_everything(
        """
fn @prim1(%arg0: Tensor[(p0, 2), f32], %arg1: Tensor[(p0, 2), f32]) -> Tensor[(p0, 2), f32]
    attrs {primitive = true} {
  %v1 = tanh(%arg1)
  return %v1
}

fn @main(%x: Tensor[(n, 2), f32]) -> Tensor[(n, 2), f32] attrs {upper_bounds = {n = 4}} {
  %r = call @prim1(%x, %x)
  return %r
}
""",
        {"n": 3},
        tmp_path,
    )


def test_intermediates_in_an_output_of_another_dtype(tmp_path: Path) -> None:
    """C: f32 intermediates computed in the i32 output buffer were passed as int32_t *."""
    check_everything(
        """
fn @prim1(%arg2: Tensor[(p1, p0), f32]) -> Tensor[(1, 3, 3), i32]
    attrs {primitive = true} {
  %v2 = sum(%arg2, keepdims=true)
  %v3 = multiply(%v2, %v2)
  %v4 = full(shape=(1, 3, 3), dtype=i32, fill_value=3)
  return %v4
}

fn @main(%x: Tensor[(n, m), f32]) -> Tensor[(1, 3, 3), i32] attrs {upper_bounds = {m = 6, n = 5}} {
  %r1 = call @prim1(%x)
  return %r1
}
""",
        {"n": 5, "m": 5},
        tmp_path,
    )


@pytest.mark.parametrize("n", [1, 2, 3])
def test_pooling_window_against_a_small_symbolic_height(tmp_path: Path, n: int) -> None:
    """Interpreter and VM: at n < 2 the kernel refuses the window (an internal error before);
    now both report it at the statement, and larger n run everywhere."""
    check_everything(
        """
fn @main(%p7: Tensor[(1, 5, n, 3), f32]) -> Tensor[(1, 5, n - 1, 1), f32] attrs {upper_bounds = {n = 4}} {
  %v8 = max_pool2d(%p7, pool_size=2, ceil_mode=true, dilation=(1, 2))
  return %v8
}
""",  # noqa: E501
        {"n": n},
        tmp_path,
    )


@pytest.mark.parametrize("n", [0, 2])
def test_max_and_take_over_a_symbolic_axis_of_length_zero(tmp_path: Path, n: int) -> None:
    """Interpreter: numpy's ValueError / IndexError at n = 0 (a crash); now the run's error."""
    check_everything(
        """
fn @main(%x: Tensor[(n, 3), f32], %i: Tensor[(2,), i32]) -> Tuple[Tensor[(3,), f32], Tensor[(2, 3), f32]]
    attrs {upper_bounds = {n = 3}} {
  %m = max(%x, axes=0)
  %t = take(%x, %i, axis=0)
  return (%m, %t)
}
""",  # noqa: E501
        {"n": n},
        tmp_path,
    )


def test_strided_window_over_a_bounded_dim(tmp_path: Path) -> None:
    """PlanMemory and C: no upper bound was derived for (n - 2) / 2 + 1 (the dividend may be
    negative), so the buffers stayed dynamic and the C target refused the program."""
    check_everything(
        """
fn @main(%x: Tensor[(1, 2, n, 4), f32]) -> Tensor[(1, 2, (n - 2) / 2 + 1, 3), f32] attrs {upper_bounds = {n = 16}} {
  %p = max_pool2d(%x, pool_size=2, strides=(2, 1))
  %q = relu(%p)
  %r = negative(%q)
  return %r
}
""",  # noqa: E501
        {"n": 7},
        tmp_path,
    )


def test_mean_over_an_empty_axis(tmp_path: Path) -> None:
    """Kernels: numpy's RuntimeWarning for the mean of an empty axis reached relaxc run."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        check_everything(
            """
fn @main(%x: Tensor[(n, 3), f32]) -> Tensor[(3,), f32] attrs {upper_bounds = {n = 2}} {
  %m = mean(%x, axes=0)
  return %m
}
""",
            {"n": 0},
            tmp_path,
        )


def test_primitive_function_returning_a_constant(tmp_path: Path) -> None:
    """VM, pipeline none: the constant a primitive function returned was adopted as a fresh
    block; the second call shared it uncounted, so the block was released twice (a crash in
    the pool)."""
    check_everything(
        """
fn @prim(%a: Tensor[(2,), f32]) -> Tensor[(), i64] attrs {primitive = true} {
  %c = const(1, i64)
  return %c
}

fn @helper(%a: Tensor[(2,), f32]) -> Tensor[(), i64] {
  %r1 = call @prim(%a)
  %r2 = call @prim(%a)
  return %r2
}

fn @main(%x: Tensor[(2,), f32]) -> Tuple[Tensor[(), i64], Tensor[(), i64]] {
  %h = call @helper(%x)
  %k = call @prim(%x)
  return (%h, %k)
}
""",
        {},
        tmp_path,
        vm_only=True,
    )  # the C target calls no non-primitive function


def test_primitive_function_returning_a_constant_beside_a_result(tmp_path: Path) -> None:
    """VM, pipeline none: the same cause poisoned the constant 3 while a later call still
    returned it, so %r15 read garbage."""
    check_everything(
        """
fn @prim1(%arg0: Tensor[(p0,), f32], %arg1: Tensor[(p0,), f32], %arg2: Tensor[(p0,), f32]) -> Tuple[Tensor[(1,), f32], Tensor[(), i64]]
    attrs {primitive = true} {
  %c1 = const(3, i64)
  %v2 = take(%arg0, %c1, axis=0)
  %v3 = expand_dims(%v2, axis=0)
  return (%v3, %c1)
}

fn @main(%x: Tensor[(n, 3), f32]) -> Tuple[Tensor[(3 * n,), f32], Tuple[Tensor[(1,), f32], Tensor[(), i64]], Tuple[Tensor[(1,), f32], Tensor[(), i64]]]
    attrs {upper_bounds = {n = 3}} {
  %t1 = (%x, %x)
  %f2 = %t1.0
  %v3 = reshape(%f2, newshape=(3 * n,))
  %v4 = subtract(%v3, %v3)
  %s6 = split(%v4, indices_or_sections=1, axis=0)
  %a8 = %s6
  %f12 = %s6.0
  %v13 = reshape(%v4, newshape=(3 * n,))
  %f14 = %a8.0
  %r15 = call @prim1(%v13, %f12, %f14)
  %r16 = call @prim1(%f12, %f14, %v3)
  return (%f12, %r16, %r15)
}
""",  # noqa: E501
        {"n": 2},
        tmp_path,
    )


def test_errors_come_in_program_order(tmp_path: Path) -> None:
    """VM, pipeline none, n = 1: the VM reported the negative height of the second pool
    (evaluated before running) where the interpreter reports the first pool's refusal."""
    check_everything(
        """
fn @main(%x: Tensor[(1, 2, n, 3), f32]) -> Tuple[Tensor[(1, 2, n - 1, 2), f32], Tensor[(1, 2, (n - 4) / 2 + 1, 3), f32]]
    attrs {upper_bounds = {n = 6}} {
  %p = max_pool2d(%x, pool_size=2)
  %q = max_pool2d(%x, pool_size=(4, 1), strides=(2, 1))
  return (%p, %q)
}
""",  # noqa: E501
        {"n": 1},
        tmp_path,
    )


def test_output_whose_size_is_negative_for_every_allowed_dim(tmp_path: Path) -> None:
    """C: the copy of a duplicated output of size 32 * n - 64 with n <= 1 became a memcpy of
    (size_t)-64 bytes (gcc -O2: -Wstringop-overflow; at run time an overrun). The
    interpreter refuses every run, so only the builds are checked."""
    check_everything(
        """
fn @main(%p8: Tensor[(1, 2, n, 4), f32]) -> Tuple[Tensor[(1, 2, n - 2, 4), f32], Tensor[(1, 2, n - 2, 4), f32]]
    attrs {upper_bounds = {n = 1}} {
  %v9 = avg_pool2d(%p8, pool_size=(3, 1), dilation=(1, 2))
  return (%v9, %v9)
}
""",  # noqa: E501
        {"n": 1},
        tmp_path,
        c_flags=["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic"],
    )


def test_integer_power_out_of_range(tmp_path: Path) -> None:
    """C: power on u16 wrapped 11 ** 11 modulo 2**16 (39251); numpy's astype on x86 goes
    through int32 for 16-bit types and gives 0."""
    check_everything(
        """
fn @prim1(%arg0: Tensor[(p0, 1, 1), f32]) -> Tensor[(2, 1, 3, 1), u16]
    attrs {primitive = true} {
  %c2 = const([[[[3], [0], [2]]], [[[3], [4], [0]]]], u16)
  %c3 = const([[2]], u16)
  %c4 = const([5], u16)
  %v5 = dense(%c2, %c3, %c4)
  return %v5
}

fn @main(%x: Tensor[(n, n), f32]) -> Tuple[Tensor[(2, 1, 3, 1), u16], Tensor[(2, 1, 3, 1), u16]]
    attrs {upper_bounds = {n = 2}} {
  %v1 = reshape(%x, newshape=(n * n, 1, 1))
  %r4 = call @prim1(%v1)
  %v7 = power(%r4, %r4)
  return (%v7, %v7)
}
""",
        {"n": 1},
        tmp_path,
    )


def test_f16_max_pool_over_signed_zeros(tmp_path: Path) -> None:
    """C: max_pool2d over f16 weights holding -0 and +0 kept the later zero where numpy's f16
    maximum keeps the first; rsqrt then gave inf for -inf (seed 375, reduced)."""
    import numpy as np

    text = """
fn @main(%x: Tensor[(2, 3), f32]) -> Tuple[Tensor[(2, 3), f32], Tensor[(1, 2, 1, 4), f16]] {
  %w: Tensor[(1, 2, 2, 3), f16] = const("w0.weight")
  %v7 = max_pool2d(%w, pool_size=2, padding=(0, 1))
  %v8 = rsqrt(%v7)
  %y = relu(%x)
  return (%y, %v8)
}
"""
    w = np.array(
        [[[[-0.0, 0.0, 0.0], [0.0, 0.0, -0.0]], [[0.0, -0.0, 0.5], [-0.0, 0.0, 0.25]]]], np.float16
    )
    prog = GenProgram(parse_module(text, "r.rx"), text, {"w0.weight": w}, {}, True, ())
    case, compiled = check_program(prog, thorough=True)
    assert np.isneginf(case.want[0][1]).any()
    batch = CBatch(tmp_path, jobs=1)
    batch.add(emit_variants(case, compiled, "rg", 0))
    result = batch.run()
    assert not result.mismatches, str(result.mismatches[0])


def test_integer_power_overflowing_in_a_long_array(tmp_path: Path) -> None:
    """Interpreter vs C: numpy's float64 -> u32 astype of an out-of-range power is 0 in its
    SIMD loop (1296 elements here) but wraps in C (3 ** 27 gave 2030534587)."""
    check_everything(
        """
fn @main(%x: Tensor[(6, 6, 6, 6), u32], %x2: Tensor[(6, 6, 6, 1), u32]) -> Tensor[(6, 6, 6, 6), u32] {
  %v3 = power(%x2, %x)
  %v11 = power(%x, %v3)
  return %v11
}
""",  # noqa: E501
        {},
        tmp_path,
    )


def test_tensor_empty_for_every_allowed_dim(tmp_path: Path) -> None:
    """C (planner none, unpacked, -O2): the static array of a tensor empty for every n <= 1
    was 1 byte; gcc saw a float written into it (-Warray-bounds)."""
    check_everything(
        """
fn @main(%p2: Tensor[(1, 3, n, 3), f32], %p3: Tensor[(1, 3, 2, 2), f32]) -> Tuple[Tensor[(1, 1, (n - 2) / 2 + 1, 1), f32], Tensor[(1, 1, (n - 2) / 2 + 1, 1), f32]]
    attrs {upper_bounds = {n = 1}} {
  %c4 = const([-0.25], f32)
  %v5 = conv2d(%p2, %p3, %c4, strides=2)
  %c6 = const([0.5], f32)
  %v8 = layer_norm(%v5, %c6, %c6, axes=(-1,))
  %v9 = relu(%v8)
  return (%v5, %v9)
}
""",  # noqa: E501
        {"n": 1},
        tmp_path,
        c_flags=["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic"],
    )


def test_dead_window_taller_than_its_bounded_input(tmp_path: Path) -> None:
    """PlanMemory: the storage of %v7 (height n - 4 with n <= 2) has a negative upper bound;
    the arena came out at -128 bytes and the verifier rejected PlanMemory's output."""
    check_everything(
        """
fn @main(%p4: Tensor[(2, 3, n, 3), f32], %p6: Tensor[(3,), f32]) -> Tuple[Tensor[(2, 3, n, 3), f32], Tensor[(1, 9), f32]]
    attrs {upper_bounds = {n = 2}} {
  %c5 = const([[[[1.25], [1.25], [-0.25]]], [[[1.5], [1.0], [0.25]]], [[[-0.75], [1.0], [1.0]]]], f32)
  %v7 = conv2d(%p4, %c5, %p6, groups=3, dilation=(2, 1))
  %v8 = reshape(%c5, newshape=(1, 9))
  %y = relu(%p4)
  return (%y, %v8)
}
""",  # noqa: E501
        {"n": 2},
        tmp_path,
    )


# ---------------------------------------------------------------------------------------
# Found by the generator's memory-sharing patterns (issue 15).


def test_dead_intermediates_of_a_primitive_returning_its_parameter(tmp_path: Path) -> None:
    """Seeds 229 and 275 of the fixed-seed run (and many of the campaigns): PlanWorkspace
    produced IR the verifier rejects: "%v3 (bytes 0 + 8 of %out0) is written while %out0
    (bytes 0 + 16), which shares memory with it, is still live". PlanWorkspace placed the
    dead %v2 as `%v2 = %out0` and the dead %v3 as a view of %out0; the placement checker
    takes a value filling all of an output for the output, live to the end. Fixed in
    PlanWorkspace: nothing smaller follows such a value in an output's bytes
    (tests/passes/test_plan_workspace.py::test_nothing_smaller_follows_a_value_filling_an_output)."""
    check_everything(
        """
fn @prim1(%a: Tensor[(4,), f32], %b: Tensor[(2,), f32]) -> Tensor[(4,), f32]
    attrs {primitive = true} {
  %v2 = exp(%a)
  %v3 = tanh(%b)
  return %a
}

fn @main(%x: Tensor[(4,), f32], %y: Tensor[(2,), f32]) -> Tensor[(4,), f32] {
  %r = call @prim1(%x, %y)
  return %r
}
""",
        {},
        tmp_path,
    )


# ---------------------------------------------------------------------------------------
# Found by the generator's patterns (issue 15) and not fixed yet: each is an
# xfail(strict=True) naming the bug (the fix turns it into an XPASS, a failure asking for the
# mark to go, with its entry of KNOWN_BUGS in test_fuzz.py).


def test_two_outputs_one_a_view_of_the_other_at_an_offset(tmp_path: Path) -> None:
    """Seeds 800129, 800844 and 800992 of the 1,000-program campaign from 800,000 (with
    relaxc build -t c too, whatever the pipeline): the C target carved the returned tensor
    from the first output aliasing it, here a view of it at byte 8, smaller than it, and
    refused the program ('%v5 does not fit the output buffer v7 it is carved from'). An
    output buffer is now the storage of the tensor only when that output covers all of it;
    the view is copied out."""
    check_everything(
        """
fn @main(%p3: Tensor[(2, 8, 8, 5), f32]) -> Tuple[Tensor[(1, 12), f32], Tensor[(2, 8), f32]] {
  %v4 = global_avg_pool2d(%p3)
  %v5 = minimum(%v4, %v4)
  %v6 = flatten(%v5)
  %v7 = memory.view(%v6, offset=8, shape=(1, 12), dtype=f32)
  return (%v7, %v6)
}
""",
        {},
        tmp_path,
    )


def test_reflect_pad_of_a_static_single_element(tmp_path: Path) -> None:
    """C, seed 57 once issue 30's linear_attention changed the draws: a reflect pad of an
    axis cropped to one element emitted its period-2(L - 1) branch behind a run-time test,
    and cc rejected the constant ``% (2 * (1 - 1))`` (-Werror=div-by-zero)."""
    check_everything(
        """
fn @main(%x: Tensor[(3, 1), i32]) -> Tensor[(1, 2), i32] {
  %v = pad(%x, pads=(-1, 1, -1, 0), mode="reflect")
  return %v
}
""",
        {},
        tmp_path,
    )
