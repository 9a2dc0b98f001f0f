"""The onnx package's operator tests (``onnx.backend.test.case.node``) run through relaxc.

Each case is a model of one node (or a function expanded into nodes) with data sets of
inputs and expected outputs. :func:`run_case` imports the model as it is (no opset
conversion), runs every data set on the reference interpreter, the VM and optionally the C
backend, and compares with the expected outputs (rtol 1e-4, atol 1e-5 on floats, exact on
integers and booleans). The outcome is one of:

``passed``   every backend asked for matched every data set;
``wrong``    a backend computed something else (the message says which output, where);
``refused``  relaxc refused the model with an error of its own (the message is the sentence);
``error``    anything else (an internal error: a bug).

``python -m tests.frontend.onnx.node_cases [--c] [-v] NAME_OR_OP ...`` runs the cases whose
name or tested op matches and prints one line per case.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

RTOL, ATOL = 1e-4, 1e-5


@dataclass(frozen=True)
class Outcome:
    case: str
    op: str
    status: str  # passed | wrong | refused | error
    message: str = ""


def all_cases() -> list[Any]:
    """Every node test case the installed onnx package generates, sorted by name."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            cases = collect_testcases()
    return sorted(cases, key=lambda c: c.name)


def tested_op(case: Any) -> str:
    """The operator a case tests: its name's op (``test_reduce_l2_...`` -> ReduceL2), read from
    the model: the op of the only node, or of the node that is not a Constant."""
    nodes = [n for n in case.model.graph.node if n.op_type != "Constant"] or list(
        case.model.graph.node
    )
    if case.name.endswith("_expanded") or "_expanded_" in case.name:
        return _op_from_name(case)
    ops = sorted({n.op_type for n in nodes})
    return ops[0] if len(ops) == 1 else _op_from_name(case)


def _op_from_name(case: Any) -> str:
    from onnx import defs

    words = case.name.removeprefix("test_").split("_")
    names = {s.name.lower(): s.name for s in defs.get_all_schemas_with_history()}
    for k in range(len(words), 0, -1):
        key = "".join(words[:k])
        if key in names:
            return names[key]
    return words[0]


def compare(got: Sequence[np.ndarray], want: Sequence[Any], what: str) -> str | None:
    """None when ``got`` matches ``want``; otherwise what differs, in a sentence."""
    if len(got) != len(want):
        return f"{what}: {len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        g = np.asarray(g)
        if g.shape != w.shape:
            return f"{what} output {i}: shape {g.shape}, expected {w.shape}"
        if g.dtype != w.dtype:
            return f"{what} output {i}: dtype {g.dtype}, expected {w.dtype}"
        if w.dtype.kind in "fc":
            ok = np.isclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True)
            if not ok.all():
                at = tuple(int(x) for x in np.argwhere(~ok)[0])
                return f"{what} output {i}: {g[at]} at {at}, expected {w[at]}"
        elif not np.array_equal(g, w):
            at = tuple(int(x) for x in np.argwhere(g != w)[0]) if g.shape else ()
            return f"{what} output {i}: {g[at]} at {at}, expected {w[at]}"
    return None


def _flatten(v: Any) -> list[np.ndarray]:
    if isinstance(v, (tuple, list)):
        return [x for f in v for x in _flatten(f)]
    return [np.asarray(v)]


def _feeds(model: Any, inputs: Sequence[Any]) -> list[np.ndarray] | None:
    """The data set's inputs in the order of the model's graph inputs (None: a sequence or an
    optional, which relaxc does not take)."""
    out = []
    for x in inputs:
        if not isinstance(x, np.ndarray):
            return None
        out.append(x)
    return out


def _dims(result: Any, args: Sequence[np.ndarray]) -> dict[str, int]:
    """The values of the symbolic dims of the imported function's parameters, read off ``args``."""
    from relaxc.ir.types import TensorType

    fn = result.module.functions[0]
    dims: dict[str, int] = {}
    for p, a in zip(fn.params, args):
        t = p.type
        if isinstance(t, TensorType):
            for d, n in zip(t.shape, a.shape):
                if isinstance(d, str):
                    dims[d] = int(n)
    return dims


def run_case(case: Any, backends: Iterable[str] = ("interp", "vm")) -> Outcome:
    """``case`` through import and each of ``backends`` (interp, vm, c)."""
    from relaxc.ir.diagnostics import RxError

    op = tested_op(case)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with np.errstate(all="ignore"):
                return _run(case, op, tuple(backends))
    except RxError as e:
        return Outcome(case.name, op, "refused", str(e).splitlines()[0].removeprefix("error: "))
    except Exception as e:  # noqa: BLE001 - the point is to catch internal errors
        return Outcome(case.name, op, "error", f"{type(e).__name__}: {e}".splitlines()[0])


def _run(case: Any, op: str, backends: tuple[str, ...]) -> Outcome:
    from relaxc.frontend.onnx import import_onnx

    if not case.data_sets:
        return Outcome(case.name, op, "refused", "the case has no data set")
    result = import_onnx(case.model)
    for inputs, want in case.data_sets:
        args = _feeds(case.model, inputs)
        if args is None:
            return Outcome(case.name, op, "refused", "its inputs are sequences or optionals")
        dims = _dims(result, args)
        for backend in backends:
            got = RUNNERS[backend](result, args, dims)
            wrong = compare(got, want, backend)
            if wrong is not None:
                return Outcome(case.name, op, "wrong", wrong)
    return Outcome(case.name, op, "passed")


def _interp(result: Any, args: Sequence[np.ndarray], dims: dict[str, int]) -> list[np.ndarray]:
    from relaxc.backend.interpreter import Interpreter

    return _flatten(Interpreter(result.module, result.weights).run("main", list(args), dims))


def _vm(result: Any, args: Sequence[np.ndarray], dims: dict[str, int]) -> list[np.ndarray]:
    from relaxc.backend.vm import VirtualMachine, compile_module, load_bytes
    from relaxc.passes.assemble import assemble_pipeline
    from relaxc.passes.pipeline import Pipeline, VerifyInstrument

    lowered = Pipeline(assemble_pipeline("vm"), [VerifyInstrument()]).run(result.module)
    exe = load_bytes(compile_module(lowered, result.weights), "model.rxb")
    return _flatten(VirtualMachine(exe, poison=True).run("main", list(args), dims))


def _c(result: Any, args: Sequence[np.ndarray], dims: dict[str, int]) -> list[np.ndarray]:
    from tests.backend.c.cbuild import compile_c, emit, run_c

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        sources = emit(result.module, result.weights, folder, prefix="node", unpacked=True)
        built = compile_c(folder, sources)
        return _flatten(run_c(built, list(args), dims or None))


RUNNERS = {"interp": _interp, "vm": _vm, "c": _c}


def select(cases: Sequence[Any], patterns: Sequence[str]) -> list[Any]:
    """The cases whose name contains a pattern or whose tested op is one (case-insensitive)."""
    pats = [p.lower() for p in patterns]
    return [
        c
        for c in cases
        if not pats or any(p in c.name.lower() or p == tested_op(c).lower() for p in pats)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("patterns", nargs="*", help="case-name fragments or op names")
    ap.add_argument("--c", action="store_true", help="also build and run the C backend")
    ap.add_argument("-v", action="store_true", help="print passed cases too")
    ns = ap.parse_args(argv)
    backends = ("interp", "vm", "c") if ns.c else ("interp", "vm")
    counts: dict[str, int] = {}
    for case in select(all_cases(), ns.patterns):
        o = run_case(case, backends)
        counts[o.status] = counts.get(o.status, 0) + 1
        if o.status != "passed" or ns.v:
            print(f"{o.status:8} {o.op:24} {o.case}: {o.message}")
    print(" ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
