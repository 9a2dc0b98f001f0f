"""The VM gives the reference interpreter's outputs, bit for bit.

The VM runs the same numpy kernels as the interpreter, so outputs must be identical (not
merely close): every sample, the transformer at several sequence lengths, a program using
every instruction, and generated programs — each after every prefix of the vm pipeline
(the VM runs programs before ManifestAlloc too), with memory poisoning on so that a
freed-too-early buffer shows up as NaNs.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from relaxc.backend.vm import VirtualMachine
from relaxc.ir.diagnostics import RxError
from tests.strategies import programs

from .util import (
    KITCHEN_SINK,
    KITCHEN_WEIGHTS,
    PIPELINES,
    SAMPLE_STEMS,
    assert_identical,
    build,
    compile_text,
    inputs_for,
    interpret,
    parse,
    sample,
    vm_run,
)


@pytest.mark.parametrize("stem", SAMPLE_STEMS)
@pytest.mark.parametrize("passes", ["none", "vm"])
def test_samples_match_the_interpreter(stem: str, passes: str) -> None:
    source, weights = sample(stem)
    module = compile_text(source_text(stem), passes)
    exe = build(module, weights)
    for seed in (0, 1):
        args = inputs_for(source, seed=seed)
        assert_identical(interpret(source, weights, args), vm_run(exe, args)[0])


def source_text(stem: str) -> str:
    from .util import SAMPLES

    return (SAMPLES / f"{stem}.rx").read_text()


@pytest.mark.parametrize("n", [1, 2, 17, 64, 128])
def test_transformer_at_several_lengths(n: int) -> None:
    source, weights = sample("transformer")
    exe = build(compile_text(source_text("transformer")), weights)
    vm = VirtualMachine(exe, poison=True)
    args = inputs_for(source, {"n": n}, seed=n)
    assert_identical(interpret(source, weights, args), vm.run("main", args))
    # A second run reuses the pooled arena and the cached specialization.
    assert_identical(interpret(source, weights, args), vm.run("main", args))


def test_one_vm_runs_many_lengths() -> None:
    """Specializations per set of dim values are cached; interleaving them changes nothing."""
    _, weights = sample("transformer")
    text = source_text("transformer").replace("\n    attrs {upper_bounds = {n = 128}}", "")
    source = parse(text)
    assert source.get("main").upper_bounds() == {}
    vm = VirtualMachine(build(compile_text(text), weights), poison=True)
    for n in (3, 40, 3, 200, 40, 1):
        args = inputs_for(source, {"n": n}, seed=n)
        assert_identical(interpret(source, weights, args), vm.run("main", args))


@pytest.mark.parametrize("passes", list(PIPELINES))
def test_every_instruction(passes: str) -> None:
    source = parse(KITCHEN_SINK)
    exe = build(compile_text(KITCHEN_SINK, passes), KITCHEN_WEIGHTS)
    for n in (1, 3, 8):
        args = inputs_for(source, {"n": n}, seed=n)
        assert_identical(interpret(source, KITCHEN_WEIGHTS, args), vm_run(exe, args)[0])


def test_primitive_entry_function() -> None:
    source = parse(KITCHEN_SINK)
    exe = build(source, KITCHEN_WEIGHTS)
    args = inputs_for(source, {"n": 2}, entry="prim")
    assert_identical(
        interpret(source, KITCHEN_WEIGHTS, args, entry="prim"), vm_run(exe, args, entry="prim")[0]
    )


def test_results_are_the_callers() -> None:
    """Outputs never share memory with the VM's pool or constants, and inputs are not written."""
    text = """\
fn @main(%x: Tensor[(2, 2), f32]) -> Tuple[Tensor[(2, 2), f32], Tensor[(2, 2), f32], Tensor[(2, 2), f32]] {
  %c = const([[1.0, 2.0], [3.0, 4.0]], f32)
  %y = add(%x, %c)
  return (%y, %c, %x)
}
"""  # noqa: E501
    vm = VirtualMachine(build(compile_text(text)), poison=True)
    x = np.ones((2, 2), np.float32)
    y1, c1, x1 = vm.run("main", [x])
    assert all(a.flags.writeable for a in (y1, c1, x1))
    assert not np.shares_memory(x1, x)
    c1[...] = 0  # the caller may scribble on its results...
    y2, c2, _ = vm.run("main", [x])  # ...without changing the program's constants
    np.testing.assert_array_equal(c2, [[1, 2], [3, 4]])
    assert not np.shares_memory(y1, y2)
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(x, 1)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(programs())
def test_generated_programs_match_the_interpreter(prog) -> None:
    source = parse(prog.text, "generated.rx")
    args = inputs_for(source, prog.dims, seed=3)
    dims = prog.dims or None
    want = interpret(source, {}, args, dims)
    for passes in PIPELINES:
        module = compile_text(prog.text, passes, "generated.rx")
        exe = build(module)
        assert exe.module == module  # the bytecode holds the program exactly
        vm = VirtualMachine(exe, poison=True)
        assert_identical(want, vm.run("main", args, dims))
        assert_identical(want, vm.run("main", args, dims))  # again, with pooled memory


ELEMENTWISE_ATTRS = """\
fn @act(%a: Tensor[(n, 6), {t}]) -> Tensor[(n, 6), {t}] attrs {primitive = true} {
  %e = erf(%a)
  %r = leaky_relu(%e, 0.3)
  return %r
}

fn @main(%x: Tensor[(n, 6), {t}]) -> Tuple[Tensor[(n, 6), {t}], Tensor[(n, 6), {t}], Tensor[(n, 6), {t}]]
    attrs {upper_bounds = {n = 5}} {
  %a = leaky_relu(%x)
  %b = leaky_relu(%a, alpha=-2)
  %c = erf(%b)
  %d = call @act(%c)
  %f = leaky_relu(%x, alpha=1e-30)
  return (%d, %f, %c)
}
"""  # noqa: E501


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16"])
@pytest.mark.parametrize("passes", list(PIPELINES))
def test_erf_and_leaky_relu_attributes(dtype: str, passes: str) -> None:
    """erf and leaky_relu (its alpha positional, by keyword, an integer, tiny): the bytecode
    keeps every attribute and the VM gives the interpreter's bits, NaN and infinities included."""
    text = ELEMENTWISE_ATTRS.replace("{t}", dtype)
    source = parse(text)
    module = compile_text(text, passes)
    exe = build(module)
    assert exe.module == module
    vm = VirtualMachine(exe, poison=True)
    for n in (1, 5):
        args = inputs_for(source, {"n": n}, seed=n)
        args[0].reshape(-1)[:4] = [np.nan, np.inf, -np.inf, -0.0][: args[0].size]
        assert_identical(interpret(source, {}, args), vm.run("main", args))


# ---------------------------------------------------------------------------------------
# Runtime errors are the interpreter's


BOUNDED = """\
fn @main(%x: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32] attrs {upper_bounds = {n = 8}} {
  %y = relu(%x)
  return %y
}
"""


def test_dim_above_its_upper_bound_names_dim_value_and_bound() -> None:
    exe = build(compile_text(BOUNDED))
    vm = VirtualMachine(exe)
    with pytest.raises(RxError) as e:
        vm.run("main", [np.zeros((9, 4), np.float32)])
    assert e.value.message == (
        "dimension 'n' is 9, larger than its upper bound 8 in @main; the memory plan "
        "only holds sizes up to the bound (raise upper_bounds and rebuild)"
    )
    vm.run("main", [np.zeros((8, 4), np.float32)])  # the bound itself is fine


def test_callee_bounds_are_checked() -> None:
    text = """\
fn @inner(%a: Tensor[(m, 4), f32]) -> Tensor[(m, 4), f32] attrs {upper_bounds = {m = 2}} {
  %b = relu(%a)
  return %b
}

fn @main(%x: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32] {
  %y = call @inner(%x)
  return %y
}
"""
    exe = build(compile_text(text))
    VirtualMachine(exe).run("main", [np.zeros((2, 4), np.float32)])
    with pytest.raises(
        RxError, match="dimension 'm' is 3, larger than its upper bound 2 in @inner"
    ):
        VirtualMachine(exe).run("main", [np.zeros((3, 4), np.float32)])


@pytest.mark.parametrize(
    "bad, message",
    [
        ([np.zeros((2, 5), np.float32)], "input %x has shape (2, 5), expected (2, 4)"),
        (
            [np.zeros((2, 4), np.float64)],
            "input %x has dtype float64, but Tensor[(n, 4), f32] needs f32",
        ),
        ([], "@main takes 1 input(s), got 0"),
    ],
)
def test_bad_inputs_are_refused_like_the_interpreter(bad: list, message: str) -> None:
    exe = build(compile_text(BOUNDED))
    with pytest.raises(RxError) as e:
        VirtualMachine(exe).run("main", bad)
    assert message in e.value.message
    with pytest.raises(RxError) as ref:
        interpret(parse(BOUNDED), {}, bad)
    assert ref.value.message == e.value.message


def test_unknown_runtime_function_is_an_error_when_reached() -> None:
    text = """\
fn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  %o = call_packed("no.such.function", %x)
  return %x
}
"""
    exe = build(compile_text(text, "none"))
    with pytest.raises(RxError) as e:
        VirtualMachine(exe).run("main", [np.zeros(2, np.float32)])
    assert e.value.message == "call_packed: no runtime function named 'no.such.function'"
    assert any("instruction 0" in n for n in e.value.notes)


def test_unknown_function_name() -> None:
    exe = build(compile_text(BOUNDED))
    with pytest.raises(RxError, match="the program has no function @nope"):
        VirtualMachine(exe).run("nope", [])


# ---------------------------------------------------------------------------------------
# Found by the fuzzer (tests/fuzz)


def test_empty_result_of_a_primitive_call_does_not_take_over_its_argument() -> None:
    """A primitive function returning an empty split field of its argument: the VM adopted
    the argument's buffer as the fresh result and poisoned it when the result died, so the
    returned view of the argument read 0xFF."""
    text = """\
fn @prim(%a: Tensor[(5, 4), i16]) -> Tensor[(5, 0), i16] attrs {primitive = true} {
  %s = split(%a, (4,), axis=1)
  %e = %s.1
  return %e
}

fn @main(%x: Tensor[(5, 4), i16]) -> Tensor[(5, 4, 1), i16] {
  %r = call @prim(%x)
  %v = expand_dims(%x, axis=-1)
  return %v
}
"""
    source = parse(text)
    args = inputs_for(source)
    want = interpret(source, {}, args)
    for passes in PIPELINES:
        assert_identical(want, vm_run(build(compile_text(text, passes)), args)[0])


def test_kernel_refusing_a_symbolic_dim_value_is_the_interpreters_error() -> None:
    text = """\
fn @main(%x: Tensor[(1, 2, n, 3), f32]) -> Tensor[(1, 2, n - 1, 2), f32] {
  %p = max_pool2d(%x, pool_size=2)
  return %p
}
"""
    source = parse(text)
    args = inputs_for(source, {"n": 1})
    with pytest.raises(RxError) as ref:
        interpret(source, {}, args)
    with pytest.raises(RxError) as e:
        vm_run(build(compile_text(text, "none")), args)
    assert e.value.message == ref.value.message
    assert any("instruction 0 (kernel max_pool2d)" in n for n in e.value.notes)


def test_ieee_specials_do_not_print_numpy_warnings() -> None:
    import warnings

    text = """\
fn @main(%x: Tensor[(2,), f32], %w: Tensor[(2, 2), f32]) -> Tensor[(1, 2), f32] {
  %e = exp(%x)
  %e2 = reshape(%e, (1, 2))
  %mm = matmul(%e2, %w)
  return %mm
}
"""
    args = [np.array([1000, 1], np.float32), np.zeros((2, 2), np.float32)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, _ = vm_run(build(compile_text(text)), args)
    assert np.isnan(got[0]).all()


def test_primitive_function_returning_a_constant() -> None:
    """Each call's result was the constant itself: the VM adopted the read-only constant as a
    fresh block, and the second call shared that block without counting it, so a block was
    released twice (a crash) or the constant poisoned under a live value."""
    text = """\
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
"""
    source = parse(text)
    args = inputs_for(source)
    want = interpret(source, {}, args)
    for passes in PIPELINES:
        vm = VirtualMachine(build(compile_text(text, passes)), poison=True)
        for _ in range(2):
            assert_identical(want, vm.run("main", args))


def test_errors_come_in_program_order() -> None:
    """At n = 1 the first pool refuses its window; the second's output height (n - 4) / 2 + 1
    is negative. The VM evaluated every shape of a function before running it, so it
    reported the second error where the interpreter reports the first."""
    text = """\
fn @main(%x: Tensor[(1, 2, n, 3), f32]) -> Tuple[Tensor[(1, 2, n - 1, 2), f32], Tensor[(1, 2, (n - 4) / 2 + 1, 3), f32]] {
  %p = max_pool2d(%x, pool_size=2)
  %q = max_pool2d(%x, pool_size=(4, 1), strides=(2, 1))
  return (%p, %q)
}
"""  # noqa: E501
    source = parse(text)
    args = inputs_for(source, {"n": 1})
    with pytest.raises(RxError) as ref:
        interpret(source, {}, args)
    assert ref.value.message.startswith("max_pool2d: window of extent 2")
    for passes in ("none", "vm"):
        with pytest.raises(RxError) as e:
            vm_run(build(compile_text(text, passes)), args)
        if passes == "none":
            assert e.value.message == ref.value.message
        else:  # ManifestAlloc allocates the first pool's output first: its height n - 1 is 0, fine
            assert "max_pool2d: window of extent 2" in e.value.message
