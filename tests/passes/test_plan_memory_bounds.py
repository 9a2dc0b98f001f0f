"""PlanMemory records what the planner proved (issue 17): the arena's proven bound, whether
the plan is optimal, and whether a safety clock ended the search (issue 14, item 11: the
output says so); the report shows each."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from relaxc.cli.report.json import function_json
from relaxc.frontend.parser import parse_module
from relaxc.frontend.printer import print_module
from relaxc.passes import plan_memory
from relaxc.passes.manifest_alloc import ManifestAlloc
from relaxc.cli.report.analysis import memory_report
from relaxc.passes.plan_memory import PlanMemory
from relaxc.passes.planning.planners import plan_buffers

SAMPLES = Path(__file__).resolve().parents[2] / "samples"

CHAIN = """
fn @main(%x: Tensor[(64,), f32]) -> Tensor[(64,), f32] {
  %a = exp(%x)
  %b = tanh(%a)
  %c = add(%a, %b)
  %d = relu(%c)
  return %d
}
"""


def planned(text: str, **options) -> tuple:
    m = PlanMemory(**options)(ManifestAlloc()(parse_module(text, "t.rx")))
    return m, {r.name: r for r in memory_report(m)}["main"]


def test_an_optimal_plan_is_reported_optimal() -> None:
    m, rep = planned(CHAIN)
    assert rep.arena_bytes == 768  # %a, %b and %c live at once at the add
    assert rep.proven_bound == 768 and rep.optimal
    assert "proven_bound=768" in print_module(m)
    assert function_json(rep)["optimal"] is True


def test_a_plan_above_its_bound_is_not_called_optimal(monkeypatch: pytest.MonkeyPatch) -> None:
    def loose(buffers, algorithm="best", **kw):
        plan = plan_buffers(buffers, "none")  # no reuse: above the bound
        return dataclasses.replace(plan, proven_bound=768)

    monkeypatch.setattr(plan_memory, "plan_buffers", loose)
    _, rep = planned(CHAIN.replace("  return %d", "  %e = exp(%d)\n  return %e"))
    assert rep.arena_bytes > rep.proven_bound == 768
    assert not rep.optimal


def test_a_search_the_clock_ended_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    def clocked(buffers, algorithm="best", **kw):
        return dataclasses.replace(plan_buffers(buffers, algorithm, **kw), stopped_by_clock=True)

    monkeypatch.setattr(plan_memory, "plan_buffers", clocked)
    m, rep = planned(CHAIN)
    assert "clock_stopped=true" in print_module(m)
    assert rep.clock_stopped and function_json(rep)["clock_stopped"] is True
    from io import StringIO

    from rich.console import Console

    from relaxc.cli.report.text import print_reports

    out = StringIO()
    print_reports([rep], Console(file=out, width=100))
    assert "safety clock ended its search" in out.getvalue()


def test_greedy_plans_state_their_bound_too() -> None:
    _, rep = planned(CHAIN, planner="greedy-size")
    assert rep.proven_bound >= rep.lower_bound


def rendered(rep) -> str:  # noqa: ANN001
    from io import StringIO

    from rich.console import Console

    from relaxc.cli.report.text import print_reports

    out = StringIO()
    print_reports([rep], Console(file=out, width=120))
    return out.getvalue()


def test_the_report_says_optimal_or_gives_the_proven_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, rep = planned(CHAIN)
    text = rendered(rep)
    assert "optimal" in text and "proven bound" not in text

    def raised(buffers, algorithm="best", **kw):
        # A search that proved more than max-live but did not reach it.
        plan = plan_buffers(buffers, "none")
        return dataclasses.replace(plan, proven_bound=plan.size - 64, optimal=False)

    monkeypatch.setattr(plan_memory, "plan_buffers", raised)
    _, rep = planned(CHAIN.replace("  return %d", "  %e = exp(%d)\n  return %e"))
    assert rep.lower_bound < rep.proven_bound < rep.arena_bytes
    text = rendered(rep)
    assert "proven bound" in text and "optimal" not in text.replace("not be optimal", "")
    assert f"{rep.proven_bound:,}" in text or str(rep.proven_bound) in text.replace(",", "")
