"""The transformer operators of opsets 23/24 (RMSNormalization, RotaryEmbedding, Attention):
the onnx package's node tests through the interpreter and the VM (C for a sample), and
models built here against onnx's reference evaluator."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import pytest

from .util import feed_order, make_model, randn, run_interpreter

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from relaxc.frontend.onnx import import_onnx  # noqa: E402
from relaxc.ir.diagnostics import RxError  # noqa: E402
from tests.frontend.onnx import node_cases  # noqa: E402

OPS = ("RMSNormalization", "RotaryEmbedding", "Attention")


@lru_cache(maxsize=1)
def _cases() -> dict[str, Any]:
    return {c.name: c for c in node_cases.all_cases() if node_cases.tested_op(c) in OPS}


def _names(op: str, c_sample: bool = False) -> list[str]:
    """The non-expanded node tests of ``op`` at opsets relaxc reads (<= 24)."""
    out = []
    for name, case in sorted(_cases().items()):
        version = max(o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx"))
        if node_cases.tested_op(case) == op and not name.endswith("_expanded") and version <= 24:
            out.append(name)
    return out[::4] if c_sample else out


@pytest.mark.parametrize("name", _names("RMSNormalization"))
def test_rms_normalization_node_cases(name: str) -> None:
    outcome = node_cases.run_case(_cases()[name])
    assert outcome.status == "passed", outcome.message


@pytest.mark.parametrize("name", _names("RMSNormalization", c_sample=True))
def test_rms_normalization_node_cases_c(name: str) -> None:
    outcome = node_cases.run_case(_cases()[name], ("c",))
    assert outcome.status == "passed", outcome.message


def _reference(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(x) for x in ReferenceEvaluator(model).run(None, feeds)]


def _compare_with_reference(model: Any, feeds: dict[str, np.ndarray], rtol: float = 1e-5) -> None:
    result = import_onnx(model)
    got = run_interpreter(result, [feeds[n] for n in feed_order(model)])
    want = _reference(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-6)


def _rms_model(x_shape: tuple, s_shape: tuple, axis: int, **attrs: Any) -> Any:
    node = helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=axis, **attrs)
    return make_model(
        [node],
        [("x", np.float32, x_shape), ("s", np.float32, s_shape)],
        [("y", np.float32, None)],
        opset=23,
    )


@pytest.mark.parametrize(
    "s_shape, axis",
    [((5,), -1), ((1, 5), -1), ((4, 1), -2), ((3, 1, 1), 1), ((2, 1, 1, 5), 2)],
)
def test_rms_normalization_scale_broadcasts_to_x(s_shape: tuple, axis: int) -> None:
    """Scale broadcasts to X (unidirectionally), not only as the normalized dims."""
    model = _rms_model((2, 3, 4, 5), s_shape, axis, epsilon=1e-3)
    feeds = {"x": randn(2, 3, 4, 5, seed=1), "s": randn(*s_shape, seed=2)}
    _compare_with_reference(model, feeds)


def test_rms_normalization_refusals() -> None:
    model = _rms_model((2, 3), (3,), -1, stash_type=10)
    with pytest.raises(RxError, match="stash_type 10"):
        import_onnx(model)
    model = _rms_model((2, 3), (3,), 0)  # axis 0: scale (3,) does not broadcast as (2, 3)
    model.graph.input[1].type.tensor_type.shape.dim[0].dim_value = 2
    with pytest.raises(RxError, match="does not broadcast"):
        import_onnx(model)
