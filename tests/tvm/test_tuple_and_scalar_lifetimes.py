"""Regression tests for issue 14, "Wrong results to fix" items 1, 3 and 4, with the programs
and commands of the issue; strict xfails until they are fixed (then they flip to XPASS and
the marker comes off). Plus one more of item 4's class found by the port of TVM's
test_nested_tuple."""

from __future__ import annotations

import pytest

from relaxc.frontend.parser import parse_module
from relaxc.ir.diagnostics import RxError
from relaxc.ir.verifier import verify_module

from .harness import (
    assert_no_kill_of_live_value,
    compiled,
    invoke,
    kills,
    placements,
    report,
    storages,
)

# ---------------------------------------------------------------- item 1: killed 0-d tensors

ZERO_D = """fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %s = sum(%x)
  %y = add(%x, %s)
  return %y
}
"""


def test_item1_killed_0d_tensor_run_rxb_check(tmp_path):
    # relaxc build X.rx -o X.rxb; relaxc run X.rxb --check
    (tmp_path / "x.rx").write_text(ZERO_D)
    assert invoke("build", tmp_path / "x.rx", "-o", tmp_path / "x.rxb", "-q").exit_code == 0
    r = invoke("run", tmp_path / "x.rxb", "--check")
    assert r.exit_code == 0 and "bit-identical" in r.output, r.output
    r = invoke("run", tmp_path / "x.rxb", "--check", "--poison", "--source", tmp_path / "x.rx")
    assert r.exit_code == 0 and r.output.count("bit-identical") == 2, r.output


def test_item1_killed_0d_tensor_run_lowered_rx(tmp_path):
    # relaxc build X.rx -t ir -o X.lowered.rx; relaxc run X.lowered.rx
    (tmp_path / "x.rx").write_text(ZERO_D)
    assert (
        invoke(
            "build", tmp_path / "x.rx", "-t", "ir", "-o", tmp_path / "x.lowered.rx", "-q"
        ).exit_code
        == 0
    )
    r = invoke("run", tmp_path / "x.lowered.rx")
    assert r.exit_code == 0, r.output


# ------------------------------------------- item 3: a tuple field that never reaches the return

FIELD = """fn @kernel(%x: Tensor[(16, 16), f32]) -> Tuple[Tensor[(16, 16), f32], Tensor[(16, 16), f32]]
    attrs {primitive = true} {
  %a = exp(%x)
  %b = tanh(%a)
  return (%a, %b)
}

fn @main(%x: Tensor[(16, 16), f32]) -> Tensor[(16, 16), f32] {
  %t = call @kernel(%x)
  %r = %t.1
  return %r
}
"""  # noqa: E501


def test_item3_unreturned_field_is_not_external(tmp_path):
    m = parse_module(FIELD, "field.rx")
    from relaxc.passes.assemble import assemble_pipeline
    from relaxc.passes.pipeline import Pipeline, VerifyInstrument

    out = Pipeline(assemble_pipeline("vm"), [VerifyInstrument()]).run(m)
    st = storages(out)
    p = placements(out)
    assert st[p["t_1"].storage].external  # the returned field is the caller's
    assert not st[p["t_0"].storage].external  # the scratch field is not
    assert report(out).arena_bytes >= 1024  # and it is planned and counted


def test_item3_max_arena_counts_the_unreturned_field(tmp_path):
    # relaxc build X.rx --max-arena 64 must fail: the program holds 1,024 B besides its output.
    (tmp_path / "x.rx").write_text(FIELD)
    r = invoke("build", tmp_path / "x.rx", "--max-arena", "64", "-o", tmp_path / "x.rxb")
    assert r.exit_code == 1, r.output


def test_item3_c_static_memory_is_the_report(tmp_path):
    # relaxc build X.rx -t c: the header's static bytes are the report's arena.
    (tmp_path / "x.rx").write_text(FIELD)
    r = invoke("build", tmp_path / "x.rx", "-t", "c", "-o", tmp_path / "c", "-q", "--json")
    assert r.exit_code == 0, r.output
    header = (tmp_path / "c" / "x.h").read_text()
    assert "#define X_WORKSPACE_BYTES 1024" in header and "#define X_STATIC_BYTES 1024" in header


def test_item3_dead_split_output_is_planned():
    m = compiled("crt_tuple_output")
    st, p = storages(m), placements(m)
    assert not st[p["y_2"].storage].external
    assert report(m).arena_bytes >= 128


# ------------------------------------------- item 4: a tuple killed while its alias is returned

ALIAS_RETURNED = """fn @main(%x: Tensor[(4,), f32]) -> Tuple[Tensor[(4,), f32], Tensor[(4,), f32]] {
  %a = exp(%x)
  %t = (%a, %x)
  %u = %t
  return %u
}
"""


def test_item4_kill_after_last_use_never_kills_a_returned_tuple(tmp_path):
    (tmp_path / "x.rx").write_text(ALIAS_RETURNED)
    r = invoke("build", tmp_path / "x.rx", "-t", "ir", "-o", "-", "-q")
    assert r.exit_code == 0, r.output
    assert "vm.kill_object(%t)" not in r.output
    assert_no_kill_of_live_value(parse_module(r.output, "out.rx"))


def test_item4_kill_checker_rejects_killing_a_returned_tuple():
    m = parse_module(
        ALIAS_RETURNED.replace("  return %u", "  vm.kill_object(%t)\n  return %u"), "k.rx"
    )
    with pytest.raises(RxError):
        verify_module(m)


def test_nested_tuple_object_killed_while_projected():
    """%nt0 = %nt.0 is the tuple %t itself (a projection of a tuple built from it): %t is
    killed once, after the last use of %nt0, and %nt0 gets no kill of its own."""
    m = compiled("spbm_nested_tuple")
    body = m.get("main").body
    at = {getattr(s, "name", None): i for i, s in enumerate(body)}
    kill_t = next(
        i for i, s in enumerate(body) if "kill_object" in repr(s) and "name='t'" in repr(s)
    )
    last_nt0 = max(i for i, s in enumerate(body) if "name='nt0'" in repr(getattr(s, "value", None)))
    assert kill_t > last_nt0 > at["nt0"]
    assert "nt0" not in [n for _, n in kills(m)]
    assert_no_kill_of_live_value(m)
