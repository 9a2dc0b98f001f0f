"""Generated programs (views, aliases, tuples, projections, splits, returned parameters and
duplicates, primitive calls, symbolic dims) through the C target, under ASan and UBSan,
against the interpreter; packed and unpacked."""

from __future__ import annotations

import itertools
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

from relaxc.backend.inputs import random_inputs, resolve_dims
from relaxc.backend.interpreter import Interpreter
from relaxc.frontend.parser import parse_module
from tests.strategies import programs

from .cbuild import CC, SAN_ENV, SANITIZE, assert_close, compile_c, emit, needs_cc, run_c

pytestmark = needs_cc
_counter = itertools.count()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("c_generated")


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(prog=programs(max_ops=10))
def test_generated_programs_match_the_interpreter(workdir: Path, prog) -> None:
    # The C target refuses calls of non-primitive functions and unbounded allocations (tested
    # elsewhere); everything else must compile clean and compute what the interpreter does.
    assume("call @helper" not in prog.text)
    assume("n" not in prog.dims or "upper_bounds" in prog.text)
    module = parse_module(prog.text, "gen.rx")
    fn = module.get("main")
    env = resolve_dims(fn, prog.dims)
    args = random_inputs(fn, env, seed=1)
    want = Interpreter(module, {}).run("main", args, env)
    k = next(_counter)
    for mode in ("packed", "unpacked"):
        folder = workdir / f"{k}_{mode}"
        built = compile_c(
            folder, emit(module, {}, folder, unpacked=mode == "unpacked"), sanitize=True
        )
        assert_close(run_c(built, args, env), want, f"{mode}\n{prog.text}")


# ---------------------------------------------------------------------------------------
# Found by the fuzzer (tests/fuzz): each compiled strict (-Werror) and sanitized.

FUZZ_FOUND = {
    # A primitive function that never reads a parameter: -Wunused-parameter broke -Werror.
    "unused_primitive_parameter": (
        """
fn @prim(%a: Tensor[(2, 3), f32], %b: Tensor[(3,), f32]) -> Tensor[(2, 3), f32] attrs {primitive = true} {
  %r = relu(%a)
  return %r
}

fn @main(%x: Tensor[(2, 3), f32], %y: Tensor[(3,), f32]) -> Tensor[(2, 3), f32] {
  %z = call @prim(%x, %y)
  return %z
}
""",  # noqa: E501
        {},
    ),
    # f32 intermediates (dead ones, here) computed in the i32 output buffer were passed as
    # int32_t * to float kernels (incompatible pointer types; type confusion without -Werror).
    "intermediate_of_another_dtype_in_the_output": (
        """
fn @prim(%a: Tensor[(p, q), f32]) -> Tensor[(1, 3, 3), i32] attrs {primitive = true} {
  %s = sum(%a, keepdims=true)
  %t = multiply(%s, %s)
  %f = full(shape=(1, 3, 3), dtype=i32, fill_value=3)
  return %f
}

fn @main(%x: Tensor[(n, 2), f32]) -> Tensor[(1, 3, 3), i32] attrs {upper_bounds = {n = 4}} {
  %r = call @prim(%x)
  return %r
}
""",
        {"n": 3},
    ),
    # A strided window over a bounded dim: its size (n - 2) / 2 + 1 had no derivable bound,
    # so the C target refused the program.
    "strided_window_over_a_bounded_dim": (
        """
fn @main(%x: Tensor[(1, 2, n, 4), f32]) -> Tensor[(1, 2, (n - 2) / 2 + 1, 3), f32] attrs {upper_bounds = {n = 16}} {
  %p = max_pool2d(%x, pool_size=2, strides=(2, 1))
  %q = relu(%p)
  %r = negative(%q)
  return %r
}
""",  # noqa: E501
        {"n": 7},
    ),
    # take from a symbolic axis clipped its indices to n - 1 = -1 at n = 0 and read before
    # the buffer (gcc -O2 saw it: -Warray-bounds broke -Werror in the unpacked build).
    "take_over_a_symbolic_axis": (
        """
fn @main(%x: Tensor[(n, 1), u8]) -> Tuple[Tensor[(n,), u8], Tensor[(n, 1), u8]]
    attrs {upper_bounds = {n = 2}} {
  %v1 = flatten(%x)
  %v2 = reshape(%x, newshape=(n,))
  %v3 = transpose(%v2)
  %v4 = clip(%v2, a_min=0.0, a_max=1.5)
  %c5 = const([-1, 4], i64)
  %v6 = take(%v3, %c5, axis=0)
  %v7 = power(%v1, %x)
  %v8 = expand_dims(%v4, axis=1)
  return (%v4, %v8)
}
""",
        {"n": 2},
    ),
    # An output copied with memcpy whose size 32 * n - 64 is negative for every n <= 1: the
    # (size_t) of it broke -Werror (-Wstringop-overflow) and would overrun at run time.
    "negative_size_copied_out": (
        """
fn @main(%p8: Tensor[(1, 2, n, 4), f32]) -> Tuple[Tensor[(1, 2, n - 2, 4), f32], Tensor[(1, 2, n - 2, 4), f32]]
    attrs {upper_bounds = {n = 4}} {
  %v9 = avg_pool2d(%p8, pool_size=(3, 1), dilation=(1, 2))
  return (%v9, %v9)
}
""",  # noqa: E501
        {"n": 4},
    ),
    # power on u16 converts a double out of range as numpy does on x86 (through int32: 0),
    # not modulo 2**16 (11 ** 11 gave 39251).
    "integer_power_out_of_range": (
        """
fn @main(%x: Tensor[(4,), u16], %y: Tensor[(4,), u8]) -> Tuple[Tensor[(4,), u16], Tensor[(4,), u8]] {
  %c = const([11, 5, 300, 2], u16)
  %p = power(%c, %c)
  %d = const([7, 2, 250, 3], u8)
  %q = power(%d, %d)
  %s = add(%p, %x)
  %t = add(%q, %y)
  return (%s, %t)
}
""",  # noqa: E501
        {},
    ),
}


@pytest.mark.parametrize("name", sorted(FUZZ_FOUND))
@pytest.mark.parametrize("sanitize", [False, True], ids=["strict", "asan-ubsan"])
def test_fuzzer_found_programs_build_and_match(workdir: Path, name: str, sanitize: bool) -> None:
    from .cbuild import build

    text, dims = FUZZ_FOUND[name]
    module = parse_module(text, f"{name}.rx")
    fn = module.get("main")
    env = resolve_dims(fn, dims)
    args = random_inputs(fn, env, seed=2)
    want = Interpreter(module, {}).run("main", args, env)
    for unpacked in (False, True):
        built = build(
            text,
            workdir / f"found_{name}_{sanitize}_{unpacked}",
            prefix="found",
            sanitize=sanitize,
            unpacked=unpacked,
        )
        assert_close(run_c(built, args, env), want, name)


def test_negative_size_copies_nothing(workdir: Path) -> None:
    """At n = 1 the output height n - 2 is negative (the interpreter refuses the run); the
    copy of the duplicated output must not become a (size_t)-64 byte memcpy."""
    from .cbuild import build

    text, _ = FUZZ_FOUND["negative_size_copied_out"]
    built = build(text, workdir / "negative_size", prefix="found", sanitize=True, unpacked=True)
    info = built.sources.info
    assert len(info.outputs) == 2
    # The generated main would refuse to allocate the negative output sizes: call run directly.
    driver = built.folder / "neg_driver.c"
    driver.write_text("""#include "found.h"
int main(void)
{
    static float x[1 * 2 * 1 * 4], y[8], z[8];
    return (int)found_run(x, y, z, 1);
}
""")
    r = subprocess.run(
        [CC, *SANITIZE, "found.c", driver.name, "-lm", "-o", "neg_driver"],
        cwd=built.folder,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run(
        ["./neg_driver"],
        cwd=built.folder,
        capture_output=True,
        text=True,
        env={**os.environ, **SAN_ENV},
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_take_from_an_empty_symbolic_axis_reads_nothing(workdir: Path) -> None:
    """At n = 0 the interpreter refuses the take; the C build must not read outside %x."""
    from .cbuild import build

    text = """
fn @main(%x: Tensor[(n, 3), f32], %i: Tensor[(2,), i32]) -> Tensor[(2, 3), f32] attrs {upper_bounds = {n = 4}} {
  %t = take(%x, %i, axis=0)
  return %t
}
"""  # noqa: E501
    built = build(text, workdir / "take_empty", prefix="found", sanitize=True, unpacked=True)
    (out,) = run_c(built, [np.zeros((0, 3), np.float32), np.array([-1, 3], np.int32)], {"n": 0})
    np.testing.assert_array_equal(out, np.zeros((2, 3), np.float32))


def test_size_without_a_derivable_bound_is_refused_naming_the_size() -> None:
    from relaxc.backend.c import emit_c
    from relaxc.ir.diagnostics import RxError

    text = """
fn @main(%x: Tensor[(n,), f32]) -> Tensor[(n,), f32] attrs {upper_bounds = {n = 8}, planned = true} {
  %s = memory.alloc_storage(64 / n + 4 * n, align=16)
  %t = memory.alloc_tensor(%s, 0, (n,), f32)
  invoke relu(%x) outs (%t)
  %y = negative(%t)
  return %y
}
"""  # noqa: E501
    with pytest.raises(RxError) as e:
        emit_c(parse_module(text, "t.rx"))
    assert e.value.message == (
        "the C target needs every allocation planned into static memory, but no upper "
        "bound of the size 64 / n + 4 * n of %s follows from the upper bounds of @main"
    )


def test_f16_max_of_signed_zeros_is_numpys(workdir: Path) -> None:
    """numpy's maximum and minimum give the first operand on a tie of -0 and +0 for f16 (the
    second for f32 and f64); after rsqrt or a division the sign is an infinity's (found by
    the fuzzer: a max_pool2d over -0 and +0 weights, then rsqrt, gave inf for -inf)."""
    from .cbuild import build

    text = """
fn @main(%a: Tensor[(1, 1, 2, 2), f16], %b: Tensor[(1, 1, 2, 2), f16], %c: Tensor[(1, 1, 2, 2), f32], %d: Tensor[(1, 1, 2, 2), f32])
    -> Tuple[Tensor[(1, 1, 2, 2), f16], Tensor[(1, 1, 2, 2), f16], Tensor[(1, 1, 1, 1), f16], Tensor[(1, 1), f16],
             Tensor[(1, 1, 2, 2), f32], Tensor[(1, 1, 2, 2), f32], Tensor[(1, 1, 1, 1), f32], Tensor[(1, 1), f32]] {
  %mx = maximum(%a, %b)
  %mn = minimum(%a, %b)
  %p = max_pool2d(%a, pool_size=2)
  %r = max(%a, axes=(2, 3))
  %mx32 = maximum(%c, %d)
  %mn32 = minimum(%c, %d)
  %p32 = max_pool2d(%c, pool_size=2)
  %r32 = max(%c, axes=(2, 3))
  %one = const(1.0, f16)
  %one32 = const(1.0, f32)
  %imx = divide(%one, %mx)
  %imn = divide(%one, %mn)
  %ip = divide(%one, %p)
  %ir = divide(%one, %r)
  %imx32 = divide(%one32, %mx32)
  %imn32 = divide(%one32, %mn32)
  %ip32 = divide(%one32, %p32)
  %ir32 = divide(%one32, %r32)
  return (%imx, %imn, %ip, %ir, %imx32, %imn32, %ip32, %ir32)
}
"""  # noqa: E501
    module = parse_module(text, "zeros.rx")
    z = [[[[-0.0, 0.0], [0.0, -0.0]]]]
    args = [
        np.array(z, np.float16),
        np.array(z, np.float16)[..., ::-1].copy(),
        np.array(z, np.float32),
        np.array(z, np.float32)[..., ::-1].copy(),
    ]
    want = Interpreter(module, {}).run("main", args)
    for unpacked in (False, True):
        got = run_c(
            build(text, workdir / f"zeros_{unpacked}", prefix="zeros", unpacked=unpacked), args
        )
        for g, w in zip(got, want):
            assert g.tobytes() == w.tobytes(), (g, w)


def test_empty_static_buffer_holds_an_element(workdir: Path) -> None:
    """A tensor empty for every allowed dim (height (n - 2) / 2 + 1 with n <= 1) left out of
    the arena got a 1-byte static array; gcc -O2 saw a float written into it
    (-Warray-bounds broke -Werror). Found by the fuzzer."""
    from relaxc.backend.c import emit_c
    from relaxc.cli.target_facts import pipeline_context
    from relaxc.passes.assemble import assemble_pipeline
    from relaxc.passes.pipeline import Pipeline, VerifyInstrument

    text = """
fn @main(%p2: Tensor[(1, 3, n, 3), f32], %p3: Tensor[(1, 3, 2, 2), f32]) -> Tuple[Tensor[(1, 1, (n - 2) / 2 + 1, 1), f32], Tensor[(1, 1, (n - 2) / 2 + 1, 1), f32]]
    attrs {upper_bounds = {n = 1}} {
  %c4 = const([-0.25], f32)
  %v5 = conv2d(%p2, %p3, %c4, strides=2)
  %c6 = const([0.5], f32)
  %v8 = layer_norm(%v5, %c6, %c6, axes=(-1,))
  %v9 = relu(%v8)
  return (%v5, %v9)
}
"""  # noqa: E501
    module = Pipeline(
        assemble_pipeline(
            "c",
            "ManifestAlloc,PlanKernelScratch,PlanMemory{planner=none}",
            context=pipeline_context(),
        ),
        [VerifyInstrument()],
    ).run(parse_module(text, "empty.rx"))
    folder = workdir / "empty_static"
    folder.mkdir()
    sources = emit_c(module, {}, prefix="empty", emit_main=True)
    assert any(not b.arena and b.nbytes == 0 for b in sources.info.buffers)
    for name, body in sources.files.items():
        (folder / name).write_text(body)
    compile_c(folder, sources)  # -O2 -Werror


def test_a_cast_inlined_through_a_packed_call_builds_with_werror(tmp_path: Path) -> None:
    """Seed 423 of the fuzz campaign: a primitive function casting f32 to bool over symbolic
    dims, called packed with 8 x 8; GCC 12 -O2 reported the inlined cast's tail loop as
    invoking undefined behaviour at iteration 4611686018427387903 (the trip count there is
    64: a false positive, gone with -fno-inline), which -Werror made fatal. The file now turns
    -Waggressive-loop-optimizations off for GCC; the build is strict and sanitized."""
    text = """
fn @prim1(%arg0: Tensor[(p0, p0), f32]) -> Tuple[Tensor[(p0, p0), bool]]
    attrs {primitive = true} {
  %v1 = cast(%arg0, dtype=bool)
  return (%v1,)
}

fn @main(%x1: Tensor[(8, 8), f32]) -> Tuple[Tensor[(8, 8), bool]] {
  %r1 = call @prim1(%x1)
  return %r1
}
"""
    module = parse_module(text, "cast.rx")
    sources = emit(module, {}, tmp_path, prefix="cast")
    assert "-Waggressive-loop-optimizations" in sources.files["cast.c"]
    args = random_inputs(module.get("main"), {}, 0)  # type: ignore[arg-type]
    args[0][0, :3] = 0.0  # some falses
    want = Interpreter(module, {}).run("main", args, {})
    for sanitize in (False, True):
        assert_close(run_c(compile_c(tmp_path, sources, sanitize), args), want)
