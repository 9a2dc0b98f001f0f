"""Settings every test shares.

Hypothesis runs without its per-example deadline: a deadline is a timing assertion, and the
machines the tests run on are shared and busy (a 0.1 ms example once took 290 ms under
load and failed as "flaky"). Speed is measured by the benchmarks, never by a test.

In CI (the environment variable ``CI`` set, as CI runners set it: ``CI=true``) hypothesis is
derandomized: every run draws the same examples, so a red CI run is a change of the code,
never a new draw; a failing example is printed with its reproduction blob. Locally the
draws stay random (and failures are replayed from the ``.hypothesis`` database), so the
properties keep looking for new counterexamples.

Builds that tests in several folders need are made once for the session (:func:`squeezenet_c`).

``pytest -q`` runs on every core (pytest-xdist, ``-n auto --dist loadgroup`` in
pyproject.toml's addopts), each worker a session of its own. A fixture wider than a test
(session or module scope: a C build, a fuzz run) would be built by every worker that runs
one of its tests, so the tests that share one are sent to the same worker
(:func:`shared_artefact_groups`); every other test goes wherever a worker is free. Each
worker has its own ``tmp_path_factory`` folder, and no test writes outside its temporary
folders.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

settings.register_profile("relaxc", deadline=None)
settings.register_profile(
    "ci", parent=settings.get_profile("relaxc"), derandomize=True, database=None, print_blob=True
)


def in_ci(environ: os._Environ[str] | dict[str, str] = os.environ) -> bool:
    """``CI`` is set to something other than empty, ``0`` or ``false``."""
    return environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


settings.load_profile("ci" if in_ci() else "relaxc")


@pytest.fixture(scope="session")
def squeezenet_c(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, Any]:
    """SqueezeNet (the ONNX zoo's light model with random weights) through the c pipeline,
    emitted with its weights inline and built strict, once for the session:
    ``(import result, c pipeline output, Built)``. tests/backend/c/test_weights_file.py and
    tests/passes/test_compute_in_place.py built the same program each (about 8 s of cc
    apiece). Read it, never change it: each test runs it with its own ``tag``."""
    pytest.importorskip("onnx")
    from relaxc.backend.c import emit_c
    from relaxc.frontend.onnx import import_onnx

    from .backend.c.cbuild import CC, compile_c, compile_module, write_sources
    from .frontend.onnx.test_model_zoo import with_random_weights, zoo_model

    if CC is None:
        pytest.skip("no C compiler (cc) on this machine")
    result = import_onnx(with_random_weights(zoo_model("squeezenet")))
    compiled = compile_module(result.module)
    # Inline on purpose (relaxc build -t c would put squeezenet's 4.9 MB of weights in a
    # file): test_weights_file.py compares its file build with this one.
    sources = emit_c(compiled, result.weights, prefix="sq", emit_main=True, constants="inline")
    folder = tmp_path_factory.mktemp("squeezenet_c")
    write_sources(folder, sources)
    return result, compiled, compile_c(folder, sources)


def shared_artefact_groups(items: list[pytest.Item]) -> dict[str, str]:
    """For each test that uses (directly or through other fixtures) a fixture of tests/
    wider than a function, the name of its xdist group: tests sharing such a fixture
    instance, directly or through a chain of others (test_weights_file.py uses both the
    samples' and SqueezeNet's session builds), get the same name. Keyed by node id."""
    parent: dict[str, str] = {}

    def find(k: str) -> str:
        while parent.setdefault(k, k) != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    keys_of: dict[str, list[str]] = {}
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        keys = []
        for name in info.names_closure:
            defs = info.name2fixturedefs.get(name)
            if not defs:
                continue
            fixture = defs[-1]
            if fixture.scope == "function" or not fixture.baseid:  # "": pytest's, a plugin's
                continue
            # One instance per session, or per package, module or class that uses it.
            module, _, rest = item.nodeid.partition("::")
            instance = {
                "session": "",
                "package": fixture.baseid,
                "module": module,
            }.get(fixture.scope, f"{module}::{rest.rpartition('::')[0]}")
            keys.append(f"{fixture.baseid}:{name}@{instance}")
        for k in keys[1:]:
            parent[find(k)] = find(keys[0])
        if keys:
            keys_of[item.nodeid] = keys
    return {nodeid: find(keys[0]) for nodeid, keys in keys_of.items()}


LONG_TIER = ("fuzz", "sanitize_model")
"""The markers of long runs that ``pytest -q`` skips (tests/fuzz/conftest.py,
tests/backend/c/conftest.py); each is also ``slow``, so ``pytest -m slow`` runs them all."""


def asks_for(config: pytest.Config, marker: str) -> bool:
    """The ``-m`` expression names ``marker`` (and not as ``not marker``)."""
    expr = config.getoption("markexpr") or ""
    return marker in expr and f"not {marker}" not in expr


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long tier: a test marked ``slow`` is skipped unless ``-m`` asks for it (those of
    :data:`LONG_TIER` are marked ``slow`` here, and skipped by their folder's conftest.py,
    which says how to run them)."""
    skip = pytest.mark.skip(reason="long tier: run it with pytest -m slow (README: Tests)")
    for item in items:
        if any(item.get_closest_marker(m) is not None for m in LONG_TIER):
            item.add_marker(pytest.mark.slow)
        elif item.get_closest_marker("slow") is not None and not asks_for(config, "slow"):
            item.add_marker(skip)


GROUPS_DIR = pytest.StashKey[Path]()
"""The controller's folder where the workers write :func:`shared_artefact_groups`."""


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """(xdist controller) Tell each worker where to write its groups."""
    config = node.config
    if GROUPS_DIR not in config.stash:
        config.stash[GROUPS_DIR] = Path(tempfile.mkdtemp(prefix="relaxc-xdist-groups-"))
    node.workerinput["relaxc_groups_dir"] = str(config.stash[GROUPS_DIR])


def pytest_collection_finish(session: pytest.Session) -> None:
    """(xdist worker) Write the groups of the collected tests for the controller."""
    folder = getattr(session.config, "workerinput", {}).get("relaxc_groups_dir")
    if folder is None:
        return
    worker = session.config.workerinput["workerid"]
    path = Path(folder) / f"{worker}.json"
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(shared_artefact_groups(session.items)))
    partial.replace(path)  # whole or absent


def pytest_unconfigure(config: pytest.Config) -> None:
    if GROUPS_DIR in config.stash:
        shutil.rmtree(config.stash[GROUPS_DIR], ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """(xdist controller) ``--dist loadgroup``: xdist's scheduling by group, the groups
    those of :func:`shared_artefact_groups` (xdist's own, the ``xdist_group`` mark, reaches
    the controller as a suffix of the node id, which pytest 9.2's structured node ids no
    longer carry)."""
    if config.getvalue("dist") != "loadgroup" or GROUPS_DIR not in config.stash:
        return None
    from xdist.scheduler import LoadGroupScheduling

    folder = config.stash[GROUPS_DIR]

    class SharedArtefactScheduling(LoadGroupScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                # Called once every worker has sent its collection, written before it.
                found = sorted(folder.glob("*.json"))
                self.groups = json.loads(found[0].read_text()) if found else {}
            group = self.groups.get(nodeid)
            return f"shared:{group}" if group is not None else super()._split_scope(nodeid)

    return SharedArtefactScheduling(config, log)
