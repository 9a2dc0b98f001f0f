"""The C target: compile and run time of the generated C next to the VM, and the binary's
static memory next to the memory report.

Two tables, for the CNN and transformer samples (n = 128), packed (the c pipeline) and
--unpacked:

1. **Time.** relaxc's emission time, ``cc -std=c99 -O2`` time, and the time of one call of
   ``<prefix>_run`` (a small driver calls it ``--number`` times per round, best of
   ``--repeat`` rounds, CPU time), next to the VM running the .rxb built with the vm
   pipeline (same rounds, CPU time), and the reference interpreter for scale.
2. **Static memory.** ``size -A`` of the object file: .bss (the workspace arena, exactly the
   planned size) against the memory report's arena, and .rodata (the constants, plus a
   few float literals and strings) against the report's constant bytes. A mismatch of the
   arena is an error (exit 1).

    python benchmarks/c.py [--repeat 5] [--number 20] [--cc cc]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import SAMPLES  # noqa: E402

from relaxc.backend.c import emit_c  # noqa: E402
from relaxc.backend.inputs import random_inputs, resolve_dims  # noqa: E402
from relaxc.backend.interpreter import Interpreter  # noqa: E402
from relaxc.frontend.parser import parse_module  # noqa: E402
from relaxc.frontend.weights import load_npz  # noqa: E402
from relaxc.passes.assemble import assemble_pipeline  # noqa: E402
from relaxc.passes.memory_report import memory_report  # noqa: E402
from relaxc.passes.pipeline import Pipeline  # noqa: E402

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


def best_cpu(fn: Callable[[], Any], repeat: int, number: int) -> float:
    best = float("inf")
    fn()
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(number):
            fn()
        best = min(best, (time.process_time() - t0) / number)
    return best


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="timing rounds (the best is kept)")
    ap.add_argument("--number", type=int, default=20, help="runs per timing round")
    ap.add_argument("--cc", default="cc", help="the C compiler")
    args = ap.parse_args()
    if shutil.which(args.cc) is None:
        sys.exit(f"no C compiler '{args.cc}'")
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
                passes = assemble_pipeline("c")
                if build == "unpacked":
                    passes = [p for p in passes if p.name != "LegalizePackedCalls"]
                planned = Pipeline(passes).run(source)
                report = {r.name: r for r in memory_report(planned)}["main"]
                t0 = time.perf_counter()
                sources = emit_c(planned, weights, prefix=stem, source=f"{stem}.rx")
                t_emit = time.perf_counter() - t0
                folder = Path(tmp) / f"{stem}_{build}"
                folder.mkdir()
                for name, text in sources.files.items():
                    (folder / name).write_text(text)
                (folder / "bench.c").write_text(driver(sources.info, env))
                t0 = time.perf_counter()
                subprocess.run(
                    [args.cc, *CFLAGS, "-c", f"{stem}.c", "-o", f"{stem}.o"], cwd=folder, check=True
                )
                t_cc = time.perf_counter() - t0
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
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
