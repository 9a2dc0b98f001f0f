"""PlanMemory{io_in_arena=true}: the inputs and outputs of the entry function in the arena.

What the plan says (an input live from the start to its last use, its bytes reused after it,
an output live from its producer to the end), that the independent checker and the verifier
accept it and the verifier refuses IR that breaks it, that the VM and the interpreter give
the same bits with and without it (samples, squeezenet with random weights, generated
programs), that ``relaxc run --stats`` measures what the plan promised, and that the report
and ``--max-arena`` count it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings

from relaxc.backend.inputs import random_inputs, resolve_dims
from relaxc.backend.interpreter import Interpreter
from relaxc.backend.vm import VirtualMachine, compile_module, load_bytes, predict_memory
from relaxc.cli.main import cli
from relaxc.frontend.parser import parse_module
from relaxc.frontend.printer import print_module
from relaxc.frontend.weights import default_weights_path, load_npz
from relaxc.ir.diagnostics import RxError
from relaxc.ir.io_arena import arena_inputs
from relaxc.ir.nodes import Bind, Call, Module
from relaxc.ir.verifier import verify_module
from relaxc.cli.target_facts import pipeline_context
from relaxc.passes.assemble import assemble_pipeline
from relaxc.passes.kill_after_last_use import KillAfterLastUse
from relaxc.passes.manifest_alloc import ManifestAlloc
from relaxc.cli.report.analysis import memory_report
from relaxc.passes.pipeline import Pipeline, VerifyInstrument
from relaxc.passes.plan_memory import PlanMemory
from tests.strategies import programs

from .test_plan_memory import assert_report_plan_valid, tensor_offsets
from .util import assert_same_results

SAMPLES_DIR = Path(__file__).resolve().parents[2] / "samples"
SAMPLES = sorted(p.stem for p in SAMPLES_DIR.glob("*.rx"))
IO = ("PlanMemory.io_in_arena=true", "PlanMemory.check=true")


def sample(name: str) -> tuple[Module, dict]:
    path = SAMPLES_DIR / f"{name}.rx"
    wpath = default_weights_path(path)
    return parse_module(path.read_text(), path.name), (load_npz(wpath, "weights") if wpath else {})


def compiled(module: Module, io: bool, target: str = "vm", planner: str = "best") -> Module:
    configs = (IO if io else ()) + (f"PlanMemory.planner={planner}",)
    passes = assemble_pipeline(target, None, (), configs, pipeline_context())
    return Pipeline(passes, [VerifyInstrument()]).run(module)


def vm_run(module: Module, weights: dict, args: list, dims: dict) -> tuple:
    vm = VirtualMachine(load_bytes(compile_module(module, weights), "t.rxb"), poison=True)
    return vm.run("main", args, dims or None), vm


def planned(src: str, **opts) -> Module:
    before = parse_module(src, "t.rx")
    return Pipeline(
        [ManifestAlloc(), PlanMemory(io_in_arena=True, check=True, **opts)], [VerifyInstrument()]
    ).run(before)


def storage_calls(m: Module, fn: str = "main") -> dict[str, Call]:
    f = m.get(fn)
    return {
        s.name: s.value
        for s in f.body
        if isinstance(s, Bind) and isinstance(s.value, Call) and s.value.op.startswith("memory.al")
    }


CHAIN = """
fn @main(%x: Tensor[(16, 16), f32]) -> Tensor[(16, 16), f32] {
  %a = relu(%x)
  %b = tanh(%a)
  %c = negative(%b)
  return %c
}"""


def test_the_input_dies_early_and_a_later_tensor_takes_its_bytes() -> None:
    after = planned(CHAIN)
    fn = after.get("main")
    assert fn.attr("io_in_arena") is True
    offs = tensor_offsets(after)
    (inp,) = arena_inputs(fn)
    assert inp.param == "x" and offs[inp.tensor] == ("arena", inp.offset)
    # x is read by relu only; tanh's result is made when x is dead: it reuses x's bytes,
    # and the output reuses those of relu's result, dead at negative.
    assert offs["b"] == offs[inp.tensor]
    assert offs["c"] == offs["a"] != offs["b"]
    (arena,) = [c for c in storage_calls(after).values() if dict(c.kwargs).get("arena")]
    assert arena.args[0] == 2 * 1024  # without the option: 2 KiB arena + 1 KiB in + 1 KiB out
    assert not any(dict(c.kwargs).get("external") for c in storage_calls(after).values())
    assert parse_module(print_module(after), "again.rx") == after  # the dump parses again
    for rep in memory_report(after):
        assert rep.io_in_arena and rep.arena_bytes == rep.lower_bound == 2048
        assert rep.inputs_in_arena_bytes == rep.outputs_in_arena_bytes == 1024
        assert_report_plan_valid(rep)


def test_without_the_option_nothing_changes() -> None:
    before = parse_module(CHAIN, "t.rx")
    plain = Pipeline([ManifestAlloc(), PlanMemory()]).run(before)
    off = Pipeline([ManifestAlloc(), PlanMemory(io_in_arena=False)]).run(before)
    assert plain == off and plain.get("main").attr("io_in_arena") is None


def test_an_input_live_to_the_end_keeps_its_bytes() -> None:
    """An input used by the last statement holds its region throughout; the output's region is
    never reused either (both are live at the end)."""
    after = planned(
        """
fn @main(%x: Tensor[(16,), f32]) -> Tensor[(16,), f32] {
  %a = exp(%x)
  %b = relu(%a)
  %c = add(%b, %x)
  return %c
}"""
    )
    offs = tensor_offsets(after)
    regions = {n: (o, o + 64) for n, (_, o) in offs.items()}
    x0, x1 = regions["x_in"]
    for n in ("a", "b", "c"):  # every tensor is made while the input is live
        o0, o1 = regions[n]
        assert o1 <= x0 or x1 <= o0, n


def test_running_the_pass_twice_changes_nothing() -> None:
    once = planned(CHAIN)
    twice = PlanMemory(io_in_arena=True, check=True)(once)
    verify_module(twice)
    assert twice == once


def test_functions_that_others_call_keep_the_callers_convention() -> None:
    after = planned(
        """
fn @helper(%a: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %b = exp(%a)
  return %b
}

fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %y = call @helper(%x)
  %z = relu(%y)
  return %z
}"""
    )
    assert after.get("helper").attr("io_in_arena") is None
    assert any(dict(c.kwargs).get("external") for c in storage_calls(after, "helper").values())
    assert after.get("main").attr("io_in_arena") is True
    assert [a.param for a in arena_inputs(after.get("main"))] == ["x"]


def test_tuples_returned_inputs_constants_and_unbounded_sizes() -> None:
    """A tuple input is copied leaf by leaf; an input returned as it is, an output that is a
    constant, and an input of unbounded size (the caller's memory) all keep their meaning."""
    src = """
fn @main(%t: Tuple[Tensor[(4,), f32], Tensor[(2, 2), f32]], %u: Tensor[(n,), f32], %x: Tensor[(4,), f32])
    -> Tuple[Tensor[(4,), f32], Tensor[(4,), f32], Tensor[(n,), f32], Tensor[(2,), f32], Tensor[(2, 2), f32]] {
  %a = %t.0
  %b = add(%a, %x)
  %c = relu(%u)
  %k = const([1.5, 2.5], f32)
  %m = %t.1
  %r = (%b, %x, %c, %k, %m)
  return %r
}"""  # noqa: E501
    before = parse_module(src, "t.rx")
    after = planned(src)
    fn = after.get("main")
    assert {a.label for a in arena_inputs(fn)} == {"t.0", "t.1", "x"}  # not %u: unbounded
    externals = [c for c in storage_calls(after).values() if dict(c.kwargs).get("external")]
    assert len(externals) == 1  # relu(%u), of unbounded size, stays the caller's
    for dims in ({"n": 0}, {"n": 5}):
        args = random_inputs(before.get("main"), resolve_dims(before.get("main"), dims), 3)
        want = Interpreter(before).run("main", args, dims)
        assert_same_results(want, Interpreter(after).run("main", args, dims))
        got, _ = vm_run(Pipeline([KillAfterLastUse()]).run(after), {}, args, dims)
        assert_same_results(want, got)


def test_planner_none_puts_each_input_in_a_storage_of_its_own() -> None:
    before = parse_module(CHAIN, "t.rx")
    after = compiled(before, True, planner="none")
    args = random_inputs(before.get("main"), {}, 0)
    want = Interpreter(before).run("main", args)
    assert_same_results(want, Interpreter(after).run("main", args))
    assert_same_results(want, vm_run(after, {}, args, {})[0])
    assert "x_storage" in storage_calls(after)


# -- the verifier's rules ---------------------------------------------------------------------

GOOD = """
fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32]
    attrs {io_in_arena = true, planned = true} {
  %arena = memory.alloc_storage(128, align=64, scope="global", arena=true)
  %x_in = memory.alloc_tensor(%arena, 0, (4,), f32)
  call_packed("relaxc.copy", %x, %x_in)
  %a = memory.alloc_tensor(%arena, 64, (4,), f32)
  invoke exp(%x_in) outs (%a)
  %b = memory.alloc_tensor(%arena, 0, (4,), f32)
  invoke relu(%a) outs (%b)
  return %b
}"""


def test_the_verifier_accepts_the_rules() -> None:
    verify_module(parse_module(GOOD, "t.rx"))


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("invoke exp(%x_in)", "invoke exp(%x)", "read its copy there"),
        (
            "%a = memory.alloc_tensor(%arena, 64, (4,), f32)",
            "%a = memory.alloc_tensor(%arena, 0, (4,), f32)",
            "while the input is still live",
        ),
        (
            "invoke relu(%a) outs (%b)\n",
            "invoke relu(%a) outs (%b)\n  %d = memory.alloc_tensor(%arena, 0, (2,), f32)\n"
            "  invoke zeros(shape=(2,), dtype=f32) outs (%d)\n",
            "while the output is live",
        ),
        (
            "%x_in = memory.alloc_tensor(%arena, 0, (4,), f32)\n"
            '  call_packed("relaxc.copy", %x, %x_in)',
            "%x_in = memory.alloc_tensor(%arena, 0, (4,), f32)\n"
            "  %e = memory.alloc_tensor(%arena, 64, (4,), f32)\n"
            "  invoke zeros(shape=(4,), dtype=f32) outs (%e)\n"
            '  call_packed("relaxc.copy", %x, %x_in)',
            "before anything is computed",
        ),
        (
            "fn @main(%x: Tensor[(4,), f32])",
            "fn @main(%x: Tensor[(2, 2), f32])",
            "a tensor of another type",
        ),
        ("io_in_arena = true", "io_in_arena = 1", "must be true or false"),
    ],
    ids=["param-read", "input-overwritten", "output-overwritten", "late-copy", "type", "bool"],
)
def test_the_verifier_refuses_ir_that_breaks_them(old: str, new: str, message: str) -> None:
    assert old in GOOD
    with pytest.raises(RxError, match=message):
        verify_module(parse_module(GOOD.replace(old, new), "t.rx"))


def test_an_output_made_in_place_over_a_dying_tensor_is_accepted() -> None:
    """In-place execution may write an output over the tensor its op last reads."""
    src = GOOD.replace(
        "%b = memory.alloc_tensor(%arena, 0, (4,), f32)",
        "%b = memory.alloc_tensor(%arena, 64, (4,), f32)",
    )
    verify_module(parse_module(src, "t.rx"))


# -- results and memory, VM and interpreter ---------------------------------------------------


@pytest.mark.parametrize("name", SAMPLES)
def test_samples_give_the_same_bits_and_the_run_holds_what_was_promised(name: str) -> None:
    module, weights = sample(name)
    fn = module.get("main")
    bounds = fn.upper_bounds()
    for dims in [{}] + ([{k: 1 for k in bounds}] if bounds else []):
        env = resolve_dims(fn, dims)
        args = random_inputs(fn, env, 5)
        results = []
        for io in (False, True):
            c = compiled(module, io)
            got, vm = vm_run(c, weights, args, dims)
            results += [got, Interpreter(c, weights).run("main", args, dims or None)]
            pred = predict_memory(vm.exe.module, "main", {**bounds, **env})
            assert vm.stats.working_peak == pred.peak and pred.complete
            assert vm.stats.current == 0
            if io:
                assert pred.io_in_arena and pred.output_bytes == 0
                assert vm.stats.handed_over == 0 and vm.stats.kind_peak["external"] == 0
                assert vm.pool.pooled_bytes == pred.arena_bytes  # the arena went back
                (rep,) = [r for r in memory_report(c) if r.name == "main"]
                assert rep.arena_bytes == pred.arena_bytes
                assert rep.inputs_in_arena_bytes == rep.input_bytes.bound
                assert rep.outputs_in_arena_bytes == rep.output_bytes.bound
                assert_report_plan_valid(rep)
        for r in results[1:]:
            assert_same_results(results[0], r)


def test_squeezenet_with_random_weights_gives_the_same_bits() -> None:
    from relaxc.frontend.onnx import import_onnx
    from tests.frontend.onnx.test_model_zoo import with_random_weights, zoo_model

    imported = import_onnx(with_random_weights(zoo_model("squeezenet")))
    module, weights = imported.module, imported.weights
    fn = module.functions[0]
    x = np.random.default_rng(1).standard_normal([int(d) for d in fn.params[0].type.shape])
    args = [x.astype(np.float32)]
    results, arenas = [], []
    for io in (False, True):
        c = compiled(module, io)
        vm = VirtualMachine(load_bytes(compile_module(c, weights), "sq.rxb"))
        results.append(vm.run(fn.name, args))
        results.append(Interpreter(c, weights).run(fn.name, args))
        pred = predict_memory(vm.exe.module, fn.name, {})
        assert vm.stats.working_peak == pred.peak
        (rep,) = memory_report(c)
        arenas.append((rep.arena_bytes, rep.input_bytes.bound, rep.output_bytes.bound))
    for r in results[1:]:
        assert r.tobytes() == results[0].tobytes()
    # The input (602,112 B) is dead after the first convolution and the output (4,000 B) is
    # made after the peak: the arena holds both at no cost.
    (plain, inp, out), (with_io, _, _) = arenas
    assert (inp, out) == (602112, 4000)
    assert with_io == plain


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_generated_programs_same_results_valid_plans_and_promises(prog) -> None:
    """Random programs (views, aliases, tuples, returned parameters, helpers, unbounded dims)
    with inputs and outputs in the arena: the independent checker on every plan, the same
    results on the interpreter and the VM, and never less memory held than promised."""
    before = parse_module(prog.text, "gen.rx")
    after = Pipeline(
        [ManifestAlloc(), PlanMemory(time_limit=0.05, check=True, io_in_arena=True)],
        [VerifyInstrument()],
    ).run(before)
    for rep in memory_report(after):
        assert_report_plan_valid(rep)
    fn = before.get("main")
    args = random_inputs(fn, resolve_dims(fn, prog.dims), 0)
    want = Interpreter(before).run("main", args, prog.dims)
    assert_same_results(want, Interpreter(after).run("main", args, prog.dims))
    vm_module = Pipeline([KillAfterLastUse()], [VerifyInstrument()]).run(after)
    got, vm = vm_run(vm_module, {}, args, prog.dims)
    assert_same_results(want, got)
    env = {**after.get("main").upper_bounds(), **prog.dims}
    pred = predict_memory(vm.exe.module, "main", env)
    if pred.complete:
        assert vm.stats.working_peak >= pred.peak


# -- the command line ---------------------------------------------------------------------------


def invoke(*args: object):
    return CliRunner().invoke(
        cli,
        [str(a) for a in args],
        env={"RELAXC_DEBUG": None},
        prog_name="relaxc",
        catch_exceptions=False,
    )


@pytest.mark.parametrize("name", ["cnn", "transformer"])
def test_run_stats_measures_exactly_the_promise(name: str) -> None:
    r = invoke("run", SAMPLES_DIR / f"{name}.rx", "--stats", "--check", "--io-in-arena")
    assert r.exit_code == 0, r.output
    assert "the run held exactly the memory the plan promised" in r.output
    assert "inputs and outputs are in the arena" in r.output
    assert "bit-identical" in r.output


def test_run_io_in_arena_needs_a_compiled_run(tmp_path: Path) -> None:
    r = invoke("run", SAMPLES_DIR / "mlp.rx", "--io-in-arena")
    assert r.exit_code == 2 and "--stats or --check" in r.output


def test_report_counts_io_and_max_arena_covers_it() -> None:
    path = SAMPLES_DIR / "relay_memory.rx"
    plain = json.loads(invoke("report", path, "--json").output)["functions"][-1]
    r = invoke("report", path, "--json", "--io-in-arena")
    with_io = json.loads(r.output)["functions"][-1]
    assert not plain["io_in_arena"] and with_io["io_in_arena"]
    assert plain["arena_bytes"] == 0  # its only buffer is the output, the caller's memory
    assert with_io["arena_bytes"] == with_io["workspace_bytes"] == 3 * 64 * 10 * 4
    assert with_io["inputs_in_arena_bytes"] == with_io["input_bytes"]["bound"] == 2 * 2560
    assert with_io["outputs_in_arena_bytes"] == with_io["output_bytes"]["bound"] == 2560
    assert invoke("report", path, "--max-arena", "4KiB").exit_code == 0
    over = invoke("report", path, "--max-arena", "4KiB", "--io-in-arena")
    assert over.exit_code == 1 and "7.5 KiB" in over.output
    text = invoke("report", path, "--io-in-arena").output
    assert "(in the arena)" in text


def test_build_and_passes_flag_is_the_pass_option(tmp_path: Path) -> None:
    path = SAMPLES_DIR / "mlp.rx"
    a = invoke("passes", path, "--io-in-arena").output
    b = invoke("passes", path, "--pass-config", "PlanMemory.io_in_arena=true").output
    assert a == b and "io_in_arena = true" in a and 'call_packed("relaxc.copy", %x, %x_in)' in a
    r = invoke("build", path, "-t", "ir", "-o", tmp_path / "m.rx", "--io-in-arena")
    assert r.exit_code == 0 and "inputs and outputs included" in r.output
    again = invoke("report", tmp_path / "m.rx", "-p", "none", "--json")
    assert json.loads(again.output)["functions"][0]["io_in_arena"]
    bad = invoke("passes", path, "-p", "ManifestAlloc", "--io-in-arena")
    assert bad.exit_code == 1 and "PlanMemory, which is not in the pipeline" in bad.output
