"""The weights of real models on disk and in memory: ``relaxc import`` and ``relaxc report``.

For model-zoo architectures from the onnx package (``light_*.onnx``, whose weights are
ConstantOfShape splats) and, with ``--random``, the same architectures with seeded random
weights (benchmarks/zoo.py), each command runs in a fresh process; the table gives the
size of the written ``.npz``, the command's wall time and its peak resident memory
(GNU time's maximum resident set size), and checks that the archive loads back to
the arrays the importer made (bit for bit).

    python benchmarks/weights.py [--models vgg19,resnet50] [--random] [--keep DIR]
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zoo import light_folder, random_weight_model  # noqa: E402

RELAXC = [sys.executable, "-c", "import sys; from relaxc.cli.entry import main; main()"]


GNU_TIME = "/usr/bin/time"


def measure(args: list[str], cwd: Path) -> tuple[float, int]:
    """(wall seconds, peak RSS in bytes) of ``relaxc ARGS`` in a fresh process, through GNU
    time (a child forked from this process, which holds the models, would inherit its peak)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        cmd = [GNU_TIME, "-f", "%e %M", "-o", out.name, *RELAXC, *args]
        if subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL).returncode != 0:
            sys.exit(f"relaxc {' '.join(args)} failed")
        wall, kib = out.read().split()[-2:]
    return float(wall), int(kib) * 1024


def open_npz(path: Path):
    from relaxc.frontend.weights import open_npz as open_archive

    return open_archive(path)


def check_exact(onnx_path: Path, npz: Path) -> bool:
    """The archive loads back to exactly the arrays the importer folded."""
    from relaxc.frontend.onnx import import_onnx
    from relaxc.frontend.weights import load_npz

    made = import_onnx(onnx_path).weights
    loaded = load_npz(npz)
    return sorted(made) == sorted(loaded) and all(
        made[k].dtype == loaded[k].dtype
        and made[k].shape == loaded[k].shape
        and made[k].tobytes() == loaded[k].tobytes()
        for k in made
    )


def mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n:,} B"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="vgg19,resnet50")
    ap.add_argument("--random", action="store_true", help="also the random-weight versions")
    ap.add_argument("--keep", type=Path, help="write the files here (default: a temp folder)")
    ap.add_argument("--no-check", action="store_true", help="skip the bit-exact check")
    opts = ap.parse_args()
    import onnx

    folder = opts.keep or Path(tempfile.mkdtemp(prefix="relaxc-weights-"))
    folder.mkdir(parents=True, exist_ok=True)
    table = Table(title="weights of imported models (fresh process per command)")
    for col in (
        "model",
        "weights",
        ".onnx",
        ".npz",
        "logical bytes",
        "import s",
        "import RSS",
        "report s",
        "report RSS",
        "exact",
    ):
        table.add_column(col, justify="left" if col in ("model", "weights") else "right")
    for name in opts.models.split(","):
        variants = [("splats", light_folder() / f"light_{name}.onnx")]
        if opts.random:
            path = folder / f"{name}_random.onnx"
            if not path.exists():
                onnx.save(random_weight_model(name), str(path))
            variants.append(("random", path))
        for kind, src in variants:
            rx = folder / f"{name}_{kind}.rx"
            t_imp, rss_imp = measure(["import", str(src), "-o", str(rx), "-q"], folder)
            t_rep, rss_rep = measure(["report", str(rx), "-q"], folder)
            npz = rx.with_suffix(".npz")
            archive = open_npz(npz)
            logical = sum(
                int(dt.itemsize) * math.prod(shape)
                for shape, dt in (archive.spec(k) for k in archive)
            )
            exact = "-" if opts.no_check else ("yes" if check_exact(src, npz) else "NO")
            table.add_row(
                name,
                kind,
                mib(src.stat().st_size),
                mib(npz.stat().st_size),
                mib(logical),
                f"{t_imp:.2f}",
                mib(rss_imp),
                f"{t_rep:.2f}",
                mib(rss_rep),
                exact,
            )
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
