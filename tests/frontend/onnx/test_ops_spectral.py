"""DFT and STFT (convert_spectral.py): against onnxruntime on the interpreter, the VM and C,
against numpy's FFT as a property, their refusals, and the onnx package's node tests."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.frontend.onnx import import_onnx
from relaxc.ir.diagnostics import RxError

from .node_cases import TIERS, _c, _interp, _vm, all_cases, run_case, select
from .util import feed_order, helper, make_model, randn, run_ort

F32 = np.float32
I64 = np.int64


def _everywhere(model: Any, feeds: dict[str, np.ndarray], dims: dict[str, int]) -> None:
    """``model`` on the interpreter, the VM and C equals onnxruntime to within 1e-5 of the
    largest output magnitude: onnxruntime sums its FFT in float32, relaxc in float64, so
    the two differ by float32 roundings of the sums, not in the last digit only."""
    result = import_onnx(model)
    want = run_ort(model, feeds)
    args = [feeds[n] for n in feed_order(model)]
    for run in (_interp, _vm, _c):
        got = run(result, args, dims)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, run.__name__
            scale = max(1.0, float(np.abs(w).max()))
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-5 * scale, err_msg=run.__name__)


def _dft_model(x_shape: tuple[int, ...], opset: int, n_fft: int | None, axis: int, **attrs: Any):
    inits: dict[str, np.ndarray] = {}
    names = ["x", "" if n_fft is None else "n"]
    if n_fft is not None:
        inits["n"] = np.array(n_fft, I64)
    if opset >= 20:
        names.append("axis")
        inits["axis"] = np.array(axis, I64)
    else:
        attrs["axis"] = axis
    while names and names[-1] == "":
        names.pop()
    node = helper.make_node("DFT", names, ["y"], **attrs)
    return make_model(
        [node], [("x", F32, list(x_shape))], [("y", F32, None)], initializers=inits, opset=opset
    )


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize(
    ("x_shape", "axis", "n_fft", "attrs"),
    [
        ((2, 8, 1), 1, None, {}),
        ((2, 8, 2), 1, None, {}),
        ((2, 5, 3, 2), 1, 7, {}),  # zero-padded
        ((2, 5, 3, 1), 2, 2, {}),  # cropped
        ((3, 9, 1), 1, None, {"onesided": 1}),
        ((3, 8, 2), 1, None, {"inverse": 1}),
        ((2, 4, 6, 2), 2, None, {"inverse": 1, "onesided": 1}),  # IRFFT, n = 10
        ((2, 5, 2), 1, 9, {"inverse": 1, "onesided": 1}),  # IRFFT, odd n
    ],
)
def test_dft_matches_onnxruntime(opset: int, x_shape, axis: int, n_fft, attrs) -> None:
    x = randn(*x_shape)
    _everywhere(_dft_model(x_shape, opset, n_fft, axis, **attrs), {"x": x}, {})


def _numpy_dft(x: np.ndarray, n: int, inverse: bool, onesided: bool) -> np.ndarray:
    z = x[..., 0] + (1j * x[..., 1] if x.shape[-1] == 2 else 0)
    if inverse and onesided:
        return np.fft.irfft(z, n=n, axis=1)[..., None]
    y = np.fft.ifft(z, n=n, axis=1) if inverse else np.fft.fft(z, n=n, axis=1)
    if onesided:
        y = y[:, : n // 2 + 1]
    return np.stack([y.real, y.imag], -1)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    st.integers(1, 12),
    st.integers(1, 14),
    st.sampled_from([(False, False), (False, True), (True, False), (True, True)]),
    st.integers(1, 2),
)
def test_dft_is_numpys_fft(length: int, n: int, mode: tuple[bool, bool], parts: int) -> None:
    """Property: every length, dft_length (cropping and zero padding), direction and side
    gives numpy's FFT of the same signal, to float32's precision."""
    inverse, onesided = mode
    if onesided and not inverse:
        parts = 1
    if onesided and inverse:
        parts = 2
    x = randn(2, length, parts, seed=length * 31 + n)
    model = _dft_model(x.shape, 20, n, 1, inverse=int(inverse), onesided=int(onesided))
    got = _interp(import_onnx(model), [x], {})[0]
    want = _numpy_dft(x.astype(np.float64), n, inverse, onesided)
    assert got.shape == want.shape and got.dtype == F32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize(
    ("length", "step", "window", "onesided"),
    [(64, 8, 16, True), (50, 7, 12, False), (33, 33, 33, True)],
)
def test_stft_matches_onnxruntime(length: int, step: int, window: int, onesided: bool) -> None:
    inits = {"step": np.array(step, I64), "w": np.hanning(window).astype(F32)}
    node = helper.make_node("STFT", ["x", "step", "w"], ["y"], onesided=int(onesided))
    model = make_model(
        [node], [("x", F32, [2, length, 1])], [("y", F32, None)], initializers=inits, opset=17
    )
    _everywhere(model, {"x": randn(2, length, 1)}, {})


def test_stft_with_a_frame_length_and_no_window() -> None:
    inits = {"step": np.array(4, I64), "len": np.array(10, I64)}
    node = helper.make_node("STFT", ["x", "step", "", "len"], ["y"])
    model = make_model(
        [node], [("x", F32, [1, 30, 1])], [("y", F32, None)], initializers=inits, opset=17
    )
    _everywhere(model, {"x": randn(1, 30, 1)}, {})


def test_a_one_sided_forward_dft_of_a_complex_input_is_refused() -> None:
    node = helper.make_node("DFT", ["x"], ["y"], onesided=1, axis=1)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", 1, [2, 8, 2])],
        [helper.make_tensor_value_info("y", 1, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(RxError, match="one-sided forward DFT takes a real input"):
        import_onnx(model)


def test_a_dft_over_a_symbolic_axis_is_refused_naming_the_length() -> None:
    node = helper.make_node("DFT", ["x"], ["y"], name="spec", axis=1)
    model = make_model([node], [("x", F32, [2, "T", 1])], [("y", F32, None)], opset=17)
    with pytest.raises(RxError, match="spec.*length of the transformed axis \\(T\\)"):
        import_onnx(model)


NODE_OPS = ["DFT", "STFT", "MelWeightMatrix"]


@pytest.mark.parametrize("k", TIERS)
def test_node_tests_pass_on_the_interpreter_and_the_vm(k: int) -> None:
    cases = select(all_cases(), NODE_OPS)
    assert len(cases) >= 13
    outcomes = {c.name: run_case(c) for c in cases[::k]}
    assert {n: o.status for n, o in outcomes.items() if o.status != "passed"} == {}


@pytest.mark.parametrize("name", ["test_dft_irfft", "test_stft_with_window"])
def test_node_tests_pass_in_c(name: str) -> None:
    case = next(c for c in all_cases() if c.name == name)
    assert run_case(case, ("interp", "vm", "c")).status == "passed"


def _mel_model(bins: int, n_fft: int, rate: int, low: float, high: float) -> Any:
    inits = {
        "bins": np.array(bins, I64),
        "n": np.array(n_fft, I64),
        "rate": np.array(rate, I64),
        "low": np.array(low, F32),
        "high": np.array(high, F32),
    }
    node = helper.make_node("MelWeightMatrix", list(inits), ["m"])
    nodes = [node, helper.make_node("MatMul", ["x", "m"], ["y"])]
    return make_model(
        nodes,
        [("x", F32, [3, n_fft // 2 + 1])],
        [("y", F32, None)],
        initializers=inits,
        opset=17,
    )


@pytest.mark.parametrize(
    ("bins", "n_fft", "rate", "low", "high"),
    [(8, 16, 8192, 0.0, 4096.0), (10, 64, 16000, 20.0, 7600.0), (3, 9, 100, 5.0, 30.0)],
)
def test_mel_weight_matrix_matches_onnxruntime(bins, n_fft, rate, low, high) -> None:
    model = _mel_model(bins, n_fft, rate, low, high)
    _everywhere(model, {"x": randn(3, n_fft // 2 + 1)}, {})


def test_mel_weight_matrix_is_a_constant_of_triangles_peaking_at_one() -> None:
    from relaxc.frontend.onnx.convert_spectral import mel_weight_matrix

    m = mel_weight_matrix(12, 512, 16000, 0.0, 8000.0)
    assert m.shape == (257, 12)
    assert m.min() == 0.0 and np.all(m.max(axis=0) == 1.0)
    for band in m.T:  # one rise and one fall: nonzero on one run of bins
        nz = np.nonzero(band)[0]
        assert np.all(np.diff(nz) == 1)
        peak = int(np.argmax(band))
        assert np.all(np.diff(band[nz[0] : peak + 1]) > 0)
        assert np.all(np.diff(band[peak : nz[-1] + 1]) < 0)


def test_a_filter_bank_beyond_the_spectrum_is_refused() -> None:
    with pytest.raises(RxError, match="upper edge lies beyond the one-sided spectrum"):
        import_onnx(_mel_model(8, 16, 100, 0.0, 400.0))
