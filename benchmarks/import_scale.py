"""How ``relaxc import`` grows with the model: wall time and peak RSS at growing node counts.

The models are generated ONNX graphs of N nodes (a transformer-like mix, repeated: MatMul
with an 8x8 weight, Add of a bias, a Shape -> Gather -> Concat -> Reshape chain every 16
nodes (the shape arithmetic exporters write), Relu, Sigmoid, Mul), written to a temporary
folder; each import is ``relaxc import FILE -o FILE.rx -q`` in a fresh subprocess (the
child's own ``ru_maxrss``, from ``os.wait4``). The table gives the time per node relative to
the smallest size (1.00: linear). Issue 30's goal: 10,000 nodes in under 10 s.

Usage::

    python benchmarks/import_scale.py [--sizes 1000,10000,30000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def generated_model(n: int) -> Any:
    """An ONNX model of about ``n`` nodes over a (batch, 8) input with a symbolic batch."""
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[Any] = []
    inits = [
        numpy_helper.from_array(np.eye(8, dtype=np.float32), "w"),
        numpy_helper.from_array(np.full((8,), 0.5, np.float32), "b"),
        numpy_helper.from_array(np.array([0], np.int64), "i0"),
        numpy_helper.from_array(np.array([8], np.int64), "d8"),
    ]
    prev = "x"
    i = 0
    while len(nodes) < n:
        out = f"t{i}"
        k = i % 16
        if k == 0:
            nodes.append(helper.make_node("MatMul", [prev, "w"], [out]))
        elif k == 1:
            nodes.append(helper.make_node("Add", [prev, "b"], [out]))
        elif k == 2:  # Shape -> Gather -> Concat -> Reshape: batch stays symbolic
            nodes += [
                helper.make_node("Shape", [prev], [f"s{i}"]),
                helper.make_node("Gather", [f"s{i}", "i0"], [f"g{i}"], axis=0),
                helper.make_node("Concat", [f"g{i}", "d8"], [f"c{i}"], axis=0),
                helper.make_node("Reshape", [prev, f"c{i}"], [out]),
            ]
        elif k % 3 == 0:
            nodes.append(helper.make_node("Relu", [prev], [out]))
        elif k % 3 == 1:
            nodes.append(helper.make_node("Sigmoid", [prev], [out]))
        else:
            nodes.append(helper.make_node("Mul", [prev, prev], [out]))
        prev = out
        i += 1
    graph = helper.make_graph(
        nodes,
        f"generated_{n}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, ["batch", 8])],
        initializer=inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


RELAXC = [sys.executable, "-c", "from relaxc.cli.entry import main; main()"]


def _import(path: Path) -> tuple[float, int]:
    """Wall seconds and the child's peak RSS in bytes of ``relaxc import PATH``."""
    return _run([*RELAXC, "import", str(path), "-q", "-o", str(path.with_suffix(".rx"))])


def _run(cmd: list[str]) -> tuple[float, int]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read() if proc.stderr is not None else b""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err.decode()}")
    return wall, usage.ru_maxrss * 1024


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of sizes: {text!r}") from None
    if not sizes or min(sizes) < 16:
        raise argparse.ArgumentTypeError("every size must be at least 16 nodes")
    return sorted(sizes)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--sizes", type=_sizes, default=_sizes("1000,10000,30000"))
    ns = ap.parse_args(argv)
    import onnx

    startup, _ = _run([*RELAXC, "--version"])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in ns.sizes:
            model = generated_model(n)
            path = Path(tmp) / f"generated_{n}.onnx"
            onnx.save(model, str(path))
            wall, peak = _import(path)
            rows.append((len(model.graph.node), wall, peak))

    def per_node(wall: float, nodes: int) -> float:
        return max(wall - startup, 1e-9) / nodes

    base = per_node(rows[0][1], rows[0][0])
    print(f"relaxc startup (relaxc --version): {startup:.2f} s, left out of the per-node column")
    print(f"{'nodes':>8} {'wall s':>8} {'peak RSS MiB':>13} {'time/node vs smallest':>22}")
    for nodes, wall, peak in rows:
        ratio = per_node(wall, nodes) / base
        print(f"{nodes:>8} {wall:>8.2f} {peak / 2**20:>13.1f} {ratio:>22.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
