"""The onnx package's model-zoo architectures with random weights.

The onnx package ships "light" versions of nine model-zoo architectures whose weights are
ConstantOfShape subgraphs (zeros). :func:`with_random_weights` replaces each by a random
initializer (BN variances positive, scales near 1, He-scaled kernels), so that the models
compute distinct classes and a wrong kernel or index shows in the output;
:func:`without_softmax` drops a final Softmax so that the model returns its logits.

Used by the benchmarks (``benchmarks/vm_zoo.py``) and by the tests
(``tests/frontend/onnx/test_model_zoo.py`` imports this file). As a script it writes the
models::

    python benchmarks/zoo_models.py [OUT_DIR] [--models squeezenet,resnet50] [--seed 0]

which writes ``OUT_DIR/<name>.onnx`` (random weights, logits) and ``OUT_DIR/<name>.npz``
(one random input, under the model's input name).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np

BENCH = ("squeezenet", "shufflenet", "inception_v1", "densenet121", "resnet50")
"""The five architectures of issue 16's goals."""


def light_dir() -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def zoo_names() -> list[str]:
    """Every light architecture the installed onnx package ships."""
    return sorted(p.stem.removeprefix("light_") for p in light_dir().glob("light_*.onnx"))


def zoo_model(name: str) -> Any:
    import onnx

    return onnx.load(str(light_dir() / f"light_{name}.onnx"))


def with_random_weights(model: Any, seed: int = 0) -> Any:
    """``model`` with each ConstantOfShape weight replaced by a random initializer (BN
    variances positive, scales near 1), so that a wrong kernel or index shows in the output."""
    from onnx import numpy_helper

    rng = np.random.default_rng(seed)
    consts = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    role = {}
    for node in model.graph.node:
        if node.op_type == "BatchNormalization":
            for k, name in enumerate(node.input[1:], start=1):
                role[name] = ("scale", "bias", "mean", "var")[k - 1]
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
    # The shapes the ConstantOfShape nodes read are dead now (onnxruntime warns about each).
    used = {name for node in keep for name in node.input}
    dead = [i for i in model.graph.initializer if i.name in consts and i.name not in used]
    graph_inputs = {i.name for i in model.graph.input}
    for init in dead:
        if init.name not in graph_inputs:
            model.graph.initializer.remove(init)
    return model


def without_softmax(model: Any) -> Any:
    """``model`` returning the input of its final Softmax (the logits), if it ends in one."""
    g = model.graph
    if len(g.output) != 1 or not g.node:
        return model
    last = g.node[-1]
    if last.op_type != "Softmax" or last.output[0] != g.output[0].name:
        return model
    g.output[0].name = last.input[0]
    del g.node[len(g.node) - 1]
    return model


def input_name_shape(model: Any) -> tuple[str, list[int]]:
    """The model's one non-initializer input and its static shape."""
    inits = {i.name for i in model.graph.initializer}
    (info,) = [i for i in model.graph.input if i.name not in inits]
    return info.name, [d.dim_value for d in info.type.tensor_type.shape.dim]


def bench_model(name: str, seed: int = 0) -> tuple[Any, str, np.ndarray]:
    """(model with random weights and logits, its input name, a random input)."""
    model = without_softmax(with_random_weights(zoo_model(name), seed))
    inp, shape = input_name_shape(model)
    x = np.random.default_rng(seed + 1).standard_normal(shape).astype(np.float32)
    return model, inp, x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", type=Path, default=Path("zoo"), help="output directory")
    ap.add_argument("--models", default=",".join(BENCH), help="comma-separated names")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import onnx

    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.models.split(","):
        model, inp, x = bench_model(name, args.seed)
        onnx.save(model, str(args.out / f"{name}.onnx"))
        np.savez(args.out / f"{name}.npz", **{inp: x})
        print(f"wrote {args.out / name}.onnx and .npz (input {inp} {tuple(x.shape)})")


if __name__ == "__main__":
    main()
