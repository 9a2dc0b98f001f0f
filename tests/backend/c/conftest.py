"""Whole-model sanitizer runs (``@pytest.mark.sanitize_model``: SqueezeNet built -O0 with
ASan and UBSan: half a minute to minutes on a busy machine) run only when asked for:
``pytest -m sanitize_model tests/backend/c`` (or with the whole long tier, ``pytest -m
slow``). Plain ``pytest`` skips them.

The samples' C builds (:func:`sample_builds`) are compiled once for the session."""

from __future__ import annotations

from pathlib import Path

import pytest

from relaxc.frontend.parser import parse_module
from relaxc.frontend.weights import default_weights_path, load_npz

from tests.conftest import asks_for

from .cbuild import Built, build_all, emit

MARK = "sanitize_model"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARK}: a whole model under ASan/UBSan (slow)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if asks_for(config, MARK) or asks_for(config, "slow"):
        return
    skip = pytest.mark.skip(reason=f"slow: run it with pytest -m {MARK} tests/backend/c")
    for item in items:
        if item.get_closest_marker(MARK) is not None:
            item.add_marker(skip)


SAMPLES_DIR = Path(__file__).resolve().parents[3] / "samples"


@pytest.fixture(scope="session")
def sample_builds(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, bool], Built]:
    """Every sample, packed and unpacked (``emit``'s defaults otherwise: weights inline, with
    a main), strict and sanitized, compiled once for the session: keyed ``(name, "packed" or
    "unpacked", sanitized)``. test_samples.py runs them all; test_weights_file.py compares its
    file-mode builds with the strict ones (it used to compile its own copies). Tests add
    files to the folders (their runs' inputs and outputs, with a tag of their own; objects)
    but never change the sources or the executables."""
    root = tmp_path_factory.mktemp("c_samples")
    jobs, keys = [], []
    for path in sorted(SAMPLES_DIR.glob("*.rx")):
        name = path.stem
        wpath = default_weights_path(path)
        module = parse_module(path.read_text(), path.name)
        weights = load_npz(wpath, "weights") if wpath else {}
        for mode in ("packed", "unpacked"):
            folder = root / f"{name}_{mode}"
            sources = emit(module, weights, folder, prefix=name, unpacked=mode == "unpacked")
            for sanitize in (False, True):
                jobs.append((folder, sources, sanitize))
                keys.append((name, mode, sanitize))
    return dict(zip(keys, build_all(jobs)))
