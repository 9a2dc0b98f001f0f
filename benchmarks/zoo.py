"""The ONNX model zoo's architectures with random weights, for the C benchmarks.

The onnx package ships "light" versions of model-zoo networks whose weights are
ConstantOfShape subgraphs (every weight one repeated value). :func:`random_weight_model`
replaces each of them by a seeded random initializer (batch-norm variances positive, scales
near 1), so that the emitted C holds real-looking data (its size, and the compiler's work on
it, are those of a trained model) and a wrong kernel shows in the outputs.
:func:`prepare` writes ``NAME.onnx`` (with the random weights, for onnxruntime), ``NAME.rx``
and ``NAME.npz`` (``relaxc import`` of it) into a folder, once.

    python benchmarks/zoo.py FOLDER [NAME ...]     # default: the five of benchmarks/c.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zoo_models import light_dir, with_random_weights, zoo_model  # noqa: E402

ZOO = ("squeezenet", "shufflenet", "inception_v1", "densenet121", "resnet50")


def light_folder() -> Path:
    return light_dir()


def random_weight_model(name: str, seed: int = 0) -> Any:
    """The light model ``name`` with each ConstantOfShape weight a random initializer
    (``zoo_models.with_random_weights``)."""
    return with_random_weights(zoo_model(name), seed)


def prepare(name: str, folder: Path, seed: int = 0) -> Path:
    """``folder/NAME.rx`` (and its .npz, and ``NAME.onnx``), made once; returns the .rx."""
    import onnx

    folder.mkdir(parents=True, exist_ok=True)
    rx = folder / f"{name}.rx"
    if rx.exists() and rx.with_suffix(".npz").exists():
        return rx
    model_path = folder / f"{name}.onnx"
    onnx.save(random_weight_model(name, seed), str(model_path))
    subprocess.run(
        [sys.executable, "-m", "relaxc.cli.main", "import", str(model_path), "-q", "-o", str(rx)],
        check=True,
    )
    return rx


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    folder = Path(sys.argv[1])
    for name in sys.argv[2:] or ZOO:
        print(prepare(name, folder))


if __name__ == "__main__":
    main()
