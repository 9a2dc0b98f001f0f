"""How many bytes Apache TVM's own Relax memory planner plans for an ONNX model.

A reference column for relaxc's benchmarks: the same ONNX model is imported with
``tvm.relax.frontend.onnx.from_onnx`` (initializers as constants), lowered with the
passes of TVM's default pipelines up to and including ``StaticPlanBlockMemory``, and
the memory operations of ``main`` are summed:

* ``storage_bytes``  the ``R.memory.alloc_storage`` calls after StaticPlanBlockMemory
  (the planned storages, each a separate buffer reused by one tensor at a time; TVM
  never plans the function's outputs into them);
* ``unplanned_bytes`` the static-size ``R.builtin.alloc_tensor`` calls left after planning
  (the outputs, and anything else the planner declined);
* ``naive_bytes``    every tensor allocation (``R.builtin.alloc_tensor`` before planning,
  the same set as ``R.builtin.alloc_tensor`` + ``R.memory.alloc_tensor`` after it), i.e.
  one buffer per computed tensor; this is what ``relax.analysis.estimate_memory_usage``
  calls "without memory planning".

``storage_bytes + unplanned_bytes`` is what ``estimate_memory_usage`` calls "with memory
planning".  See docs/benchmarks-tvm.md for the pass list and caveats.

tvm is imported lazily: importing this module never imports tvm, and ``available()``
says whether it can be.  Usage::

    /work/tvmvenv/bin/python benchmarks/tvm_plan.py model.onnx [more.onnx ...]
        [--fuse yes|no|both] [--shape NAME=1,3,224,224] [--bound n=128] [--prefold]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field

__all__ = ["TvmPlan", "available", "tvm_version", "tvm_planned_bytes", "main"]

_AVAILABLE: bool | None = None


def available() -> bool:
    """True when tvm (with its Relax ONNX frontend) and onnx import; never raises."""
    global _AVAILABLE
    if _AVAILABLE is None:
        try:
            import onnx  # noqa: F401
            import tvm  # noqa: F401
            from tvm import relax  # noqa: F401
            from tvm.relax.frontend.onnx import from_onnx  # noqa: F401
        except Exception:  # noqa: BLE001 - ImportError, or a broken native library (OSError, ...)
            _AVAILABLE = False
        else:
            _AVAILABLE = True
    return _AVAILABLE


def tvm_version() -> str | None:
    if not available():
        return None
    import tvm

    return str(tvm.__version__)


@dataclass
class TvmPlan:
    """What TVM's StaticPlanBlockMemory planned for the ``main`` function of one model.

    Byte counts only include allocations whose size is a compile-time constant; the
    dynamic ones are counted in ``n_dynamic`` and listed in ``dynamic``.
    """

    storage_bytes: int  # sum of R.memory.alloc_storage sizes after StaticPlanBlockMemory
    n_storages: int  # number of those alloc_storage calls
    unplanned_bytes: int  # static R.builtin.alloc_tensor left after planning (outputs, ...)
    naive_bytes: int  # every tensor allocation, one buffer each (no reuse)
    seconds: float  # wall time: onnx load + import + passes + walk
    tvm_version: str
    model: str = ""
    fuse: bool = True
    n_unplanned: int = 0  # number of R.builtin.alloc_tensor left after planning
    n_naive: int = 0  # number of tensor allocations counted in naive_bytes
    output_bytes: int = 0  # static size of main's return value (all tensor leaves)
    tir_scratch_bytes: int = 0  # largest T.alloc_buffer total inside one called PrimFunc
    n_dynamic: int = 0  # allocations (storage or tensor) whose size is symbolic
    dynamic: list[str] = field(default_factory=list)  # their sizes / shapes, as text
    storage_expr: str = ""  # when a storage size is symbolic: the simplified sum of all
    n_unfolded: int = 0  # call_tir in main whose tensor args are all constants (should be 0)
    upper_bounds: dict[str, int] = field(default_factory=dict)  # symbolic sizes taken at these
    import_seconds: float = 0.0  # onnx.load + from_onnx
    lower_seconds: float = 0.0  # passes before StaticPlanBlockMemory (FoldConstant dominates)
    plan_seconds: float = 0.0  # StaticPlanBlockMemory alone
    passes: list[str] = field(default_factory=list)

    @property
    def planned_total_bytes(self) -> int:
        """storage + unplanned: estimate_memory_usage's 'with memory planning' figure."""
        return self.storage_bytes + self.unplanned_bytes


def _pass_list(fuse: bool):
    """The passes, in TVM's order, up to and including StaticPlanBlockMemory.

    Fused: ``relax.get_pipeline("zero")`` (LegalizeOps, AnnotateTIROpPattern,
    FoldConstant, FuseOps, FuseTIR), which TVM's tutorials run before ``tvm.compile``
    and which is also the legalize stage of ``relax.get_default_pipeline(llvm)``; then
    ``relax.get_pipeline("default_build")`` (what ``tvm.compile`` runs) cut after
    StaticPlanBlockMemory.  Unfused: the same without FuseOps/FuseTIR.
    """
    from tvm import relax
    from tvm.relax import transform as T

    legalize = [T.LegalizeOps(), T.AnnotateTIROpPattern(), T.FoldConstant()]
    if fuse:
        legalize += [T.FuseOps(), T.FuseTIR()]
    build = [
        relax.backend.DispatchSampling(),
        relax.backend.DispatchSortScan(),
        T.LegalizeOps(),  # a no-op here: everything is legalized already
        T.RewriteDataflowReshape(),
        T.ToNonDataflow(),
        T.RemovePurityChecking(),
        T.CallTIRRewrite(),
    ]
    return legalize + build, T.StaticPlanBlockMemory()


def _pass_name(p) -> str:
    try:
        return str(p.info.name)
    except Exception:  # noqa: BLE001 - a pass without a readable name is shown by its type
        return type(p).__name__


def _dtype_bytes(dtype) -> int:
    import tvm

    dt = tvm.DataType(str(dtype))
    return ((dt.bits + 7) // 8) * dt.lanes


class _Sizer:
    """Evaluates symbolic sizes: constants as they are, symbolic vars at their upper
    bound when one is given (else the size is unknown: None)."""

    def __init__(self, bounds: dict[str, int] | None):
        self.bounds = dict(bounds or {})
        self._analyzer = None

    def int(self, e) -> int | None:
        import tvm

        if isinstance(e, tvm.tirx.IntImm):
            return int(e.value)
        if not self.bounds:
            return None
        import tvm_ffi
        from tvm.sym import Analyzer

        if self._analyzer is None:
            self._analyzer = Analyzer()
        found = []
        tvm_ffi.structural_walk(e, [(tvm.tirx.Var, found.append)], order="pre")
        for v in found:
            if v.name in self.bounds:
                dtype = str(getattr(v.ty, "dtype", "int64"))
                self._analyzer.bind(
                    v, tvm.tirx.IntImm(dtype, self.bounds[v.name]), allow_override=True
                )
        r = self._analyzer.simplify(e)
        return int(r.value) if isinstance(r, tvm.tirx.IntImm) else None

    def shape_bytes(self, shape, dtype) -> int | None:
        """Bytes of a ShapeExpr of a given dtype, or None when a dim is unknown."""
        n = 1
        for d in shape.values:
            v = self.int(d)
            if v is None:
                return None
            n *= v
        return n * _dtype_bytes(dtype)


def _is_static(e) -> bool:
    import tvm

    return isinstance(e, tvm.tirx.IntImm)


def _walk_calls(expr):
    """Every relax Call reachable from expr (post order)."""
    from tvm import relax

    calls = []

    def visit(e):
        if isinstance(e, relax.Call):
            calls.append(e)

    relax.analysis.post_order_visit(expr, visit)
    return calls


@dataclass
class _Count:
    storage_bytes: int = 0
    n_storages: int = 0
    builtin_bytes: int = 0
    n_builtin: int = 0
    memory_tensor_bytes: int = 0
    n_memory_tensor: int = 0
    dynamic: list[str] = field(default_factory=list)
    n_unfolded: int = 0
    callees: set = field(default_factory=set)
    storage_sizes: list = field(default_factory=list)  # every alloc_storage size (PrimExpr)


def _count(func, sizer: _Sizer) -> _Count:
    import tvm
    from tvm import relax

    op_storage = tvm.ir.Op.get("relax.memory.alloc_storage")
    op_mem_tensor = tvm.ir.Op.get("relax.memory.alloc_tensor")
    op_builtin = tvm.ir.Op.get("relax.builtin.alloc_tensor")
    op_call_tir = tvm.ir.Op.get("relax.call_tir")
    c = _Count()
    for call in _walk_calls(func.body):
        op = call.op
        if op == op_storage:
            # alloc_storage(ShapeExpr([size_in_bytes]), device_index, scope, dtype)
            size = call.args[0].values[0]
            c.storage_sizes.append(size)
            if not _is_static(size):
                c.dynamic.append(f"alloc_storage({size})")
            v = sizer.int(size)
            if v is not None:
                c.storage_bytes += v
                c.n_storages += 1
        elif op == op_builtin:
            # builtin.alloc_tensor(ShapeExpr(shape), dtype, device_index, scope)
            shape = call.args[0]
            if not all(_is_static(d) for d in shape.values):
                c.dynamic.append(f"alloc_tensor({shape}, {call.args[1].value})")
            b = sizer.shape_bytes(shape, call.args[1].value)
            if b is not None:
                c.builtin_bytes += b
                c.n_builtin += 1
        elif op == op_mem_tensor:
            # memory.alloc_tensor(storage, offset, ShapeExpr(shape), dtype, ...)
            b = sizer.shape_bytes(call.args[2], call.args[3].value)
            if b is not None:
                c.memory_tensor_bytes += b
                c.n_memory_tensor += 1
        elif isinstance(op, relax.GlobalVar):
            c.callees.add(op)
            # after CallTIRRewrite a TIR call is Call(gvar, [inputs..., outputs...]):
            # the (non-output) inputs all constant means a constant subgraph not folded
            ins = list(call.args)[:-1]
            if ins and all(isinstance(a, tvm.ir.expr.Constant) for a in ins):
                c.n_unfolded += 1
        elif op == op_call_tir:
            c.callees.add(call.args[0])
            ins = call.args[1]
            fields = ins.fields if isinstance(ins, relax.Tuple) else [ins]
            if fields and all(isinstance(a, tvm.ir.expr.Constant) for a in fields):
                c.n_unfolded += 1
    return c


def _leaf_bytes(ty, sizer: _Sizer) -> int:
    """Bytes of every tensor leaf of a relax type (0 for unknown symbolic ones)."""
    from tvm import relax

    if isinstance(ty, relax.TupleType):
        return sum(_leaf_bytes(f, sizer) for f in ty.fields)
    if isinstance(ty, relax.TensorType):
        shape = getattr(ty, "shape", None)
        if isinstance(shape, relax.ShapeExpr):
            b = sizer.shape_bytes(shape, ty.dtype)
            return b or 0
    return 0


def _tir_scratch_bytes(mod, callees, sizer: _Sizer) -> int:
    """Largest sum of T.alloc_buffer sizes inside one PrimFunc called from main.

    These are the intermediates that live inside a kernel (e.g. conv2d's padded input,
    or the buffers FuseTIR keeps between fused ops); TVM's Relax planner does not see
    them: the TIR lowering allocates them per call as workspace.  Buffers of unknown
    symbolic size are skipped.
    """
    import tvm
    import tvm_ffi
    from tvm.s_tir.stmt import SBlock

    best = 0
    for gv in callees:
        try:
            f = mod[gv]
        except Exception:  # noqa: BLE001 - a callee tvm cannot look up is skipped
            continue
        if not isinstance(f, tvm.tirx.PrimFunc):
            continue
        total = 0

        def visit(block):
            nonlocal total
            for buf in block.alloc_buffers:
                n = 1
                for d in buf.shape:
                    v = sizer.int(d)
                    if v is None:
                        break
                    n *= v
                else:
                    total += n * _dtype_bytes(buf.dtype)

        tvm_ffi.structural_walk(f.body, [(SBlock, visit)], order="pre")
        best = max(best, total)
    return best


def prefold_constant_of_shape(model):
    """Replace every ConstantOfShape whose shape is an initializer by an initializer.

    Only a speed-up: TVM's FoldConstant computes the same tensors, but compiles a kernel
    per weight shape with LLVM to do it (most of the wall time on the onnx
    light_*.onnx models).  Returns the number of nodes replaced; edits model in place.
    """
    import numpy as np
    from onnx import helper, numpy_helper

    inits = {t.name: t for t in model.graph.initializer}
    keep, n = [], 0
    for node in model.graph.node:
        if node.op_type == "ConstantOfShape" and node.input and node.input[0] in inits:
            shape = numpy_helper.to_array(inits[node.input[0]]).astype(np.int64).tolist()
            value = np.zeros(1, np.float32)
            for attr in node.attribute:
                if attr.name == "value":
                    value = numpy_helper.to_array(helper.get_attribute_value(attr))
            arr = np.full(shape, value.reshape(-1)[0], dtype=value.dtype)
            model.graph.initializer.append(numpy_helper.from_array(arr, node.output[0]))
            if model.ir_version < 4:  # initializers must be graph inputs there too
                model.graph.input.append(
                    helper.make_tensor_value_info(
                        node.output[0], helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape
                    )
                )
            n += 1
        else:
            keep.append(node)
    if n:
        del model.graph.node[:]
        model.graph.node.extend(keep)
    return n


def _set_input_shapes(model, input_shapes: dict[str, tuple]) -> None:
    """Rewrite the declared shapes of graph inputs: int dims fixed, str dims symbolic.

    (Done on the ONNX graph rather than through from_onnx's shape_dict, which only
    takes integers.)"""
    inputs = {i.name: i for i in model.graph.input}
    for name, shape in input_shapes.items():
        if name not in inputs:
            raise KeyError(f"no graph input {name!r}; inputs: {sorted(inputs)}")
        tshape = inputs[name].type.tensor_type.shape
        del tshape.dim[:]
        for d in shape:
            dim = tshape.dim.add()
            if isinstance(d, str):
                dim.dim_param = d
            else:
                dim.dim_value = int(d)


def tvm_planned_bytes(
    onnx_path: str,
    input_shapes: dict[str, tuple] | None = None,
    fuse: bool = True,
    upper_bounds: dict[str, int] | None = None,
    prefold: bool = False,
    target: str = "llvm",
) -> TvmPlan:
    """Import an ONNX model into TVM Relax, plan its memory, and count the bytes.

    input_shapes: ONNX input name -> shape (a dim may be a str: a symbolic one); the
        model's own shapes when None.
    fuse: run FuseOps + FuseTIR (relax.get_pipeline("zero")) before planning.
    upper_bounds: symbolic var name -> upper bound.  Set as main's
        "tir_var_upper_bound", which StaticPlanBlockMemory uses to plan symbolic sizes
        statically; symbolic sizes left in the IR (outputs, naive count) are evaluated
        at the bounds too.  Without bounds TVM plans symbolic storage (sizes such as
        1024 * N) and those are not in the byte counts, only in ``dynamic``.
    prefold: fold ConstantOfShape-on-initializer nodes in the ONNX graph before the
        import (same numbers, much faster; see prefold_constant_of_shape).
    """
    if not available():
        raise RuntimeError("tvm is not importable (see docs/benchmarks-tvm.md)")
    import onnx
    import tvm
    from tvm.relax.frontend.onnx import from_onnx

    sizer = _Sizer(upper_bounds)
    t0 = time.perf_counter()
    model = onnx.load(onnx_path)
    if prefold:
        prefold_constant_of_shape(model)
    if input_shapes:
        _set_input_shapes(model, input_shapes)
    mod = from_onnx(model, keep_params_in_input=False)
    if upper_bounds:
        mod["main"] = mod["main"].with_attr(
            "tir_var_upper_bound", {k: int(v) for k, v in upper_bounds.items()}
        )
    t1 = time.perf_counter()
    lower, plan = _pass_list(fuse)
    with tvm.target.Target(target):
        mod = tvm.transform.Sequential(lower)(mod)
        t2 = time.perf_counter()
        before = _count(mod["main"], sizer)
        mod = plan(mod)
    t3 = time.perf_counter()
    after = _count(mod["main"], sizer)
    scratch = _tir_scratch_bytes(mod, after.callees, sizer)
    ret = getattr(mod["main"], "ret_ty", None)
    storage_expr = ""
    if any(not _is_static(e) for e in after.storage_sizes):
        from tvm.sym import Analyzer

        total = after.storage_sizes[0]
        for e in after.storage_sizes[1:]:
            total = total + e
        storage_expr = str(Analyzer().simplify(total))
    t4 = time.perf_counter()
    return TvmPlan(
        storage_bytes=after.storage_bytes,
        n_storages=after.n_storages,
        unplanned_bytes=after.builtin_bytes,
        # one buffer per tensor: every R.builtin.alloc_tensor before planning (the
        # same sum as alloc_tensor of both kinds after it, when sizes are known)
        naive_bytes=before.builtin_bytes,
        seconds=t4 - t0,
        tvm_version=str(tvm.__version__),
        model=os.path.basename(onnx_path),
        fuse=fuse,
        n_unplanned=after.n_builtin,
        n_naive=before.n_builtin,
        output_bytes=_leaf_bytes(ret, sizer) if ret is not None else 0,
        tir_scratch_bytes=scratch,
        n_dynamic=len(after.dynamic),
        dynamic=after.dynamic,
        storage_expr=storage_expr,
        n_unfolded=after.n_unfolded,
        upper_bounds=dict(upper_bounds or {}),
        import_seconds=t1 - t0,
        lower_seconds=t2 - t1,
        plan_seconds=t3 - t2,
        passes=[_pass_name(p) for p in lower] + [_pass_name(plan)],
    )


def _parse_kv(items, conv):
    out = {}
    for item in items or []:
        name, _, value = item.rpartition("=")
        if not name:
            raise SystemExit(f"expected NAME=VALUE, got {item!r}")
        out[name] = conv(value)
    return out


def _shape(text: str) -> tuple:
    return tuple(int(d) if d.lstrip("-").isdigit() else d for d in text.split(","))


def _mib(n: int) -> str:
    return f"{n / 2**20:10.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", help="ONNX model files")
    ap.add_argument("--fuse", choices=["yes", "no", "both"], default="both")
    ap.add_argument(
        "--shape",
        action="append",
        metavar="NAME=D0,D1,...",
        help="static input shape (a non-integer dim stays symbolic)",
    )
    ap.add_argument(
        "--bound",
        "--upper-bound",
        dest="upper_bound",
        action="append",
        metavar="VAR=N",
        help="upper bound of a symbolic dim, for StaticPlanBlockMemory",
    )
    ap.add_argument(
        "--prefold",
        action="store_true",
        help="fold ConstantOfShape weights in the ONNX graph first (faster)",
    )
    ap.add_argument("--bytes", action="store_true", help="print bytes, not MiB")
    ap.add_argument(
        "--max-dynamic",
        type=int,
        default=4,
        metavar="N",
        help="list at most N symbolic allocations per row",
    )
    args = ap.parse_args(argv)
    if not available():
        print("tvm is not importable; see docs/benchmarks-tvm.md", file=sys.stderr)
        return 2
    shapes = _parse_kv(args.shape, _shape) or None
    bounds = _parse_kv(args.upper_bound, int) or None
    fuses = {"yes": [True], "no": [False], "both": [True, False]}[args.fuse]
    unit = "B" if args.bytes else "MiB"
    fmt = (lambda n: f"{n:12d}") if args.bytes else _mib
    w = 12 if args.bytes else 10
    print(f"TVM {tvm_version()} StaticPlanBlockMemory (main function; sizes in {unit})")
    head = (
        f"{'model':28s} {'fused':5s} {'storage':>{w}s} {'#st':>4s} {'unplanned':>{w}s} "
        f"{'naive':>{w}s} {'tir-scratch':>{w}s} {'dyn':>3s} {'plan s':>7s} {'total s':>8s}"
    )
    print(head)
    print("-" * len(head))
    status = 0
    for path in args.models:
        for fuse in fuses:
            name = os.path.basename(path).removesuffix(".onnx")
            try:
                p = tvm_planned_bytes(
                    path, shapes, fuse=fuse, upper_bounds=bounds, prefold=args.prefold
                )
            except Exception as e:  # noqa: BLE001 - report and go on with the next model
                msg = str(e).strip().splitlines()
                print(
                    f"{name:28s} {'yes' if fuse else 'no':5s} FAILED: "
                    f"{type(e).__name__}: {msg[0] if msg else ''}"[:200]
                )
                status = 1
                continue
            print(
                f"{name:28s} {'yes' if fuse else 'no':5s} {fmt(p.storage_bytes)} "
                f"{p.n_storages:4d} {fmt(p.unplanned_bytes)} {fmt(p.naive_bytes)} "
                f"{fmt(p.tir_scratch_bytes)} {p.n_dynamic:3d} {p.plan_seconds:7.3f} "
                f"{p.seconds:8.2f}"
            )
            if p.storage_expr:
                print(f"{'':34s} storage (symbolic): {p.storage_expr}")
            for d in p.dynamic[: args.max_dynamic]:
                print(f"{'':34s} dynamic: {d}")
            if len(p.dynamic) > args.max_dynamic:
                print(f"{'':34s} ... {len(p.dynamic) - args.max_dynamic} more dynamic")
            if p.n_unfolded:
                print(f"{'':34s} warning: {p.n_unfolded} call(s) on constants left unfolded")
    return status


if __name__ == "__main__":
    sys.exit(main())
