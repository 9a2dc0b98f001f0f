"""The import graph of the installed package keeps the design's layers (DESIGN.md, "Dependency
rule"), has no cycle, and hides no edge.

The modules are the files of the folders pyproject.toml's ``[tool.setuptools.package-dir]``
installs as ``relaxc.<pkg>`` (``ir/`` is ``relaxc.ir``, ...); their imports are read with
:mod:`ast`, so the test sees what the code says, not what one run happened to load.

Folder rules (a module may import relaxc modules of these folders only):

* ``ir/`` (nodes, types, the op registry, the verifier): the floor; ``ir/`` only.
* ``frontend/`` (the parser, printer, weights files, importers): ``ir/`` and ``frontend/``.
* ``passes/`` (the passes and their shared machinery): ``ir/`` and ``passes/``; never a
  backend: a fact that lives in a backend reaches a pass through the composition layer
  (:class:`relaxc.passes.context.PipelineContext`).
* ``backend/`` (the interpreter, the VM, the C emitter): ``ir/`` and ``backend/``; its two
  targets ``backend/c/`` and ``backend/vm/`` are peers that share ``backend/*.py`` and do not
  import each other.
* ``cli/``: everything; nothing imports ``cli/``.
* ``frontend/onnx/`` needs the optional ``onnx`` extra: only ``frontend/onnx/`` and ``cli/``
  import it.

How imports are counted:

* Every ``import``/``from ... import`` anywhere in a module is an edge: at the top, inside a
  function (a lazy import only delays the dependency, it is still one, and a cycle closed by
  it is a cycle), and under ``if TYPE_CHECKING:`` (a type the module names is a dependency of
  its design, and hiding a cycle there is still a cycle).
* Except under ``if __name__ == "__main__":``: that block runs only when the file is executed
  as a script, as the module ``__main__``, which is not the module the package imports.
* ``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``.
  Importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``; those implicit edges
  are not counted (every submodule would otherwise "import" its package).

Hidden edges: outside ``cli/`` no module calls ``importlib.import_module`` or ``__import__``
(or loads a file as a module) with a name of relaxc's or one it computes: a dependency on
another part of relaxc is an import statement this test can see.

The benchmarks' scripts (``benchmarks/*.py``, which import each other by file name) have no
cycle either.

Known exceptions are listed below, each with the change that removes it; an entry that no
longer holds fails the test, so the lists only shrink.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

ALLOWED: dict[str, frozenset[str]] = {
    "ir": frozenset({"ir"}),
    "frontend": frozenset({"ir", "frontend"}),
    "passes": frozenset({"ir", "passes"}),
    "backend": frozenset({"ir", "backend"}),
    "cli": frozenset({"ir", "frontend", "passes", "backend", "cli"}),
}
"""top folder (``relaxc.<pkg>``) -> the top folders its modules may import."""

PEERS: tuple[tuple[str, str], ...] = (("relaxc.backend.c", "relaxc.backend.vm"),)
"""Sibling packages that do not import each other."""

OPTIONAL: dict[str, frozenset[str]] = {
    "relaxc.frontend.onnx": frozenset({"relaxc.frontend.onnx", "relaxc.cli"}),
}
"""A package needing an optional extra -> the packages that may import it."""

KNOWN_CYCLES: frozenset[frozenset[str]] = frozenset()
"""Import cycles tolerated for now: each is one strongly connected component, exactly."""

KNOWN_UPWARD: frozenset[tuple[str, str]] = frozenset()
"""Edges against the folder rules tolerated for now: (importer, imported)."""


# -- reading the package ---------------------------------------------------------------------


def package_dirs(pyproject: Path) -> dict[str, Path]:
    """``relaxc.<pkg>`` -> its folder, from ``[tool.setuptools.package-dir]``."""
    text = pyproject.read_text()
    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10
        table = re.search(r"^\[tool\.setuptools\.package-dir\]\n((?:\".*\n)+)", text, re.M)
        assert table, "pyproject.toml has no [tool.setuptools.package-dir] table"
        pairs = re.findall(r'"([^"]+)"\s*=\s*"([^"]+)"', table.group(1))
        return {k: pyproject.parent / v for k, v in pairs}
    mapping = tomllib.loads(text)["tool"]["setuptools"]["package-dir"]
    return {k: pyproject.parent / v for k, v in mapping.items()}


def module_files(dirs: dict[str, Path]) -> dict[str, Path]:
    """Every module of the installed package -> its file."""
    out: dict[str, Path] = {}
    for pkg, folder in dirs.items():
        for f in sorted(folder.rglob("*.py")):
            parts = list(f.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([pkg, *parts])] = f
    return out


@dataclass
class Imports:
    """What one module's source imports (relaxc or not), and how it loads modules by name."""

    names: set[str] = field(default_factory=set)
    dynamic: list[tuple[int, str]] = field(default_factory=list)
    """(line, description) of each import done by a function call rather than a statement."""


_BY_NAME = {"import_module", "__import__", "run_module"}
"""Calls that import a module named by their first argument."""
_BY_FILE = {"spec_from_file_location", "spec_from_loader", "run_path"}
"""Calls that load a file as a module."""


def _is_main_guard(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    t = node.test
    return (
        isinstance(t, ast.Compare)
        and isinstance(t.left, ast.Name)
        and t.left.id == "__name__"
        and len(t.comparators) == 1
        and isinstance(t.comparators[0], ast.Constant)
        and t.comparators[0].value == "__main__"
    )


def read_imports(source: str, module: str, is_package: bool, known: set[str]) -> Imports:
    """The imports of ``module`` (its ``source``), resolved to module names of ``known``
    where they are relaxc's (see the module docstring for what counts)."""
    out = Imports()
    tree = ast.parse(source)
    todo: list[ast.AST] = [n for n in tree.body if not _is_main_guard(n)]
    while todo:
        node = todo.pop()
        todo.extend(n for n in ast.iter_child_nodes(node) if not _is_main_guard(n))
        if isinstance(node, ast.Import):
            out.names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.names.add(sub if sub in known else target)
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            arg = node.args[0] if node.args else None
            given = arg.value if isinstance(arg, ast.Constant) else None
            if name in _BY_FILE:
                out.dynamic.append((node.lineno, f"{name}(...): a file loaded as a module"))
            elif name in _BY_NAME and not (
                isinstance(given, str) and given.split(".")[0] not in ("relaxc", "")
            ):
                what = repr(given) if isinstance(given, str) else "a computed name"
                out.dynamic.append((node.lineno, f"{name}({what})"))
    return out


def import_graph(files: dict[str, Path]) -> tuple[dict[str, set[str]], dict[str, Imports]]:
    known = set(files)
    read = {
        m: read_imports(f.read_text(), m, f.name == "__init__.py", known) for m, f in files.items()
    }
    graph = {m: {n for n in imp.names if n in known and n != m} for m, imp in read.items()}
    return graph, read


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(frozenset(comp))
    return found


def _top(module: str) -> str:
    return module.split(".")[1]


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def rule_breaks(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Edges against the folder rules, peers and optional extras."""
    bad = set()
    for a, targets in graph.items():
        for b in targets:
            if _top(b) not in ALLOWED[_top(a)]:
                bad.add((a, b))
            for p, q in PEERS:
                if (_within(a, p) and _within(b, q)) or (_within(a, q) and _within(b, p)):
                    bad.add((a, b))
            for pkg, users in OPTIONAL.items():
                if _within(b, pkg) and not any(_within(a, u) for u in users):
                    bad.add((a, b))
    return bad


def script_graph(folder: Path) -> dict[str, set[str]]:
    """The scripts of ``folder`` -> the scripts of it they import (by their file name)."""
    names = {f.stem for f in folder.glob("*.py")}
    graph = {}
    for f in sorted(folder.glob("*.py")):
        imp = read_imports(f.read_text(), f.stem, False, names)
        graph[f.stem] = {n.split(".")[0] for n in imp.names} & names - {f.stem}
    return graph


# -- the package as it is --------------------------------------------------------------------

FILES = module_files(package_dirs(ROOT / "pyproject.toml"))
GRAPH, READ = import_graph(FILES)


def test_every_installed_package_has_its_folder() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    listed = set(re.findall(r'^\s*"(relaxc(?:\.\w+)+)",\s*$', text, re.M))
    packages = {m for m, f in FILES.items() if f.name == "__init__.py"}
    assert listed and listed <= packages, sorted(listed - packages)
    assert {_top(m) for m in FILES} == set(ALLOWED)  # a new top folder needs its rule here


def test_no_module_imports_against_the_folder_rules() -> None:
    breaks = rule_breaks(GRAPH)
    new = sorted(breaks - KNOWN_UPWARD)
    assert not new, "imports against the folder rules (see this file's docstring):\n" + "\n".join(
        f"  {a} imports {b}" for a, b in new
    )
    stale = sorted(KNOWN_UPWARD - breaks)
    assert not stale, f"fixed, remove from KNOWN_UPWARD: {stale}"


def test_the_import_graph_has_no_cycle() -> None:
    found = set(cycles(GRAPH))
    new = sorted(sorted(c) for c in found - KNOWN_CYCLES)
    assert not new, "import cycles (lazy and TYPE_CHECKING imports included):\n" + "\n".join(
        "  " + " <-> ".join(c) for c in new
    )
    stale = sorted(sorted(c) for c in KNOWN_CYCLES - found)
    assert not stale, f"gone or changed, remove or update in KNOWN_CYCLES: {stale}"


def test_no_module_outside_cli_imports_by_name() -> None:
    hidden = [
        f"{FILES[m].relative_to(ROOT)}:{line}: {what}"
        for m, imp in sorted(READ.items())
        if _top(m) != "cli"
        for line, what in imp.dynamic
    ]
    assert not hidden, "imports a test cannot see (write an import statement):\n" + "\n".join(
        hidden
    )


def test_the_benchmark_scripts_import_no_cycle() -> None:
    assert cycles(script_graph(ROOT / "benchmarks")) == []


# -- the checks find what they look for ------------------------------------------------------


def _graph_of(sources: dict[str, str]) -> tuple[dict[str, set[str]], dict[str, Imports]]:
    known = set(sources)
    read = {m: read_imports(s, m, m.count(".") == 1, known) for m, s in sources.items()}
    return {m: {n for n in i.names if n in known and n != m} for m, i in read.items()}, read


def test_lazy_type_checking_and_relative_imports_are_edges_a_main_guard_is_not() -> None:
    graph, _ = _graph_of(
        {
            "relaxc.ir": "",
            "relaxc.ir.a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from .b import B\n",
            "relaxc.ir.b": "def f():\n    from . import c\n",
            "relaxc.ir.c": "import relaxc.ir.a\n",
            "relaxc.cli": "",
            "relaxc.cli.m": "from relaxc.ir import a\nif __name__ == '__main__':\n"
            "    from relaxc.cli import n\n",
            "relaxc.cli.n": "from .m import x\n",
        }
    )
    assert graph["relaxc.ir.a"] == {"relaxc.ir.b"} and graph["relaxc.ir.b"] == {"relaxc.ir.c"}
    assert graph["relaxc.cli.m"] == {"relaxc.ir.a"} and graph["relaxc.cli.n"] == {"relaxc.cli.m"}
    assert cycles(graph) == [frozenset({"relaxc.ir.a", "relaxc.ir.b", "relaxc.ir.c"})]


def test_upward_peer_and_optional_edges_are_found() -> None:
    graph, _ = _graph_of(
        {
            "relaxc.ir.x": "from relaxc.passes.base import Pass\n",
            "relaxc.passes.base": "def f():\n    from relaxc.backend.c import emit\n",
            "relaxc.backend.c.emit": "from relaxc.backend.vm import codegen\n",
            "relaxc.backend.vm.codegen": "from relaxc.frontend.onnx import importer\n",
            "relaxc.frontend.onnx.importer": "from relaxc.ir import x\n",
            "relaxc.passes.fine": "from relaxc.ir.x import y\nfrom . import base\n",
        }
    )
    assert rule_breaks(graph) == {
        ("relaxc.ir.x", "relaxc.passes.base"),
        ("relaxc.passes.base", "relaxc.backend.c.emit"),
        ("relaxc.backend.c.emit", "relaxc.backend.vm.codegen"),
        ("relaxc.backend.vm.codegen", "relaxc.frontend.onnx.importer"),
    }


@pytest.mark.parametrize(
    "call",
    [
        'importlib.import_module("relaxc.backend.c.kernels")',
        "import_module(name)",
        '__import__("relaxc")',
        'importlib.import_module(".kernels", "relaxc.backend.c")',
        'importlib.util.spec_from_file_location("m", path)',
    ],
)
def test_imports_by_name_are_found(call: str) -> None:
    _, read = _graph_of({"relaxc.ir.a": f"def f():\n    return {call}\n"})
    assert [line for line, _ in read["relaxc.ir.a"].dynamic] == [2]


def test_an_optional_third_party_import_by_name_is_not_an_edge() -> None:
    _, read = _graph_of({"relaxc.ir.a": 'import importlib\nm = importlib.import_module("onnx")\n'})
    assert read["relaxc.ir.a"].dynamic == []


def test_benchmark_scripts_cycles_are_found(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import sys\nfrom b import f\n")
    (tmp_path / "b.py").write_text("def f():\n    from a import g\n")
    (tmp_path / "c.py").write_text("import a\n")
    assert cycles(script_graph(tmp_path)) == [frozenset({"a", "b"})]


if __name__ == "__main__":  # pragma: no cover - a quick look: python tests/test_layering.py
    for comp in cycles(GRAPH):
        print("cycle:", " <-> ".join(sorted(comp)), file=sys.stderr)
