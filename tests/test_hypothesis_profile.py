"""The hypothesis profile of tests/conftest.py: derandomized in CI, random locally."""

from __future__ import annotations

from hypothesis import settings

from .conftest import in_ci


def test_ci_is_recognised_as_ci_runners_set_it() -> None:
    assert in_ci({"CI": "true"})
    assert in_ci({"CI": "1"})
    assert in_ci({"CI": "True"})
    assert not in_ci({})
    assert not in_ci({"CI": ""})
    assert not in_ci({"CI": "false"})
    assert not in_ci({"CI": "0"})


def test_the_loaded_profile_follows_the_environment() -> None:
    assert settings.default.deadline is None
    assert settings.default.derandomize == in_ci()
    if in_ci():
        assert settings.default.database is None
        assert settings.default.print_blob
