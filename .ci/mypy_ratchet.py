#!/usr/bin/env python3
"""Type-check the package with mypy once and hold each folder to its recorded error count.

    python .ci/mypy_ratchet.py            # check: fails if a folder has more errors than recorded
    python .ci/mypy_ratchet.py --update   # after fixing errors: record the lower counts
    python .ci/mypy_ratchet.py --show ir  # also print the errors of one folder

mypy's settings are pyproject.toml's ``[tool.mypy]``. mypy cannot follow setuptools'
``package-dir`` mapping (``relaxc.ir`` is the folder ``ir/``) through an editable install, so
this script makes a tree of links ``relaxc/<pkg> -> <folder>`` under ``.mypy_cache/`` and
checks the package ``relaxc`` there: modules are named as they are installed, and each error
is counted against the folder it is in.

The record is ``.ci/mypy_counts.json`` (folder -> errors). A folder at 0 (``ir/``) must stay
clean; any other may only go down: fix errors, run ``--update`` and commit the new record.
``--update`` never raises a count; a folder with more errors than recorded fails, with its
new errors listed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / ".ci" / "mypy_counts.json"
CACHE = ROOT / ".mypy_cache"
TREE = CACHE / "relaxc-tree"
ERROR = re.compile(r"^relaxc/(?P<folder>[A-Za-z0-9_]+)/(?P<rest>[^:]+):\d+(?::\d+)?: error: ")


def package_dirs() -> dict[str, str]:
    """``relaxc.<pkg>`` -> folder, from pyproject.toml's ``[tool.setuptools.package-dir]``."""
    text = (ROOT / "pyproject.toml").read_text()
    try:
        import tomllib
    except ImportError:  # Python 3.10
        table = re.search(r"^\[tool\.setuptools\.package-dir\]\n((?:\".*\n)+)", text, re.M)
        if not table:
            sys.exit("pyproject.toml has no [tool.setuptools.package-dir] table")
        return dict(re.findall(r'"([^"]+)"\s*=\s*"([^"]+)"', table.group(1)))
    return dict(tomllib.loads(text)["tool"]["setuptools"]["package-dir"])


def link_tree() -> dict[str, str]:
    """Make ``TREE/relaxc/<pkg>`` point at each folder; returns pkg -> folder."""
    dirs = package_dirs()
    pkg_root = TREE / "relaxc"
    pkg_root.mkdir(parents=True, exist_ok=True)
    folders = {}
    for name, folder in dirs.items():
        pkg = name.removeprefix("relaxc.")
        if "." in pkg:
            sys.exit(f"package-dir maps a subpackage ({name}): teach {__file__} about it")
        link = pkg_root / pkg
        target = ROOT / folder
        if link.is_symlink() and Path(os.readlink(link)) == target:
            pass
        else:
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(target, target_is_directory=True)
        folders[pkg] = folder
    for stale in pkg_root.iterdir():
        if stale.name not in folders:
            stale.unlink()
    return folders


def run_mypy() -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(ROOT / "pyproject.toml"),
        "--cache-dir",
        str(CACHE),
        "-p",
        "relaxc",
    ]
    done = subprocess.run(cmd, cwd=TREE, capture_output=True, text=True)
    lines = done.stdout.splitlines()
    summary = lines[-1] if lines else ""
    if done.returncode not in (0, 1) or not (
        summary.startswith("Success") or summary.startswith("Found ")
    ):
        sys.stderr.write(done.stdout + done.stderr)
        sys.exit(f"mypy did not run to the end (exit status {done.returncode})")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true", help="record counts that went down")
    ap.add_argument("--show", metavar="FOLDER", help="print the errors of FOLDER")
    args = ap.parse_args()
    folders = link_tree()
    lines = run_mypy()
    errors: dict[str, list[str]] = {pkg: [] for pkg in folders}
    for line in lines:
        m = ERROR.match(line)
        if m:
            errors.setdefault(m["folder"], []).append(line)
    counts = Counter({pkg: len(v) for pkg, v in errors.items()})
    record: dict[str, int] = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    worse, better = [], []
    for pkg in sorted(counts):
        was = record.get(pkg)
        now = counts[pkg]
        state = "" if was is None or was == now else f" (recorded {was})"
        print(f"{folders.get(pkg, pkg) + '/':<10} {now:4d} errors{state}")
        if was is None or now > was:
            worse.append(pkg)
        elif now < was:
            better.append(pkg)
    if args.show:
        print("\n".join(errors.get(args.show, [])))
    if args.update:
        new = {pkg: min(counts[pkg], record.get(pkg, counts[pkg])) for pkg in sorted(counts)}
        if not RECORD.exists():
            new = {pkg: counts[pkg] for pkg in sorted(counts)}
        RECORD.write_text(json.dumps(new, indent=2) + "\n")
        print(f"recorded {RECORD.relative_to(ROOT)}")
        worse = [p for p in worse if counts[p] > new[p]]
    if worse:
        for pkg in worse:
            print(
                f"\n{folders.get(pkg, pkg)}/ has {counts[pkg]} mypy errors, more than the "
                f"{record.get(pkg, 0)} recorded in {RECORD.relative_to(ROOT)}:",
                file=sys.stderr,
            )
            for line in errors[pkg]:
                print("  " + line, file=sys.stderr)
        print(
            "\nfix the new errors (the ones your change made); the record only goes down",
            file=sys.stderr,
        )
        return 1
    if better and not args.update:
        print(
            f"fewer errors than recorded in {', '.join(f + '/' for f in better)}: "
            "lower the record with python .ci/mypy_ratchet.py --update and commit it"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
