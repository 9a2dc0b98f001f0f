"""Building ONNX models in tests and checking relaxc's import of them against onnxruntime."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from relaxc.backend.interpreter import Interpreter  # noqa: E402
from relaxc.frontend.onnx import ImportResult, import_onnx  # noqa: E402

NP_TO_ONNX = {
    np.dtype("float32"): TensorProto.FLOAT,
    np.dtype("float64"): TensorProto.DOUBLE,
    np.dtype("float16"): TensorProto.FLOAT16,
    np.dtype("int64"): TensorProto.INT64,
    np.dtype("int32"): TensorProto.INT32,
    np.dtype("int8"): TensorProto.INT8,
    np.dtype("uint8"): TensorProto.UINT8,
    np.dtype("int16"): TensorProto.INT16,
    np.dtype("uint16"): TensorProto.UINT16,
    np.dtype("uint64"): TensorProto.UINT64,
    np.dtype("bool"): TensorProto.BOOL,
}
ORT_TOLERANCE = {"float32": (1e-4, 1e-5), "float64": (1e-9, 1e-12), "float16": (1e-2, 1e-3)}
"""(rtol, atol) against onnxruntime: both compute in the dtype or wider, in different orders."""

Shape = Sequence["int | str"]


def tensor_info(name: str, dtype: Any, shape: Shape | None) -> Any:
    return helper.make_tensor_value_info(name, NP_TO_ONNX[np.dtype(dtype)], shape)


def make_model(
    nodes: Sequence[Any],
    inputs: Sequence[tuple[str, Any, Shape]],
    outputs: Sequence[tuple[str, Any, Shape | None]],
    initializers: Mapping[str, np.ndarray] | None = None,
    opset: int = 17,
    name: str = "test",
) -> Any:
    """A checked ONNX model of ``nodes`` (inputs/outputs as (name, numpy dtype, shape))."""
    graph = helper.make_graph(
        list(nodes),
        name,
        [tensor_info(*i) for i in inputs],
        [tensor_info(*o) for o in outputs],
        initializer=[
            numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()
        ],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="relaxc-tests"
    )
    model.ir_version = min(model.ir_version, 8)  # what the installed onnxruntime reads
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)  # fills the outputs' shapes
    onnx.checker.check_model(model)
    return model


def run_ort(model: Any, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return [np.asarray(x) for x in sess.run(None, dict(feeds))]


def flatten(v: Any) -> list[np.ndarray]:
    if isinstance(v, (tuple, list)):
        return [x for f in v for x in flatten(f)]
    return [np.asarray(v)]


def run_interpreter(
    result: ImportResult, args: Sequence[np.ndarray], dims: Mapping[str, int] | None = None
) -> list[np.ndarray]:
    return flatten(Interpreter(result.module, result.weights).run("main", list(args), dims))


def assert_matches(got: Sequence[np.ndarray], want: Sequence[np.ndarray], what: str = "") -> None:
    """Same shapes and dtypes; floats within ORT_TOLERANCE, everything else exactly."""
    assert len(got) == len(want), f"{what}: {len(got)} outputs, onnxruntime gives {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"{what} output {i}: shape {g.shape}, onnxruntime {w.shape}"
        assert g.dtype == w.dtype, f"{what} output {i}: dtype {g.dtype}, onnxruntime {w.dtype}"
        if w.dtype.kind == "f":
            rtol, atol = ORT_TOLERANCE[w.dtype.name]
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{what} output {i}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{what} output {i}")


def import_and_compare(
    model: Any,
    feeds: Mapping[str, np.ndarray],
    dims: Mapping[str, int] | None = None,
    **import_kw: Any,
) -> ImportResult:
    """Import ``model``, run it with the reference interpreter and check it against onnxruntime."""
    result = import_onnx(model, **import_kw)
    want = run_ort(model, feeds)
    got = run_interpreter(result, [feeds[p] for p in feed_order(model)], dims)
    assert_matches(got, want, "interpreter")
    return result


def feed_order(model: Any) -> list[str]:
    inits = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def randn(*shape: int, seed: int = 0, dtype: Any = np.float32) -> np.ndarray:
    return rng(seed).standard_normal(shape).astype(dtype)


def save(model: Any, folder: Path, name: str = "model.onnx") -> Path:
    path = folder / name
    onnx.save(model, str(path))
    return path
