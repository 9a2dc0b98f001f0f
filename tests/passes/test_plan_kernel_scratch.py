"""PlanKernelScratch: each kernel call gets the scratch its target's kernel states, as an
ordinary buffer that PlanMemory places, the report lists and --max-arena counts."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner

from relaxc.cli.main import cli
from relaxc.frontend.parser import parse_module
from relaxc.frontend.printer import print_module
from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Bind, Invoke, Module
from relaxc.ir.verifier import verify_module
from relaxc.ir.vocab import ALLOC_STORAGE, ALLOC_TENSOR, call_of
from relaxc.cli.target_facts import pipeline_context
from relaxc.passes.base import PassError
from relaxc.passes.plan_kernel_scratch import PlanKernelScratch
from relaxc.passes.registry import PASSES, PIPELINES
from relaxc.passes.assemble import assemble_pipeline
from relaxc.passes.pipeline import Pipeline, VerifyInstrument

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
CONTEXT = pipeline_context()  # the C target's scratch fact, as relaxc's commands give it


def explicit(name: str) -> Module:
    module = parse_module((SAMPLES / f"{name}.rx").read_text(), f"{name}.rx")
    return Pipeline(assemble_pipeline("c", "ManifestAlloc"), [VerifyInstrument()]).run(module)


def without_scratch(module: Module) -> Module:
    """``module`` with every scratch the pass added taken out again."""
    functions = []
    for fn in module.functions:
        made = {
            s.value.scratch.name for s in fn.body if isinstance(s.value, Invoke) and s.value.scratch
        }
        storages = set()
        for s in fn.body:
            if isinstance(s, Bind) and s.name in made:
                c = call_of(s.value, ALLOC_TENSOR)
                assert c is not None
                storages.add(c.args[0].name)  # type: ignore[union-attr]
        body = []
        for s in fn.body:
            if isinstance(s, Bind) and (s.name in made or s.name in storages):
                continue
            if isinstance(s.value, Invoke) and s.value.scratch is not None:
                s = dataclasses.replace(s, value=dataclasses.replace(s.value, scratch=None))
            body.append(s)
        attrs = tuple((k, v) for k, v in fn.attrs if k != "scratch")
        functions.append(dataclasses.replace(fn, body=tuple(body), attrs=attrs, attr_locs=()))
    return dataclasses.replace(module, functions=tuple(functions))


@pytest.mark.parametrize("sample", ["cnn", "mlp", "transformer"])
def test_adds_only_the_scratch_and_is_idempotent(sample: str) -> None:
    before = explicit(sample)
    after = PlanKernelScratch(context=CONTEXT)(before)
    verify_module(after)
    assert print_module(after) != print_module(before)
    assert print_module(without_scratch(after)) == print_module(without_scratch(before))
    assert print_module(PlanKernelScratch(context=CONTEXT)(after)) == print_module(after)
    # each scratch is a fresh storage of its own size, made just before its call
    for fn in after.functions:
        body = list(fn.body)
        for i, s in enumerate(body):
            if isinstance(s.value, Invoke) and s.value.scratch is not None:
                tensor, storage = body[i - 1], body[i - 2]
                assert isinstance(tensor, Bind) and tensor.name == s.value.scratch.name
                st = call_of(storage.value, ALLOC_STORAGE)
                assert st is not None and st.kwargs == (("align", 64), ("scope", "global"))
                t = call_of(tensor.value, ALLOC_TENSOR)
                assert t is not None and t.args[2] == (st.args[0],)


def test_the_printed_ir_reads_back() -> None:
    after = PlanKernelScratch(context=CONTEXT)(explicit("cnn"))
    text = print_module(after)
    assert "scratch (%c1_scratch)" in text
    assert print_module(parse_module(text, "again.rx")) == text


def test_runs_before_planning_and_knows_its_targets() -> None:
    planned = Pipeline(assemble_pipeline("c", "ManifestAlloc,PlanMemory", context=CONTEXT)).run(
        parse_module((SAMPLES / "mlp.rx").read_text(), "mlp.rx")
    )
    with pytest.raises(PassError, match="plan kernel scratch before PlanMemory"):
        PlanKernelScratch(context=CONTEXT)(planned)
    with pytest.raises(PassError, match="no kernel scratch facts for target 'vm'"):
        PlanKernelScratch(target="vm", context=CONTEXT)(explicit("mlp"))
    with pytest.raises(PassError, match="target 'c' \\(targets: none given to the pipeline\\)"):
        PlanKernelScratch()(explicit("mlp"))  # assembled without the composition layer's facts
    assert "PlanKernelScratch" in PASSES
    c = PIPELINES["c"]
    assert c.index("ComputeInPlace") < c.index("PlanKernelScratch") < c.index("PlanMemory")
    assert "PlanKernelScratch" not in PIPELINES["vm"]  # numpy's kernels need none


def test_max_arena_counts_the_scratch(tmp_path: Path) -> None:
    """cnn's tensors peak at 81,920 bytes; the max pool that runs there needs 128 bytes of
    scratch, so the C program's arena is 82,048, and a limit of 81,920 fails."""
    runner = CliRunner()
    ok = runner.invoke(
        cli, ["build", str(SAMPLES / "cnn.rx"), "-t", "c", "-o", str(tmp_path / "a")]
    )
    assert ok.exit_code == 0 and "82,048 B" in ok.stderr
    tight = runner.invoke(
        cli,
        [
            "build",
            str(SAMPLES / "cnn.rx"),
            "-t",
            "c",
            "-o",
            str(tmp_path / "b"),
            "--max-arena",
            "81920",
        ],
    )
    assert tight.exit_code != 0 and "81,920" in tight.output
    vm = runner.invoke(
        cli,
        ["build", str(SAMPLES / "cnn.rx"), "-o", str(tmp_path / "c.rxb"), "--max-arena", "81920"],
    )
    assert vm.exit_code == 0, vm.output  # the VM's kernels take none


def test_report_lists_each_scratch_as_its_kernel_s(tmp_path: Path) -> None:
    import json

    r = CliRunner().invoke(
        cli, ["report", str(SAMPLES / "cnn.rx"), "-p", "c", "--json"], catch_exceptions=False
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    buffers = {b["name"]: b for f in data["functions"] for b in f["buffers"]}
    scratch = {n: b for n, b in buffers.items() if n.endswith("_scratch")}
    assert {"c1_scratch", "p1_scratch", "c3_scratch"} <= set(scratch)
    assert all(b["dtype"] == "u8" and b["arena"] == "arena" for b in scratch.values())
    assert scratch["c1_scratch"]["bytes"] == 2368 and scratch["p1_scratch"]["bytes"] == 128
    (main,) = data["functions"]  # the calls are packed by now: counted through their structs
    assert main["kernel_scratch_calls"] == len(scratch) == 5  # 4 convolutions, the max pool
    # the largest: the 3x3 branch conv's Winograd blocks (backend/c/kernels/winograd.py),
    # within twice its own input and output; the arena is no larger for it
    # (tests/backend/c/test_cmd_build_c.py)
    assert main["kernel_scratch_max_bytes"] == max(b["bytes"] for b in scratch.values()) == 33856
    vm = json.loads(CliRunner().invoke(cli, ["report", str(SAMPLES / "cnn.rx"), "--json"]).stdout)
    assert vm["functions"][0]["kernel_scratch_calls"] == 0  # numpy's kernels need none


BAD = [
    (
        '%s2 = memory.alloc_storage(64, align=64, scope="global")\n'
        "  %s = memory.alloc_tensor(%s2, 0, (16,), f32)\n"
        "  invoke relu(%x) outs (%y) scratch (%s)",
        "scratch %s of invoke must be a Tensor[(n,), u8]",
    ),
    ("invoke relu(%x) outs (%y) scratch (%y)", "also one of its inputs or outs"),
]


@pytest.mark.parametrize("stmts, message", BAD)
def test_the_verifier_refuses_a_bad_scratch(stmts: str, message: str) -> None:
    text = f"""fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {{
  %st = memory.alloc_storage(16, align=64, scope="global")
  %y = memory.alloc_tensor(%st, 0, (4,), f32)
  {stmts}
  return %y
}}
"""
    with pytest.raises(
        RxError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
    ):
        verify_module(parse_module(text, "bad.rx"))


def test_a_function_asking_for_scratch_must_get_it() -> None:
    text = """fn @k(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32]
    attrs {primitive = true, scratch = 64} {
  %y = relu(%x)
  return %y
}

fn @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  %st = memory.alloc_storage(16, align=64, scope="global")
  %y = memory.alloc_tensor(%st, 0, (4,), f32)
  invoke @k(%x) outs (%y)
  return %y
}
"""
    with pytest.raises(RxError, match=r"invoke @k must pass scratch \(%s\) of 64 bytes"):
        verify_module(parse_module(text, "bad.rx"))
    small = text.replace(
        "  invoke @k(%x) outs (%y)",
        '  %ss = memory.alloc_storage(32, align=64, scope="global")\n'
        "  %s = memory.alloc_tensor(%ss, 0, (32,), u8)\n"
        "  invoke @k(%x) outs (%y) scratch (%s)",
    )
    with pytest.raises(RxError, match="scratch %s has 32 bytes, but @k needs 64"):
        verify_module(parse_module(small, "small.rx"))


def test_the_context_is_wiring_not_an_option() -> None:
    """The facts reach the pass through assemble_pipeline's context; they are not an option
    (not listed, not printed in its spec, not compared), and --pass-config keeps them."""
    from relaxc.passes.spec import apply_pass_config, describe_options

    (given,) = assemble_pipeline("c", "PlanKernelScratch", context=CONTEXT)
    (bare,) = assemble_pipeline("c", "PlanKernelScratch")
    assert given.context is CONTEXT and bare.context.kernel_scratch == {}
    assert given == bare and given.spec() == "PlanKernelScratch"
    assert [o for o, _, _ in describe_options(PlanKernelScratch)] == ["target"]
    (configured,) = apply_pass_config([given], ["PlanKernelScratch.target=vm"], PASSES)
    assert configured.context is CONTEXT and configured.spec() == "PlanKernelScratch{target=vm}"
