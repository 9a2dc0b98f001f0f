"""The reference interpreter: samples against hand-written numpy, memory ops, kills, bounds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from relaxc.backend.interpreter import Interpreter
from relaxc.frontend.parser import parse_module
from relaxc.frontend.weights import load_npz
from relaxc.ir.diagnostics import RxError
from relaxc.ir.verifier import verify_module

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _run(src: str, *args, weights=None, dims=None, poison=True, check_kills=True):
    m = parse_module(src, "t.rx")
    types = verify_module(m, kills=check_kills)
    interp = Interpreter(m, weights, poison=poison, types=types)
    return interp.run("main", list(args), dims), interp


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_mlp_sample_matches_numpy() -> None:
    w = load_npz(SAMPLES / "mlp.npz")
    x = np.random.default_rng(0).normal(size=(8, 64)).astype(np.float32)
    interp = Interpreter(parse_module((SAMPLES / "mlp.rx").read_text()), w)
    got = interp.run("main", [x])
    h = np.maximum(x @ w["fc1.weight"].T + w["fc1.bias"], 0)
    h = np.maximum(h @ w["fc2.weight"].T + w["fc2.bias"], 0)
    want = _softmax(h @ w["fc3.weight"].T + w["fc3.bias"])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _layer_norm(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


@pytest.mark.parametrize("n", [1, 7, 128])
def test_transformer_sample_matches_numpy(n: int) -> None:
    from math import erf

    w = load_npz(SAMPLES / "transformer.npz")
    x = np.random.default_rng(n).normal(size=(n, 64)).astype(np.float32)
    got = Interpreter(parse_module((SAMPLES / "transformer.rx").read_text()), w).run("main", [x])
    x64 = x.astype(np.float64)
    ln1 = _layer_norm(x64, w["ln1.gamma"], w["ln1.beta"])
    proj = {k: ln1 @ w[f"attn.{k}.weight"].T + w[f"attn.{k}.bias"] for k in "qkv"}
    heads = {k: v.reshape(n, 4, 16).transpose(1, 0, 2) for k, v in proj.items()}
    p = _softmax(heads["q"] @ heads["k"].transpose(0, 2, 1) * 0.25)
    ctx = (p @ heads["v"]).transpose(1, 0, 2).reshape(n, 64)
    r1 = x64 + ctx @ w["attn.out.weight"].T + w["attn.out.bias"]
    f1 = _layer_norm(r1, w["ln2.gamma"], w["ln2.beta"]) @ w["mlp.fc1.weight"].T + w["mlp.fc1.bias"]
    act = 0.5 * f1 * (1 + np.vectorize(erf)(f1 / np.sqrt(2)))
    want = r1 + act @ w["mlp.fc2.weight"].T + w["mlp.fc2.bias"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_transformer_rejects_sequence_above_its_bound() -> None:
    w = load_npz(SAMPLES / "transformer.npz")
    interp = Interpreter(parse_module((SAMPLES / "transformer.rx").read_text()), w)
    with pytest.raises(RxError, match=r"dimension 'n' is 129, larger than its upper bound 128"):
        interp.run("main", [np.zeros((129, 64), np.float32)])


def test_cnn_sample_runs_and_is_deterministic() -> None:
    w = load_npz(SAMPLES / "cnn.npz")
    x = np.random.default_rng(0).normal(size=(1, 3, 32, 32)).astype(np.float32)
    m = parse_module((SAMPLES / "cnn.rx").read_text())
    a = Interpreter(m, w).run("main", [x])
    b = Interpreter(m, w).run("main", [x])
    assert a.shape == (1, 10) and np.isfinite(a).all()
    np.testing.assert_array_equal(a, b)


def test_relay_example_computes_2x_minus_y_as_a_view() -> None:
    x = np.arange(20, dtype=np.float32).reshape(2, 10)
    y = np.ones((2, 10), np.float32)
    got, _ = _run((SAMPLES / "relay_memory.rx").read_text(), x, y)
    np.testing.assert_array_equal(got, (2 * x - y).reshape(20))


MEMORY_PROGRAM = """
fn @main(%x: Tensor[(4,), f32], %y: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %s = memory.alloc_storage(32, align=64)
  %a = memory.alloc_tensor(%s, 0, (4,), f32)
  %b = memory.alloc_tensor(%s, 16, (4,), f32)
  invoke add(%x, %y) outs (%a)
  invoke multiply(%a, %a) outs (%b)
  %c = exp(%b)
  return %b
}
"""


def test_invoke_writes_into_planned_storage() -> None:
    x = np.array([1, 2, 3, 4], np.float32)
    y = np.array([1, 1, 1, 1], np.float32)
    got, interp = _run(MEMORY_PROGRAM, x, y)
    np.testing.assert_array_equal(got, (x + y) ** 2)
    # 32 bytes of storage, 16 for %c; %c is freed at return, the storage too (the result is copied).
    assert interp.stats.peak == 48
    assert interp.stats.current == 0


def test_overlapping_tensors_really_share_bytes() -> None:
    src = MEMORY_PROGRAM.replace("alloc_tensor(%s, 16,", "alloc_tensor(%s, 0,")
    x = np.array([1, 2, 3, 4], np.float32)
    got, _ = _run(src, x, x)
    # %b overwrote %a in place: the result is still (x + x)^2 because invoke reads first.
    np.testing.assert_array_equal(got, (2 * x) ** 2)


def test_alloc_tensor_outside_its_storage_is_an_error() -> None:
    """The verifier proves it before anything runs (issue 14, item 7); the interpreter's own
    check stays for programs run unverified."""
    src = MEMORY_PROGRAM.replace("alloc_tensor(%s, 16,", "alloc_tensor(%s, 24,")
    with pytest.raises(RxError, match=r"bytes \[24, 40\) does not fit in storage %s of 32 bytes"):
        _run(src, np.zeros(4, np.float32), np.zeros(4, np.float32))


def test_use_after_kill_fails_loudly() -> None:
    src = """
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %a = exp(%x)
  memory.kill_tensor(%a)
  %b = relu(%a)
  return %b
}
"""
    # The verifier's kill checker rejects it before anything runs ...
    with pytest.raises(RxError, match=r"%a is used after it was killed at line 4") as e:
        _run(src, np.zeros(4, np.float32))
    assert e.value.loc.line == 5 and e.value.loc.col == 13
    # ... and the interpreter catches it at run time when verification is bypassed.
    with pytest.raises(RxError, match=r"use of %a after it was killed \(killed at line 4\)") as e:
        _run(src, np.zeros(4, np.float32), check_kills=False)
    assert e.value.loc.line == 5


def test_kill_poisons_memory_seen_through_an_alias() -> None:
    src = """
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %a = exp(%x)
  %v = reshape(%a, (2, 2))
  memory.kill_tensor(%a)
  %b = reshape(%v, (4,))
  %c = add(%b, %x)
  return %c
}
"""
    with pytest.raises(RxError, match=r"%v is used after its memory was freed by the kill of %a"):
        _run(src, np.zeros(4, np.float32))
    got, _ = _run(src, np.zeros(4, np.float32), check_kills=False)
    assert np.isnan(got).all()  # the alias read poisoned bytes: a wrong kill changes results
    clean, _ = _run(src, np.zeros(4, np.float32), poison=False, check_kills=False)
    np.testing.assert_array_equal(clean, np.ones(4, np.float32))


def test_kill_storage_frees_its_bytes() -> None:
    src = """
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %s = memory.alloc_storage(1024)
  %a = memory.alloc_tensor(%s, 0, (4,), f32)
  invoke exp(%x) outs (%a)
  %b = add(%a, %x)
  memory.kill_tensor(%a)
  memory.kill_storage(%s)
  %c = relu(%b)
  return %c
}
"""
    _, interp = _run(src, np.zeros(4, np.float32))
    assert interp.stats.peak == 1024 + 16
    assert interp.stats.current == 0


def test_weights_are_never_modified() -> None:
    src = """
fn @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  %w: Tensor[(2,), f32] = const("w")
  %a = add(%x, %w)
  memory.kill_tensor(%w)
  return %a
}
"""
    w = {"w": np.array([1.0, 2.0], np.float32)}
    with pytest.raises(RxError, match="frees memory of a constant"):
        verify_module(parse_module(src))
    m = parse_module(src)
    interp = Interpreter(m, w, types=verify_module(m, kills=False))
    first = interp.run("main", [np.zeros(2, np.float32)])
    second = interp.run("main", [np.zeros(2, np.float32)])
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(w["w"], [1.0, 2.0])


def test_symbolic_primitive_call_and_tuple_results() -> None:
    src = """
fn @halves(%a: Tensor[(k, 2), f32]) -> Tuple[Tensor[(k, 1), f32], Tensor[(k, 1), f32]]
    attrs {primitive = true} {
  %s = split(%a, 2, axis=1)
  return %s
}

fn @main(%x: Tensor[(n, 2), f32]) -> Tensor[(n, 1), f32] {
  %t = call @halves(%x)
  %l = %t.0
  %r = %t.1
  %d = subtract(%l, %r)
  return %d
}
"""
    x = np.array([[5, 2], [1, 7], [0, 0]], np.float32)
    got, _ = _run(src, x)
    np.testing.assert_array_equal(got, [[3], [-6], [0]])


def test_inputs_are_checked() -> None:
    src = "fn @main(%x: Tensor[(n, 3), f32]) -> Tensor[(n, 3), f32] { return %x }"
    with pytest.raises(RxError, match="has dtype float64"):
        _run(src, np.zeros((2, 3)))
    with pytest.raises(RxError, match="has rank 1"):
        _run(src, np.zeros(3, np.float32))
    with pytest.raises(RxError, match=r"shape \(2, 4\), expected \(2, 3\)"):
        _run(src, np.zeros((2, 4), np.float32))
    with pytest.raises(RxError, match="'n' is 5"):
        _run(src, np.zeros((2, 3), np.float32), dims={"n": 5})


def test_kernel_results_never_alias_their_inputs() -> None:
    # numpy hands back a view for a one-element slice; killing the split field must not
    # poison the input (found by the generated-program differential test).
    src = """
fn @main(%x: Tensor[(1, 2), f32]) -> Tensor[(1, 2), f32] {
  %s = split(%x, 2, axis=1)
  %h = %s.0
  %c = concat(%h, %h, axis=1)
  memory.kill_tensor(%h)
  vm.kill_object(%s)
  memory.kill_tensor(%c)
  return %x
}
"""
    x = np.array([[0.5, -1.0]], np.float32)
    got, _ = _run(src, x)
    np.testing.assert_array_equal(got, x)


def test_empty_kernel_results_never_keep_their_input_buffer() -> None:
    # An empty slice shares no bytes with its input but keeps the input's buffer as its
    # base; the VM took that buffer for the result's own and poisoned it on release (found
    # by the fuzzer: tests/fuzz/test_regressions.py::test_empty_split_field_of_an_argument).
    from relaxc.backend.values import fresh

    x = np.arange(20, dtype=np.int16).reshape(5, 4)
    empty = np.split(x, [4], axis=1)[1]
    assert empty.size == 0 and empty.base is not None
    got = fresh(empty, [x])
    assert got.shape == (5, 0) and got.base is None


@pytest.mark.parametrize(
    "src, dims, message",
    [
        (
            """
fn @main(%x: Tensor[(1, 2, n, 3), f32]) -> Tensor[(1, 2, n - 1, 2), f32] {
  %p = max_pool2d(%x, pool_size=2)
  return %p
}""",
            {"n": 1},
            "max_pool2d: window of extent 2 (with dilation) is larger than the padded height 1",
        ),
        (
            """
fn @main(%x: Tensor[(n, 3), f32], %i: Tensor[(2,), i32]) -> Tensor[(2, 3), f32] {
  %t = take(%x, %i, axis=0)
  return %t
}""",
            {"n": 0},
            "take: axis 0 of data has length 0, there is nothing to take",
        ),
    ],
)
def test_kernel_refusing_a_symbolic_dim_value_is_an_error_at_the_statement(
    src: str, dims, message: str
) -> None:
    # The verifier cannot rule these out for a symbolic dim; the run used to end in an
    # internal error (OpError, or numpy's ValueError/IndexError) instead (found by the fuzzer).
    from relaxc.backend.inputs import random_inputs, resolve_dims

    m = parse_module(src, "t.rx")
    fn = m.get("main")
    args = random_inputs(fn, resolve_dims(fn, dims), 0)
    with pytest.raises(RxError) as e:
        Interpreter(m, {}).run("main", args, dims)
    assert e.value.message == message
    assert e.value.loc is not None and e.value.loc.line == 3


def test_softmax_over_an_axis_of_length_zero() -> None:
    """Regression: softmax over an axis whose symbolic length is 0 in a run crashed in numpy
    (a maximum of nothing); it is an empty result, on the interpreter and the VM alike."""
    from relaxc.backend.vm import VirtualMachine, compile_module, load_bytes

    text = """\
fn @main(%x: Tensor[(2, n), f32]) -> Tensor[(2, n), f32] {
  %y = softmax(%x, axis=1)
  return %y
}
"""
    module = parse_module(text, "t.rx")
    x = np.zeros((2, 0), np.float32)
    got = Interpreter(module, {}).run("main", [x], {"n": 0})
    assert got.shape == (2, 0) and got.dtype == np.float32
    exe = load_bytes(compile_module(module), "t.rxb")
    assert VirtualMachine(exe, poison=True).run("main", [x], {"n": 0}).shape == (2, 0)


def test_ieee_specials_do_not_print_numpy_warnings() -> None:
    # inf * 0 in multiply and inside matmul printed "RuntimeWarning: invalid value" on relaxc
    # run (found by the fuzzer); kernels follow IEEE and say nothing.
    import warnings

    src = """
fn @main(%x: Tensor[(2,), f32], %w: Tensor[(2, 2), f32]) -> Tuple[Tensor[(2,), f32], Tensor[(1, 2), f32]] {
  %e = exp(%x)
  %z = subtract(%x, %x)
  %m = multiply(%e, %z)
  %e2 = reshape(%e, (1, 2))
  %mm = matmul(%e2, %w)
  return (%m, %mm)
}
"""  # noqa: E501
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (m, mm), _ = _run(src, np.array([1000, 1], np.float32), np.zeros((2, 2), np.float32))
    assert np.isnan(m[0]) and np.isnan(mm[0]).all()
