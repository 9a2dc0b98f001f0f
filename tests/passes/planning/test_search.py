"""The exact search's settled-buffer rule (7), time reversal, and its work accounting.

(7) cuts a node's candidates at the first settled buffer (no unplaced neighbour may go
below its top): the search must stay complete, every heuristic on both views finding a
plan exactly when one exists, on the instance and on its mirror image in time (the same
conflicts, so the same optimum). ``minimize`` and ``repair`` count their work: they
stop within their budget (up to the last node started), and the same input gives the
same plan and the same work.
"""

from __future__ import annotations

import itertools
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaxc.passes.planning import search as search_module
from relaxc.passes.planning.checker import check_plan
from relaxc.passes.planning.greedy import Instance, greedy, place, prepare, scan
from relaxc.passes.planning.model import Buffer, lower_bound
from relaxc.passes.planning.search import Sections, merged_runs, minimize, repair

from .test_repair import buffer_lists, decide


def mirrored(inst: Instance) -> Instance:
    return Instance(
        list(inst.index), [-e for e in inst.end], [-s for s in inst.start], inst.size, inst.align
    )


def optimum(inst: Instance) -> int:
    orders = itertools.permutations(range(inst.n))
    return min(inst.height(place(inst, list(order))) for order in orders)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(buffer_lists(6), st.sampled_from(["TWA", "WAT", "TAW", "TWO"]))
def test_settled_buffers_keep_the_search_exact_forwards_and_backwards(
    buffers: list[Buffer], heuristic: str
) -> None:
    inst = prepare(buffers)
    opt = optimum(inst)
    for view in (inst, merged_runs(inst), mirrored(inst), merged_runs(mirrored(inst))):
        found = decide(view, opt, heuristic=heuristic)
        assert found is not None
        assert view.height(found) <= opt
        assert not check_plan(buffers, inst.expand(found, len(buffers)), opt)
        assert decide(view, opt - 1, heuristic=heuristic) is None


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(buffer_lists(12))
def test_settled_buffers_do_not_change_the_answer(buffers: list[Buffer]) -> None:
    # With (7) off (no candidate looked at), the same capacities are feasible.
    inst = prepare(buffers)
    base, _ = greedy(inst, "greedy-size", scan(inst))
    for capacity in range(lower_bound(buffers), inst.height(base) + 1):
        with_rule = decide(inst, capacity) is not None
        with mock.patch.object(search_module, "SETTLED_LOOK", 0):
            without = decide(inst, capacity) is not None
        assert with_rule == without


def dense(n: int, seed: int) -> list[Buffer]:
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        s = rng.randrange(0, n // 2)
        out.append(Buffer(s, s + rng.randint(1, 40), rng.randint(1, 64) * 64, 64))
    return out


def test_minimize_and_repair_stay_within_their_budgets_and_repeat() -> None:
    # The work counted ends the search: never past the budget by more than a node per
    # decision of the last turn (a few hundred units, milliseconds), and the same input
    # gives the same plan and the same work.
    inst = prepare(dense(300, 5))
    sc = scan(inst)
    base, _ = greedy(inst, "greedy-size", sc)
    top = inst.height(base)
    for budget in (500, 5000, 20000):
        a = minimize(inst, sc.max_live, top, budget)
        b = minimize(inst, sc.max_live, top, budget)
        assert a.work <= budget + 1000
        assert (a.offsets, a.work, a.bound) == (b.offsets, b.work, b.bound)
        r = repair(inst, base, sc.max_live, budget)
        s = repair(inst, base, sc.max_live, budget)
        assert r.work <= budget + search_module.REPAIR_WORK // 10
        assert (r.offsets, r.work) == (s.offsets, s.work)


def test_building_the_sections_is_counted() -> None:
    inst = prepare(dense(300, 6))
    sc = scan(inst)
    base, _ = greedy(inst, "greedy-size", sc)
    sec = Sections(inst)
    assert search_module.sections_work(sec) > 0
    # A budget smaller than the set-up: nothing more is searched, and the set-up shows.
    out = minimize(inst, sc.max_live, inst.height(base), 1)
    assert out.work >= search_module.sections_work(sec)
