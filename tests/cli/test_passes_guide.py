"""docs/passes.md is checked against the code, not only its ``$ relaxc`` examples: it said
ReorderForMemory was in no named pipeline while ``--print-pipeline`` showed it first. The
named pipelines' table, each pass's paragraph, its options and their defaults, and the
option table of ``relaxc passes`` are compared with the registry and the command."""

from __future__ import annotations

import re
from dataclasses import MISSING
from pathlib import Path

import pytest

from relaxc.cli.main import cli
from relaxc.passes.registry import PASSES, PIPELINES
from relaxc.passes.spec import kebab

GUIDE = (Path(__file__).resolve().parents[2] / "docs" / "passes.md").read_text()


def _paragraph(name: str) -> str:
    """The guide's text about pass ``name``: from its bold heading to the next pass's."""
    start = GUIDE.index(f"**{name}** (`{kebab(name)}`")
    others = [GUIDE.find(f"**{n}** (`", start + 1) for n in PASSES if n != name]
    ends = [e for e in others if e > start]
    return GUIDE[start : min(ends) if ends else len(GUIDE)]


def test_the_named_pipelines_table_is_the_registry() -> None:
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]*) \|", GUIDE, re.M))
    for name, passes in PIPELINES.items():
        listed = rows[name].strip()
        assert (() if listed == "(none)" else tuple(p.strip() for p in listed.split(","))) == (
            passes
        ), name


@pytest.mark.parametrize("name", list(PASSES))
def test_every_pass_is_described_with_its_options(name: str) -> None:
    text = _paragraph(name)
    fields = PASSES[name].option_fields()
    if not fields:
        assert "No options." in text, name
    for f in fields:
        default = f.default if f.default is not MISSING else None
        shown = str(default).lower() if isinstance(default, bool) else str(default)
        # "Option: `align: int = 64`", or a table row "| `planner` | `best` |"
        if isinstance(default, str):
            shown = f'"{default}"'
        spelled = (f"`{f.name}: " in text and f"= {shown}`" in text) or (
            f"| `{f.name}` | `{shown.strip(chr(34))}`" in text
        )
        assert spelled, f"{name}.{f.name} (default {shown}) is not in its paragraph"
    in_pipelines = [p for p, passes in PIPELINES.items() if name in passes]
    if not in_pipelines:
        assert "not in the named pipelines" in text, name
    else:
        assert "not in the named pipelines" not in text, name


def test_every_option_of_relaxc_passes_is_in_its_table() -> None:
    table = GUIDE[GUIDE.index("## Options") : GUIDE.index("## Pipelines and options")]
    for param in cli.commands["passes"].params:
        for opt in param.opts + param.secondary_opts:
            if opt in ("-h", "--help") or not opt.startswith("--"):
                continue
            assert f"`{opt}" in table, opt
