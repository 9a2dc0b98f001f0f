"""A second opinion on the planners: CP-SAT (OR-Tools, optional) certifies the optimum.

Skipped when ortools is not installed (``pip install relaxc[cpsat]``).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaxc.passes.planning import cpsat
from relaxc.passes.planning.checker import check_plan
from relaxc.passes.planning.model import Buffer
from relaxc.passes.planning.planners import plan_buffers

pytestmark = pytest.mark.skipif(not cpsat.available(), reason="ortools (CP-SAT) is not installed")


def small_instances() -> st.SearchStrategy[list[Buffer]]:
    one = st.builds(
        lambda start, length, size, align: Buffer(start, start + length, size * align, align),
        st.integers(0, 12),
        st.integers(1, 8),
        st.integers(1, 12),
        st.sampled_from([1, 2, 4, 8]),
    )
    return st.lists(one, min_size=1, max_size=9)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_instances())
def test_best_matches_cpsat_on_small_instances(buffers: list[Buffer]) -> None:
    ref = cpsat.solve(buffers, time_limit=20.0)
    assert ref.status == "OPTIMAL"
    assert ref.offsets is not None and not check_plan(buffers, ref.offsets, ref.size)
    best = plan_buffers(buffers, "best", time_limit=1.0)
    assert best.size >= ref.size  # CP-SAT's optimum is a true lower bound
    assert best.proven_bound <= ref.size  # relaxc never claims more than is true
    if best.optimal:
        assert best.size == ref.size
    # Small instances are searched to the end: best finds the optimum and knows it.
    assert best.size == ref.size and best.optimal


def test_cpsat_on_random_instances_with_a_fixed_seed() -> None:
    rnd = random.Random(11)
    for _ in range(5):
        buffers = [
            Buffer(s, s + rnd.randrange(1, 6), rnd.randrange(1, 9) * 16, 16)
            for s in (rnd.randrange(0, 15) for _ in range(14))
        ]
        best = plan_buffers(buffers, "best", time_limit=2.0)
        ref = cpsat.solve(buffers, time_limit=30.0, upper=best.size, hint=best.offsets)
        assert ref.status == "OPTIMAL"
        assert ref.size == best.size
        assert best.optimal


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_instances())
def test_section_model_and_2d_model_agree(buffers: list[Buffer]) -> None:
    # One NoOverlap per maximal clique states the same problem as the NoOverlap2D boxes.
    a = cpsat.solve(buffers, time_limit=20.0)
    b = cpsat.solve(buffers, time_limit=20.0, model="2d")
    assert a.status == b.status == "OPTIMAL"
    assert a.size == b.size
    assert a.offsets is not None and not check_plan(buffers, a.offsets, a.size)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_instances())
def test_certify_best_on_small_instances(buffers: list[Buffer]) -> None:
    best = plan_buffers(buffers, "best", time_limit=1.0)
    assert not check_plan(buffers, best.offsets, best.size)
    cert = cpsat.certify(buffers, best.offsets, best.size, time_limit=20.0)
    # best proves these optimal itself; CP-SAT, asked for anything lower, finds nothing.
    assert cert.status == "OPTIMAL" and cert.size == best.size
