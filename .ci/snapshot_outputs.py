"""Hash every output relaxc writes for the samples and the ONNX model-zoo imports.

Used to show that a refactoring changes no output: run it before and after, then diff.

    python .ci/snapshot_outputs.py OUT.json [--c-zoo squeezenet,shufflenet] [--skip-c-zoo]

For each sample: build -t vm / ir / c / c --unpacked / c --emit-main and report --json.
For each model-zoo architecture the onnx package ships: import (the .rx and .npz), then
build -t vm / ir and report --json, and build -t c for the models named by --c-zoo
(default: all; C emission of the largest takes minutes before issue 16).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def digest_tree(path: Path) -> dict[str, str]:
    if path.is_file():
        return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()}
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.iterdir())
        if p.is_file()
    }


def run(args: list[str], cwd: Path) -> tuple[int, str]:
    p = subprocess.run(["relaxc", *args], cwd=cwd, capture_output=True, text=True, timeout=3600)
    return p.returncode, hashlib.sha256((p.stdout + "\x00" + p.stderr).encode()).hexdigest()


def builds(rx: Path, work: Path, with_c: bool, out: dict, key: str) -> None:
    # Paths relative to the work folder: outputs that name their source (C comments, the
    # report's "file") are then the same wherever the snapshot runs.
    stem = rx.stem
    variants: list[tuple[str, list[str], Path]] = [
        ("vm", ["-t", "vm", "-o", f"{stem}.rxb"], work / f"{stem}.rxb"),
        ("ir", ["-t", "ir", "-o", f"{stem}.out.rx"], work / f"{stem}.out.rx"),
    ]
    if with_c:
        variants += [
            ("c", ["-t", "c", "-o", "c"], work / "c"),
            ("c-unpacked", ["-t", "c", "--unpacked", "-o", "cu"], work / "cu"),
            ("c-main", ["-t", "c", "--emit-main", "-o", "cm"], work / "cm"),
        ]
    for name, args, target in variants:
        code, log = run(["build", rx.name, "-q", *args], work)
        out[f"{key}/{name}"] = {
            "exit": code,
            "files": digest_tree(target) if target.exists() else {},
        }
        print(f"{key}/{name}: exit {code}", file=sys.stderr, flush=True)
    code, log = run(["report", rx.name, "--json"], work)
    out[f"{key}/report"] = {"exit": code, "output": log}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--c-zoo", default="")
    ap.add_argument("--skip-c-zoo", action="store_true")
    ap.add_argument("--only", default="", help="comma list of sample/model names")
    ap.add_argument("--root", default=str(ROOT), help="the checkout whose samples/ to use")
    a = ap.parse_args()
    import onnx

    light = Path(onnx.__file__).parent / "backend/test/data/light"
    only = set(filter(None, a.only.split(",")))
    c_zoo = set(filter(None, a.c_zoo.split(",")))
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="snapshot-") as tmp:
        for rx in sorted((Path(a.root) / "samples").glob("*.rx")):
            if only and rx.stem not in only:
                continue
            work = Path(tmp) / rx.stem
            work.mkdir()
            for f in rx.parent.glob(rx.stem + ".*"):
                if f.suffix in (".rx", ".npz"):
                    (work / f.name).write_bytes(f.read_bytes())
            builds(work / rx.name, work, True, out, f"sample/{rx.stem}")
        for model in sorted(light.glob("light_*.onnx")):
            name = model.stem.removeprefix("light_")
            if only and name not in only:
                continue
            work = Path(tmp) / name
            work.mkdir()
            code, _ = run(["import", str(model), "-q", "-o", f"{name}.rx"], work)
            out[f"zoo/{name}/import"] = {"exit": code, "files": digest_tree(work)}
            with_c = not a.skip_c_zoo and (not c_zoo or name in c_zoo)
            builds(work / f"{name}.rx", work, with_c, out, f"zoo/{name}")
            for f in work.iterdir():
                if f.is_dir():
                    for g in f.iterdir():
                        g.unlink()
                    f.rmdir()
                elif f.suffix in (".rxb",):
                    f.unlink()
    Path(a.out).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
