"""The LALR engine's one door into lark's internals: lark_parse_table and its failure message."""

from __future__ import annotations

import re
import types
from pathlib import Path

import lark
import pytest

from relaxc.frontend import lalr
from relaxc.frontend.ir_builder import IRBuilder
from relaxc.frontend.lalr import SUPPORTED_LARK, LalrTables, LarkInternalsError, lark_parse_table
from relaxc.frontend.parser import _grammar, _tables, parse_module

ROOT = Path(__file__).resolve().parents[2]


def _stock_lark() -> lark.Lark:
    return lark.Lark(_grammar(), parser="lalr", maybe_placeholders=True)


def test_reads_the_installed_larks_table() -> None:
    table = lark_parse_table(_stock_lark())
    assert table.start_states["start"] in table.states
    assert table.end_states["start"] in table.states
    kinds = {kind.name for actions in table.states.values() for kind, _ in actions.values()}
    assert kinds == {"Shift", "Reduce"}


def test_supported_range_is_the_bound_in_pyproject() -> None:
    bounds = re.findall(r'^\s*"lark([^"]*)",', (ROOT / "pyproject.toml").read_text(), re.M)
    assert [b.replace(" ", "") for b in bounds] == [SUPPORTED_LARK]
    major = int(lark.__version__.split(".")[0])
    assert major == 1, f"lark {lark.__version__} is outside {SUPPORTED_LARK}"


def _assert_names_version_and_range(err: pytest.ExceptionInfo, version: str) -> None:
    message = str(err.value)
    assert f"installed lark {version}" in message
    assert "Lark.parser.parser.parser.parse_table" in message
    assert f"relaxc supports lark{SUPPORTED_LARK}" in message
    assert f"pip install 'lark{SUPPORTED_LARK}'" in message


def test_moved_table_fails_naming_the_lark_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lark whose parser frontend no longer has ``.parser.parser.parse_table``."""
    monkeypatch.setattr(lark, "__version__", "2.0.0")
    broken = _stock_lark()
    broken.parser.parser.parser = types.SimpleNamespace()  # the table has moved
    with pytest.raises(LarkInternalsError) as err:
        lark_parse_table(broken)
    _assert_names_version_and_range(err, "2.0.0")
    assert "AttributeError" in str(err.value)


def test_changed_table_shape_fails_naming_the_lark_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table is there but its actions are no longer Shift/Reduce pairs."""
    monkeypatch.setattr(lark, "__version__", "1.99.0")
    broken = _stock_lark()
    real = broken.parser.parser.parser.parse_table
    goto = types.SimpleNamespace(name="Goto")
    broken.parser.parser.parser.parse_table = types.SimpleNamespace(
        states={0: {"FN": (goto, 1)}}, start_states=real.start_states, end_states=real.end_states
    )
    with pytest.raises(LarkInternalsError) as err:
        lark_parse_table(broken)
    _assert_names_version_and_range(err, "1.99.0")
    assert "'Goto'" in str(err.value)


def test_building_the_tables_goes_through_the_one_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """LalrTables reaches the table only through lark_parse_table, so its error is what a
    user of a moved lark sees first."""

    def moved(parser: lark.Lark) -> None:
        raise LarkInternalsError("moved")

    monkeypatch.setattr(lalr, "lark_parse_table", moved)
    with pytest.raises(LarkInternalsError, match="moved"):
        LalrTables(_grammar(), IRBuilder)


def test_engine_matches_a_fresh_build() -> None:
    """Tables built again from the grammar parse a sample to the same module."""
    text = (ROOT / "samples" / "mlp.rx").read_text()
    fresh = LalrTables(_grammar(), IRBuilder)
    assert fresh.parse(text, IRBuilder("mlp.rx", text)) == parse_module(text, "mlp.rx")
    assert fresh.rules and len(fresh.action) == len(_tables().action)
