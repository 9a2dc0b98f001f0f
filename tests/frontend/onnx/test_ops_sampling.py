"""GridSample and AffineGrid from ONNX: against onnxruntime on random inputs for every mode,
padding mode and alignment (2-D and 3-D), the opset-16 spellings, refusals in sentences,
and the onnx package's node tests through the interpreter and the VM (C too)."""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np
import pytest
from onnx import helper

from relaxc.frontend.onnx import import_onnx
from relaxc.ir.diagnostics import RxError

from tests.backend.c.cbuild import needs_cc

from .node_cases import all_cases, run_case, select
from .util import import_and_compare, make_model, randn, rng, run_interpreter

OPS = ["GridSample", "AffineGrid"]


@functools.cache
def node_cases() -> tuple[Any, ...]:
    return tuple(select(all_cases(), OPS))


def uses_if(case: Any) -> bool:
    """The expanded AffineGrid cases branch with If, which relaxc does not import."""
    return any(n.op_type == "If" for n in case.model.graph.node)


def grid_sample_model(x: tuple, grid: tuple, attrs: dict, opset: int = 22) -> Any:
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], **attrs)
    return make_model(
        [node],
        [("x", np.float32, list(x)), ("grid", np.float32, list(grid))],
        [("y", np.float32, None)],
        opset=opset,
    )


def feeds(x: tuple, grid: tuple, seed: int) -> dict[str, np.ndarray]:
    g = rng(seed + 1).uniform(-1.6, 1.6, grid).astype(np.float32)
    return {"x": randn(*x, seed=seed), "grid": g}


@pytest.mark.parametrize(
    "mode,padding,align",
    list(
        itertools.product(["nearest", "linear", "cubic"], ["zeros", "border", "reflection"], [0, 1])
    ),
)
def test_grid_sample_2d_matches_onnxruntime(mode: str, padding: str, align: int) -> None:
    attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
    x, grid = (2, 3, 5, 6), (2, 4, 7, 2)
    import_and_compare(grid_sample_model(x, grid, attrs), feeds(x, grid, 3))


@pytest.mark.parametrize(
    "mode,padding,align",
    list(itertools.product(["nearest", "linear"], ["zeros", "border", "reflection"], [0, 1])),
)
def test_grid_sample_3d_matches_onnxruntime(mode: str, padding: str, align: int) -> None:
    attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
    x, grid = (1, 2, 3, 4, 5), (1, 2, 3, 4, 3)
    import_and_compare(grid_sample_model(x, grid, attrs), feeds(x, grid, 5))


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest"])
def test_grid_sample_16_spells_the_modes_bilinear_and_bicubic(mode: str) -> None:
    x, grid = (1, 2, 4, 4), (1, 3, 5, 2)
    model = grid_sample_model(x, grid, {"mode": mode, "padding_mode": "border"}, opset=16)
    import_and_compare(model, feeds(x, grid, 9))


def test_grid_sample_refuses_an_other_opsets_mode_with_a_sentence() -> None:
    x, grid = (1, 2, 4, 4), (1, 3, 5, 2)
    model = grid_sample_model(x, grid, {"mode": "bilinear"}, opset=16)
    model.opset_import[0].version = 20
    with pytest.raises(RxError, match="mode 'bilinear' is not one of opset 20's"):
        import_onnx(model)


def affine_grid_model(theta: tuple, size: list[int], align: int) -> Any:
    node = helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align)
    return make_model(
        [node],
        [("theta", np.float32, list(theta))],
        [("grid", np.float32, None)],
        {"size": np.asarray(size, np.int64)},
        opset=20,
    )


@pytest.mark.parametrize(
    "size,align",
    [([2, 3, 4, 5], 0), ([2, 3, 4, 5], 1), ([2, 1, 3, 4, 2], 0), ([2, 1, 3, 4, 2], 1)]
    + [([2, 3, 1, 3], 0), ([2, 1, 1, 2, 1], 0)],
)
def test_affine_grid_matches_onnxruntime(size: list[int], align: int) -> None:
    r = len(size) - 2
    theta = (2, r, r + 1)
    import_and_compare(affine_grid_model(theta, size, align), {"theta": randn(*theta, seed=4)})


def test_affine_grid_refuses_align_corners_on_a_length_of_one() -> None:
    """onnx's reference, onnxruntime and PyTorch place the one position at -1, 1 and 0."""
    with pytest.raises(RxError, match="no agreed grid"):
        import_onnx(affine_grid_model((2, 2, 3), [2, 3, 1, 3], 1))


def test_affine_grid_then_grid_sample_with_the_identity_returns_the_input() -> None:
    nodes = [
        helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=1),
        helper.make_node("GridSample", ["x", "grid"], ["y"], align_corners=1, mode="cubic"),
    ]
    model = make_model(
        nodes,
        [("x", np.float32, [1, 2, 3, 4])],
        [("y", np.float32, None)],
        {
            "theta": np.array([[[1, 0, 0], [0, 1, 0]]], np.float32),
            "size": np.array([1, 2, 3, 4], np.int64),
        },
        opset=20,
    )
    x = randn(1, 2, 3, 4, seed=2)
    import_and_compare(model, {"x": x})


def test_affine_grid_of_an_empty_size_is_empty() -> None:
    """(onnxruntime refuses a length of 0; onnx's reference and relaxc give an empty grid)"""
    result = import_onnx(affine_grid_model((2, 2, 3), [2, 1, 0, 3], 1))
    (y,) = run_interpreter(result, [randn(2, 2, 3)])
    assert y.shape == (2, 0, 3, 2) and y.dtype == np.float32


def test_affine_grid_refuses_a_size_of_an_other_batch() -> None:
    with pytest.raises(RxError, match="size's batch 3 is not theta's, 2"):
        import_onnx(affine_grid_model((2, 2, 3), [3, 3, 4, 5], 0))


def test_affine_grid_refuses_a_theta_that_does_not_fit_the_size() -> None:
    model = affine_grid_model((2, 2, 3), [2, 3, 4, 5], 0)
    model.graph.initializer[0].CopyFrom(
        helper.make_tensor("size", 7, [5], [2, 3, 4, 5, 6])  # 3-D size for a 2-D theta
    )
    with pytest.raises(RxError, match=r"theta must be \(N, 3, 4\)"):
        import_onnx(model)


def test_node_tests_pass_or_are_refused_for_if() -> None:
    cases = node_cases()
    assert len(cases) >= 26
    for case in cases:
        outcome = run_case(case)
        if uses_if(case):
            assert outcome.status == "refused" and "If" in outcome.message, (case.name, outcome)
        else:
            assert outcome.status == "passed", (case.name, outcome.message)


@needs_cc
def test_node_tests_pass_in_c_for_a_sample() -> None:
    for case in [c for c in node_cases() if not uses_if(c)][::3]:
        outcome = run_case(case, ("c",))
        assert outcome.status == "passed", (case.name, outcome.message)
