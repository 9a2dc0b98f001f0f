"""Settings every test shares.

Hypothesis runs without its per-example deadline: a deadline is a timing assertion, and the
machines the tests run on are shared and busy (a 0.1 ms example once took 290 ms under
load and failed as "flaky"). Speed is measured by the benchmarks, never by a test.
"""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("relaxc", deadline=None)
settings.load_profile("relaxc")
