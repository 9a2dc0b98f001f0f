"""The pass infrastructure: pipeline specs, --pass-config, assembling a target's pipeline,
--disable-pass, the order check, and the instruments (verify, timing, dump).

The passes themselves are tested in their own files; here toy passes stand in where a test
needs a pass that records what happened to it or deliberately breaks the IR.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import pytest

from relaxc.frontend.parser import parse_module
from relaxc.frontend.printer import print_module
from relaxc.ir.diagnostics import InternalError, RxError
from relaxc.ir.nodes import Module, Var
from relaxc.ir.verifier import ModuleTypes, verify_module
from relaxc.passes.assemble import assemble_pipeline, named_pipeline, resolve_dump_names
from relaxc.passes.base import Pass, PassError
from relaxc.passes.compute_in_place import ComputeInPlace
from relaxc.passes.elide_concat_split import ElideConcatSplit
from relaxc.passes.kill_after_last_use import KillAfterLastUse
from relaxc.passes.manifest_alloc import ManifestAlloc
from relaxc.passes.pipeline import (
    DumpInstrument,
    PassBrokeIR,
    Pipeline,
    TimingInstrument,
    VerifyInstrument,
    check_order,
)
from relaxc.passes.plan_memory import PlanMemory
from relaxc.passes.plan_workspace import PlanWorkspace
from relaxc.passes.reorder_for_memory import ReorderForMemory
from relaxc.passes.properties import EXPLICIT_MEMORY, PACKED_CALLS, PLANNED, detect_properties
from relaxc.passes.registry import PASSES, PIPELINES
from relaxc.passes.spec import SpecError, apply_pass_config, kebab, parse_pipeline

SRC = """\
fn @main(%x: Tensor[(4, 4), f32]) -> Tensor[(4, 4), f32] {
  %a = relu(%x)
  %b = exp(%a)
  %c = add(%a, %b)
  return %c
}
"""

VM = [ManifestAlloc, PlanMemory, KillAfterLastUse]
VM_PIPELINE = [
    ReorderForMemory,
    ManifestAlloc,
    PlanWorkspace,
    ElideConcatSplit,
    ComputeInPlace,
    PlanMemory,
    KillAfterLastUse,
]


def vm_passes() -> list[Pass]:
    return [ManifestAlloc(), PlanMemory(), KillAfterLastUse()]


def default_vm_passes() -> list[Pass]:
    """The vm pipeline as the registry names it."""
    return [cls() for cls in VM_PIPELINE]


def module() -> Module:
    m = parse_module(SRC, "t.rx")
    verify_module(m)
    return m


def parse(text: str) -> list[Pass]:
    return parse_pipeline(text, PASSES)


def spec_error(text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse(text)
    return info.value


def caret_under(err: RxError, text: str, word: str) -> None:
    """The error shows ``text`` with carets exactly under ``word``."""
    assert err.snippet, f"no snippet in {err}"
    line, carets = err.snippet[0], err.snippet[1]
    assert line == "  " + text
    start = 2 + text.index(word)
    assert carets == " " * start + "^" * len(word), f"\n{line}\n{carets}"


# ---------------------------------------------------------------------------------------
# Toy passes


@dataclass(frozen=True)
class Record(Pass):
    """Returns its input unchanged and remembers that it ran."""

    name: ClassVar[str] = "Record"
    summary: ClassVar[str] = "test pass: does nothing"
    log: ClassVar[list[str]] = []
    types_seen: ClassVar[list[bool | None]] = []  # None: no types; True/False: they were right

    tag: str = ""

    def run(self, module: Module, types: ModuleTypes | None = None) -> Module:
        Record.log.append(self.tag)
        Record.types_seen.append(None if types is None else types == verify_module(module))
        return module


@dataclass(frozen=True)
class BreakTheIR(Pass):
    """Returns a module whose @main returns an undefined value: a pass with a bug."""

    name: ClassVar[str] = "BreakTheIR"
    summary: ClassVar[str] = "test pass: produces invalid IR"

    def run(self, module: Module, types: ModuleTypes | None = None) -> Module:
        fns = tuple(
            replace(f, ret=Var("nope")) if f.name == "main" else f for f in module.functions
        )
        return Module(fns, module.loc)


@dataclass(frozen=True)
class FakeLegalize(Pass):
    """Claims to wrap buffers into packed-call structs (stands in for LegalizePackedCalls)."""

    name: ClassVar[str] = "FakeLegalize"
    summary: ClassVar[str] = "test pass: provides packed calls"
    provides: ClassVar[frozenset[str]] = frozenset({PACKED_CALLS})

    def run(self, module: Module, types: ModuleTypes | None = None) -> Module:
        return module


@pytest.fixture(autouse=True)
def _clear_log() -> None:
    Record.log.clear()
    Record.types_seen.clear()


# ---------------------------------------------------------------------------------------
# parse_pipeline: names


def test_kebab() -> None:
    assert kebab("PlanMemory") == "plan-memory"
    assert kebab("KillAfterLastUse") == "kill-after-last-use"
    assert kebab("ManifestAlloc") == "manifest-alloc"


def test_camel_case_names() -> None:
    assert [type(p) for p in parse("ManifestAlloc,PlanMemory,KillAfterLastUse")] == VM


def test_kebab_case_names() -> None:
    assert [type(p) for p in parse("manifest-alloc,plan-memory,kill-after-last-use")] == VM


def test_mixed_spellings_and_whitespace() -> None:
    assert [type(p) for p in parse("  manifest-alloc , PlanMemory ,kill-after-last-use ")] == VM


def test_every_registered_pass_parses_under_both_names() -> None:
    for name, cls in PASSES.items():
        assert [type(p) for p in parse(name)] == [cls]
        assert [type(p) for p in parse(kebab(name))] == [cls]


def test_defaults_without_options() -> None:
    (p,) = parse("PlanMemory")
    assert p == PlanMemory()


@pytest.mark.parametrize("text", ["", "   "])
def test_empty_spec_is_no_passes(text: str) -> None:
    assert parse(text) == []


def test_a_pass_may_appear_twice() -> None:
    assert [type(p) for p in parse("ManifestAlloc,ManifestAlloc")] == [ManifestAlloc, ManifestAlloc]


# ---------------------------------------------------------------------------------------
# parse_pipeline: options


@pytest.mark.parametrize(
    "text",
    [
        "PlanMemory{planner=greedy-size check=true time_limit=0.5}",
        "PlanMemory{planner=greedy-size,check=true,time_limit=0.5}",
        "PlanMemory{ planner=greedy-size ,  check=true, time_limit=0.5 }",
        "plan-memory {planner=greedy-size check=true time_limit=0.5}",
    ],
    ids=["spaces", "commas", "mixed", "kebab-and-space-before-brace"],
)
def test_options_in_braces(text: str) -> None:
    assert parse(text) == [PlanMemory(planner="greedy-size", check=True, time_limit=0.5)]


def test_options_of_several_passes() -> None:
    got = parse("ManifestAlloc{align=16},PlanMemory{planner=none},KillAfterLastUse")
    assert got == [ManifestAlloc(align=16), PlanMemory(planner="none"), KillAfterLastUse()]


def test_empty_braces() -> None:
    assert parse("PlanMemory{}") == [PlanMemory()]


@pytest.mark.parametrize("raw, want", [("16", 16), ("0x20", 32), ("128", 128)])
def test_int_option(raw: str, want: int) -> None:
    assert parse(f"ManifestAlloc{{align={raw}}}") == [ManifestAlloc(align=want)]


@pytest.mark.parametrize(
    "raw, want",
    [
        ("true", True),
        ("True", True),
        ("1", True),
        ("yes", True),
        ("on", True),
        ("false", False),
        ("0", False),
        ("no", False),
        ("OFF", False),
    ],
)
def test_bool_option(raw: str, want: bool) -> None:
    assert parse(f"PlanMemory{{check={raw}}}")[0].check is want


@pytest.mark.parametrize("raw, want", [("0", 0.0), ("0.25", 0.25), ("3", 3.0), ("1e-1", 0.1)])
def test_float_option(raw: str, want: float) -> None:
    assert parse(f"PlanMemory{{time_limit={raw}}}")[0].time_limit == want


@pytest.mark.parametrize("planner", ["none", "greedy-size", "greedy-conflict", "best"])
def test_literal_option(planner: str) -> None:
    assert parse(f"PlanMemory{{planner={planner}}}")[0].planner == planner


@pytest.mark.parametrize(
    "p",
    [
        ManifestAlloc(),
        ManifestAlloc(align=8),
        PlanMemory(),
        PlanMemory(planner="greedy-conflict", check=True),
        PlanMemory(time_limit=0.5),
        KillAfterLastUse(),
    ],
)
def test_spec_round_trips(p: Pass) -> None:
    assert parse(p.spec()) == [p]


# ---------------------------------------------------------------------------------------
# parse_pipeline: errors


def test_unknown_pass_did_you_mean_and_caret() -> None:
    text = "ManifestAlloc,PlanMemoy,KillAfterLastUse"
    err = spec_error(text)
    assert "unknown pass 'PlanMemoy'" in err.message
    assert "did you mean 'PlanMemory'?" in err.message
    caret_under(err, text, "PlanMemoy")
    assert any(
        "ManifestAlloc" in n and "PlanMemory" in n and "KillAfterLastUse" in n for n in err.notes
    )


def test_unknown_kebab_pass_suggests_kebab() -> None:
    text = "manifest-alloc,plan-memroy"
    err = spec_error(text)
    assert "did you mean 'plan-memory'?" in err.message
    caret_under(err, text, "plan-memroy")


def test_unknown_pass_without_close_match_lists_the_passes() -> None:
    err = spec_error("Frobnicate")
    assert "unknown pass 'Frobnicate'" in err.message
    assert "did you mean" not in err.message
    assert err.notes == ("passes: " + ", ".join(sorted(PASSES)),)


@pytest.mark.parametrize(
    "text, at",
    [
        ("ManifestAlloc,,PlanMemory", 14),
        (",ManifestAlloc", 0),
        ("123", 0),
        ("ManifestAlloc,{align=8}", 14),
        ("Manifest Alloc", None),
        ("ManifestAlloc{align=8", None),
        ("ManifestAlloc{align=8}}", None),
        ("ManifestAlloc{a={b}}", None),
        ("ManifestAlloc;PlanMemory", None),
    ],
)
def test_malformed_spec(text: str, at: int | None) -> None:
    err = spec_error(text)
    assert err.snippet and err.snippet[0] == "  " + text
    assert "^" in err.snippet[1]
    if at is not None:
        assert "malformed pass pipeline" in err.message
        assert err.snippet[1] == " " * (2 + at) + "^"
        assert any("ManifestAlloc,PlanMemory{planner=greedy-size}" in n for n in err.notes)


def test_unclosed_brace_says_so() -> None:
    err = spec_error("ManifestAlloc{align=8")
    assert "}" in err.message


@pytest.mark.parametrize("item", ["align", "=8", "align8"])
def test_option_without_equals(item: str) -> None:
    text = f"ManifestAlloc{{{item}}}"
    err = spec_error(text)
    assert f"option '{item}' of ManifestAlloc is not key=value" in err.message
    caret_under(err, text, item)


def test_unknown_option_did_you_mean() -> None:
    err = spec_error("ManifestAlloc{alignment=8}")
    assert "ManifestAlloc has no option 'alignment'" in err.message
    assert "did you mean 'align'?" in err.message
    assert "(options: align)" in err.message
    assert err.snippet[0] == "  ManifestAlloc{alignment=8}"


def test_unknown_option_lists_options() -> None:
    err = spec_error("ManifestAlloc,PlanMemory{planer=best}")
    assert "did you mean 'planner'?" in err.message
    assert "options: planner, time_limit, check" in err.message
    caret_under(err, "ManifestAlloc,PlanMemory{planer=best}", "PlanMemory{planer=best}")


def test_pass_without_options_has_none() -> None:
    err = spec_error("KillAfterLastUse{x=1}")
    assert "KillAfterLastUse has no option 'x'" in err.message
    assert "options: none" in err.message


@pytest.mark.parametrize(
    "text, needle",
    [
        ("ManifestAlloc{align=x}", "ManifestAlloc.align must be an integer; got 'x'"),
        ("ManifestAlloc{align=1.5}", "ManifestAlloc.align must be an integer; got '1.5'"),
        ("ManifestAlloc{align=}", "ManifestAlloc.align must be an integer; got ''"),
        ("PlanMemory{check=maybe}", "PlanMemory.check must be true or false; got 'maybe'"),
        ("PlanMemory{time_limit=soon}", "PlanMemory.time_limit must be a number; got 'soon'"),
        (
            "PlanMemory{planner=fast}",
            "PlanMemory.planner must be one of none, greedy-size, greedy-conflict, "
            "best; got 'fast'",
        ),
        ("PlanMemory{planner=Best}", "got 'Best'"),
    ],
)
def test_bad_option_values(text: str, needle: str) -> None:
    err = spec_error(text)
    assert needle in err.message
    caret_under(err, text, text)


@pytest.mark.parametrize(
    "text, needle",
    [
        ("ManifestAlloc{align=3}", "ManifestAlloc: align=3 is not a power of two from 1 to 4096"),
        ("ManifestAlloc{align=0}", "ManifestAlloc: align=0 is not a power of two from 1 to 4096"),
        ("ManifestAlloc{align=-64}", "is not a power of two from 1 to 4096"),
        (
            "PlanMemory{time_limit=-1}",
            "PlanMemory: time_limit=-1.0 must be a finite number of seconds, 0 or more",
        ),
    ],
)
def test_option_values_the_pass_refuses(text: str, needle: str) -> None:
    err = spec_error(text)
    assert needle in err.message
    caret_under(err, text, text)


@pytest.mark.parametrize("raw", ["nan", "inf"])
def test_non_finite_time_limit_refused(raw: str) -> None:
    spec_error(f"PlanMemory{{time_limit={raw}}}")


def test_spec_errors_are_user_errors() -> None:
    # The CLI renders RxError with exit 1; SpecError must be one.
    assert issubclass(SpecError, RxError)
    assert issubclass(PassError, RxError)
    assert not issubclass(PassBrokeIR, RxError) and issubclass(PassBrokeIR, InternalError)


# ---------------------------------------------------------------------------------------
# apply_pass_config


def test_pass_config_sets_an_option_of_the_matching_pass_only() -> None:
    before = [ManifestAlloc(), PlanMemory(), KillAfterLastUse()]
    after = apply_pass_config(before, ["PlanMemory.planner=greedy-size"], PASSES)
    assert after == [ManifestAlloc(), PlanMemory(planner="greedy-size"), KillAfterLastUse()]
    assert before == [ManifestAlloc(), PlanMemory(), KillAfterLastUse()]  # passes are values


def test_pass_config_kebab_name_and_every_occurrence() -> None:
    after = apply_pass_config(
        [ManifestAlloc(), ManifestAlloc(align=8)], ["manifest-alloc.align=16"], PASSES
    )
    assert after == [ManifestAlloc(align=16), ManifestAlloc(align=16)]


def test_pass_config_applies_in_order_later_wins() -> None:
    after = apply_pass_config(
        [ManifestAlloc(), PlanMemory()],
        ["PlanMemory.planner=none", "PlanMemory.check=true", "PlanMemory.planner=greedy-conflict"],
        PASSES,
    )
    assert after[1] == PlanMemory(planner="greedy-conflict", check=True)


def test_pass_config_overrides_spec_options() -> None:
    passes = parse("ManifestAlloc{align=8},PlanMemory{planner=none}")
    after = apply_pass_config(passes, ["ManifestAlloc.align=32"], PASSES)
    assert after == [ManifestAlloc(align=32), PlanMemory(planner="none")]


def test_pass_config_pass_not_in_pipeline() -> None:
    with pytest.raises(SpecError) as info:
        apply_pass_config([ManifestAlloc()], ["PlanMemory.planner=best"], PASSES)
    msg = info.value.message
    assert "--pass-config 'PlanMemory.planner=best'" in msg
    assert "PlanMemory is not in the pipeline (ManifestAlloc)" in msg


def test_pass_config_on_empty_pipeline() -> None:
    with pytest.raises(SpecError, match=r"not in the pipeline \(empty\)"):
        apply_pass_config([], ["PlanMemory.planner=best"], PASSES)


@pytest.mark.parametrize(
    "item",
    [
        "PlanMemory",
        "PlanMemory.planner",
        "planner=best",
        "PlanMemory=best",
        ".planner=best",
        "PlanMemory.=best",
        "",
    ],
)
def test_pass_config_malformed(item: str) -> None:
    with pytest.raises(SpecError) as info:
        apply_pass_config(vm_passes(), [item], PASSES)
    assert f"--pass-config '{item}' is not NAME.KEY=VALUE" in info.value.message
    assert "PlanMemory.planner=greedy-size" in info.value.message


def test_pass_config_unknown_pass() -> None:
    with pytest.raises(SpecError) as info:
        apply_pass_config(vm_passes(), ["PlanMemoy.planner=best"], PASSES)
    assert "unknown pass 'PlanMemoy'; did you mean 'PlanMemory'?" in info.value.message


def test_pass_config_unknown_key() -> None:
    with pytest.raises(SpecError) as info:
        apply_pass_config(vm_passes(), ["PlanMemory.plannr=best"], PASSES)
    assert "PlanMemory has no option 'plannr'; did you mean 'planner'?" in info.value.message


@pytest.mark.parametrize(
    "item, needle",
    [
        ("PlanMemory.planner=fast", "PlanMemory.planner must be one of"),
        ("PlanMemory.check=perhaps", "PlanMemory.check must be true or false"),
        ("PlanMemory.time_limit=x", "PlanMemory.time_limit must be a number"),
        ("ManifestAlloc.align=big", "ManifestAlloc.align must be an integer"),
    ],
)
def test_pass_config_bad_values(item: str, needle: str) -> None:
    with pytest.raises(SpecError, match=needle):
        apply_pass_config(vm_passes(), [item], PASSES)


@pytest.mark.parametrize(
    "item", ["ManifestAlloc.align=0", "ManifestAlloc.align=3", "PlanMemory.time_limit=-1"]
)
def test_pass_config_value_the_pass_refuses_is_a_spec_error(item: str) -> None:
    with pytest.raises(SpecError):
        apply_pass_config(vm_passes(), [item], PASSES)


# ---------------------------------------------------------------------------------------
# assemble_pipeline


@pytest.mark.parametrize("target", ["vm", "ir"])
def test_target_default_pipelines(target: str) -> None:
    assert assemble_pipeline(target) == default_vm_passes()


def test_named_pipelines_are_registered() -> None:
    assert set(PIPELINES) >= {"vm", "c", "none"}
    assert PIPELINES["vm"] == tuple(cls.name for cls in VM_PIPELINE)
    assert PIPELINES["none"] == ()
    c = PIPELINES["c"]
    assert c.index("PlanMemory") < c.index("LegalizePackedCalls")  # plan first, legalize after


def test_c_pipeline_with_legalize() -> None:
    got = [p.name for p in assemble_pipeline("c")]
    assert got == [
        "ReorderForMemory",
        "ManifestAlloc",
        "PlanWorkspace",
        "ElideConcatSplit",
        "ComputeInPlace",
        "PlanKernelScratch",
        "PlanMemory",
        "LegalizePackedCalls",
    ]


@pytest.mark.parametrize(
    "passes, want",
    [
        ("none", []),
        (" none ", []),
        ("vm", VM_PIPELINE),
        (" vm", VM_PIPELINE),
        ("", []),
        ("ManifestAlloc", [ManifestAlloc]),
        ("plan-memory,manifest-alloc", [PlanMemory, ManifestAlloc]),
    ],
)
def test_passes_overrides_the_target(passes: str, want: list[type]) -> None:
    assert [type(p) for p in assemble_pipeline("c", passes)] == want


def test_spec_options_survive_assembly() -> None:
    got = assemble_pipeline("vm", "ManifestAlloc{align=8},PlanMemory{planner=none}")
    assert got == [ManifestAlloc(align=8), PlanMemory(planner="none")]


def test_configs_apply_to_the_named_pipeline() -> None:
    got = assemble_pipeline(
        "vm", None, (), ("PlanMemory.planner=greedy-size", "ManifestAlloc.align=16")
    )
    assert got == [
        ReorderForMemory(),
        ManifestAlloc(align=16),
        PlanWorkspace(),
        ElideConcatSplit(),
        ComputeInPlace(),
        PlanMemory(planner="greedy-size"),
        KillAfterLastUse(),
    ]


def test_named_pipeline_gives_fresh_default_passes() -> None:
    assert named_pipeline("vm") == default_vm_passes()
    assert named_pipeline("none") == []


# ---------------------------------------------------------------------------------------
# --disable-pass


def test_disable_removes_the_pass() -> None:
    got = [type(p) for p in assemble_pipeline("vm", None, ("KillAfterLastUse",))]
    assert got == VM_PIPELINE[:-1]


@pytest.mark.parametrize(
    "disable",
    [
        ("kill-after-last-use,plan-memory",),
        ("KillAfterLastUse", "plan-memory"),
        (" KillAfterLastUse , PlanMemory ",),
        ("KillAfterLastUse,,", "PlanMemory"),
    ],
)
def test_disable_lists_and_repeats(disable: tuple[str, ...]) -> None:
    assert [type(p) for p in assemble_pipeline("vm", None, disable)] == VM_PIPELINE[:-2]


def test_disable_every_occurrence() -> None:
    got = assemble_pipeline(
        "vm", "ManifestAlloc,KillAfterLastUse,ManifestAlloc", ("ManifestAlloc",)
    )
    assert [type(p) for p in got] == [KillAfterLastUse]


def test_disable_everything_leaves_an_empty_pipeline() -> None:
    assert assemble_pipeline("vm", None, (",".join(PIPELINES["vm"]),)) == []


def test_disable_pass_not_in_pipeline() -> None:
    with pytest.raises(SpecError) as info:
        assemble_pipeline("vm", "ManifestAlloc", ("PlanMemory",))
    assert (
        info.value.message
        == "--disable-pass PlanMemory: PlanMemory is not in the pipeline (ManifestAlloc)"
    )
    with pytest.raises(SpecError, match=r"not in the pipeline \(empty\)"):
        assemble_pipeline("vm", "none", ("plan-memory",))


def test_disable_twice_is_an_error_the_second_time() -> None:
    with pytest.raises(SpecError, match="not in the pipeline"):
        assemble_pipeline("vm", None, ("PlanMemory", "PlanMemory"))


def test_disable_unknown_pass() -> None:
    with pytest.raises(SpecError) as info:
        assemble_pipeline("vm", None, ("KillAfterLastUs",))
    assert "unknown pass 'KillAfterLastUs'; did you mean 'KillAfterLastUse'?" in info.value.message


def test_disable_comes_before_config() -> None:
    # A disabled pass cannot be configured: the config names a pass no longer in the pipeline.
    with pytest.raises(SpecError, match="PlanMemory is not in the pipeline"):
        assemble_pipeline("vm", None, ("PlanMemory",), ("PlanMemory.planner=none",))


def test_disabling_a_prerequisite_is_caught_by_the_order_check() -> None:
    passes = assemble_pipeline("vm", None, ("ManifestAlloc",))
    with pytest.raises(PassError, match="run ManifestAlloc before it"):
        Pipeline(passes).run(module())


# ---------------------------------------------------------------------------------------
# resolve_dump_names (--dump-before / --dump-after)


def test_dump_names() -> None:
    vm = vm_passes()
    assert resolve_dump_names(("all",), vm, "--dump-after") == {"all"}
    assert resolve_dump_names(
        ("plan-memory,ManifestAlloc", "KillAfterLastUse"), vm, "--dump-after"
    ) == {"PlanMemory", "ManifestAlloc", "KillAfterLastUse"}
    assert resolve_dump_names((), vm, "--dump-after") == frozenset()


def test_dump_name_not_in_pipeline() -> None:
    with pytest.raises(SpecError) as info:
        resolve_dump_names(("PlanMemory",), [ManifestAlloc()], "--dump-before")
    assert (
        info.value.message
        == "--dump-before PlanMemory: PlanMemory is not in the pipeline (ManifestAlloc)"
    )


def test_dump_name_unknown() -> None:
    with pytest.raises(SpecError, match="did you mean 'PlanMemory'"):
        resolve_dump_names(("PlanMemroy",), vm_passes(), "--dump-after")


# ---------------------------------------------------------------------------------------
# check_order


def test_vm_order_is_accepted_on_a_fresh_module() -> None:
    check_order(vm_passes(), detect_properties(module()))


def test_plan_memory_before_manifest_alloc_is_refused() -> None:
    passes = [PlanMemory(), ManifestAlloc()]
    with pytest.raises(PassError) as info:
        check_order(passes, detect_properties(module()))
    err = info.value
    assert err.message.startswith("PlanMemory needs explicit memory")
    assert "run ManifestAlloc before it" in err.message
    assert err.notes == ("in pass 1 of the pipeline (PlanMemory -> ManifestAlloc)",)


def test_order_check_runs_before_any_pass() -> None:
    with pytest.raises(PassError, match="run ManifestAlloc before it"):
        Pipeline([Record(tag="first"), PlanMemory()]).run(module())
    assert Record.log == []  # nothing ran: the pipeline is refused as a whole


def test_plan_memory_on_explicit_memory_needs_no_manifest_alloc() -> None:
    explicit = ManifestAlloc()(module())
    assert EXPLICIT_MEMORY in detect_properties(explicit)
    check_order([PlanMemory(), KillAfterLastUse()], detect_properties(explicit))


def test_planning_after_packed_calls_is_refused() -> None:
    # Any pass that wraps buffers into structs, run before PlanMemory, is refused up front.
    passes = [ManifestAlloc(), FakeLegalize(), PlanMemory()]
    with pytest.raises(PassError) as info:
        check_order(passes, detect_properties(module()))
    assert "PlanMemory cannot run on IR with packed calls" in info.value.message
    assert "plan memory before LegalizePackedCalls" in info.value.message
    assert info.value.notes == (
        "in pass 3 of the pipeline (ManifestAlloc -> FakeLegalize -> PlanMemory)",
    )


def test_packed_then_plan_is_fine_the_other_way_round() -> None:
    check_order([ManifestAlloc(), PlanMemory(), FakeLegalize()], detect_properties(module()))


def test_legalize_before_plan_memory_is_refused() -> None:
    passes = parse("ManifestAlloc,LegalizePackedCalls,PlanMemory")
    with pytest.raises(PassError, match="LegalizePackedCalls"):
        check_order(passes, detect_properties(module()))


def test_order_check_uses_the_module_itself() -> None:
    planned = Pipeline(vm_passes()).run(module())
    assert {EXPLICIT_MEMORY, PLANNED} <= detect_properties(planned)
    # A dumped, planned module fed back in may be planned again without ManifestAlloc.
    again = Pipeline([PlanMemory(), KillAfterLastUse()], [VerifyInstrument()]).run(planned)
    assert print_module(again) == print_module(planned)


def test_calling_a_pass_checks_its_preconditions() -> None:
    with pytest.raises(PassError, match="run ManifestAlloc before it"):
        PlanMemory()(module())


# ---------------------------------------------------------------------------------------
# Instruments: verify


def test_verify_names_the_pass_that_broke_the_ir() -> None:
    pipe = Pipeline([ManifestAlloc(), BreakTheIR(), PlanMemory()], [VerifyInstrument()])
    with pytest.raises(PassBrokeIR) as info:
        pipe.run(module())
    err = info.value
    assert err.pass_name == "BreakTheIR"
    assert "pass BreakTheIR produced invalid IR" in str(err)
    assert "%nope is not defined" in str(err)
    assert isinstance(err.error, RxError)


def test_verify_blames_the_first_broken_pass() -> None:
    with pytest.raises(PassBrokeIR) as info:
        Pipeline([Record(tag="ok"), BreakTheIR(), Record(tag="later")], [VerifyInstrument()]).run(
            module()
        )
    assert info.value.pass_name == "BreakTheIR"
    assert Record.log == ["ok"]  # the pipeline stops at the broken pass


def test_without_verify_broken_ir_goes_through() -> None:
    out = Pipeline([BreakTheIR(), Record(tag="after")]).run(module())
    assert out.get("main").ret == Var("nope")
    assert Record.log == ["after"]


def test_verified_types_are_handed_to_the_next_pass() -> None:
    m = module()
    Pipeline([Record(), ManifestAlloc(), Record(), Record()], [VerifyInstrument()]).run(m)
    assert Record.types_seen == [None, True, True]  # the input was not verified by the pipeline
    Record.types_seen.clear()
    Pipeline([Record(), Record()], [VerifyInstrument()]).run(m, verify_module(m))
    assert Record.types_seen == [True, True]
    Record.types_seen.clear()
    Pipeline([Record(), ManifestAlloc(), Record()]).run(m)  # no verifier: each pass infers its own
    assert Record.types_seen == [None, None]


def test_verify_accepts_the_real_passes() -> None:
    out = Pipeline(vm_passes(), [VerifyInstrument()]).run(module())
    verify_module(out)


# ---------------------------------------------------------------------------------------
# Instruments: timing


def test_timing_one_entry_per_pass_in_run_order() -> None:
    timing = TimingInstrument()
    Pipeline(vm_passes(), [timing]).run(module())
    assert [name for name, _ in timing.times] == ["ManifestAlloc", "PlanMemory", "KillAfterLastUse"]
    assert all(isinstance(s, float) and s >= 0 for _, s in timing.times)


def test_timing_repeated_passes_and_empty_pipeline() -> None:
    timing = TimingInstrument()
    Pipeline([Record(), Record(), ManifestAlloc()], [timing]).run(module())
    assert [name for name, _ in timing.times] == ["Record", "Record", "ManifestAlloc"]
    empty = TimingInstrument()
    Pipeline([], [empty]).run(module())
    assert empty.times == []


# ---------------------------------------------------------------------------------------
# Instruments: dump


class Sink:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, str]] = []
        self.modules: list[Module] = []

    def __call__(self, when: str, index: int, name: str, m: Module) -> None:
        self.calls.append((when, index, name))
        self.modules.append(m)


def test_dump_before_and_after_named_passes() -> None:
    sink = Sink()
    Pipeline(
        vm_passes(),
        [
            DumpInstrument(
                sink,
                before=frozenset({"PlanMemory"}),
                after=frozenset({"ManifestAlloc", "KillAfterLastUse"}),
            )
        ],
    ).run(module())
    assert sink.calls == [
        ("after", 0, "ManifestAlloc"),
        ("before", 1, "PlanMemory"),
        ("after", 2, "KillAfterLastUse"),
    ]


def test_dump_all() -> None:
    sink = Sink()
    m = module()
    out = Pipeline(
        vm_passes(), [DumpInstrument(sink, before=frozenset({"all"}), after=frozenset({"all"}))]
    ).run(m)
    assert sink.calls == [
        ("before", 0, "ManifestAlloc"),
        ("after", 0, "ManifestAlloc"),
        ("before", 1, "PlanMemory"),
        ("after", 1, "PlanMemory"),
        ("before", 2, "KillAfterLastUse"),
        ("after", 2, "KillAfterLastUse"),
    ]
    mods = sink.modules
    assert mods[0] is m  # before the first pass: the input
    assert (
        mods[2] is mods[1] and mods[4] is mods[3]
    )  # before a pass: what the previous one returned
    assert mods[-1] is out  # after the last: the result
    for d in mods:
        verify_module(parse_module(print_module(d), "dump.rx"))  # every dump parses and verifies


def test_dump_nothing_asked() -> None:
    sink = Sink()
    Pipeline(vm_passes(), [DumpInstrument(sink)]).run(module())
    assert sink.calls == []


def test_dump_sees_the_pass_that_broke_the_ir_after_verify_fails_not_before() -> None:
    # Verify runs first in the instrument list, so the broken module is never dumped.
    sink = Sink()
    with pytest.raises(PassBrokeIR):
        Pipeline(
            [BreakTheIR()], [VerifyInstrument(), DumpInstrument(sink, after=frozenset({"all"}))]
        ).run(module())
    assert sink.calls == []


def test_instruments_do_not_change_the_result() -> None:
    plain = Pipeline(vm_passes()).run(module())
    sink, timing = Sink(), TimingInstrument()
    watched = Pipeline(
        vm_passes(),
        [timing, VerifyInstrument(), DumpInstrument(sink, frozenset({"all"}), frozenset({"all"}))],
    ).run(module())
    assert watched == plain
