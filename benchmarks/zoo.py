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

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

ZOO = ("squeezenet", "shufflenet", "inception_v1", "densenet121", "resnet50")


def light_folder() -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def random_weight_model(name: str, seed: int = 0) -> Any:
    """The light model ``name`` with each ConstantOfShape weight a random initializer."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(light_folder() / f"light_{name}.onnx"))
    rng = np.random.default_rng(seed)
    consts = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    role = {}
    for node in model.graph.node:
        if node.op_type == "BatchNormalization":
            for k, inp in enumerate(node.input[1:], start=1):
                role[inp] = ("scale", "bias", "mean", "var")[k - 1]
    keep = []
    for node in model.graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in consts:
            keep.append(node)
            continue
        shape = [int(d) for d in consts[node.input[0]]]
        fan_in = math.prod(shape[1:]) if len(shape) > 1 else 1
        kind = role.get(node.output[0])
        if kind == "var":
            arr = rng.uniform(0.5, 1.5, shape)
        elif kind == "scale":
            arr = 1.0 + 0.1 * rng.standard_normal(shape)
        elif len(shape) == 1:
            arr = 0.1 * rng.standard_normal(shape)
        else:
            arr = rng.standard_normal(shape) * math.sqrt(2.0 / fan_in)
        model.graph.initializer.append(
            numpy_helper.from_array(arr.astype(np.float32), node.output[0])
        )
    del model.graph.node[:]
    model.graph.node.extend(keep)
    return model


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
