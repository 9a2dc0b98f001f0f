"""The model files the memory benchmarks measure, and loading one.

``default_files``: the onnx package's light model zoo (nine architectures), an attention
block (built by the importer tests' helper) and samples/*.rx; ``load``: the module and
weights of an .onnx or .rx file. Shared by benchmarks/plans.py and benchmarks/below_bound.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from relaxc.frontend.parser import parse_module  # noqa: E402
from relaxc.frontend.weights import default_weights_path, load_npz  # noqa: E402

SAMPLES = HERE.parent / "samples"


def default_files(workdir: Path) -> list[Path]:
    files: list[Path] = []
    try:
        import onnx

        light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
        files += sorted(light.glob("light_*.onnx"))
    except ImportError:
        print(
            "onnx is not installed (pip install 'relaxc[onnx]'): ONNX models skipped",
            file=sys.stderr,
        )
    else:
        try:
            from tests.frontend.onnx.models import attention_block

            model, _ = attention_block(seq=128, dim=256, heads=4)
            path = workdir / "attention_block.onnx"
            onnx.save(model, str(path))
            files.append(path)
        except Exception as e:  # noqa: BLE001 - onnxruntime/pytest missing: skip just this one
            print(f"attention block skipped: {e}", file=sys.stderr)
    files += sorted(SAMPLES.glob("*.rx"))
    return files


def load(path: Path, bounds: dict[str, int]):
    """(module, weights, kind) of an .onnx or .rx file."""
    if path.suffix == ".onnx":
        from relaxc.frontend.onnx import import_onnx
        from relaxc.frontend.onnx.model import load_model

        model = load_model(path)
        syms = {
            d.dim_param
            for i in model.graph.input
            for d in i.type.tensor_type.shape.dim
            if d.dim_param
        }
        result = import_onnx(
            model, upper_bounds={k: v for k, v in bounds.items() if k in syms} or None
        )
        return result.module, result.weights, "onnx"
    module = parse_module(path.read_text(), str(path))
    weights_path = default_weights_path(path)
    return module, (dict(load_npz(weights_path)) if weights_path else {}), "rx"
