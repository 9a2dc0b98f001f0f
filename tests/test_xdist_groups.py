"""tests/conftest.py's xdist groups: tests that share an instance of a fixture wider than a
function run on one worker, and every other test anywhere."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from .conftest import shared_artefact_groups


@dataclass
class Def:
    scope: str
    baseid: str


@dataclass
class Info:
    names_closure: list[str]
    name2fixturedefs: dict[str, list[Def]]


@dataclass
class Item:
    nodeid: str
    _fixtureinfo: Info = field(default_factory=lambda: Info([], {}))


FIXTURES = {
    "built": Def("session", "tests"),  # tests/conftest.py
    "samples": Def("session", "tests/backend/c"),
    "ops": Def("module", "tests/backend/c/test_ops.py"),
    "per_file": Def("module", "tests/backend/c"),  # a conftest's module fixture
    "tmp_path_factory": Def("session", ""),  # pytest's: every test may use it
    "tmp_path": Def("function", ""),
    "data": Def("function", "tests"),
}
FILES = ["tests/a.py", "tests/b.py", "tests/backend/c/test_ops.py"]


def item(nodeid: str, *names: str) -> Item:
    return Item(nodeid, Info(list(names), {n: [FIXTURES[n]] for n in names}))


def test_a_session_build_groups_its_users_across_files() -> None:
    items = [
        item("tests/a.py::t1", "built", "tmp_path"),
        item("tests/b.py::t2", "built"),
        item("tests/b.py::t3", "tmp_path", "tmp_path_factory", "data"),
    ]
    groups = shared_artefact_groups(items)  # type: ignore[arg-type]
    assert groups["tests/a.py::t1"] == groups["tests/b.py::t2"]
    assert "tests/b.py::t3" not in groups  # nothing of ours wider than a test


def test_a_module_fixture_groups_per_module_and_chains_join_groups() -> None:
    items = [
        item("tests/a.py::t1", "per_file"),
        item("tests/b.py::t2", "per_file"),
        item("tests/b.py::t3", "per_file", "samples"),
        item("tests/a.py::t4", "samples"),
    ]
    groups = shared_artefact_groups(items)  # type: ignore[arg-type]
    # a.py's per_file and b.py's are two instances, but t3 and t4 share samples.
    assert groups["tests/b.py::t2"] == groups["tests/b.py::t3"] == groups["tests/a.py::t4"]
    assert groups["tests/a.py::t1"] != groups["tests/b.py::t2"]


@st.composite
def suites(draw: Any) -> list[Item]:
    n = draw(st.integers(1, 12))
    names = sorted(FIXTURES)
    return [
        item(
            f"{draw(st.sampled_from(FILES))}::t{i}",
            *draw(st.lists(st.sampled_from(names), unique=True, max_size=3)),
        )
        for i in range(n)
    ]


def instances(it: Item) -> set[str]:
    """The instances of wide fixtures of ours an item uses, computed plainly."""
    out = set()
    for name in it._fixtureinfo.names_closure:
        d = FIXTURES[name]
        if d.scope == "function" or not d.baseid:
            continue
        out.add(name if d.scope == "session" else f"{name}@{it.nodeid.split('::')[0]}")
    return out


@given(suites())
def test_two_tests_share_a_group_exactly_when_a_chain_of_shared_instances_joins_them(
    items: list[Item],
) -> None:
    groups = shared_artefact_groups(items)  # type: ignore[arg-type]
    used = [instances(it) for it in items]
    assert {it.nodeid for it, u in zip(items, used) if u} == set(groups)
    # Connected components of "shares an instance", by repeated merging.
    comps: list[tuple[set[int], set[str]]] = []
    for i, u in enumerate(used):
        if not u:
            continue
        joined = [c for c in comps if c[1] & u]
        comps = [c for c in comps if not c[1] & u]
        members = {i}.union(*(c[0] for c in joined))
        comps.append((members, u.union(*(c[1] for c in joined))))
    for members, _ in comps:
        assert len({groups[items[i].nodeid] for i in members}) == 1
    names = [groups[items[min(m)].nodeid] for m, _ in comps]
    assert len(set(names)) == len(comps)
