"""Inside a primitive function, a value is computed over its input's buffer exactly when the
op's record says the output may overwrite that input (``OpDef.inplace``): PlanWorkspace
decides it, in the IR, and the C target prints it. Without PlanWorkspace the C target
decides nothing: it refuses the intermediates, located, and names the pass."""

from __future__ import annotations

import dataclasses

import pytest

from relaxc.backend.c import emit_c
from relaxc.frontend.parser import parse_module
from relaxc.ir.diagnostics import RxError
from relaxc.ir.ops import build_registry
from relaxc.ir.vocab import lowered_outputs
from relaxc.passes import plan_workspace
from relaxc.passes.manifest_alloc import ManifestAlloc
from relaxc.passes.plan_memory import PlanMemory
from relaxc.passes.plan_workspace import PlanWorkspace

# %b and %c can only live in the output buffer, over the value they are computed from.
CHAIN = """
fn @chain(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] attrs {primitive = true} {
  %a = exp(%x)
  %b = exp(%a)
  %c = exp(%b)
  return %c
}

fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %y = call @chain(%x)
  return %y
}
"""


def _planned(workspace: bool = True):
    m = ManifestAlloc().run(parse_module(CHAIN, "chain.rx"))
    if workspace:
        m = PlanWorkspace().run(m)
    return PlanMemory().run(m)


def _chain_c(module) -> str:
    text = emit_c(module, {}, prefix="m", source="chain.rx").files["m.c"]
    return text[text.index("static void m_f_chain(") : text.index("static int32_t m_run_body(")]


def test_an_inplace_op_is_computed_over_its_input():
    planned = _planned()
    chain = planned.get("chain")
    assert lowered_outputs(chain) == 1 and chain.attr("workspace") == 0  # all in the output
    body = _chain_c(planned)
    assert "m_k0_exp(v_x, v_out0);" in body
    assert body.count("m_k0_exp(v_out0, v_out0);") == 2  # %b over %a, %c over %b


def test_without_inplace_on_the_record_the_values_go_to_a_workspace(monkeypatch):
    reg = build_registry()
    reg._ops["exp"] = dataclasses.replace(reg.get("exp"), inplace=())
    monkeypatch.setattr(plan_workspace, "REGISTRY", reg)
    planned = _planned()
    ws = planned.get("chain").attr("workspace")
    assert isinstance(ws, int) and ws >= 2 * 4 * 4  # %a and %b, both live at %b
    body = _chain_c(planned)
    assert "v_out0, v_out0" not in body


def test_without_plan_workspace_the_c_target_refuses_the_intermediate():
    planned = _planned(workspace=False)
    with pytest.raises(RxError, match=r"@chain computes %a.*run PlanWorkspace") as e:
        emit_c(planned, {}, prefix="m", source="chain.rx")
    assert e.value.loc is not None and (e.value.loc.line, e.value.loc.col) == (3, 3)
