"""The N-d window ops and the CNN normalizations: inference, and the numpy kernels against
onnx's reference implementation and against the 2-D ops (conv_nd over two spatial axes is
conv2d, and so on)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxc.ir import dims as D
from relaxc.ir.nodes import Var
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import OpError, bind_args
from relaxc.ir.types import TensorType

n = D.Sym("n")


def infer(name: str, shapes: Sequence[Sequence[Any]], dtype: str = "f32", **attrs: Any) -> Any:
    op = REGISTRY.get(name)
    assert op is not None
    bound = bind_args(op, [Var(f"x{i}") for i in range(len(shapes))], list(attrs.items()))
    return op.infer([TensorType(tuple(s), dtype) for s in shapes], bound.attrs)


def run(name: str, arrays: Sequence[np.ndarray], **attrs: Any) -> np.ndarray:
    op = REGISTRY.get(name)
    assert op is not None and op.kernel is not None
    bound = bind_args(op, [Var(f"x{i}") for i in range(len(arrays))], list(attrs.items()))
    return op.kernel(list(arrays), bound.attrs)


def onnx_ref(
    op_type: str, arrays: Sequence[np.ndarray], opset: int = 19, **attrs: Any
) -> np.ndarray:
    from onnx import helper as h
    from onnx.reference import ReferenceEvaluator

    names = [f"i{k}" for k in range(len(arrays))]
    node = h.make_node(op_type, names, ["y"], **attrs)
    graph = h.make_graph(
        [node],
        "g",
        [h.make_tensor_value_info(nm, 1, None) for nm in names],
        [h.make_tensor_value_info("y", 1, None)],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, dict(zip(names, arrays)))[0]


RNG = np.random.default_rng(7)
X5 = RNG.standard_normal((2, 4, 5, 6, 5)).astype(np.float32)


# -- inference -------------------------------------------------------------------------


def test_conv_nd_infers_every_spatial_axis_and_symbolic_sizes() -> None:
    t = infer(
        "conv_nd",
        [(2, 4, 5, 6, n), (6, 2, 2, 3, 2), (6,)],
        strides=(1, 2, 1),
        padding=(1, 0, 1, 0, 1, 1),
        dilation=(1, 1, 2),
        groups=2,
    )
    assert t.shape[:4] == (2, 6, 5, 3)
    assert D.dims_equal(t.shape[4], n)  # n + 2 padded, less the extent 3 of a dilated 2, + 1


def test_conv_nd_refuses_a_channel_mismatch_and_a_wrong_rank() -> None:
    with pytest.raises(OpError, match="in-channels"):
        infer("conv_nd", [(1, 4, 5, 5, 5), (6, 3, 1, 1, 1)])
    with pytest.raises(OpError, match="same rank"):
        infer("conv_nd", [(1, 4, 5, 5, 5), (6, 4, 1, 1)])
    with pytest.raises(OpError, match="'strides' needs 1 or 3"):
        infer("conv_nd", [(1, 4, 5, 5, 5), (6, 4, 1, 1, 1)], strides=(1, 2))


def test_pools_infer_ceil_mode_and_refuse_a_window_in_the_padding() -> None:
    t = infer("max_pool_nd", [(1, 2, 5, 6, 7)], pool_size=(2, 2, 2), strides=2, ceil_mode=True)
    assert t.shape == (1, 2, 3, 3, 4)
    t = infer("lp_pool_nd", [(1, 2, 9)], pool_size=(3,), padding=(1,))
    assert t.shape == (1, 2, 9)
    with pytest.raises(OpError, match="entirely in the padding"):
        infer("avg_pool_nd", [(1, 2, 5, 5, 5)], pool_size=(2, 2, 2), padding=(2, 0, 0, 0, 0, 0))
    with pytest.raises(OpError, match="rank 4 does not fit"):
        infer("max_pool_nd", [(1, 2, 5, 5)], pool_size=(2, 2, 2))
    with pytest.raises(OpError, match="p must be positive"):
        infer("lp_pool_nd", [(1, 2, 5)], pool_size=(2,), p=0.0)


def test_norms_infer_and_check_their_parameters() -> None:
    assert infer("group_norm", [(2, 4, 3, 3), (4,), (4,)], num_groups=2).shape == (2, 4, 3, 3)
    with pytest.raises(OpError, match="not divisible"):
        infer("group_norm", [(2, 4, 3), (4,), (4,)], num_groups=3)
    with pytest.raises(OpError, match="scale"):
        infer("group_norm", [(2, 4, 3), (2,), (4,)], num_groups=2)
    assert infer("inv_std_dev", [(2, 3, 4)], axes=(1, 2)).shape == (2, 1, 1)
    assert infer("inv_std_dev", [(2, 3, 4)], axes=(1,), keepdims=False).shape == (2, 4)
    assert infer("mean_variance_norm", [(2, 3, 4, 5)]).shape == (2, 3, 4, 5)
    with pytest.raises(OpError, match="float"):
        infer("mean_variance_norm", [(2, 3, 4, 5)], dtype="i32")


# -- kernels against onnx's reference ---------------------------------------------------


def test_conv_nd_matches_onnx_reference_in_3d() -> None:
    w = RNG.standard_normal((6, 2, 2, 3, 2)).astype(np.float32)
    b = RNG.standard_normal(6).astype(np.float32)
    got = run(
        "conv_nd",
        [X5, w, b],
        strides=(1, 2, 1),
        padding=(1, 0, 1, 0, 1, 1),
        dilation=(1, 1, 2),
        groups=2,
    )
    want = onnx_ref(
        "Conv", [X5, w, b], strides=[1, 2, 1], pads=[1, 0, 1, 0, 1, 1], dilations=[1, 1, 2], group=2
    )
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_conv_nd_integers_wrap_to_the_input_dtype() -> None:
    x = np.full((1, 1, 4), 100, np.int8)
    w = np.full((1, 1, 2), 2, np.int8)
    got = run("conv_nd", [x, w])
    assert got.dtype == np.int8 and (got == np.int8(np.int64(400) - 512)).all()


@pytest.mark.parametrize("include", [0, 1])
def test_avg_pool_nd_matches_onnx_reference(include: int) -> None:
    got = run(
        "avg_pool_nd",
        [X5],
        pool_size=(3, 2, 3),
        strides=(2, 1, 2),
        padding=(1, 0, 1, 1, 1, 0),
        dilation=(1, 2, 1),
        ceil_mode=True,
        count_include_pad=bool(include),
    )
    want = onnx_ref(
        "AveragePool",
        [X5],
        kernel_shape=[3, 2, 3],
        strides=[2, 1, 2],
        pads=[1, 0, 1, 1, 1, 0],
        dilations=[1, 2, 1],
        ceil_mode=1,
        count_include_pad=include,
    )
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_max_and_lp_pool_nd_match_onnx_reference() -> None:
    attrs = dict(pool_size=(3, 2, 3), strides=(2, 1, 2), padding=(1, 0, 1, 1, 1, 0))
    onnx_attrs = dict(kernel_shape=[3, 2, 3], strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 0])
    np.testing.assert_array_equal(
        run("max_pool_nd", [X5], **attrs), onnx_ref("MaxPool", [X5], **onnx_attrs)
    )
    for p in (1, 2, 3):
        np.testing.assert_allclose(
            run("lp_pool_nd", [X5], p=float(p), **attrs),
            onnx_ref("LpPool", [X5], p=p, **onnx_attrs),
            rtol=1e-5,
        )


def test_group_norm_matches_onnx_reference_at_opset_21() -> None:
    x = RNG.standard_normal((2, 6, 3, 4)).astype(np.float32)
    s, b = RNG.standard_normal(6).astype(np.float32), RNG.standard_normal(6).astype(np.float32)
    got = run("group_norm", [x, s, b], num_groups=3, epsilon=1e-3)
    want = onnx_ref("GroupNormalization", [x, s, b], opset=21, num_groups=3, epsilon=1e-3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_mean_variance_norm_and_inv_std_dev() -> None:
    x = RNG.standard_normal((3, 2, 4, 5)).astype(np.float32)
    got = run("mean_variance_norm", [x], axes=(0, 2, 3))
    np.testing.assert_allclose(
        got, onnx_ref("MeanVarianceNormalization", [x]), rtol=1e-5, atol=1e-6
    )
    x = x.astype(np.float64)
    inv = run("inv_std_dev", [x], axes=(1, 2), epsilon=0.5)
    want = 1 / np.sqrt(x.var(axis=(1, 2), keepdims=True) + 0.5)
    np.testing.assert_allclose(inv, want, rtol=1e-12)


# -- the N-d ops over two spatial axes are the 2-D ones ----------------------------------


@settings(max_examples=25, deadline=None)
@given(
    k=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    s=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    pad=st.tuples(*(st.integers(0, 1) for _ in range(4))),
    ceil=st.booleans(),
    include=st.booleans(),
    seed=st.integers(0, 99),
)
def test_nd_pools_over_two_axes_are_the_2d_pools(
    k: tuple[int, int],
    s: tuple[int, int],
    pad: tuple[int, ...],
    ceil: bool,
    include: bool,
    seed: int,
) -> None:
    if max(pad[0], pad[2]) >= k[0] or max(pad[1], pad[3]) >= k[1]:
        return
    x = np.random.default_rng(seed).standard_normal((2, 3, 6, 7)).astype(np.float32)
    top, left, bottom, right = pad
    nd = dict(pool_size=k, strides=s, padding=(top, left, bottom, right), ceil_mode=ceil)
    two = dict(pool_size=k, strides=s, padding=(top, left, bottom, right), ceil_mode=ceil)
    np.testing.assert_array_equal(run("max_pool_nd", [x], **nd), run("max_pool2d", [x], **two))
    np.testing.assert_allclose(
        run("avg_pool_nd", [x], count_include_pad=include, **nd),
        run("avg_pool2d", [x], count_include_pad=include, **two),
        rtol=1e-6,
    )


@settings(max_examples=25, deadline=None)
@given(
    k=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    s=st.integers(1, 2),
    pad=st.integers(0, 2),
    groups=st.sampled_from([1, 2]),
    seed=st.integers(0, 99),
)
def test_conv_nd_over_two_axes_is_conv2d(
    k: tuple[int, int], s: int, pad: int, groups: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 4, 6, 5))
    w = rng.standard_normal((4, 4 // groups, *k))
    attrs = dict(strides=s, padding=pad, groups=groups)
    np.testing.assert_allclose(
        run("conv_nd", [x, w], **attrs), run("conv2d", [x, w], **attrs), rtol=1e-12, atol=1e-12
    )


def test_group_norm_with_one_channel_per_group_is_instance_norm() -> None:
    x = RNG.standard_normal((2, 3, 4, 5))
    s, b = np.array([1.0, 2.0, 0.5]), np.array([0.0, -1.0, 3.0])
    got = run("group_norm", [x, s, b], num_groups=3, epsilon=1e-5)
    mean, var = x.mean(axis=(2, 3), keepdims=True), x.var(axis=(2, 3), keepdims=True)
    want = (x - mean) / np.sqrt(var + 1e-5) * s[None, :, None, None] + b[None, :, None, None]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("order", [0, 1])
def test_max_pool_indices_match_onnx_reference(order: int) -> None:
    from onnx import helper as h
    from onnx.reference import ReferenceEvaluator

    x = RNG.standard_normal((2, 3, 5, 6)).astype(np.float32)
    node = h.make_node(
        "MaxPool",
        ["x"],
        ["y", "i"],
        kernel_shape=[3, 2],
        strides=[2, 2],
        pads=[1, 0, 1, 1],
        storage_order=order,
    )
    graph = h.make_graph(
        [node],
        "g",
        [h.make_tensor_value_info("x", 1, None)],
        [h.make_tensor_value_info("y", 1, None), h.make_tensor_value_info("i", 7, None)],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 12)])
    want = ReferenceEvaluator(model).run(None, {"x": x})[1]
    got = run(
        "max_pool_indices",
        [x],
        pool_size=(3, 2),
        strides=(2, 2),
        padding=(1, 0, 1, 1),
        storage_order=order,
    )
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)
