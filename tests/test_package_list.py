"""pyproject.toml lists every package of the source tree (setuptools installs only those
named: a package left off is missing from a wheel, though an editable install finds it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _table(text: str, name: str) -> str:
    m = re.search(rf"^\[{re.escape(name)}\]\n(.*?)(?=^\[)", text, re.M | re.S)
    assert m, name
    return m.group(1)


def test_every_package_directory_is_listed() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    listed = set(re.findall(r'^\s*"(relaxc[\w.]*)",', _table(text, "tool.setuptools"), re.M))
    dirs = dict(
        re.findall(
            r'^"(relaxc[\w.]*)" = "([\w/]+)"', _table(text, "tool.setuptools.package-dir"), re.M
        )
    )
    assert dirs, "no package-dir table"
    found = set()
    for package, folder in dirs.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *rel.parts]))
    assert found == listed
