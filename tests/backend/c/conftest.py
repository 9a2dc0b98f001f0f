"""Whole-model sanitizer runs (``@pytest.mark.sanitize_model``: SqueezeNet built -O0 with
ASan and UBSan: half a minute to minutes on a busy machine) run only when asked for:
``pytest -m sanitize_model tests/backend/c``. Plain ``pytest`` skips them."""

from __future__ import annotations

import pytest

MARK = "sanitize_model"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARK}: a whole model under ASan/UBSan (slow)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    expr = config.getoption("markexpr") or ""
    if MARK in expr and f"not {MARK}" not in expr:
        return
    skip = pytest.mark.skip(reason=f"slow: run it with pytest -m {MARK} tests/backend/c")
    for item in items:
        if item.get_closest_marker(MARK) is not None:
            item.add_marker(skip)
