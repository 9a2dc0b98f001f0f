"""conv2d_transpose (ONNX ConvTranspose): inference and the numpy kernel against a direct
scatter written out here."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.ir import dims as D
from relaxc.ir.nodes import Var
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import OpError, bind_args
from relaxc.ir.types import TensorType

OP = REGISTRY.get("conv2d_transpose")
assert OP is not None and OP.kernel is not None


def attrs_of(n_inputs: int, **kwargs: Any) -> dict[str, Any]:
    assert OP is not None
    vars_ = [Var(f"x{i}") for i in range(n_inputs)]
    return dict(bind_args(OP, vars_, list(kwargs.items())).attrs)


def scatter(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    strides: tuple,
    pads: tuple,
    dilation: tuple,
    out_pad: tuple,
    groups: int,
) -> np.ndarray:
    """Each input element times the kernel, added at its place in the full output."""
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilation
    fh = (h - 1) * sh + (kh - 1) * dh + 1 + out_pad[0]
    fw = (wd - 1) * sw + (kw - 1) * dw + 1 + out_pad[1]
    full = np.zeros((n, og * groups, fh, fw))
    cg = c // groups
    for bi, ci, i, j in np.ndindex(n, c, h, wd):
        g = ci // cg
        for o, p, q in np.ndindex(og, kh, kw):
            full[bi, g * og + o, i * sh + p * dh, j * sw + q * dw] += (
                x[bi, ci, i, j] * w[ci, o, p, q]
            )
    pt, pl, pb, pr = pads
    y = full[:, :, pt : fh - pb, pl : fw - pr]
    return y if b is None else y + b.reshape(1, -1, 1, 1)


@settings(max_examples=40, deadline=None)
@given(
    groups=st.sampled_from([1, 2]),
    hw=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    k=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    strides=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    pads=st.tuples(st.integers(0, 1), st.integers(0, 1), st.integers(0, 1), st.integers(0, 1)),
    out_pad=st.tuples(st.integers(0, 1), st.integers(0, 1)),
    bias=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_kernel_matches_the_direct_scatter(
    groups: int,
    hw: tuple,
    k: tuple,
    strides: tuple,
    dilation: tuple,
    pads: tuple,
    out_pad: tuple,
    bias: bool,
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, 2 * groups) + hw)
    w = rng.normal(size=(2 * groups, 3) + k)
    b = rng.normal(size=(3 * groups,)) if bias else None
    want = scatter(x, w, b, strides, pads, dilation, out_pad, groups)
    if min(want.shape) == 0:
        return
    attrs = attrs_of(
        3 if bias else 2,
        strides=strides,
        padding=pads,
        dilation=dilation,
        output_padding=out_pad,
        groups=groups,
    )
    got = OP.kernel([x, w] + ([b] if b is not None else []), attrs)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    t = OP.infer([TensorType(x.shape, "f64"), TensorType(w.shape, "f64")], attrs)
    assert isinstance(t, TensorType) and t.shape == want.shape


def test_f32_sums_in_f32_and_ints_wrap() -> None:
    x = np.ones((1, 1, 2, 2), np.float32)
    w = np.full((1, 1, 2, 2), 0.5, np.float32)
    y = OP.kernel([x, w], attrs_of(2, strides=(1, 1)))
    assert y.dtype == np.float32 and y[0, 0].tolist() == [[0.5, 1, 0.5], [1, 2, 1], [0.5, 1, 0.5]]
    xi = np.full((1, 1, 1, 1), 100, np.int8)
    wi = np.full((1, 1, 1, 1), 3, np.int8)
    assert OP.kernel([xi, wi], attrs_of(2))[0, 0, 0, 0] == np.int8(44)  # 300 wraps to 44


def test_symbolic_height_gives_a_symbolic_output_height() -> None:
    h = D.Sym("h")
    t = OP.infer(
        [TensorType((1, 4, h, 5), "f32"), TensorType((4, 2, 2, 2), "f32")],
        attrs_of(2, strides=(2, 2)),
    )
    assert isinstance(t, TensorType)
    assert t.shape[3] == 10 and D.evaluate(t.shape[2], {"h": 7}) == 14


@pytest.mark.parametrize(
    "shapes, kwargs, message",
    [
        (((1, 3, 4, 4), (4, 2, 2, 2)), {}, "input channels and the weight"),
        (((1, 4, 4, 4), (4, 2, 2, 2)), {"groups": 3}, "not divisible by groups"),
        (((1, 4, 2, 2), (4, 2, 1, 1)), {"padding": (2, 2, 2, 2)}, "negative output"),
        (((1, 4, 2, 2), (4, 2, 1, 1)), {"strides": (0, 1)}, "must be positive"),
    ],
)
def test_bad_calls_are_refused(shapes: tuple, kwargs: dict, message: str) -> None:
    with pytest.raises(OpError, match=message):
        OP.infer([TensorType(s, "f32") for s in shapes], attrs_of(2, **kwargs))
