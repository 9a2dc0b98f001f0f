"""The VM: dispatch overhead, end-to-end time against a plain loop, and measured peak memory.

Three tables:

1. **Dispatch overhead.** A chain of ``--chain`` tiny ops (``add`` of two 1-element
   tensors) compiled with the vm pipeline (each op becomes alloc_tensor + invoke + kill):
   VM time per instruction, the same kernels called from a plain Python loop, and the
   difference per instruction (what the VM adds).
2. **End to end.** The CNN and transformer samples (n = 128): the VM running the compiled
   .rxb against a plain Python loop calling the same numpy kernels (``op.kernel(inputs,
   attrs)`` from the op registry, primitive functions inlined, views as reshapes, no
   destination passing, nothing freed early). Best of ``--repeat`` timings of
   ``--number`` runs each, VM and loop taking turns, in CPU time (the machine may be
   busy). Goal: VM / loop <= 1.3.
3. **Peak memory measured by the VM** on the dynamic-shape models (every allocation
   dynamic: the transformer with n unbounded, decoders of 8 and 16 layers), compiled with
   ManifestAlloc alone, + PlanMemory (equal-size dynamic storages reused), and
   + KillAfterLastUse (the vm pipeline), against the peak the plan predicts (alias-aware
   liveness of the compiled program). Working memory: arena and dynamic storages; the
   outputs the caller receives are left out.

    python benchmarks/vm.py [--chain 2000] [--repeat 5] [--number 20] [--n 16,64,256]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import SAMPLES, decoder, unbounded_transformer  # noqa: E402

from relaxc.backend.inputs import random_inputs, resolve_dims  # noqa: E402
from relaxc.backend.vm import VirtualMachine, compile_module, load_bytes, predict_memory  # noqa: E402
from relaxc.frontend.parser import parse_module  # noqa: E402
from relaxc.frontend.weights import load_npz  # noqa: E402
from relaxc.ir import dims as D  # noqa: E402
from relaxc.ir.nodes import Bind, CallFunc, Function, Module, Project, TupleExpr, Var  # noqa: E402
from relaxc.ir.ops import REGISTRY  # noqa: E402
from relaxc.ir.ops.memory import literal_to_array  # noqa: E402
from relaxc.ir.registry import bind_args  # noqa: E402
from relaxc.ir.types import TensorType  # noqa: E402
from relaxc.ir.verifier import verify_module  # noqa: E402
from relaxc.passes.kill_after_last_use import KillAfterLastUse  # noqa: E402
from relaxc.passes.manifest_alloc import ManifestAlloc  # noqa: E402
from relaxc.passes.pipeline import Pipeline  # noqa: E402
from relaxc.passes.plan_memory import PlanMemory  # noqa: E402


# ---------------------------------------------------------------------------------------
# The plain loop: the same kernels, no VM.


def _conc(v: Any, env: dict[str, int]) -> Any:
    if isinstance(v, (D.Sym, D.BinOp, D.DimCall)):
        return D.evaluate(v, env)
    if isinstance(v, tuple):
        return tuple(_conc(x, env) for x in v)
    return v


def _view(xs: list, shape: Any) -> np.ndarray:
    return xs[0].reshape(shape)


def plain_loop(module: Module, weights: dict, env: dict[str, int]) -> Callable[[list], Any]:
    """A function running @main of the *source* module as a flat list of kernel calls."""
    types = verify_module(module)
    slots: dict[str, int] = {}
    consts: dict[int, np.ndarray] = {}
    steps: list[tuple[Callable, tuple[int, ...], Any, int]] = []

    def slot(key: str) -> int:
        slots.setdefault(key, len(slots))
        return slots[key]

    def emit(fn: Function, prefix: str, env: dict[str, int]) -> None:
        ftypes = types[fn.name]
        for st in fn.body:
            assert isinstance(st, Bind)
            e = st.value
            out = slot(prefix + st.name)
            if isinstance(e, CallFunc):
                callee = module.get(e.func)
                sub = f"{prefix}{st.name}/"
                for p, a in zip(callee.params, e.args):
                    slots[sub + p.name] = slots[prefix + a.name]
                emit(callee, sub, env)
                slots[prefix + st.name] = slots[sub + callee.ret.name]
                continue
            if isinstance(e, (Var, TupleExpr, Project)):
                raise NotImplementedError("the plain loop runs the samples' forms only")
            op = REGISTRY.get(e.op)
            b = bind_args(op, e.args, e.kwargs)
            if e.op == "const":
                v = b.attrs["value"]
                t = ftypes[st.name]
                consts[out] = weights[v] if isinstance(v, str) else literal_to_array(v, t.dtype)
                continue
            ins = tuple(slots[prefix + v.name] for v in b.inputs)
            if op.is_view:
                t = ftypes[st.name]
                assert isinstance(t, TensorType)
                steps.append((_view, ins, tuple(_conc(d, env) for d in t.shape), out))
            else:
                steps.append((op.kernel, ins, {k: _conc(v, env) for k, v in b.attrs.items()}, out))

    main = module.get("main")
    for p in main.params:
        slot(p.name)
    emit(main, "", env)
    ret = slots[main.ret.name]
    n = len(slots)
    nparams = len(main.params)

    def run(args: list) -> Any:
        vals: list = [None] * n
        vals[:nparams] = args
        for k, v in consts.items():
            vals[k] = v
        for kernel, ins, attrs, out in steps:
            vals[out] = kernel([vals[i] for i in ins], attrs)
        return vals[ret]

    return run


# ---------------------------------------------------------------------------------------


def vm_pipeline(kills: bool = True) -> Pipeline:
    passes = [ManifestAlloc(), PlanMemory()] + ([KillAfterLastUse()] if kills else [])
    return Pipeline(passes)


def best_times(fns: list[Callable[[], Any]], repeat: int, number: int) -> list[float]:
    """Best mean CPU seconds per call of each function, over ``repeat`` rounds of
    ``number`` calls; the functions take turns within each round, so a busy machine slows
    them alike. CPU time (not wall time) leaves out the time other processes take."""
    for fn in fns:
        fn()  # warm up (specialization, pool)
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.process_time()
            for _ in range(number):
                fn()
            best[i] = min(best[i], (time.process_time() - t0) / number)
    return best


def chain_program(k: int) -> str:
    lines = ["fn @main(%x: Tensor[(1,), f32], %y: Tensor[(1,), f32]) -> Tensor[(1,), f32] {"]
    prev = "x"
    for i in range(k):
        lines.append(f"  %v{i} = add(%{prev}, %y)")
        prev = f"v{i}"
    lines.append(f"  return %{prev}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def dispatch_table(k: int, repeat: int, number: int) -> Table:
    source = parse_module(chain_program(k), "chain.rx")
    exe = load_bytes(compile_module(vm_pipeline().run(source)), "chain.rxb")
    vm = VirtualMachine(exe)
    x = np.ones(1, np.float32)
    loop = plain_loop(source, {}, {})
    n_instr = sum(len(f.instrs) for f in exe.functions)
    t_vm, t_loop = best_times(
        [lambda: vm.run("main", [x, x]), lambda: loop([x, x])], repeat, number
    )
    table = Table(title=f"dispatch: a chain of {k:,} tiny adds ({n_instr:,} VM instructions)")
    for col in ("", "per run", "per source op", "per VM instruction"):
        table.add_column(col, justify="left" if not col else "right")
    table.add_row(
        "VM", f"{t_vm * 1e3:.2f} ms", f"{t_vm / k * 1e6:.2f} us", f"{t_vm / n_instr * 1e6:.2f} us"
    )
    table.add_row(
        "plain loop (kernels only)", f"{t_loop * 1e3:.2f} ms", f"{t_loop / k * 1e6:.2f} us", "-"
    )
    table.add_row(
        "VM overhead",
        f"{(t_vm - t_loop) * 1e3:.2f} ms",
        f"{(t_vm - t_loop) / k * 1e6:.2f} us",
        f"{(t_vm - t_loop) / n_instr * 1e6:.2f} us",
    )
    return table


def end_to_end_table(repeat: int, number: int) -> Table:
    table = Table(title="end to end: VM vs the same kernels in a plain Python loop")
    for col in ("model", "VM", "plain loop", "VM / loop", "goal <= 1.3"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for stem, dims in (("cnn", {}), ("transformer", {"n": 128})):
        source = parse_module((SAMPLES / f"{stem}.rx").read_text(), f"{stem}.rx")
        weights = load_npz(SAMPLES / f"{stem}.npz")
        exe = load_bytes(compile_module(vm_pipeline().run(source), weights), f"{stem}.rxb")
        vm = VirtualMachine(exe)
        fn = source.get("main")
        env = resolve_dims(fn, dims)
        args = random_inputs(fn, env, 0)
        loop = plain_loop(source, weights, env)
        np.testing.assert_array_equal(vm.run("main", args), loop(args))
        t_vm, t_loop = best_times(
            [lambda: vm.run("main", args), lambda: loop(args)], repeat, number
        )
        ratio = t_vm / t_loop
        label = stem + (f" (n={dims['n']})" if dims else "")
        table.add_row(
            label,
            f"{t_vm * 1e3:.3f} ms",
            f"{t_loop * 1e3:.3f} ms",
            f"{ratio:.2f}x",
            "met" if ratio <= 1.3 else "NOT met",
        )
    return table


def memory_table(ns: list[int]) -> Table:
    weights = load_npz(SAMPLES / "transformer.npz")
    table = Table(
        title=(
            "peak bytes of working memory measured by the VM (all allocations "
            "dynamic; outputs apart)"
        )
    )
    for col in (
        "model",
        "n",
        "ManifestAlloc",
        "+ PlanMemory",
        "+ KillAfterLastUse",
        "predicted",
        "saved by kills",
    ):
        table.add_column(col, justify="left" if col == "model" else "right")
    models = [("transformer (n unbounded)", unbounded_transformer())]
    models += [(f"decoder, {k} layers", decoder(k)) for k in (8, 16)]
    pipelines = [Pipeline([ManifestAlloc()]), vm_pipeline(kills=False), vm_pipeline(kills=True)]
    for name, text in models:
        source = parse_module(text, name)
        builds = [p.run(source) for p in pipelines]
        vms = [VirtualMachine(load_bytes(compile_module(m, weights), name)) for m in builds]
        for n in ns:
            x = np.random.default_rng(n).normal(size=(n, 64)).astype(np.float32)
            peaks = []
            for vm in vms:
                vm.run("main", [x])
                peaks.append(vm.stats.working_peak)
            pred = predict_memory(builds[-1], "main", {"n": n}).peak
            table.add_row(
                name,
                str(n),
                *(f"{p:,}" for p in peaks),
                f"{pred:,}",
                f"{1 - peaks[2] / peaks[1]:.0%}" if peaks[1] else "-",
            )
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chain", type=int, default=2000, help="length of the chain of tiny ops")
    ap.add_argument("--repeat", type=int, default=5, help="timing rounds (the best is kept)")
    ap.add_argument("--number", type=int, default=20, help="runs per timing round")
    ap.add_argument("--n", default="16,64,256", help="sequence lengths for the memory table")
    args = ap.parse_args()
    console = Console(width=120)
    console.print(dispatch_table(args.chain, args.repeat, max(1, args.number // 4)))
    console.print(end_to_end_table(args.repeat, args.number))
    console.print(memory_table([int(v) for v in args.n.split(",")]))


if __name__ == "__main__":
    main()
