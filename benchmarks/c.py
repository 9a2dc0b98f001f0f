"""The C target: compile and run time of the generated C next to the VM, and the binary's
static memory next to the memory report.

Two tables, for the CNN and transformer samples (n = 128), packed (the c pipeline) and
--unpacked:

1. **Time.** relaxc's emission time, ``cc -std=c99 -O2`` time (both CPU), and the time of
   one call of ``<prefix>_run`` (a small driver calls it ``--number`` times per round, best of
   ``--repeat`` rounds, CPU time), next to the VM running the .rxb built with the vm
   pipeline (same rounds, CPU time), and the reference interpreter for scale.
2. **Static memory.** ``size -A`` of the object file: .bss (the workspace arena, exactly the
   planned size) against the memory report's arena, and .rodata (the constants, plus a
   few float literals and strings) against the report's constant bytes. A mismatch of the
   arena is an error (exit 1).

A third table times emit_c on decoders of 10 to 80 layers (the time per statement stays
flat: emission is linear in the program). Then, for the model zoo's architectures with
random weights (benchmarks/zoo.py; default the five of issue 16), the build in each weight
mode (``--constants inline`` and ``file``): ``relaxc build -t c`` end to end (CPU time and
peak memory of the process),
the emission alone (``emit_c``, CPU time, in this process), the size of the ``.c``, and
``cc -O2 -c`` of it (CPU time and peak memory: the compiler's own rusage, children
included), with ``.bss`` and ``.rodata`` (the weights object's in file mode) against the
report's arena and constant bytes (:data:`ZOO_COLUMNS`). The zoo models are those of
benchmarks/zoo.py without their final softmax (so that logits are compared).

Last, the inference table (benchmarks/c_infer.py), from each model's ``--constants file``
build: CPU time per run of onnxruntime (``intra_op_num_threads=1``), of the C built
``-std=c99 -O2`` and with the recommended flags (``--flags``, docs/c.md), and of the VM, on
the same input, with the ratios to onnxruntime and the largest difference from its logits
(over the largest |logit|); above ``--rtol`` (1e-4) the run exits 1, as it does when a C
build warns under ``-Wall -Wextra -Werror -pedantic``.

    python benchmarks/c.py [--repeat 5] [--number 20] [--cc cc]
                           [--zoo squeezenet,...|none] [--constants inline,file]
                           [--zoo-dir DIR] [--skip-samples] [--flags "-std=c99 -O3 ..."]
                           [--no-infer] [--no-vm] [--infer-repeat 3] [--infer-number 3]
"""

from __future__ import annotations

import argparse
import gc
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from blas_threads import pin_blas_threads  # noqa: E402

pin_blas_threads(sys.argv[1:])  # the VM's BLAS on one thread, as onnxruntime, before numpy loads

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from models import SAMPLES, decoder  # noqa: E402
from c_infer import INFER_COLUMNS, RECOMMENDED, best_cpu, infer_row, prepare_logits  # noqa: E402
from zoo import ZOO  # noqa: E402

from relaxc.backend.c import emit_c  # noqa: E402
from relaxc.cli.target_facts import pipeline_context  # noqa: E402
from relaxc.backend.inputs import random_inputs, resolve_dims  # noqa: E402
from relaxc.backend.interpreter import Interpreter  # noqa: E402
from relaxc.frontend.parser import parse_module  # noqa: E402
from relaxc.frontend.weights import load_npz  # noqa: E402
from relaxc.passes.assemble import assemble_pipeline  # noqa: E402
from relaxc.cli.report.analysis import memory_report  # noqa: E402
from relaxc.passes.pipeline import Pipeline, VerifyInstrument  # noqa: E402

MODELS = (("cnn", {}), ("transformer", {"n": 128}))
CFLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic"]

DRIVER = """\
#include "{p}.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void fill(float *x, size_t n)
{{
    size_t i;
    for (i = 0; i < n; ++i) x[i] = (float)((double)(i % 17) / 17.0 - 0.5);
}}

int main(int argc, char **argv)
{{
    int rounds = atoi(argv[1]), number = atoi(argv[2]), r, k;
    double best = 1e30;
{decls}
{fills}
    if ({call} != 0) return 1;
    for (r = 0; r < rounds; ++r) {{
        clock_t t0 = clock();
        for (k = 0; k < number; ++k) {{
            if ({call} != 0) return 1;
        }}
        {{
            double t = (double)(clock() - t0) / CLOCKS_PER_SEC / number;
            if (t < best) best = t;
        }}
    }}
    printf("%.9f\\n", best);
    (void)argc;
    return 0;
}}
"""


def driver(info: Any, env: dict[str, int]) -> str:
    decls, fills, args = [], [], []
    for i, port in enumerate(info.inputs + info.outputs):
        n = int(
            np.prod(
                [int(d) if isinstance(d, int) else env[d.name] for d in port.type.shape],
                dtype=np.int64,
            )
        )
        assert port.type.dtype == "f32", "the driver feeds f32 tensors only"
        decls.append(f"    float *b{i} = (float *)malloc({max(n, 1)} * sizeof(float));")
        if i < len(info.inputs):
            fills.append(f"    fill(b{i}, {n});")
        args.append(f"b{i}")
    args += [str(env[ir]) for ir, _, _ in info.dims]
    return DRIVER.format(
        p=info.prefix,
        decls="\n".join(decls),
        fills="\n".join(fills),
        call=f"{info.prefix}_run({', '.join(args)})",
    )


def section_sizes(obj: Path) -> dict[str, int]:
    out = subprocess.run(
        ["size", "-A", str(obj)], capture_output=True, text=True, check=True
    ).stdout
    sizes: dict[str, int] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith(".") and parts[1].isdigit():
            base = "." + parts[0].split(".")[1]
            sizes[base] = sizes.get(base, 0) + int(parts[1])
    return sizes


# ---------------------------------------------------------------------------------------
# The model zoo: emission and compilation of real models.


TIME = shutil.which("time", path="/usr/bin:/bin")


def run_measured(cmd: Sequence[str], cwd: Path | None = None) -> tuple[float, int, str]:
    """Run ``cmd``; (CPU seconds, peak resident bytes, stderr) of it and its children.

    Measured by GNU time (``/usr/bin/time``: user + system time, and "Maximum resident set
    size"), a small process: the rusage of a child forked from this Python process would
    count this process's own memory (Linux records the pre-exec peak of a forked child).
    Without GNU time, that rusage (os.wait4) is the fallback, an upper bound."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "time.txt"
        full = [TIME, "-f", "%U %S %M", "-o", str(report), *cmd] if TIME else list(cmd)
        with open(Path(tmp) / "stderr", "w+b") as err:
            p = subprocess.Popen(full, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
            _, status, ru = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
            err.seek(0)
            text = err.read().decode("utf-8", "replace")
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{text}")
        if TIME:
            user, system, kib = report.read_text().split()[-3:]
            return float(user) + float(system), int(kib) * 1024, text
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, text


def emit_cpu(rx: Path, constants: str) -> tuple[float, Any, int]:
    """The c pipeline on ``rx``, then ``emit_c`` as ``relaxc build -t c`` calls it (the types
    of the last verification, the collector paused): (CPU seconds of emit_c, its result, the
    report's constant bytes)."""
    source = parse_module(rx.read_text(), rx.name)
    weights = load_npz(rx.with_suffix(".npz"))
    verify = VerifyInstrument()
    planned = Pipeline(assemble_pipeline("c", context=pipeline_context()), [verify]).run(source)
    report = {r.name: r for r in memory_report(planned)}["main"]
    gc.collect()
    gc.disable()
    try:
        t0 = time.process_time()
        sources = emit_c(
            planned,
            weights,
            prefix=rx.stem,
            source=rx.name,
            types=verify.types_for(planned),
            constants=constants,
        )
        t = time.process_time() - t0
    finally:
        gc.enable()
    return t, sources, report


ZOO_COLUMNS: list[tuple[str, str, Callable[[Any], str]]] = [
    ("model", "model", str),
    ("constants", "constants", str),
    ("build_cpu", "relaxc build s", lambda v: f"{v:.1f}"),
    ("build_rss", "build RSS", lambda v: f"{v / 2**20:,.0f} MiB"),
    ("emit_cpu", "emit s", lambda v: f"{v:.2f}"),
    ("c_bytes", ".c size", lambda v: f"{v / 1e6:,.1f} MB"),
    ("cc_cpu", "cc -O2 -c s", lambda v: f"{v:.1f}"),
    ("cc_rss", "cc RSS", lambda v: f"{v / 2**20:,.0f} MiB"),
    ("bss_ok", ".bss = arena", lambda v: "yes" if v else "NO"),
    ("rodata", "constants .rodata", lambda v: f"{v:,}"),
    ("rodata_ok", "= report", lambda v: "yes" if v else "NO"),
]
"""(key, heading, format) of the zoo table; a row lacking a key prints an empty cell."""


def zoo_rows(
    models: Sequence[str], modes: Sequence[str], folder: Path, cc: str
) -> list[dict[str, Any]]:
    """One row per model and weight mode (see the module's docstring)."""
    rows = []
    for name in models:
        rx = prepare_logits(name, folder / "models")
        for mode in modes:
            row: dict[str, Any] = {"model": name, "constants": mode}
            out = folder / f"{name}_{mode}"
            shutil.rmtree(out, ignore_errors=True)
            cmd = [sys.executable, "-m", "relaxc.cli.main", "build", str(rx), "-t", "c"]
            cmd += ["-q", "-o", str(out), "--constants", mode]
            row["build_cpu"], row["build_rss"], _ = run_measured(cmd)
            t_emit, sources, report = emit_cpu(rx, mode)
            row["emit_cpu"] = t_emit
            c_file = out / f"{name}.c"
            row["c_bytes"] = c_file.stat().st_size
            if sources.files[f"{name}.c"].encode() != c_file.read_bytes():
                raise RuntimeError(f"{name}: emit_c and relaxc build wrote different C")
            del sources
            cmd = [cc, "-std=c99", "-O2", "-Wall", "-Wextra", "-c", f"{name}.c", "-o", f"{name}.o"]
            row["cc_cpu"], row["cc_rss"], _ = run_measured(cmd, cwd=out)
            sec = section_sizes(out / f"{name}.o")
            row["bss_ok"] = sec.get(".bss", 0) == report.arena_bytes + report.unplanned_static_bytes
            if mode == "file":
                run_measured([cc, "-c", f"{name}_weights.S", "-o", f"{name}_weights.o"], cwd=out)
                row["rodata"] = section_sizes(out / f"{name}_weights.o").get(".rodata", 0)
                row["rodata_ok"] = row["rodata"] == (out / f"{name}_weights.bin").stat().st_size
                row["rodata_ok"] &= report.constant_bytes <= row["rodata"] + sec.get(".rodata", 0)
            else:
                row["rodata"] = sec.get(".rodata", 0)
                row["rodata_ok"] = report.constant_bytes <= row["rodata"]
            rows.append(row)
            print(
                "  ".join(f"{h}={f(row[k])}" for k, h, f in ZOO_COLUMNS if k in row),
                file=sys.stderr,
                flush=True,
            )
            for f in out.glob("*.o"):
                f.unlink()
    return rows


def infer_rows(
    models: Sequence[str], folder: Path, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """The inference row of each model, from its ``--constants file`` build in ``folder``
    (built by :func:`zoo_rows` if it is not there)."""
    rows = []
    for name in models:
        rx = prepare_logits(name, folder / "models")
        out = folder / f"{name}_file"
        if not (out / f"{name}.c").exists():
            cmd = [sys.executable, "-m", "relaxc.cli.main", "build", str(rx), "-t", "c"]
            run_measured([*cmd, "-q", "-o", str(out), "--constants", "file"])
        row = {"model": name}
        row.update(
            infer_row(
                rx,
                out,
                args.cc,
                shlex.split(args.flags),
                args.infer_repeat,
                args.infer_number,
                not args.no_vm,
            )
        )
        rows.append(row)
        print(
            "  ".join(f"{h}={f(row[k])}" for k, h, f in INFER_COLUMNS if k in row),
            file=sys.stderr,
            flush=True,
        )
    return rows


def scaling_table(layers: Sequence[int]) -> Table:
    """emit_c's CPU time on decoders of growing depth (benchmarks/models.py, n <= 128): the
    time per statement stays flat when emission is linear in the program."""
    weights = load_npz(SAMPLES / "transformer.npz")
    t = Table(title="emit_c on deeper decoders (CPU time, best of 2): linear in the program")
    for col in (
        "layers",
        "bindings",
        "statements after the c pipeline",
        "emit_c s",
        "ms / statement",
    ):
        t.add_column(col, justify="right")
    for n in layers:
        module = parse_module(decoder(n, bounded=True), "decoder.rx")
        verify = VerifyInstrument()
        planned = Pipeline(assemble_pipeline("c", context=pipeline_context()), [verify]).run(module)
        stmts = len(planned.get("main").body)
        best = float("inf")
        for _ in range(2):
            gc.disable()
            try:
                t0 = time.process_time()
                emit_c(planned, weights, prefix="decoder", types=verify.types_for(planned))
                best = min(best, time.process_time() - t0)
            finally:
                gc.enable()
        t.add_row(
            str(n),
            f"{len(module.get('main').body):,}",
            f"{stmts:,}",
            f"{best:.2f}",
            f"{best / stmts * 1e3:.3f}",
        )
    return t


def table(title: str, rows: list[dict[str, Any]], columns: list) -> Table:
    t = Table(title=title)
    for key, heading, _ in columns:
        t.add_column(heading, justify="left" if key in ("model", "constants") else "right")
    for row in rows:
        t.add_row(*[fmt(row[key]) if key in row else "" for key, _, fmt in columns])
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="timing rounds (the best is kept)")
    ap.add_argument("--number", type=int, default=20, help="runs per timing round")
    ap.add_argument("--cc", default="cc", help="the C compiler")
    ap.add_argument(
        "--zoo",
        default=",".join(ZOO),
        help="comma list of zoo models, or none (default: %(default)s)",
    )
    ap.add_argument("--constants", default="inline,file", help="weight modes of the zoo builds")
    ap.add_argument("--zoo-dir", type=Path, help="keep the zoo's models and builds here")
    ap.add_argument("--skip-samples", action="store_true", help="only the zoo")
    ap.add_argument(
        "--flags", default=" ".join(RECOMMENDED), help="the recommended flags (%(default)s)"
    )
    ap.add_argument("--no-infer", action="store_true", help="no zoo inference table")
    ap.add_argument("--no-vm", action="store_true", help="leave the VM out of it (slow)")
    ap.add_argument(
        "--blas-threads",
        default="1",
        help="numpy's BLAS threads for the VM (read before numpy loads; onnxruntime has one)",
    )
    ap.add_argument("--infer-repeat", type=int, default=3, help="zoo timing rounds")
    ap.add_argument("--infer-number", type=int, default=3, help="zoo runs per round")
    ap.add_argument("--rtol", type=float, default=1e-4, help="C vs onnxruntime, of max |logit|")
    args = ap.parse_args()
    if shutil.which(args.cc) is None:
        sys.exit(f"no C compiler '{args.cc}'")
    failed = False if args.skip_samples else samples_tables(args)
    if not args.skip_samples:
        Console(width=150).print(scaling_table((10, 20, 40, 80)))
    models = [m for m in args.zoo.split(",") if m and m != "none"]
    if models:
        with tempfile.TemporaryDirectory() as tmp:
            folder = args.zoo_dir or Path(tmp)
            rows = zoo_rows(models, args.constants.split(","), folder, args.cc)
            inferred = [] if args.no_infer else infer_rows(models, folder, args)
        Console(width=160).print(
            table(
                "the model zoo (random weights): relaxc build -t c and cc -O2 -c, CPU time and "
                "peak memory",
                rows,
                ZOO_COLUMNS,
            )
        )
        failed |= not all(r["bss_ok"] and r["rodata_ok"] for r in rows)
        if inferred:
            Console(width=160).print(
                table(
                    f"inference, batch 1, CPU time per run (best of {args.infer_repeat} x "
                    f"{args.infer_number}), the same input",
                    inferred,
                    INFER_COLUMNS,
                ),
                f"C -O2: cc -std=c99 -O2; C recommended: cc {args.flags} (both with "
                "-Wall -Wextra -Werror -pedantic). max err: the largest difference from "
                "onnxruntime's logits over the largest |logit|; above --rtol fails.",
            )
            failed |= any(r["err"] > args.rtol for r in inferred)
    if failed:
        sys.exit(1)


def samples_tables(args: argparse.Namespace) -> bool:
    """The two tables of the samples; True if the static memory disagrees."""
    from relaxc.backend.vm import VirtualMachine, compile_module, load_bytes

    times = Table(
        title=(
            f"time: generated C (cc -O2) vs the VM, best of {args.repeat} x "
            f"{args.number} runs, CPU time"
        )
    )
    for col in (
        "model",
        "build",
        "C lines",
        "emit s",
        "cc -O2 s",
        "C run",
        "VM run",
        "VM / C",
        "interpreter",
    ):
        times.add_column(col, justify="left" if col in ("model", "build") else "right")
    memory = Table(title="static memory of the object file (size -A) vs the memory report (bytes)")
    for col in (
        "model",
        "build",
        "report arena",
        ".bss",
        "report constants",
        "C constants",
        ".rodata",
        ".text",
        "agree",
    ):
        memory.add_column(col, justify="left" if col in ("model", "build") else "right")
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for stem, dims in MODELS:
            source = parse_module((SAMPLES / f"{stem}.rx").read_text(), f"{stem}.rx")
            weights = load_npz(SAMPLES / f"{stem}.npz")
            fn = source.get("main")
            env = resolve_dims(fn, dims)
            inputs = random_inputs(fn, env, 0)
            label = stem + (f" (n={dims['n']})" if dims else "")
            vm = VirtualMachine(
                load_bytes(
                    compile_module(Pipeline(assemble_pipeline("vm")).run(source), weights),
                    f"{stem}.rxb",
                )
            )
            t_vm = best_cpu(lambda: vm.run("main", inputs), args.repeat, args.number)
            interp = Interpreter(source, weights, poison=False)
            t_int = best_cpu(lambda: interp.run("main", inputs, env), min(args.repeat, 3), 2)
            for build in ("packed", "unpacked"):
                passes = assemble_pipeline("c", context=pipeline_context())
                if build == "unpacked":
                    passes = [p for p in passes if p.name != "LegalizePackedCalls"]
                planned = Pipeline(passes).run(source)
                report = {r.name: r for r in memory_report(planned)}["main"]
                t0 = time.process_time()
                sources = emit_c(planned, weights, prefix=stem, source=f"{stem}.rx")
                t_emit = time.process_time() - t0
                folder = Path(tmp) / f"{stem}_{build}"
                folder.mkdir()
                for name, text in sources.files.items():
                    (folder / name).write_text(text)
                (folder / "bench.c").write_text(driver(sources.info, env))
                t_cc, _, _ = run_measured(
                    [args.cc, *CFLAGS, "-c", f"{stem}.c", "-o", f"{stem}.o"], cwd=folder
                )
                subprocess.run(
                    [args.cc, *CFLAGS, "bench.c", f"{stem}.o", "-lm", "-o", "bench"],
                    cwd=folder,
                    check=True,
                )
                out = subprocess.run(
                    ["./bench", str(args.repeat), str(args.number)],
                    cwd=folder,
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                t_c = float(out)
                lines = sources.files[f"{stem}.c"].count("\n")
                times.add_row(
                    label,
                    build,
                    f"{lines:,}",
                    f"{t_emit:.2f}",
                    f"{t_cc:.2f}",
                    f"{t_c * 1e3:.3f} ms",
                    f"{t_vm * 1e3:.3f} ms",
                    f"{t_vm / t_c:.2f}x",
                    f"{t_int * 1e3:.1f} ms",
                )
                sec = section_sizes(folder / f"{stem}.o")
                info = sources.info
                agree = (
                    sec.get(".bss", 0) == report.arena_bytes + report.unplanned_static_bytes
                    and info.workspace_bytes == report.arena_bytes
                    and report.constant_bytes <= sec.get(".rodata", 0)
                )
                failed |= not agree
                memory.add_row(
                    label,
                    build,
                    f"{report.arena_bytes:,}",
                    f"{sec.get('.bss', 0):,}",
                    f"{report.constant_bytes:,}",
                    f"{info.constant_bytes:,}",
                    f"{sec.get('.rodata', 0):,}",
                    f"{sec.get('.text', 0):,}",
                    "yes" if agree else "NO",
                )
    console = Console(width=150)
    console.print(times)
    console.print(memory)
    console.print(
        "C constants = the report's constants of @main plus the literals of primitive functions; "
        ".rodata adds the float literals of the kernels and the error strings."
    )
    return failed


if __name__ == "__main__":
    main()
