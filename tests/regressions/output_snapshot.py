"""A snapshot of what relaxc writes for the samples and the onnx package's model-zoo
architectures: the SHA-256 of every output file of ``build`` (``-t vm``, ``-t ir``, ``-t c``
and ``-t c --unpacked``) and of ``report --json`` and ``report --svg``, for a refactoring
that must change no byte.

    python tests/regressions/output_snapshot.py before.json           # on the old tree
    python tests/regressions/output_snapshot.py after.json --compare before.json

It runs the ``relaxc`` of the active environment in a subprocess per command (so the
tree installed there is the one measured), in a temporary folder, and exits 1 listing
every file whose bytes differ (or that exists on one side only). ``--only NAME`` limits
it to some programs (a sample's stem, or a zoo name such as ``resnet50``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"

BUILDS: dict[str, list[str]] = {
    "vm": ["-t", "vm", "-o", "{out}/{stem}.rxb"],
    "ir": ["-t", "ir", "-o", "{out}/{stem}.rx"],
    "c": ["-t", "c", "-o", "{out}/c"],
    "c-unpacked": ["-t", "c", "--unpacked", "-o", "{out}/cu"],
}


def programs() -> dict[str, Path]:
    """Every sample ``.rx`` and every light model-zoo ``.onnx`` the onnx package ships."""
    found = {p.stem: p for p in sorted(SAMPLES.glob("*.rx"))}
    try:
        import onnx
    except ImportError:
        return found
    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    for p in sorted(light.glob("light_*.onnx")):
        found[p.stem.removeprefix("light_")] = p
    return found


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _relaxc(args: list[str], cwd: Path, stdout: Path | None = None) -> str:
    exe = Path(sys.executable).parent / "relaxc"
    with open(stdout, "wb") if stdout else open("/dev/null", "wb") as out:
        r = subprocess.run([str(exe), *args], stdout=out, stderr=subprocess.PIPE, cwd=cwd)
    return f"exit {r.returncode}"


def snapshot(name: str, path: Path) -> dict[str, str]:
    """``{output file or command: digest or exit status}`` of one program."""
    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        # a copy of the program (and a sample's weights) in the folder, named relative to
        # it: no output lands in samples/, and no output names the temporary folder
        src = folder / path.name
        src.write_bytes(path.read_bytes())
        npz = path.with_suffix(".npz")
        if path.suffix == ".rx" and npz.exists():
            src.with_suffix(".npz").write_bytes(npz.read_bytes())
        for kind, args in BUILDS.items():
            (folder / kind).mkdir()
            argv = [a.format(out=kind, stem=name) for a in args]
            out[f"build {kind}"] = _relaxc(["build", src.name, *argv, "-q"], folder)
        json_out = folder / "report.json"
        out["report json"] = _relaxc(["report", src.name, "--json"], folder, json_out)
        out["report svg"] = _relaxc(["report", src.name, "-q", "--svg", "r.svg"], folder)
        inputs = {src, src.with_suffix(".npz")}
        for f in sorted(folder.rglob("*")):
            if f.is_file() and f not in inputs:
                out[str(f.relative_to(folder))] = _digest(f)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", type=Path, help="where to write the snapshot (JSON)")
    parser.add_argument("--compare", type=Path, help="an earlier snapshot to compare with")
    parser.add_argument("--only", action="append", default=[], help="a program's name")
    args = parser.parse_args(argv)
    found = programs()
    unknown = [n for n in args.only if n not in found]
    if unknown:
        parser.error(f"unknown program(s) {', '.join(unknown)}; known: {', '.join(found)}")
    chosen = {n: p for n, p in found.items() if not args.only or n in args.only}
    result = {}
    for name, path in chosen.items():
        print(f"{name} ...", file=sys.stderr, flush=True)
        result[name] = snapshot(name, path)
    args.output.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    if args.compare is None:
        return 0
    before = json.loads(args.compare.read_text())
    differ = []
    for name in chosen:
        old, new = before.get(name, {}), result[name]
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                differ.append(f"{name}: {key}: {old.get(key)} -> {new.get(key)}")
    print("\n".join(differ) if differ else f"identical: {len(chosen)} programs", flush=True)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
