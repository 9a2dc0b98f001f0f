"""The installed relaxc's version (what ``--version`` prints and the JSON report records)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def relaxc_version() -> str:
    try:
        return version("relaxc")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0+unknown"
