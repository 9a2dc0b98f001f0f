"""The C target on real models: inference time of the generated C next to onnxruntime.

For each model of the onnx package's model zoo (the "light" architectures, with random
weights from ``tests/frontend/onnx/test_model_zoo.py:with_random_weights``; the final
softmax removed, so that the logits are compared), in one run:

* **onnxruntime**, one thread (``intra_op_num_threads=1``, sequential), in-process;
* **C -O2**: the emitted C built with ``cc -std=c99 -O2`` (portable: no ``-march``);
* **C recommended**: the same C built with the flags docs/c.md recommends for the host
  (``--flags``, default ``-std=c99 -O3 -march=native``);
* **the VM** running the .rxb built with the vm pipeline, in-process (``--vm``).

Every time is CPU time (``clock()`` in a small C driver that calls ``<prefix>_run``;
``time.process_time`` in Python), best of ``--repeat`` rounds of ``--number`` runs, on the
same input. The C outputs are checked against onnxruntime's (within ``--rtol`` of the
largest logit), and the object's ``.bss`` against the memory report's arena (to the byte):
a mismatch exits 1.

    python benchmarks/c_zoo.py [--models squeezenet,shufflenet] [--repeat 5] [--number 5]
                               [--flags "-std=c99 -O3 -march=native"] [--vm] [--work DIR]

With ``--work DIR`` the emitted C and the binaries are kept there, and an existing build
whose ``.c`` is newer than relaxc's C backend is reused (``--rebuild`` forces it).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODELS = ("squeezenet", "shufflenet", "inception_v1", "densenet121", "resnet50")
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


def without_final_softmax(model: Any) -> Any:
    """``model`` with a Softmax that makes its only output removed: the logits are the
    output (the comparison of probabilities hides the differences of logits)."""
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


def load_model(name: str) -> Any:
    from tests.frontend.onnx.test_model_zoo import with_random_weights, zoo_model

    return without_final_softmax(with_random_weights(zoo_model(name)))


def input_of(model: Any) -> tuple[str, np.ndarray]:
    init = {i.name for i in model.graph.initializer}
    (info,) = [i for i in model.graph.input if i.name not in init]
    shape = [d.dim_value for d in info.type.tensor_type.shape.dim]
    return info.name, np.random.default_rng(1).standard_normal(shape).astype(np.float32)


def ort_time(model: Any, feed: dict[str, np.ndarray], repeat: int, number: int) -> tuple:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3
    sess = ort.InferenceSession(
        model.SerializeToString(), opts, providers=["CPUExecutionProvider"]
    )
    out = sess.run(None, feed)[0]
    return best_cpu(lambda: sess.run(None, feed), repeat, number), np.asarray(out)


def section_sizes(obj: Path) -> dict[str, int]:
    out = subprocess.run(["size", "-A", str(obj)], capture_output=True, text=True, check=True)
    sizes: dict[str, int] = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith(".") and parts[1].isdigit():
            base = "." + parts[0].split(".")[1]
            sizes[base] = sizes.get(base, 0) + int(parts[1])
    return sizes


def backend_mtime() -> float:
    c = ROOT / "backend" / "c"
    return max(p.stat().st_mtime for p in c.rglob("*.py"))


class Built:
    def __init__(self, folder: Path, prefix: str, arena: int, emit_s: float):
        self.folder, self.prefix, self.arena, self.emit_s = folder, prefix, arena, emit_s


def emit(name: str, model: Any, folder: Path, rebuild: bool) -> Built:
    from relaxc.backend.c import emit_c
    from relaxc.frontend.onnx import import_onnx
    from relaxc.passes.assemble import assemble_pipeline
    from relaxc.passes.memory_report import memory_report
    from relaxc.passes.pipeline import Pipeline

    prefix = name
    c_file = folder / f"{prefix}.c"
    stamp = folder / "arena.txt"
    if not rebuild and c_file.exists() and stamp.exists():
        if c_file.stat().st_mtime > backend_mtime():
            arena, emit_s = stamp.read_text().split()
            return Built(folder, prefix, int(arena), float(emit_s))
    folder.mkdir(parents=True, exist_ok=True)
    result = import_onnx(model)
    planned = Pipeline(assemble_pipeline("c")).run(result.module)
    report = {r.name: r for r in memory_report(planned)}["main"]
    t0 = time.process_time()
    sources = emit_c(
        planned, result.weights, prefix=prefix, source=f"{name}.onnx", constants="file"
    )
    emit_s = time.process_time() - t0
    for fname, text in sources.files.items():
        data = text if isinstance(text, bytes) else text.encode()
        (folder / fname).write_bytes(data)
    info = sources.info
    assert len(info.inputs) == 1 and len(info.outputs) == 1 and not info.dims
    nin = int(np.prod([int(d) for d in info.inputs[0].type.shape]))
    nout = int(np.prod([int(d) for d in info.outputs[0].type.shape]))
    (folder / "bench.c").write_text(DRIVER.format(p=prefix, nin=nin, nout=nout))
    stamp.write_text(f"{report.arena_bytes + report.unplanned_static_bytes} {emit_s}")
    return Built(folder, prefix, report.arena_bytes + report.unplanned_static_bytes, emit_s)


def compile_and_time(
    b: Built, tag: str, flags: list[str], cc: str, x: np.ndarray, repeat: int, number: int
) -> tuple[float, float, np.ndarray, dict[str, int]]:
    """(compile CPU s, best run s, output, object sections) of ``b`` built with ``flags``."""
    f = b.folder
    obj, exe = f"{b.prefix}_{tag}.o", f"bench_{tag}"
    stamp = f / f"{tag}.flags"
    want = " ".join(flags)
    fresh = (
        (f / exe).exists()
        and stamp.exists()
        and stamp.read_text() == want
        and (f / exe).stat().st_mtime > (f / f"{b.prefix}.c").stat().st_mtime
    )
    t_cc = 0.0
    if not fresh:
        r0 = os.times()
        subprocess.run([cc, *flags, *WARN, "-c", f"{b.prefix}.c", "-o", obj], cwd=f, check=True)
        r1 = os.times()
        t_cc = (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)
        stub = f"{b.prefix}_weights.S"
        subprocess.run([cc, "-c", stub, "-o", f"{b.prefix}_weights.o"], cwd=f, check=True)
        link = [cc, *flags, "bench.c", obj, f"{b.prefix}_weights.o", "-lm", "-o", exe]
        subprocess.run(link, cwd=f, check=True)
        stamp.write_text(want)
    x.tofile(f / "in.bin")
    out = subprocess.run(
        [f"./{exe}", "in.bin", f"out_{tag}.bin", str(repeat), str(number)],
        cwd=f,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    y = np.fromfile(f / f"out_{tag}.bin", dtype="<f4")
    return t_cc, float(out), y, section_sizes(f / obj)


def vm_time(model: Any, x: np.ndarray, repeat: int, number: int) -> float:
    from relaxc.backend.vm import VirtualMachine, compile_module, load_bytes
    from relaxc.frontend.onnx import import_onnx
    from relaxc.passes.assemble import assemble_pipeline
    from relaxc.passes.pipeline import Pipeline

    result = import_onnx(model)
    exe = compile_module(Pipeline(assemble_pipeline("vm")).run(result.module), result.weights)
    vm = VirtualMachine(load_bytes(exe, "model.rxb"))
    return best_cpu(lambda: vm.run("main", [x]), repeat, number)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated zoo names")
    ap.add_argument("--repeat", type=int, default=5, help="timing rounds (the best is kept)")
    ap.add_argument("--number", type=int, default=5, help="runs per timing round")
    ap.add_argument("--cc", default="cc", help="the C compiler")
    ap.add_argument("--flags", default=" ".join(RECOMMENDED), help="the recommended flags")
    ap.add_argument("--vm", action="store_true", help="also time the VM (slow)")
    ap.add_argument("--work", type=Path, help="keep (and reuse) the builds in this folder")
    ap.add_argument("--rebuild", action="store_true", help="emit and compile again")
    ap.add_argument("--rtol", type=float, default=1e-4, help="C vs onnxruntime, of max |logit|")
    args = ap.parse_args()
    if shutil.which(args.cc) is None:
        sys.exit(f"no C compiler '{args.cc}'")
    from rich.console import Console
    from rich.table import Table

    recommended = shlex.split(args.flags)
    tmp = None
    work = args.work
    if work is None:
        tmp = tempfile.TemporaryDirectory()
        work = Path(tmp.name)
    table = Table(
        title=f"inference, batch 1, CPU time per run (best of {args.repeat} x {args.number})"
    )
    cols = ["model", "emit s", "cc -O2 s", "ort 1 thread", "C -O2", "C rec.", "O2 / ort"]
    cols += ["rec. / ort", "max err", ".bss = arena"]
    if args.vm:
        cols += ["VM", "VM / ort"]
    for col in cols:
        table.add_column(col, justify="left" if col == "model" else "right")
    failed = False
    console = Console(width=160)
    for name in args.models.split(","):
        model = load_model(name)
        inp, x = input_of(model)
        b = emit(name, model, work / name, args.rebuild)
        t_ort, want = ort_time(model, {inp: x}, args.repeat, args.number)
        cc2, t2, y2, sec = compile_and_time(
            b, "O2", PORTABLE, args.cc, x, args.repeat, args.number
        )
        _, tr, yr, _ = compile_and_time(b, "rec", recommended, args.cc, x, args.repeat, args.number)
        scale = float(np.abs(want).max())
        err = max(float(np.abs(y - want.ravel()).max()) / scale for y in (y2, yr))
        bss_ok = sec.get(".bss", 0) == b.arena
        failed |= not bss_ok or err > args.rtol
        row = [
            name,
            f"{b.emit_s:.1f}",
            f"{cc2:.1f}" if cc2 else "(kept)",
            f"{t_ort * 1e3:.1f} ms",
            f"{t2 * 1e3:.1f} ms",
            f"{tr * 1e3:.1f} ms",
            f"{t2 / t_ort:.2f}x",
            f"{tr / t_ort:.2f}x",
            f"{err:.1e}",
            f"{sec.get('.bss', 0):,}" + (" yes" if bss_ok else f" NO ({b.arena:,})"),
        ]
        if args.vm:
            t_vm = vm_time(model, x, min(args.repeat, 3), 1)
            row += [f"{t_vm * 1e3:.1f} ms", f"{t_vm / t_ort:.2f}x"]
        table.add_row(*row)
        console.print(f"{name}: ort {t_ort * 1e3:.2f} ms, C -O2 {t2 * 1e3:.2f} ms, "
                      f"C {args.flags} {tr * 1e3:.2f} ms", highlight=False)
    console.print(table)
    console.print(
        f"C -O2: cc {' '.join(PORTABLE)}; C rec.: cc {args.flags}. max err: the largest "
        "difference from onnxruntime's logits over the largest |logit|."
    )
    if tmp is not None:
        tmp.cleanup()
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
