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

A model that feeds an integer tensor the importer needs at import time (Reduce axes, Slice
starts, Split sizes, Pad pads, a Reshape target) as a graph input is refused as it stands
("... must be known when the model is imported"); exported models hold these as constants.
:func:`run_case` then imports it once more with those inputs bound to the value every data
set gives them (:func:`bind_inputs`: the integer or bool inputs of rank 0 or 1 that are not
the first input of a node: axes, sizes, pads; integer scalars: a window's size; and the
float inputs of rank 0 or 1 that only feed what :data:`FLOAT_IMPORT_TIME` names: Resize's
scales, a Range's bounds, a OneHot's depth), as a model exported with constant axes has them,
and the outcome names them (``Outcome.bound``). Only a refusal of that kind is retried.

``python -m tests.frontend.onnx.node_cases [--c] [-v] NAME_OR_OP ...`` runs the cases whose
name or tested op matches and prints one line per case (benchmarks/onnx_conformance.py
runs them all and prints a table by op).
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pytest

RTOL, ATOL = 1e-4, 1e-5
STATUSES = ("passed", "wrong", "refused", "error")

LOOSER = {
    "test_averagepool_2d_ceil_last_window_starts_on_pad": (
        1e-3,
        "its expected output is written to 4 decimals (0.1511 for 0.151056, which onnxruntime "
        "and onnx's reference implementation compute, as relaxc does)",
    ),
    "test_gridsample_bicubic": (
        1e-3,
        "its expected output is written to 4 decimals (-0.1406 for -0.140625, which onnxruntime "
        "and onnx's reference implementation compute, as relaxc does)",
    ),
}
"""Cases compared at a larger rtol than RTOL: case -> (rtol, why). onnx's own runner compares
every case at rtol 1e-3."""

NARROW = frozenset(
    (
        "bfloat16",
        "float8_e4m3fn",
        "float8_e4m3fnuz",
        "float8_e5m2",
        "float8_e5m2fnuz",
        "float8_e8m0fnu",
        "float4_e2m1fn",
        "int4",
        "uint4",
        "int2",
        "uint2",
    )
)
"""ml_dtypes' types (one byte per element but bfloat16's two), read from the cases'
TensorProtos. bfloat16 compares at :data:`HALF_ULPS`; the others exactly: the same bits,
or NaN for NaN (their casts round once, so relaxc and ONNX agree bit for bit)."""

HALF_ULPS = 2
"""float16 and bfloat16 outputs compare at this many of their epsilon (2 ** -10, 2 ** -7)
relative, and as many of its ulp at 1 absolute near zero: rtol 1e-4 is a tenth of float16's
ulp, so a case computed in float16 (its expanded form rounds after every op, as onnxruntime
does) cannot meet it, and the expected outputs were rounded to float16 from a float32 or
float64 computation."""

IMPORT_TIME = (
    "must be known when the model is imported",
    "its output shape depends on tensor values",
)
"""The importer's words for a value it needs as a constant (ctx.folded, and
ctx.value_dependent for one that sets a shape): the refusals that :func:`run_case` retries
with :func:`bind_inputs`."""


@dataclass(frozen=True)
class Outcome:
    case: str
    op: str
    status: str  # passed | wrong | refused | error
    message: str = ""
    backends: tuple[str, ...] = ()
    """The backends the case ran on (every one asked for, unless it was refused first)."""
    bound: tuple[str, ...] = ()
    """The graph inputs bound to their data sets' values (:func:`bind_inputs`)."""

    @property
    def reason(self) -> str:
        """The refusal or error sentence without what names one case (see
        :func:`refusal_reason`)."""
        return refusal_reason(self.message) if self.status != "passed" else ""


TIERS = (
    pytest.param(2, id="every-2nd-case"),
    pytest.param(1, id="every-case", marks=pytest.mark.slow),
)
"""A family's node tests: every second case (by name) in every run, all of them in the long
tier (``pytest -m slow``); benchmarks/onnx_conformance.py runs all of every op."""


@functools.cache
def all_cases() -> tuple[Any, ...]:
    """Every node test case the installed onnx package generates, sorted by name (generated
    once per process: about 5 s; the cases are read, never changed)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            cases = collect_testcases()
    return tuple(sorted(cases, key=lambda c: c.name))


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


_ABBREVIATIONS = {
    "mvn": "MeanVarianceNormalization",
    "nllloss": "NegativeLogLikelihoodLoss",
    "sce": "SoftmaxCrossEntropyLoss",
}
"""Case names that spell their op short."""


def _op_from_name(case: Any) -> str:
    from onnx import defs

    words = case.name.removeprefix("test_").split("_")
    if words[0] in _ABBREVIATIONS:
        return _ABBREVIATIONS[words[0]]
    names = {s.name.lower(): s.name for s in defs.get_all_schemas_with_history()}
    for k in range(len(words), 0, -1):
        key = "".join(words[:k])
        if key in names:
            return names[key]
    return words[0]


def compare(
    got: Sequence[np.ndarray], want: Sequence[Any], what: str, rtol: float = RTOL
) -> str | None:
    """None when ``got`` matches ``want``; otherwise what differs, in a sentence."""
    if len(got) != len(want):
        return f"{what}: {len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        w = _array(w) if _array(w) is not None else np.asarray(w)
        g = np.asarray(g)
        if g.shape != w.shape:
            return f"{what} output {i}: shape {g.shape}, expected {w.shape}"
        if g.dtype != w.dtype:
            return f"{what} output {i}: dtype {g.dtype}, expected {w.dtype}"
        if w.dtype.name in NARROW and w.dtype.name != "bfloat16":
            bad = _narrow_mismatch(g, w)
            if bad is not None:
                return f"{what} output {i}: {g[bad]} at {bad}, expected {w[bad]}"
        elif w.dtype.name == "bfloat16":  # ml_dtypes' type: compared as the float32 it widens to
            g, w = g.astype(np.float32), w.astype(np.float32)
            r, a = _half_tolerance(rtol, np.dtype("V2"))
            ok = np.isclose(g, w, rtol=r, atol=a, equal_nan=True)
            if not ok.all():
                at = tuple(int(x) for x in np.argwhere(~ok)[0])
                return f"{what} output {i}: {g[at]} at {at}, expected {w[at]}"
        elif w.dtype.kind in "fc":
            r, a = _half_tolerance(rtol, w.dtype) if w.dtype.itemsize == 2 else (rtol, ATOL)
            ok = np.isclose(g, w, rtol=r, atol=a, equal_nan=True)
            if not ok.all():
                at = tuple(int(x) for x in np.argwhere(~ok)[0])
                return f"{what} output {i}: {g[at]} at {at}, expected {w[at]}"
        elif not np.array_equal(g, w):
            at = tuple(int(x) for x in np.argwhere(g != w)[0]) if g.shape else ()
            return f"{what} output {i}: {g[at]} at {at}, expected {w[at]}"
    return None


def _narrow_mismatch(g: np.ndarray, w: np.ndarray) -> tuple[int, ...] | None:
    """The first position where two arrays of an 8-, 4- or 2-bit type differ (bits; any NaN
    matches any NaN), or None."""
    same = g.view(np.uint8) == w.view(np.uint8)
    if w.dtype.kind in "fV" and w.dtype.name not in ("int4", "uint4", "int2", "uint2"):
        with np.errstate(invalid="ignore"):
            wide_g, wide_w = g.astype(np.float32), w.astype(np.float32)
        same |= np.isnan(wide_g) & np.isnan(wide_w)
    if same.all():
        return None
    return tuple(int(x) for x in np.argwhere(~same)[0]) if g.shape else ()


def _half_tolerance(rtol: float, dtype: np.dtype) -> tuple[float, float]:
    """float16 (and bfloat16, epsilon 2 ** -7) at HALF_ULPS of the type's epsilon."""
    eps = float(np.finfo(np.float16).eps) if dtype == np.float16 else 2.0**-7
    return max(rtol, HALF_ULPS * eps), HALF_ULPS * eps * 2**-4


def _flatten(v: Any) -> list[np.ndarray]:
    if isinstance(v, (tuple, list)):
        return [x for f in v for x in _flatten(f)]
    return [np.asarray(v)]


def _array(x: Any) -> np.ndarray | None:
    """A data set's value as an array: numpy arrays and scalars as they are, a TensorProto
    (how the cases write bfloat16, float8 and 4-bit data) read when numpy holds its type;
    None for a sequence, an optional or a type numpy does not hold."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, np.generic):
        return np.asarray(x)
    if type(x).__name__ == "TensorProto":
        from onnx import numpy_helper

        try:
            a = np.asarray(numpy_helper.to_array(x))
        except Exception:  # noqa: BLE001 - a type numpy does not hold
            return None
        if a.dtype.name in NARROW:
            return a
        return a if a.dtype.kind in "biuf" and a.dtype.itemsize in (1, 2, 4, 8) else None
    return None


def _feeds(model: Any, inputs: Sequence[Any]) -> list[np.ndarray] | None:
    """The data set's inputs in the order of the model's graph inputs (None: a sequence or an
    optional, which relaxc does not take)."""
    out = []
    for x in inputs:
        a = _array(x)
        if a is None:
            return None
        out.append(a)
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
    """``case`` through import and each of ``backends`` (interp, vm, c); a refusal for an
    input needed at import time is retried with :func:`bind_inputs` (the module docstring)."""
    backends = tuple(backends)
    first = _guarded(case, case.model, case.data_sets, (), backends)
    if first.status != "refused" or not any(words in first.message for words in IMPORT_TIME):
        return first
    bound = bind_inputs(case)
    if bound is None:
        return first
    model, data_sets, names = bound
    return _guarded(case, model, data_sets, names, backends)


def _guarded(
    case: Any, model: Any, data_sets: Any, bound: tuple[str, ...], backends: tuple[str, ...]
) -> Outcome:
    from relaxc.ir.diagnostics import RxError

    op = tested_op(case)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with np.errstate(all="ignore"):
                rtol = LOOSER.get(case.name, (RTOL, ""))[0]
                status, message = _run(model, data_sets, backends, rtol)
    except RxError as e:
        status, message = "refused", str(e).splitlines()[0].removeprefix("error: ")
    except Exception as e:  # noqa: BLE001 - the point is to catch internal errors
        status, message = "error", f"{type(e).__name__}: {e}".splitlines()[0]
    ran = backends if status in ("passed", "wrong") else ()
    return Outcome(case.name, op, status, message, ran, bound)


def _run(
    model: Any, data_sets: Any, backends: tuple[str, ...], rtol: float = RTOL
) -> tuple[str, str]:
    from relaxc.frontend.onnx import import_onnx

    if not data_sets:
        return "refused", "the case has no data set"
    result = import_onnx(model)
    for inputs, want in data_sets:
        args = _feeds(model, inputs)
        if args is None:
            return "refused", "its inputs are sequences or optionals, which relaxc does not take"
        dims = _dims(result, args)
        for backend in backends:
            got = RUNNERS[backend](result, args, dims)
            wrong = compare(got, want, backend, rtol)
            if wrong is not None:
                return "wrong", wrong
    return "passed", ""


SIZES_FIRST = frozenset({"ConstantOfShape", "Range", "MelWeightMatrix"})
"""Ops whose first input is a size (a shape, a range's start), not data."""

FLOAT_IMPORT_TIME: dict[str, frozenset[int]] = {
    "Resize": frozenset({1, 2}),
    "Upsample": frozenset({1}),
    "Range": frozenset({0, 1, 2}),
    "OneHot": frozenset({1}),
    "Dropout": frozenset({1}),
    "MelWeightMatrix": frozenset({3, 4}),
}
"""Float inputs the importer needs at import time, by op and input position: Resize's roi
and scales (Resize-10's scales at 1), Upsample's scales, a float Range's start, limit and
delta, OneHot's depth, Dropout's ratio, MelWeightMatrix's band edges. A float graph input of
rank 0 or 1 that feeds one of these (and no other input of a node) is bound as the integer
ones are."""


def bind_inputs(case: Any) -> tuple[Any, list[Any], tuple[str, ...]] | None:
    """``case``'s model with its import-time inputs made initializers, the data sets without
    them, and their names; None when it has none or the data sets disagree on a value.

    An import-time input is a number (or bool) graph input of rank 0 or 1 that is never the
    first input of a node (the first is the data; axes, pads, sizes, shapes and Dropout's
    training_mode come after it), except of the ops of :data:`SIZES_FIRST`, or an integer
    scalar (a size, as a window op's, even where a Cast of it comes first); and a float graph
    input of rank 0 or 1 that feeds only the inputs of :data:`FLOAT_IMPORT_TIME`."""
    from onnx import TensorProto, numpy_helper

    graph = case.model.graph
    firsts = {n.input[0] for n in graph.node if n.input and n.op_type not in SIZES_FIRST}
    ints = {TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL}  # bool: training_mode
    floats = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}
    uses: dict[str, list[bool]] = {}  # name -> per use, whether a float import-time slot
    for n in graph.node:
        slots = FLOAT_IMPORT_TIME.get(n.op_type, frozenset())
        for j, name in enumerate(n.input):
            uses.setdefault(name, []).append(j in slots)
    pick = []
    for k, info in enumerate(graph.input):
        t = info.type.tensor_type if info.type.HasField("tensor_type") else None
        if t is None:
            continue
        if t.elem_type in floats:
            if not uses.get(info.name) or not all(uses[info.name]):
                continue
        elif t.elem_type not in ints:
            continue
        size_like = t.elem_type in (TensorProto.INT64, TensorProto.INT32)
        if t.HasField("shape") and len(t.shape.dim) > 1:
            continue
        if info.name in firsts and not (size_like and t.HasField("shape") and not t.shape.dim):
            continue
        pick.append(k)
    if not pick or not case.data_sets:
        return None
    values = {}
    for k in pick:
        arrays = [np.asarray(inputs[k]) for inputs, _ in case.data_sets if k < len(inputs)]
        if len(arrays) != len(case.data_sets) or any(
            not np.array_equal(a, arrays[0]) or a.dtype != arrays[0].dtype for a in arrays
        ):
            return None
        values[k] = arrays[0]
    model = type(case.model)()
    model.CopyFrom(case.model)
    inputs = list(model.graph.input)
    del model.graph.input[:]
    for k, info in enumerate(inputs):
        if k in values:
            model.graph.initializer.append(numpy_helper.from_array(values[k], info.name))
        else:
            model.graph.input.append(info)
    data_sets = [
        ([x for k, x in enumerate(inputs_) if k not in values], want)
        for inputs_, want in case.data_sets
    ]
    names = tuple(inputs[k].name for k in sorted(values))
    return model, data_sets, names


_NODE = re.compile(r"^node (?:'[^']*'|#\d+) \((\w+)\)(?: \(\w+\))?: ")
_MISSING = re.compile(r"^the model uses \d+ operators? relaxc cannot import, in \d+ nodes?: (.*)$")


def refusal_reason(message: str) -> str:
    """``message`` (an outcome's sentence) with what names one case or node taken out, so
    that the refusals of many cases group by their reason: ``node 'n' (Slice): starts must
    be ...`` reads ``Slice: starts must be ...``; a list of operators without a converter
    reads ``no converter for A, B``; quoted names read ``'…'`` and positions ``(…)``."""
    m = _MISSING.match(message)
    if m:
        ops, whys = set(), set()
        for part in re.split(r"; (?=[A-Za-z.]+ \()", m.group(1)):
            op, _, rest = part.partition(" (")
            ops.add(op.strip())
            if not rest.startswith("node"):
                whys.add(rest.split("; node")[0])
        why = f" ({'; '.join(sorted(whys))})" if whys else ""
        return "no converter for " + ", ".join(sorted(ops)) + why
    m = _NODE.match(message)
    if m:
        message = f"{m.group(1)}: {message[m.end() :]}"
    message = re.sub(r"'[^']*'", "'…'", message)
    message = re.sub(r" at \([\d, ]*\), expected .*$", " (at …)", message)
    return message


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
