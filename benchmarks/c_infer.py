"""Inference time of the emitted C on the model zoo, next to onnxruntime and the VM.

Used by ``benchmarks/c.py`` (its zoo rows get these columns); one job: given a model built by
``relaxc build -t c --constants file`` into a folder, compile it twice (portable
``-std=c99 -O2`` and the flags docs/c.md recommends for the host), run both on one input,
and time onnxruntime (one thread, sequential) and the VM on the same input. Every time is CPU
time, best of ``repeat`` rounds of ``number`` runs: ``clock()`` in a small C driver around
``<prefix>_run``, ``time.process_time`` in Python. The models are the zoo's with their final
softmax removed (:func:`logits_model`), so that the logits are compared: a softmax hides
their differences.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

PORTABLE = ["-std=c99", "-O2"]
RECOMMENDED = ["-std=c99", "-O3", "-march=native"]
WARN = ["-Wall", "-Wextra", "-Werror", "-pedantic"]

DRIVER = """\
#include "{p}.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{{
    int rounds, number, r, k;
    double best = 1e30;
    float *x = (float *)malloc({nin} * sizeof(float));
    float *y = (float *)malloc({nout} * sizeof(float));
    FILE *f;
    if (argc != 5 || x == NULL || y == NULL) return 2;
    rounds = atoi(argv[3]);
    number = atoi(argv[4]);
    f = fopen(argv[1], "rb");
    if (f == NULL || fread(x, sizeof(float), {nin}, f) != {nin}) return 3;
    fclose(f);
    if ({p}_run(x, y) != 0) return 1;
    for (r = 0; r < rounds; ++r) {{
        clock_t t0 = clock();
        double t;
        for (k = 0; k < number; ++k) {{
            if ({p}_run(x, y) != 0) return 1;
        }}
        t = (double)(clock() - t0) / CLOCKS_PER_SEC / number;
        if (t < best) best = t;
    }}
    f = fopen(argv[2], "wb");
    if (f == NULL || fwrite(y, sizeof(float), {nout}, f) != {nout}) return 4;
    fclose(f);
    printf("%.9f\\n", best);
    free(x);
    free(y);
    return 0;
}}
"""


def best_cpu(fn: Callable[[], Any], repeat: int, number: int) -> float:
    """The best CPU time per call of ``fn``: ``repeat`` rounds of ``number`` calls."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(number):
            fn()
        best = min(best, (time.process_time() - t0) / number)
    return best


def logits_model(model: Any) -> Any:
    """``model`` with a Softmax that makes its only output removed (the logits become the
    output); a model without one is returned as it is."""
    from onnx import helper

    g = model.graph
    (out,) = g.output
    last = next((n for n in g.node if out.name in n.output), None)
    if last is None or last.op_type != "Softmax":
        return model
    src = last.input[0]
    g.node.remove(last)
    dims = [d.dim_value for d in out.type.tensor_type.shape.dim]
    g.output.remove(out)
    g.output.append(helper.make_tensor_value_info(src, out.type.tensor_type.elem_type, dims))
    return model


def prepare_logits(name: str, folder: Path, seed: int = 0) -> Path:
    """``folder/NAME.rx`` (its .npz, and ``NAME.onnx`` for onnxruntime): the zoo model with
    random weights (``benchmarks/zoo.py``) and without its final softmax, made once."""
    import onnx
    from zoo import random_weight_model

    folder.mkdir(parents=True, exist_ok=True)
    rx = folder / f"{name}.rx"
    if rx.exists() and rx.with_suffix(".npz").exists() and rx.with_suffix(".onnx").exists():
        return rx
    model_path = folder / f"{name}.onnx"
    onnx.save(logits_model(random_weight_model(name, seed)), str(model_path))
    subprocess.run(
        [sys.executable, "-m", "relaxc.cli.main", "import", str(model_path), "-q", "-o", str(rx)],
        check=True,
    )
    return rx


def model_input(model_path: Path) -> tuple[str, np.ndarray]:
    """The name of the model's one input and a seeded random value of it."""
    import onnx

    model = onnx.load(str(model_path))
    init = {i.name for i in model.graph.initializer}
    (info,) = [i for i in model.graph.input if i.name not in init]
    shape = [d.dim_value for d in info.type.tensor_type.shape.dim]
    return info.name, np.random.default_rng(1).standard_normal(shape).astype(np.float32)


def ort_time(model_path: Path, feed: dict[str, np.ndarray], repeat: int, number: int) -> tuple:
    """(best CPU s per run, the output) of onnxruntime on one thread, sequential."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3
    sess = ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
    out = np.asarray(sess.run(None, feed)[0])
    return best_cpu(lambda: sess.run(None, feed), repeat, number), out


def vm_time(rx: Path, x: np.ndarray, repeat: int, number: int) -> tuple[float, np.ndarray]:
    """(best CPU s per run, the output) of the VM on the .rxb the vm pipeline makes."""
    from relaxc.backend.vm import VirtualMachine, compile_module, load_bytes
    from relaxc.frontend.parser import parse_module
    from relaxc.frontend.weights import load_npz
    from relaxc.passes.assemble import assemble_pipeline
    from relaxc.passes.pipeline import Pipeline

    source = parse_module(rx.read_text(), rx.name)
    planned = Pipeline(assemble_pipeline("vm")).run(source)
    vm = VirtualMachine(load_bytes(compile_module(planned, load_npz(rx.with_suffix(".npz"))), "m"))
    out = np.asarray(vm.run("main", [x])).ravel()
    return best_cpu(lambda: vm.run("main", [x]), repeat, number), out


def compile_and_time(
    folder: Path,
    prefix: str,
    tag: str,
    flags: Sequence[str],
    cc: str,
    x: np.ndarray,
    nout: int,
    repeat: int,
    number: int,
) -> tuple[float, float, np.ndarray]:
    """(cc -c CPU s, best run CPU s, output) of the C in ``folder`` (built with
    ``--constants file``) compiled with ``flags`` plus ``-Wall -Wextra -Werror -pedantic``
    (a warning fails the benchmark), the weights stub and a timing driver."""
    (folder / "bench.c").write_text(DRIVER.format(p=prefix, nin=x.size, nout=nout))
    obj, exe = f"{prefix}_{tag}.o", f"bench_{tag}"
    r0 = os.times()
    subprocess.run([cc, *flags, *WARN, "-c", f"{prefix}.c", "-o", obj], cwd=folder, check=True)
    r1 = os.times()
    t_cc = (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)
    stub = f"{prefix}_weights.S"
    subprocess.run([cc, "-c", stub, "-o", f"{prefix}_weights.o"], cwd=folder, check=True)
    link = [cc, *flags, "bench.c", obj, f"{prefix}_weights.o", "-lm", "-o", exe]
    subprocess.run(link, cwd=folder, check=True)
    x.tofile(folder / "in.bin")
    out = subprocess.run(
        [f"./{exe}", "in.bin", f"out_{tag}.bin", str(repeat), str(number)],
        cwd=folder,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return t_cc, float(out), np.fromfile(folder / f"out_{tag}.bin", dtype="<f4")


def infer_row(
    rx: Path,
    built: Path,
    cc: str,
    recommended: Sequence[str],
    repeat: int,
    number: int,
    vm: bool,
) -> dict[str, Any]:
    """The inference columns of one model: ``rx`` (with ``NAME.onnx`` beside it), ``built``
    the folder ``relaxc build -t c --constants file`` wrote."""
    name = rx.stem
    inp, x = model_input(rx.with_suffix(".onnx"))
    t_ort, want = ort_time(rx.with_suffix(".onnx"), {inp: x}, repeat, number)
    want = want.ravel()
    scale = float(np.abs(want).max())
    row: dict[str, Any] = {"ort": t_ort}
    errs = []
    for tag, flags in (("O2", PORTABLE), ("rec", list(recommended))):
        _, t, y = compile_and_time(built, name, tag, flags, cc, x, want.size, repeat, number)
        row[f"c_{tag}"] = t
        row[f"c_{tag}_ratio"] = t / t_ort
        errs.append(float(np.abs(y - want).max()) / scale)
    if vm:
        row["vm"], y = vm_time(rx, x, min(repeat, 3), 1)
        row["vm_ratio"] = row["vm"] / t_ort
        row["vm_err"] = float(np.abs(y - want).max()) / scale
    row["err"] = max(errs)
    return row


def ms(v: float) -> str:
    return f"{v * 1e3:,.1f} ms"


INFER_COLUMNS: list[tuple[str, str, Callable[[Any], str]]] = [
    ("model", "model", str),
    ("ort", "onnxruntime 1 thread", ms),
    ("c_O2", "C -O2", ms),
    ("c_O2_ratio", "-O2 / ort", lambda v: f"{v:.2f}x"),
    ("c_rec", "C recommended", ms),
    ("c_rec_ratio", "rec. / ort", lambda v: f"{v:.2f}x"),
    ("vm", "VM", ms),
    ("vm_ratio", "VM / ort", lambda v: f"{v:.2f}x"),
    ("err", "C max err", lambda v: f"{v:.1e}"),
    ("vm_err", "VM max err", lambda v: f"{v:.1e}"),
]
"""(key, heading, format) of the inference table (rows of :func:`infer_row`)."""
