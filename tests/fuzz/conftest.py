"""The long fuzz campaigns (``@pytest.mark.fuzz``) run only when asked for: ``pytest -m fuzz``.

Plain ``pytest -q`` (the CI command) runs the fixed-seed run of tests/fuzz/test_fuzz.py and
skips the campaigns, whatever addopts say; ``pytest -m slow`` (the whole long tier) runs them.
"""

from __future__ import annotations

import pytest

from tests.conftest import asks_for


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if asks_for(config, "fuzz") or asks_for(config, "slow"):
        return
    skip = pytest.mark.skip(
        reason="long fuzz campaign: run it with pytest -m fuzz (see docs/fuzzing.md)"
    )
    for item in items:
        if item.get_closest_marker("fuzz") is not None:
            item.add_marker(skip)
