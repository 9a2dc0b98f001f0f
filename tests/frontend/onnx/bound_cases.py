"""Node-test cases with their import-time integer inputs bound as initializers.

The onnx package's node tests feed Reduce axes, TopK's k, CumSum's axis and the like as
graph inputs; exported models hold them as constants, and relaxc needs them at import time.
:func:`bound` gives a case whose integer inputs of rank 0 or 1 that are never the first
input of a node are initializers holding the value every data set gives them (the case as
it is when it has none, or when the data sets disagree).
``python -m tests.frontend.onnx.bound_cases [--c] OP ...`` prints the cases not passed.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any, Sequence

import numpy as np


def bound(case: Any) -> Any:
    from onnx import TensorProto, numpy_helper

    graph = case.model.graph
    firsts = {n.input[0] for n in graph.node if n.input}
    ints = {TensorProto.INT64, TensorProto.INT32}
    pick: dict[int, np.ndarray] = {}
    for k, info in enumerate(graph.input):
        t = info.type.tensor_type if info.type.HasField("tensor_type") else None
        if t is None or t.elem_type not in ints or info.name in firsts:
            continue
        if t.HasField("shape") and len(t.shape.dim) > 1:
            continue
        arrays = [np.asarray(ins[k]) for ins, _ in case.data_sets if k < len(ins)]
        if not arrays or len(arrays) != len(case.data_sets):
            return case
        if any(not np.array_equal(a, arrays[0]) for a in arrays):
            return case
        pick[k] = arrays[0]
    if not pick:
        return case
    model = type(case.model)()
    model.CopyFrom(case.model)
    inputs = list(model.graph.input)
    del model.graph.input[:]
    for k, info in enumerate(inputs):
        if k in pick:
            model.graph.initializer.append(numpy_helper.from_array(pick[k], info.name))
        else:
            model.graph.input.append(info)
    data_sets = [
        ([x for k, x in enumerate(ins) if k not in pick], want) for ins, want in case.data_sets
    ]
    return SimpleNamespace(name=case.name, model=model, data_sets=data_sets)


def main(argv: Sequence[str]) -> int:
    from .node_cases import all_cases, run_case, select

    c = "--c" in argv
    pats = [a for a in argv if a != "--c"]
    counts: dict[str, int] = {}
    for case in select(all_cases(), pats):
        o = run_case(bound(case), ("interp", "vm", "c") if c else ("interp", "vm"))
        counts[o.status] = counts.get(o.status, 0) + 1
        if o.status != "passed":
            print(f"{o.status:8} {o.op:24} {o.case}: {o.message}")
    print(" ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
