"""The VM measures the memory the plan promises: arena plus dynamic peak, to the byte.

The VM counts a block's bytes from its allocation until no register refers to it any more
(backend/vm/memory.py). The promise is computed from the compiled IR without the VM: the
memory report's arenas, and its dynamic storages live from definition to last use (the
alias-aware liveness of the passes) with sizes evaluated at the run's dims.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from relaxc.backend.vm import PooledAllocator, VirtualMachine, predict_memory
from relaxc.backend.vm.memory import ARENA, DYNAMIC, EXTERNAL
from relaxc.ir import dims as D
from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Bind, Call
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import bind_args
from relaxc.cli.report.analysis import memory_report
from tests.strategies import programs

from .util import (
    KITCHEN_SINK,
    KITCHEN_WEIGHTS,
    SAMPLE_STEMS,
    SAMPLES,
    assert_identical,
    build,
    compile_text,
    inputs_for,
    interpret,
    parse,
    sample,
)

import sys

sys.path.insert(0, str(SAMPLES.parent / "benchmarks"))
from models import decoder, unbounded_transformer  # noqa: E402


def report_promise(module, dims: dict[str, int], fn_name: str = "main") -> tuple[int, int, int]:
    """(arena, dynamic peak, peak of both) from the memory report of the compiled module."""
    rep = next(r for r in memory_report(module) if r.name == fn_name)
    fn = module.get(fn_name)
    alloc = REGISTRY.get("memory.alloc_storage")
    size_of = {}
    for st in fn.body:
        if (
            isinstance(st, Bind)
            and isinstance(st.value, Call)
            and st.value.op == "memory.alloc_storage"
        ):
            size = bind_args(alloc, st.value.args, st.value.kwargs).attrs["size"]
            size_of[st.name] = D.evaluate(size, dims) if not isinstance(size, int) else size
    intervals = []  # (first, last, bytes, is_arena)
    for a in rep.arenas:
        last = max((b.last for b in rep.buffers if b.arena == a["name"]), default=0)
        intervals.append((0, last, a["bytes"], True))
    for d in rep.dynamic:
        intervals.append((d.first, d.last, size_of[d.name], False))

    def peak(keep) -> int:
        points = sorted({i for f, last, _, _ in intervals for i in (f, last)})
        return max(
            (sum(s for f, last, s, a in intervals if keep(a) and f <= p <= last) for p in points),
            default=0,
        )

    return rep.arena_bytes, peak(lambda a: not a), peak(lambda a: True)


def measure(module, weights, dims: dict[str, int], seed: int = 0) -> VirtualMachine:
    vm = VirtualMachine(build(module, weights), poison=True)
    vm.run("main", inputs_for(module, dims, seed), dims or None)
    return vm


@pytest.mark.parametrize("stem", SAMPLE_STEMS)
def test_samples_measured_peak_is_the_planned_arena(stem: str) -> None:
    source, weights = sample(stem)
    module = compile_text((SAMPLES / f"{stem}.rx").read_text())
    fn = source.get("main")
    bound = fn.upper_bounds()
    for dims in ({}, {k: 1 for k in bound}):
        vm = measure(module, weights, dims)
        arena, dynamic, both = report_promise(module, {**bound, **dims})
        assert dynamic == 0
        assert vm.stats.working_peak == arena == both
        assert vm.stats.kind_peak[ARENA] == arena
        pred = predict_memory(module, "main", {**bound, **dims})
        assert (pred.arena_bytes, pred.dynamic_peak, pred.peak) == (arena, dynamic, both)
        assert vm.stats.current == 0  # everything freed or handed over with the outputs


@pytest.mark.parametrize("n", [1, 5, 16, 64, 200])
def test_dynamic_transformer_measured_peak_is_the_predicted_dynamic_peak(n: int) -> None:
    _, weights = sample("transformer")
    module = compile_text(unbounded_transformer())
    vm = measure(module, weights, {"n": n})
    arena, dynamic, both = report_promise(module, {"n": n})
    assert arena == 0 and dynamic == both > 0
    assert vm.stats.working_peak == dynamic
    assert vm.stats.kind_peak[DYNAMIC] == dynamic
    assert predict_memory(module, "main", {"n": n}).peak == dynamic


@pytest.mark.parametrize("layers, n", [(2, 7), (4, 33)])
def test_dynamic_decoder_measured_peak_is_the_predicted_dynamic_peak(layers: int, n: int) -> None:
    _, weights = sample("transformer")
    module = compile_text(decoder(layers))
    vm = measure(module, weights, {"n": n})
    _, dynamic, both = report_promise(module, {"n": n})
    assert vm.stats.working_peak == dynamic == both


MIXED = """\
fn @main(%x: Tensor[(n, 64), f32], %y: Tensor[(m, 64), f32]) -> Tensor[(m, 64), f32]
    attrs {upper_bounds = {n = 16}} {
  %a = tanh(%x)
  %b = exp(%a)
  %s = sum(%b, axes=0)
  %c = add(%y, %s)
  %d = relu(%c)
  %e = negative(%d)
  %f = concat(%e, %e, axis=0)
  %g = sum(%f, axes=0)
  %h = add(%e, %g)
  return %h
}
"""


@pytest.mark.parametrize("n, m", [(16, 3), (4, 40), (1, 1)])
def test_arena_plus_dynamic(n: int, m: int) -> None:
    """Bounded values in the arena, the m-sized ones dynamic: the measured peak is the peak
    of both together, at most the arena plus the dynamic peak."""
    module = compile_text(MIXED)
    vm = measure(module, {}, {"n": n, "m": m})
    arena, dynamic, both = report_promise(module, {"n": 16, "m": m})
    assert arena > 0 and dynamic > 0
    assert vm.stats.working_peak == both <= arena + dynamic
    assert vm.stats.kind_peak[ARENA] == arena
    assert vm.stats.kind_peak[DYNAMIC] == dynamic
    assert predict_memory(module, "main", {"n": n, "m": m}).peak == both


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(programs())
def test_generated_programs_never_hold_less_than_promised(prog) -> None:
    """Kills come after last uses, so the VM never frees earlier than liveness says; when the
    promise covers the whole function, it holds at least that much (usually exactly)."""
    module = compile_text(prog.text, "vm", "generated.rx")
    fn = module.get("main")
    dims = {**fn.upper_bounds(), **prog.dims}
    vm = measure(module, {}, prog.dims, seed=1)
    pred = predict_memory(module, "main", dims)
    if pred.complete:
        assert vm.stats.working_peak >= pred.peak
    assert vm.stats.current == 0


def test_tuple_holding_a_parameter_keeps_its_other_field_alive() -> None:
    text = """\
fn @main(%x: Tensor[(n, 4), f32], %w: Tensor[(4,), f32]) -> Tensor[(n, 16), f32] {
  %a = relu(%x)
  %t = (%a, %w)
  %b = %t.0
  %c = exp(%b)
  %d = concat(%c, %c, axis=1)
  %e = negative(%d)
  %f = concat(%e, %e, axis=1)
  %g = negative(%f)
  return %g
}
"""
    module = compile_text(text)
    vm = measure(module, {}, {"n": 5})
    assert vm.stats.working_peak == predict_memory(module, "main", {"n": 5}).peak


# ---------------------------------------------------------------------------------------
# When memory is freed


TWO_PHASES = """\
fn @main(%x: Tensor[(n, 64), f32]) -> Tensor[(n, 64), f32] {
  %a = tanh(%x)
  %b = exp(%a)
  %c = concat(%b, %b, axis=1)
  %d = sum(%c, axes=1)
  %e = expand_dims(%d, 1)
  %f = add(%x, %e)
  return %f
}
"""


def test_kills_free_at_the_last_use_and_without_them_at_the_return() -> None:
    with_kills = measure(compile_text(TWO_PHASES, "vm"), {}, {"n": 10})
    without = measure(compile_text(TWO_PHASES, "planned"), {}, {"n": 10})
    # Without kills every dynamic storage lives to the return: the peak is their sum.
    module = compile_text(TWO_PHASES, "planned")
    total = sum(
        D.evaluate(s.value.args[0], {"n": 10})
        for s in module.get("main").body
        if isinstance(s, Bind)
        and isinstance(s.value, Call)
        and s.value.op == "memory.alloc_storage"
        and not dict(s.value.kwargs).get("external")
    )
    assert without.stats.working_peak == total
    assert with_kills.stats.working_peak < total
    for vm in (with_kills, without):
        assert vm.stats.current == 0
        assert vm.stats.frees == vm.stats.allocations - 1  # all but the output's storage
        assert vm.stats.handed_over == 10 * 64 * 4


def test_pool_reuses_blocks_across_runs() -> None:
    source, weights = sample("transformer")
    vm = VirtualMachine(build(compile_text((SAMPLES / "transformer.rx").read_text()), weights))
    args = inputs_for(source, {"n": 32})
    vm.run("main", args)
    first = vm.stats
    assert first.reuses == 0 and first.allocations == 2  # the arena and the output
    vm.run("main", args)
    assert vm.stats.reuses == 1  # the arena came back from the pool; the output went to the caller
    assert vm.stats.working_peak == first.working_peak
    assert vm.pool.pooled_bytes == first.kind_peak[ARENA]
    assert vm.trim() == first.kind_peak[ARENA] and vm.pool.pooled_bytes == 0
    vm.run("main", args)
    assert vm.stats.reuses == 0 and vm.stats.working_peak == first.working_peak


def test_pool_free_lists_are_by_exact_size_and_alignment() -> None:
    pool = PooledAllocator()
    a = pool.alloc(100, 64, DYNAMIC)
    raw = a.raw
    a.rc = 0
    pool.release(a)
    assert pool.alloc(101, 64, DYNAMIC).raw is not raw
    assert pool.alloc(100, 32, DYNAMIC).raw is not raw
    b = pool.alloc(100, 64, ARENA)
    assert b.raw is raw and b.buf.ctypes.data % 64 == 0
    assert pool.stats.reuses == 1 and pool.stats.allocations == 4
    assert pool.stats.current == 100 + 101 + 100 + 100 - 100


def test_poison_fills_freed_memory() -> None:
    for poison in (True, False):
        pool = PooledAllocator(poison=poison)
        blk = pool.alloc(64, 64, DYNAMIC)
        blk.buf[:] = 7
        buf = blk.buf
        blk.rc = 0
        pool.release(blk)
        assert (buf == 0xFF).all() == poison


def test_poisoned_vm_leaves_only_poison_in_the_pool() -> None:
    source, weights = sample("transformer")
    module = compile_text(unbounded_transformer())
    vm = VirtualMachine(build(module, weights), poison=True)
    vm.run("main", inputs_for(source, {"n": 9}), {"n": 9})
    bufs = [buf for lst in vm.pool.free.values() for _, buf in lst]
    assert bufs and all((b == 0xFF).all() for b in bufs)


def test_killing_an_alias_never_frees_memory_another_register_uses() -> None:
    """The TVM lesson: a kill clears one register; the memory stays while another refers to it.

    ``vm.kill_object`` of a tuple, and of a view, are valid while the tensor is still used
    (they end that object, not the buffer); the VM keeps the storage until the tensor's own
    kill and the storage's kill. (A trivial alias ``%b = %a`` is the same object as ``%a``, as
    in TVM's VM, so killing it while ``%a`` is used is refused: see
    tests/regressions/test_edge_case_programs.py.)
    """
    module = compile_text(KILL_ALIASES, "none")
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    vm = VirtualMachine(build(module), poison=True)
    out = vm.run("main", [x])
    np.testing.assert_array_equal(out, np.exp(np.maximum(x, 0)))
    assert vm.stats.kind_peak[DYNAMIC] == 48 and vm.stats.kind_peak[EXTERNAL] == 48
    assert vm.stats.frees == 1 and vm.stats.current == 0


KILL_ALIASES = """\
fn @main(%x: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32] {
  %s = memory.alloc_storage(16 * n, align=64)
  %a = memory.alloc_tensor(%s, 0, (n, 4), f32)
  invoke relu(%x) outs (%a)
  %t = (%a, %x)
  %b = reshape(%a, (n * 4,))
  vm.kill_object(%t)
  vm.kill_object(%b)
  %o_storage = memory.alloc_storage(16 * n, align=64, external=true)
  %o = memory.alloc_tensor(%o_storage, 0, (n, 4), f32)
  invoke exp(%a) outs (%o)
  memory.kill_tensor(%a)
  memory.kill_storage(%s)
  return %o
}
"""


def test_interpreter_agrees_on_killing_an_alias() -> None:
    module = compile_text(KILL_ALIASES, "none")
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    assert_identical(interpret(module, {}, [x]), VirtualMachine(build(module)).run("main", [x]))


def test_kill_object_of_a_tuple_with_a_returned_field() -> None:
    source = parse(KITCHEN_SINK)
    vm = VirtualMachine(build(compile_text(KITCHEN_SINK, "vm"), KITCHEN_WEIGHTS), poison=True)
    args = inputs_for(source, {"n": 4})
    assert_identical(interpret(source, KITCHEN_WEIGHTS, args), vm.run("main", args))
    assert vm.stats.current == 0


def test_an_error_mid_run_frees_what_the_frame_held() -> None:
    text = """\
fn @main(%x: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32] {
  %s = memory.alloc_storage(16 * n, align=64)
  %a = memory.alloc_tensor(%s, 0, (n, 4), f32)
  invoke relu(%x) outs (%a)
  %o = call_packed("no.such.function", %a)
  return %x
}
"""
    vm = VirtualMachine(build(compile_text(text, "none")))
    with pytest.raises(RxError, match="no runtime function named 'no.such.function'"):
        vm.run("main", [np.zeros((2, 4), np.float32)])
    assert vm.stats.current == 0 and vm.stats.frees == 1
    assert vm.pool.pooled_bytes == 32


def test_tensor_that_does_not_fit_its_storage() -> None:
    text = """\
fn @main(%x: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32] {
  %s = memory.alloc_storage(32, align=64)
  %a = memory.alloc_tensor(%s, 0, (n, 4), f32)
  invoke relu(%x) outs (%a)
  %b = exp(%a)
  return %b
}
"""
    # The verifier proves every tensor inside its storage for every allowed dim (issue 14,
    # item 7): with n unbounded, 16 * n bytes may overrun 32, so it is refused before any run.
    with pytest.raises(RxError) as e:
        build(compile_text(text, "none"))
    assert e.value.message == (
        "memory.alloc_tensor: %a ends at byte 16 * n, past the end of storage %s (32 bytes), "
        "for some allowed dim value"
    )
    assert e.value.loc is not None and e.value.loc.line == 3
    # Bounded so that it always fits, it runs.
    ok = build(
        compile_text(
            text.replace(
                "-> Tensor[(n, 4), f32] {",
                "-> Tensor[(n, 4), f32] attrs {upper_bounds = {n = 2}} {",
            ),
            "none",
        )
    )
    VirtualMachine(ok).run("main", [np.zeros((2, 4), np.float32)])


def test_use_after_kill_storage_through_an_alias_is_refused() -> None:
    text = """\
fn @main(%x: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32] {
  %s = memory.alloc_storage(16 * n, align=64)
  %s2 = %s
  %a = memory.alloc_tensor(%s, 0, (n, 4), f32)
  invoke relu(%x) outs (%a)
  memory.kill_storage(%s2)
  %b = exp(%a)
  return %b
}
"""
    with pytest.raises(RxError, match=r"%a is used after its memory was freed by the kill of %s2"):
        build(compile_text(text, "none"))


def test_tuple_holding_a_returned_value_keeps_its_other_field_alive() -> None:
    text = """\
fn @main(%x: Tensor[(n, 4), f32]) -> Tensor[(n, 16), f32] {
  %a = relu(%x)
  %g0 = negative(%x)
  %g = concat(%g0, %g0, %g0, %g0, axis=1)
  %t = (%a, %g)
  %b = %t.0
  %c = exp(%b)
  %d = concat(%c, %c, axis=1)
  %e = negative(%d)
  %f = concat(%e, %e, axis=1)
  %h = add(%f, %g)
  return %g
}
"""
    module = compile_text(text)
    vm = measure(module, {}, {"n": 5})
    assert vm.stats.working_peak == predict_memory(module, "main", {"n": 5}).peak


def test_adopting_memory_already_counted_adds_a_reference() -> None:
    """The defensive path of adopt (a "fresh" result that is not): the new register refers
    to the existing block, so one release must not free it (found by the fuzzer)."""
    pool = PooledAllocator(poison=True)
    x = np.ones(4, np.float32)
    (blk,) = pool.adopt(x)
    assert pool.adopt(x[1:]) == (blk,) and blk.rc == 2
    blk.rc -= 1
    assert pool.blocks_of(x) == (blk,)
