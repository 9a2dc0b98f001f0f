"""Models as torch.onnx.export writes them (tests/data/exported: the dynamo exporter and the
TorchScript one, batch and sequence axes dynamic) import with symbolic dims and give
onnxruntime's results on the interpreter, the VM and in C at several sizes.

The files were made by tests/data/exported/make_models.py (which needs torch; these tests do
not): their shape computations (Shape -> Gather -> Concat -> Reshape, Range of a sequence
length, Slice to a computed end, Where(Equal(shape, -1), ...), Resize to computed sizes)
must fold at import time into static or symbolic shapes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from click.testing import CliRunner

from relaxc.cli.main import cli
from relaxc.frontend.onnx import import_onnx
from relaxc.ir import dims as D
from relaxc.ir.diagnostics import RxError

from tests.backend.c.cbuild import needs_cc

from . import node_cases
from .util import onnx, run_ort

DATA = Path(__file__).resolve().parents[2] / "data" / "exported"
MANIFEST: dict[str, Any] = json.loads((DATA / "models.json").read_text())

# name -> (--shape overrides, --bound values, the dims of each run)
RUNS: dict[str, tuple[dict[str, list], dict[str, int], list[dict[str, int]]]] = {
    "cnn": ({}, {}, [{"batch": 1}, {"batch": 3}]),
    "positions": (
        {},
        {},
        [{"batch": 1, "seq": 1}, {"batch": 2, "seq": 7}, {"batch": 3, "seq": 12}],
    ),
    "patterns": ({}, {}, [{"batch": 1, "seq": 1}, {"batch": 2, "seq": 6}, {"batch": 3, "seq": 9}]),
    "encoder": ({}, {}, [{"batch": 1, "seq": 1}, {"batch": 2, "seq": 7}, {"batch": 3, "seq": 12}]),
    "bert": ({}, {}, [{"batch": 1, "seq": 1}, {"batch": 2, "seq": 7}, {"batch": 2, "seq": 64}]),
    "gpt2": ({}, {}, [{"batch": 1, "seq": 1}, {"batch": 2, "seq": 7}, {"batch": 3, "seq": 20}]),
    "vit": ({}, {}, [{"batch": 1}, {"batch": 4}]),
    "t5": ({}, {}, [{"batch": 1, "seq": 1}, {"batch": 2, "seq": 7}, {"batch": 2, "seq": 30}]),
    "whisper": ({}, {}, [{"batch": 1}, {"batch": 3}]),
    # TorchScript's trace wrote the example's sequence length (7) into a Reshape, which
    # onnxruntime too refuses at any other length: imported with that length
    "encoder_script": (
        {"x": ["batch", 7, 32]},
        {},
        [{"batch": 1, "seq": 7}, {"batch": 3, "seq": 7}],
    ),
    # Resize to computed sizes needs static spatial lengths (relaxc's resize has static taps)
    "upsample": (
        {"x": ["batch", 2, 12, 10]},
        {},
        [{"batch": 1, "height": 12, "width": 10}, {"batch": 3, "height": 12, "width": 10}],
    ),
}

MODELS = sorted(MANIFEST)


def _base(key: str) -> str:
    """The RUNS entry of a model: its own, or its network's (``bert`` for ``bert_dynamo``)."""
    return key if key in RUNS else key.rsplit("_", 1)[0]


def feeds(key: str, dims: dict[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for spec in MANIFEST[key]["inputs"]:
        shape = [dims[d] if isinstance(d, str) else d for d in spec["shape"]]
        if spec["dtype"] == "int64":
            out[spec["name"]] = rng.integers(0, spec["high"], shape).astype(np.int64)
        else:
            out[spec["name"]] = rng.standard_normal(shape).astype(np.float32)
    return out


def symbolic_dims(key: str) -> set[str]:
    """The dims left symbolic: the model's named ones no --shape of RUNS fixes."""
    shapes = RUNS[_base(key)][0]
    return {
        d
        for s in MANIFEST[key]["inputs"]
        for d in shapes.get(s["name"], s["shape"])
        if isinstance(d, str)
    }


def imported(key: str, bounds: dict[str, int] | None = None) -> Any:
    shapes, given, _ = RUNS[_base(key)]
    wanted = {k: v for k, v in {**given, **(bounds or {})}.items() if k in symbolic_dims(key)}
    return import_onnx(
        DATA / f"{key}.onnx", input_shapes=shapes or None, upper_bounds=wanted or None
    )


def dims_of(result: Any, args: list[np.ndarray]) -> dict[str, int]:
    """The values of the parameters' symbolic dims, read off ``args``."""
    out: dict[str, int] = {}
    for p, a in zip(result.module.functions[0].params, args):
        for d, n in zip(p.type.shape, a.shape):
            if isinstance(d, D.Sym):
                out[d.name] = int(n)
    return out


def check(key: str, backend: str, bounds: dict[str, int] | None = None) -> float:
    """The largest error relative to the largest output magnitude, over the runs."""
    result = imported(key, bounds)
    model = onnx.load(str(DATA / f"{key}.onnx"))
    worst = 0.0
    for dims in RUNS[_base(key)][2]:
        inputs = feeds(key, dims)
        (want,) = run_ort(model, inputs)
        args = [inputs[s["name"]] for s in MANIFEST[key]["inputs"]]
        (got,) = node_cases.RUNNERS[backend](result, args, dims_of(result, args))
        assert got.shape == want.shape, f"{key} {backend} {dims}: {got.shape} vs {want.shape}"
        scale = max(float(np.abs(want).max()), 1e-30)
        err = float(np.abs(got.astype(np.float64) - want).max()) / scale
        assert err <= 1e-5, f"{key} {backend} {dims}: relative error {err:.2e}"
        worst = max(worst, err)
    return worst


def test_the_committed_models_are_small_and_listed() -> None:
    files = sorted(p.stem for p in DATA.glob("*.onnx"))
    assert files == MODELS
    assert sum(p.stat().st_size for p in DATA.glob("*.onnx")) < 2_000_000
    assert all(_base(k) in RUNS for k in MODELS)


@pytest.mark.parametrize("key", MODELS)
def test_imports_with_symbolic_dims(key: str) -> None:
    result = imported(key)
    (param,) = result.module.functions[0].params
    names = set().union(*(D.free_vars(d) for d in param.type.shape))  # type: ignore[attr-defined]
    assert names == symbolic_dims(key)


@pytest.mark.parametrize("key", MODELS)
@pytest.mark.parametrize("backend", ["interp", "vm"])
def test_matches_onnxruntime(key: str, backend: str) -> None:
    check(key, backend)


C_EVERY_RUN = [k for k in MODELS if not k.endswith("_script")]
"""The models C builds in every run: one export of each network (the dynamo one, or the
model's only one); the TorchScript exports' C builds are the long tier (``pytest -m slow``)."""


@needs_cc
@pytest.mark.parametrize(
    "key",
    [k if k in C_EVERY_RUN else pytest.param(k, marks=pytest.mark.slow) for k in MODELS],
)
def test_c_matches_onnxruntime(key: str) -> None:
    check(key, "c", {"batch": 4, "seq": 64})


def test_a_sliced_table_bounds_the_sequence_length() -> None:
    """BERT slices its 64 position ids to seq: seq <= 64 becomes an upper bound the run checks."""
    result = imported("bert_dynamo")
    fn = result.module.functions[0]
    assert fn.upper_bounds() == {"seq": 64}
    assert any("seq is at most 64" in n and "node_slice_1" in n for n in result.notes)
    inputs = feeds("bert_dynamo", {"batch": 1, "seq": 65})
    args = [inputs["input_ids"]]
    with pytest.raises(Exception, match="seq"):
        node_cases.RUNNERS["vm"](result, args, {"batch": 1, "seq": 65})


def test_a_length_the_trace_baked_in_is_refused_where_it_does_not_fit() -> None:
    """With seq symbolic, the Reshape to the traced length 7 cannot hold: a sentence naming it."""
    with pytest.raises(RxError, match="'/layer/self_attn/Reshape_4' \\(Reshape\\).*7"):
        import_onnx(DATA / "encoder_script.onnx")


def invoke(*args: object) -> Any:
    return CliRunner().invoke(
        cli, [str(a) for a in args], env={"RELAXC_DEBUG": None}, prog_name="relaxc"
    )


@pytest.mark.parametrize("key", ["bert_script", "gpt2_dynamo", "upsample_dynamo"])
def test_cli_imports_and_builds_with_shape_and_bound(key: str, tmp_path: Path) -> None:
    out = tmp_path / "m.rx"
    model = DATA / f"{key}.onnx"
    if key.startswith("upsample"):
        extra: tuple[str, ...] = ("--shape", "x=batch,2,12,10")
    else:
        extra = ("--bound", "seq=32")
    done = invoke("import", model, "-o", out, "--bound", "batch=4", *extra)
    assert done.exit_code == 0, done.output
    assert "upper_bounds" in out.read_text()
    built = invoke("build", model, "-o", tmp_path / "m.rxb", "--bound", "batch=4", *extra, "-q")
    assert built.exit_code == 0, built.output
