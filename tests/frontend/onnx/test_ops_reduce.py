"""The ONNX reductions, index-producing ops and Range: against onnxruntime, and the onnx
package's node tests through the interpreter and the VM (C for a sample)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from relaxc.frontend.onnx import import_onnx
from relaxc.ir import dims as D
from relaxc.ir.diagnostics import RxError

from .node_cases import _c, _interp, _vm
from .util import helper, make_model, randn, run_ort

F32 = np.float32


def _everywhere(model: Any, feeds: dict[str, np.ndarray], dims: dict[str, int]) -> None:
    """``model`` on the interpreter, the VM and C equals onnxruntime (exactly: integer or
    single-op results)."""
    result = import_onnx(model)
    want = run_ort(model, feeds)
    args = list(feeds.values())
    for run in (_interp, _vm, _c):
        got = run(result, args, dims)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, run.__name__
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=run.__name__)


# -- Range -------------------------------------------------------------------------------


def _range_of_width(start: int, delta: int, dtype: Any = np.int64) -> Any:
    """Range(start, Shape(x)[2], delta), as YOLOv8's exporter writes the anchor grid."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "two"], ["n"], axis=0),
        helper.make_node("Cast", ["n"], ["nc"], to=6 if dtype == np.int32 else 7),
        helper.make_node("Range", ["start", "nc", "delta"], ["r"]),
        helper.make_node("Relu", ["x"], ["y"]),
    ]
    init = {
        "two": np.array(2, np.int64),
        "start": np.array(start, dtype),
        "delta": np.array(delta, dtype),
    }
    outs = [("y", F32, None), ("r", dtype, None)]
    return make_model(nodes, [("x", F32, ["N", 3, "W"])], outs, init)


@pytest.mark.parametrize("start, delta", [(0, 1), (1, 2), (2, 3), (9, -2)])
def test_range_of_a_symbolic_dim_has_a_symbolic_length(start: int, delta: int) -> None:
    model = _range_of_width(start, delta)
    for w in (1, 7, 12):
        _everywhere(model, {"x": randn(2, 3, w)}, {"N": 2, "W": w})


def test_range_from_zero_by_one_is_as_long_as_the_dim() -> None:
    """Range(0, W, 1) has length W itself, so it broadcasts against tensors of width W."""
    result = import_onnx(_range_of_width(0, 1, np.int32))
    t = result.module.functions[0].ret_type.fields[1]
    assert t.shape == (D.Sym("W"),) and t.dtype == "i32"


@pytest.mark.parametrize(
    "start, limit, delta, dtype",
    [(0, 5, 1, np.int64), (10, 1, -3, np.int32), (1.0, 2.0, 0.25, np.float32), (3, 3, 1, np.int64)],
)
def test_constant_range_folds(start: Any, limit: Any, delta: Any, dtype: Any) -> None:
    nodes = [
        helper.make_node("Range", ["s", "l", "d"], ["r"]),
        helper.make_node("Add", ["x", "r"], ["y"]),
    ]
    init = {k: np.array(v, dtype) for k, v in (("s", start), ("l", limit), ("d", delta))}
    n = len(np.arange(start, limit, delta))
    model = make_model(nodes, [("x", dtype, [n])], [("y", dtype, None)], init, opset=11)
    result = import_onnx(model)
    assert "arange" not in str(result.module)  # folded into a constant
    _everywhere(model, {"x": np.arange(n).astype(dtype)}, {})


def test_range_of_runtime_values_is_refused_naming_the_node() -> None:
    node = helper.make_node("Range", ["s", "l", "d"], ["r"], name="grid")
    ins = [("s", np.int64, []), ("l", np.int64, []), ("d", np.int64, [])]
    model = make_model([node], ins, [("r", np.int64, None)], opset=11)
    with pytest.raises(RxError, match=r"node 'grid' \(Range\): the output length depends on"):
        import_onnx(model)


def test_range_with_zero_delta_is_refused() -> None:
    nodes = [helper.make_node("Range", ["s", "l", "d"], ["r"])]
    init = {"s": np.array(0, np.int64), "l": np.array(4, np.int64), "d": np.array(0, np.int64)}
    model = make_model(nodes, [], [("r", np.int64, None)], init, opset=11)
    with pytest.raises(RxError, match="delta input is 0"):
        import_onnx(model)
