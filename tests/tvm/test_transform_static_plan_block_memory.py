"""Ports of tests/python/relax/test_transform_static_plan_block_memory.py (Apache TVM), all 28.

Each test names its TVM test, states TVM's Expected plan (which allocations share a storage)
and checks that relaxc reuses at least as much: its arena is no larger than the blocks TVM's
sharing implies at relaxc's 64-byte alignment (``tvm_bytes``), and where TVM's sharing is the
only good one, the same pairs share. Then: the independent plan checker agrees, nothing still
used is killed, the VM (kills poisoned) is bit-identical to the interpreter, and programs
marked ``# c: yes`` run under ASan/UBSan within tolerance.
"""

from __future__ import annotations

import pytest

from .common import assert_clear_refusal, memory_safe
from .harness import (
    arena_bytes,
    invoke,
    assert_reuse_at_least_tvm,
    kills,
    placements,
    program,
    refusal,
    report,
    shares,
    storages,
    tvm_bytes,
)


def test_basic(tmp_path, c_check):
    # TVM: storage{exp (32 B), add (32 B)}, storage1{relu (32 B), pad (40 B)}; log -> output.
    m = memory_safe("spbm_basic", tmp_path)
    assert assert_reuse_at_least_tvm(m, [[32, 32], [32, 40]]) == 128  # matched
    assert shares(m, "lv", "lv3") and shares(m, "lv2", "lv4")  # TVM's pairs exactly
    assert not shares(m, "lv", "lv2")  # exp's result is read (through the reshape) by relu
    assert storages(m)["gv_storage"].external
    # TVM's lowered form kills exp's result, its reshape, relu's, add's and pad's results.
    assert {n for op, n in kills(m) if op == "memory.kill_tensor"} == {
        "lv",
        "lv1",
        "lv2",
        "lv3",
        "lv4",
    }
    c_check("spbm_basic")


def test_different_dtype(tmp_path, c_check):
    # TVM: two 24-byte storages (float32, int32): no sharing across dtypes. relaxc beats it.
    m = memory_safe("spbm_different_dtype", tmp_path)
    assert assert_reuse_at_least_tvm(m, [[24], [24]]) == 64 < tvm_bytes([[24], [24]])
    assert shares(m, "gv", "gv1")
    c_check("spbm_different_dtype")


def test_dtype_bool(tmp_path, c_check):
    # TVM: a 6-byte storage for the bool (2, 3) tensor.
    m = memory_safe("spbm_dtype_bool", tmp_path)
    assert placements(m)["gv1"].nbytes == 6
    assert {b.name: b.bytes for b in report(m).buffers}["gv1"] == 6
    assert_reuse_at_least_tvm(m, [[6]])
    c_check("spbm_dtype_bool")


def test_same_dtype(tmp_path, c_check):
    # TVM: one 24-byte storage for both results.
    m = memory_safe("spbm_same_dtype", tmp_path)
    assert assert_reuse_at_least_tvm(m, [[24, 24]]) == 64
    assert shares(m, "gv", "gv1")
    c_check("spbm_same_dtype")


IF_COND = """# tvm: tests/python/relax/test_transform_static_plan_block_memory.py::test_if_cond
fn @main(%x: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] {
  %x1 = max(%x)
  %c = cast(%x1, dtype=bool)
  %y = if %c { %x } else { exp(%x) }
  return %x
}
"""

IF_THEN_ELSE = """# tvm: tests/python/relax/test_transform_static_plan_block_memory.py::test_if_then_else
fn @main(%cond: Tensor[(), bool], %x: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] {
  %y = exp(%x)
  if %cond {
    %z = %y
  } else {
    %z = %y
  }
  return %x
}
"""  # noqa: E501

CROSS_BLOCK_USE = """# tvm: tests/python/relax/test_transform_static_plan_block_memory.py::test_cross_block_use
fn @main(%cond: Tensor[(), bool], %x: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] {
  %y = exp(%x)
  %z = if (%cond) {
    %y2 = exp(%y)
    yield %y2
  } else {
    %y2 = exp(%y)
    yield %y2
  }
  return %x
}
"""  # noqa: E501

WITH_DATAFLOW = """# tvm: tests/python/relax/test_transform_static_plan_block_memory.py::test_with_dataflow
fn @main(%x: Tensor[(10,), f32]) -> Tensor[(10,), f32] {
  dataflow {
    %gv = exp(%x)
    output %gv
  }
  return %gv
}
"""  # noqa: E501

SHAPE_PARAM = """# tvm: tests/python/relax/test_transform_static_plan_block_memory.py::test_call_tir_dyn (R.Shape parameter)
fn @main(%s: Shape[(n,)]) -> Tensor[(n,), f32] attrs {upper_bounds = {n = 20}} {
  %full = full((n,), 1.5)
  %lv2 = exp(%full)
  return %lv2
}
"""  # noqa: E501

OUT_OF_SCOPE = {
    "if_cond": IF_COND,
    "if_then_else": IF_THEN_ELSE,
    "cross_block_use": CROSS_BLOCK_USE,
    "with_dataflow": WITH_DATAFLOW,
    "shape_param": SHAPE_PARAM,
}


@pytest.mark.parametrize("case", sorted(OUT_OF_SCOPE))
def test_out_of_scope_is_refused_with_a_location(case, tmp_path):
    # TVM plans nothing across if/else (the pass leaves the function unchanged) and plans
    # dataflow blocks only after they are lowered; relaxc bodies are straight-line: refused.
    refusal(OUT_OF_SCOPE[case], tmp_path)


def test_if_cond(tmp_path):
    assert_clear_refusal(IF_COND, tmp_path, "if/else")


def test_if_then_else(tmp_path):
    assert_clear_refusal(IF_THEN_ELSE, tmp_path, "if/else")


def test_cross_block_use(tmp_path):
    assert_clear_refusal(CROSS_BLOCK_USE, tmp_path, "if/else")


def test_with_dataflow(tmp_path):
    assert_clear_refusal(WITH_DATAFLOW, tmp_path, "dataflow blocks")


def test_nested_tuple(tmp_path, c_check):
    # TVM: y1, y2, y3, z1 each their own storage (4 x 24 B); z2 reuses y1's, z3 reuses z1's.
    # (The walk of the kills is
    # test_tuple_and_scalar_lifetimes.py::test_nested_tuple_object_killed_while_projected.)
    m = memory_safe("spbm_nested_tuple", tmp_path, kill_walk=False)
    assert assert_reuse_at_least_tvm(m, [[24, 24], [24], [24], [24, 24]]) == 256  # matched
    for a, b in [
        ("y1", "y2"),
        ("y1", "y3"),
        ("y2", "y3"),
        ("z1", "y1"),
        ("z1", "y2"),
        ("z1", "y3"),
    ]:
        assert not shares(m, a, b)  # live together through the tuples
    c_check("spbm_nested_tuple")


def test_call_func_other_than_primfunc(tmp_path):
    # TVM: no change (an allocation handed to a non-PrimFunc call is not planned: 1 runtime
    # allocation of 24 B). relaxc plans it (the callee's result is a fresh buffer) and w
    # reuses it: beats.
    m = memory_safe("spbm_call_func_other_than_primfunc", tmp_path)
    assert placements(m)["alloc"].storage == "arena"
    assert shares(m, "alloc", "w")
    assert arena_bytes(m) == 64


def test_call_packed_external_func(tmp_path):
    # TVM: the first allocation gets a storage; the output stays a runtime allocation.
    m = memory_safe("spbm_call_packed_external_func", tmp_path)
    p, st = placements(m), storages(m)
    assert st[p["alloc"].storage].arena and st[p["alloc1"].storage].external
    assert ("memory.kill_tensor", "alloc1") not in kills(m)


def test_symbolic_shape(tmp_path):
    # TVM: a runtime storage of 4 * (m * n) bytes. relaxc: dynamic too, freed after its last use.
    m = memory_safe("spbm_symbolic_shape", tmp_path)
    st = storages(m)
    assert arena_bytes(m) == 0 and not st["y_storage"].arena and not st["y_storage"].external
    assert ("memory.kill_storage", "y_storage") in kills(m)


def test_zero_reference(tmp_path, c_check):
    # TVM: the unused allocation keeps its 24-byte storage. relaxc: planned (no extra storage).
    m = memory_safe("spbm_zero_reference", tmp_path)
    assert set(storages(m)) == {"arena"} and arena_bytes(m) == 64
    c_check("spbm_zero_reference")


def test_reshape_param(tmp_path, c_check):
    # TVM: no change: views of parameters allocate nothing, the output is not planned.
    m = memory_safe("spbm_reshape_param", tmp_path)
    assert set(placements(m)) == {"gv"} and storages(m)["gv_storage"].external
    assert kills(m) == []
    c_check("spbm_reshape_param")


def test_multiple_functions(tmp_path):
    # TVM: func1 two 24-byte storages (f32, i32); func2 one shared storage. relaxc: each
    # function planned on its own; func1 shares across dtypes (beats), func2 matches.
    m = memory_safe("spbm_multiple_functions", tmp_path)
    assert assert_reuse_at_least_tvm(m, [[24], [24]], "func1") == 64
    assert assert_reuse_at_least_tvm(m, [[24, 24]], "func2") == 64
    assert shares(m, "gv", "gv1", "func1") and shares(m, "gv", "gv1", "func2")


@pytest.mark.parametrize("name", ["spbm_tir_var_upper_bound", "spbm_upper_and_lower_bounds"])
def test_tir_var_upper_bound(name, tmp_path, c_check):
    # TVM (n <= 4): storage{exp, add} 32 B, storage1{relu, pad} 40 B; the output unplanned.
    # (test_upper_and_lower_bounds: the same Expected; relaxc has no lower bounds.)
    m = memory_safe(name, tmp_path)
    assert assert_reuse_at_least_tvm(m, [[32, 32], [32, 40]]) == 128
    assert shares(m, "lv", "lv3") and shares(m, "lv2", "lv4")
    for n in (1, 4):
        memory_safe(name, tmp_path, dims={"n": n})
    c_check(name)


def test_upper_and_lower_bounds(tmp_path):
    # Covered by test_tir_var_upper_bound[spbm_upper_and_lower_bounds]; the lower bound itself
    # is refused by name (relaxc sizes need only upper bounds).
    text = program("spbm_upper_and_lower_bounds").text.replace(
        "{upper_bounds = {n = 4}}", "{upper_bounds = {n = 4}, lower_bounds = {n = 2}}"
    )
    assert "unknown function attribute 'lower_bounds'" in refusal(text, tmp_path)


def test_lower_bound_only(tmp_path):
    # TVM: three runtime storages (8n, 8n, 4(2n + 2) B), exp's reused by add. relaxc: the
    # same three dynamic storages, add reusing exp's (provably equal sizes).
    m = memory_safe("spbm_lower_bound_only", tmp_path)
    p, st = placements(m), storages(m)
    assert arena_bytes(m) == 0
    assert p["lv"].storage == p["lv3"].storage
    assert len({p[n].storage for n in ("lv", "lv2", "lv3", "lv4")}) == 3
    assert not any(st[p[n].storage].external for n in ("lv", "lv2", "lv3", "lv4"))
    for n in (1, 9):
        memory_safe("spbm_lower_bound_only", tmp_path, dims={"n": n})


@pytest.mark.parametrize("bound", ['"x"', "-1", "0", "n"])
def test_invalid_tir_var_upper_bound(bound, tmp_path):
    # TVM: an upper bound that is not a positive integer raises. relaxc: a located error.
    text = f"""fn @main(%x: Tensor[(2, n), f32]) -> Tensor[(2, n), f32] attrs {{upper_bounds = {{n = {bound}}}}} {{
  %a = exp(%x)
  return %a
}}
"""  # noqa: E501
    assert "upper bound of 'n'" in refusal(text, tmp_path)


def test_invalid_tir_var_lower_bound(tmp_path):
    # TVM: a lower bound that is not an integer raises. relaxc has no lower bounds: refused by name.
    text = """fn @main(%x: Tensor[(2, n), f32]) -> Tensor[(2, n), f32] attrs {lower_bounds = {n = "x"}} {
  %a = exp(%x)
  return %a
}
"""  # noqa: E501
    assert "lower_bounds" in refusal(text, tmp_path)


def test_tir_var_decreasing_monotone(tmp_path, c_check):
    # TVM (n <= 20, m <= 5): two 8000-byte storages (the bound of n * m * max(n - m, 1) * 4).
    m = memory_safe("spbm_tir_var_decreasing_monotone", tmp_path)
    assert assert_reuse_at_least_tvm(m, [[8000], [8000]]) == 16000
    for dims in ({"n": 20, "m": 5}, {"n": 3, "m": 5}):
        memory_safe("spbm_tir_var_decreasing_monotone", tmp_path, dims=dims)
    c_check("spbm_tir_var_decreasing_monotone")


def test_call_tir_dyn(tmp_path, c_check):
    # TVM (n <= 20): full and the first exp get one 80-byte storage each; output unplanned.
    m = memory_safe("spbm_call_tir_dyn", tmp_path)
    assert assert_reuse_at_least_tvm(m, [[80], [80]]) == 256
    assert storages(m)["lv3_storage"].external
    c_check("spbm_call_tir_dyn")


def test_call_tir_dyn_plan_dynamic_func_output(tmp_path, c_check):
    # TVM with relax.memory_plan_dynamic_func_output: the output gets a planned 80-byte
    # storage too. relaxc by design never plans an output (the caller's buffer, exactly its
    # size): intermediates matched, the output is the caller's.
    m = memory_safe("spbm_call_tir_dyn_plan_dynamic_func_output", tmp_path)
    assert assert_reuse_at_least_tvm(m, [[80], [80]]) == 256
    st = storages(m)["lv3_storage"]
    assert st.external and not st.arena
    c_check("spbm_call_tir_dyn_plan_dynamic_func_output")


def test_call_tir_dyn_plan_partially_dynamic(tmp_path):
    # TVM (n <= 20, m free): storage{full, exp2} and storage1{exp1} of 80m B, plus the output.
    # relaxc: two dynamic storages for the three intermediates (full's reused by the second
    # exp), the output the caller's.
    m = memory_safe("spbm_call_tir_dyn_plan_partially_dynamic", tmp_path)
    p, st = placements(m), storages(m)
    assert p["full"].storage == p["lv3"].storage != p["lv2"].storage
    assert st[p["lv4"].storage].external
    assert len({p[n].storage for n in ("full", "lv2", "lv3")}) == 2


def test_function_independence(tmp_path):
    # TVM: func1 a 32-byte storage, func2 a 40-byte one, each its own.
    m = memory_safe("spbm_function_independence", tmp_path)
    assert assert_reuse_at_least_tvm(m, [[32]], "func1") == 64
    assert assert_reuse_at_least_tvm(m, [[40]], "func2") == 64
    assert (
        placements(m, "func1")["lv"].storage == "arena"
        and placements(m, "func2")["lv"].storage == "arena"
    )


def test_builtin_reshape_preserves_storage_liveness(tmp_path):
    # TVM: exactly two storages; alloc stays live through the packed reshape.
    m = memory_safe("spbm_builtin_reshape_preserves_storage_liveness", tmp_path)
    assert not shares(m, "alloc", "alloc1")
    assert len(storages(m)) == 2 and arena_bytes(m) == 128


def test_add_runs_on_the_vm_today(tmp_path):
    # TVM test_add, the part relaxc does today: the VM and the interpreter agree (the
    # primitive's intermediates are the VM's own, unplanned and uncounted).
    memory_safe("feature_workspace_cumsum", tmp_path)


def test_add(tmp_path, c_check):
    # TVM: the cumsum workspace is planned (storage, bounded by batch_size <= 32), next to
    # storage1 for the result. relaxc's intended plan: @cumsum's intermediates (%e, %t, %s:
    # at most three (b, v) f32 tensors, 8 KiB each at the bounds) live in @main's arena,
    # verified by the plan checker, counted by the report and --max-arena, built for C.
    m = memory_safe("feature_workspace_cumsum", tmp_path)
    workspace = 32 * 64 * 4
    assert arena_bytes(m) >= workspace  # the scratch is planned in the caller's arena
    assert report(m).arena_bytes == arena_bytes(m) >= workspace
    r = invoke(
        "build",
        program("feature_workspace_cumsum").path,
        "-t",
        "c",
        "-o",
        tmp_path / "c",
        "--max-arena",
        workspace - 1,
    )
    assert r.exit_code == 1 and "arena" in r.output  # --max-arena covers the workspace
    c_check("feature_workspace_cumsum")


VIEW = program("feature_view_offset").text


@pytest.mark.parametrize("offset", [0, 512])
def test_view(offset, tmp_path):
    # TVM: x gets 1024 B, y 512 B, z (output) unplanned; x stays live through the view until y.
    path = tmp_path / "view.rx"
    path.write_text(VIEW.replace("offset=512", f"offset={offset}"))
    r = invoke("build", path, "-o", tmp_path / "view.rxb", "-q")
    assert r.exit_code == 0, r.output
    r = invoke("run", tmp_path / "view.rxb", "--check", "--poison", "--source", path)
    assert r.exit_code == 0 and r.output.count("bit-identical") == 2, r.output
    from relaxc.frontend.parser import parse_module
    from relaxc.passes.assemble import assemble_pipeline
    from relaxc.passes.pipeline import Pipeline, VerifyInstrument

    from .harness import SHARING_PASSES

    vm = assemble_pipeline("vm", disable=[",".join(SHARING_PASSES)])
    m = Pipeline(vm, [VerifyInstrument()]).run(parse_module(path.read_text(), str(path)))
    assert not shares(m, "x", "y")
    assert arena_bytes(m) <= tvm_bytes([[1024], [512]])


def test_view_c(c_check):
    c_check("feature_view_offset")


def test_tir_var_upper_bound_with_expression_parameter_shapes(tmp_path, c_check):
    # TVM test_tir_var_upper_bound's PrimFuncs take (2 * n,) and (2 * n + 2,) buffers; the
    # same plan as without them: storage{exp, add}, storage1{relu, pad}.
    m = memory_safe("feature_expr_param_shapes", tmp_path)
    assert assert_reuse_at_least_tvm(m, [[32, 32], [32, 40]]) == 128
    c_check("feature_expr_param_shapes")


def test_call_tir_dyn_shape_parameter(tmp_path):
    # TVM's test_call_tir_dyn and its two variants take main(s: R.Shape(["n"])).
    assert_clear_refusal(SHAPE_PARAM, tmp_path, "Shape parameters")
