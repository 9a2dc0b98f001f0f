"""C kernels: one specialised C function per kernel-op instance (op, attributes, types).

Each kernel computes what the op's numpy kernel in :mod:`relaxc.ir.ops` computes: reductions,
pooling and normalizations accumulate in ``double`` (the numpy kernels compute in float64
and cast back); ``f32`` conv2d, dense and matmul sum in ``float``, blocked for speed
(:mod:`.blocked`: within the error of a float sum, not bit-identical; 3x3 stride-1
convolutions through Winograd F(2x2, 3x3) where it pays, :mod:`.winograd`); ``f32`` elementwise
arithmetic is done in ``float`` like numpy; integers wrap (arithmetic is done in unsigned
64 bits, never undefined), and every special case of the reference kernels (integer
division by zero, float-to-int casts, NaN propagation of ``maximum`` and ``max_pool2d``,
``take`` clipping its indices) is mirrored.

One module per family: :mod:`.elementwise`, :mod:`.movement`, :mod:`.reduce`,
:mod:`.linalg` (with :mod:`.blocked` and :mod:`.winograd`, on the micro-tiles of
:mod:`.microtile`), :mod:`.pool`, :mod:`.norm`; :mod:`.base` holds what they share, and
:mod:`.lines` the one builder of C lines they write through. Kernels that may compute their
output over an input (``OpDef.inplace``) read each element (each row, for a normalization)
before writing it; the others declare their pointers ``restrict``.

A kernel's signature is ``static void NAME(const T *x0, ..., T *y0, ..., [unsigned char
*scratch,] int64_t d_a, ...)``: inputs, outputs, the call's scratch when the kernel uses one
(:func:`scratch_bytes`: its working arrays, planned in the arena by PlanKernelScratch), then
the value of each symbolic dim its types use (sorted by name).
Shapes are baked in; symbolic dims are read from those parameters. An op or dtype this file
does not handle is an :class:`RxError` naming it: the C target never emits a guess.

What an op *is* (float-only, elementwise, its scalar formula, in-place safety) is read from its
record in :data:`relaxc.ir.ops.REGISTRY`; what this file adds is :data:`C_KERNELS`, the C
generator of each kernel op (or the reason the C target refuses it), checked against the
registry when the module is imported: the formula of each plain elementwise op
(:data:`.elementwise.C_FORMULAS`, one entry per op) and the generator of every other one.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from relaxc.ir.backends import BackendTable
from relaxc.ir.diagnostics import Loc, RxError
from relaxc.ir.nodes import DType
from relaxc.ir.types import TensorType
from relaxc.ir.ops import REGISTRY
from relaxc.ir.registry import Registry

from .. import dtypes as T
from ..helpers import Helpers
from .base import DimC, Gen, Spec, broadcast_index, horner, same_shape, unsupported
from .elementwise import (
    C_FORMULAS,
    CFormula,
    FormulaKernel,
    formula_problems,
    gen_bit_shift,
    gen_cast,
    gen_celu,
    gen_clip,
    gen_elu,
    gen_isinf,
    gen_hard_sigmoid,
    gen_leaky_relu,
    gen_mod,
    gen_selu,
    gen_shrink,
    gen_thresholded_relu,
    gen_where,
    plain_elementwise,
)
from .attention import gen_attention, gen_rotary_embedding
from .linear_attention import gen_linear_attention
from .conv_transpose import gen_conv2d_transpose
from .cnn import (
    gen_axes_norm,
    gen_conv_nd,
    gen_group_norm,
    gen_max_pool_indices,
    gen_pool_nd,
)
from .gather import (
    gen_gather_elements,
    gen_gather_nd,
    gen_one_hot,
    gen_pad,
    gen_scatter_elements,
    gen_scatter_nd,
    gen_tile,
    gen_trilu,
)
from .linalg import gen_conv2d, gen_dense, gen_matmul
from .movement import gen_concat, gen_fill, gen_split, gen_strided_slice, gen_take, gen_transpose
from .cumulative import gen_cumulative, gen_topk_indices
from .bits import gen_bitcast
from .det import gen_det
from .grid_sample import gen_grid_sample
from .norm import gen_batch_norm, gen_lrn, gen_norm, gen_softmax
from .pool import gen_global_avg_pool2d, gen_pool
from .reduce import gen_reduce
from .resize import gen_resize
from .scan import gen_arange, gen_arg

# ---------------------------------------------------------------------------------------
# The table.

Generator = Callable[[Gen], list[str]]


GENERATORS: dict[str, Generator] = {
    "leaky_relu": gen_leaky_relu,
    "elu": gen_elu,
    "selu": gen_selu,
    "celu": gen_celu,
    "thresholded_relu": gen_thresholded_relu,
    "shrink": gen_shrink,
    "isinf": gen_isinf,
    "mod": gen_mod,
    "bit_shift": gen_bit_shift,
    "hard_sigmoid": gen_hard_sigmoid,
    "clip": gen_clip,
    "cast": gen_cast,
    "where": gen_where,
    "zeros": gen_fill,
    "ones": gen_fill,
    "full": gen_fill,
    "concat": gen_concat,
    "split": gen_split,
    "transpose": gen_transpose,
    "strided_slice": gen_strided_slice,
    "take": gen_take,
    "pad": gen_pad,
    "tile": gen_tile,
    "gather_elements": gen_gather_elements,
    "gather_nd": gen_gather_nd,
    "scatter_nd": gen_scatter_nd,
    "scatter_elements": gen_scatter_elements,
    "one_hot": gen_one_hot,
    "trilu": gen_trilu,
    "sum": gen_reduce,
    "mean": gen_reduce,
    "max": gen_reduce,
    "min": gen_reduce,
    "prod": gen_reduce,
    "sum_square": gen_reduce,
    "l1_norm": gen_reduce,
    "l2_norm": gen_reduce,
    "log_sum": gen_reduce,
    "log_sum_exp": gen_reduce,
    "matmul": gen_matmul,
    "dense": gen_dense,
    "conv2d": gen_conv2d,
    "conv2d_transpose": gen_conv2d_transpose,
    "max_pool2d": gen_pool,
    "avg_pool2d": gen_pool,
    "global_avg_pool2d": gen_global_avg_pool2d,
    "batch_norm": gen_batch_norm,
    "layer_norm": gen_norm,
    "rms_norm": gen_norm,
    "softmax": gen_softmax,
    "log_softmax": gen_softmax,
    "cumsum": gen_cumulative,
    "cumprod": gen_cumulative,
    "topk_indices": gen_topk_indices,
    "lrn": gen_lrn,
    "arange": gen_arange,
    "attention": gen_attention,
    "linear_attention": gen_linear_attention,
    "rotary_embedding": gen_rotary_embedding,
    "resize": gen_resize,
    "grid_sample": gen_grid_sample,
    "conv_nd": gen_conv_nd,
    "max_pool_nd": gen_pool_nd,
    "max_pool_indices": gen_max_pool_indices,
    "avg_pool_nd": gen_pool_nd,
    "lp_pool_nd": gen_pool_nd,
    "group_norm": gen_group_norm,
    "mean_variance_norm": gen_axes_norm,
    "inv_std_dev": gen_axes_norm,
    "argmax": gen_arg,
    "argmin": gen_arg,
    "bitcast": gen_bitcast,
    "det": gen_det,
}
"""The generators of the kernel ops that are not plain elementwise ones (those have a formula
each in :data:`.elementwise.C_FORMULAS`)."""

REFUSED: dict[str, str] = {}
"""Kernel ops the C target does not compute, and why: ``{"fft": "not on the C target, because
it has no complex dtype"}``. The sentence reaches the user's error. (Every op is computed today.)"""


def c_kernels(
    registry: Registry, formulas: Mapping[str, CFormula] = C_FORMULAS
) -> BackendTable[Generator]:
    """The C target's table of kernel generators for ``registry`` (each plain elementwise op's
    from its entry in ``formulas``), checked to cover it: a RuntimeError names a kernel op
    that has neither a generator nor a refusal, or a formula out of step with the records
    (:func:`.elementwise.formula_problems`)."""
    problems = formula_problems(registry, formulas)
    if problems:
        raise RuntimeError("C backend out of step with the op registry: " + "; ".join(problems))
    table: BackendTable[Generator] = BackendTable("C")
    for op in plain_elementwise(registry):  # one without a formula: check_covers names it
        if op in formulas:
            table.implement(op, FormulaKernel(formulas[op]))
    for op, gen in GENERATORS.items():
        table.implement(op, gen)
    for op, why in REFUSED.items():
        table.refuse(op, why)
    table.check_covers(registry)
    return table


MOVES_BITS = frozenset(
    {
        "concat",
        "split",
        "transpose",
        "strided_slice",
        "take",
        "tile",
        "gather_elements",
        "gather_nd",
    }
)
"""Kernels that only move elements (copies through the element's C storage type): they run
on bf16 and the low-precision types, which C stores as their bits, as on any other dtype."""

C_KERNELS: BackendTable[Generator] = c_kernels(REGISTRY)
"""The C generator of every kernel op of the registry, or why the C target refuses it."""


def _generator(spec: Spec, fname: str, helpers: Helpers, loc: Loc | None) -> tuple[Gen, list[str]]:
    """The builder of kernel ``fname`` for ``spec`` with its body generated, and the
    declarations to render it with; RxError if the C target lacks the kernel."""
    gen = C_KERNELS.get(spec.op)
    if gen is None:
        refusal = C_KERNELS.refusal(spec.op)
        why = f": {refusal.why}" if refusal is not None else ""
        raise RxError(f"the C target has no kernel for op {spec.op}{why}", loc)
    moves = spec.op == "cast" or spec.op in MOVES_BITS
    for t in spec.ins + spec.outs:
        if t.dtype not in T.SUPPORTED and not (moves and t.dtype in T.C_TYPE):
            raise unsupported(spec, f"dtype {t.dtype} has no C representation", loc)
    op = REGISTRY.get(spec.op)
    if op is not None and op.float_only and any(T.kind(t.dtype) != "float" for t in spec.ins[:1]):
        raise unsupported(spec, loc=loc)
    g = Gen(spec, fname, helpers, loc)
    return g, gen(g)


def generate(spec: Spec, fname: str, helpers: Helpers, loc: Loc | None = None) -> tuple[str, int]:
    """The C definition of kernel ``fname`` for ``spec`` and the bytes of scratch it takes
    (0: no scratch parameter); RxError if the C target lacks it."""
    g, decls = _generator(spec, fname, helpers, loc)
    return g.render(decls), g.scratch_bytes


def make_spec(
    op: str, attrs: Mapping[str, Any], ins: Sequence[TensorType], outs: Sequence[TensorType]
) -> Spec:
    """The kernel instance of ``op`` with its bound attributes (:func:`relaxc.ir.registry.
    bind_args`) on these tensor types, in the hashable form the emitter keys kernels by."""
    return Spec(
        op, tuple(sorted((k, _hashable(v)) for k, v in attrs.items())), tuple(ins), tuple(outs)
    )


def scratch_bytes(
    op: str, attrs: Mapping[str, Any], ins: Sequence[TensorType], outs: Sequence[TensorType]
) -> int:
    """The C target's fact for PlanKernelScratch: how many bytes of scratch the C kernel of
    ``op`` on these types uses (0 for most kernels). It is the kernel's own generator that
    answers (its :meth:`Gen.scratch_array` calls), so the plan and the code cannot disagree;
    RxError if the C target lacks the kernel."""
    g, _ = _generator(make_spec(op, attrs, ins, outs), "k", Helpers("relaxc"), None)
    return g.scratch_bytes


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, DType):
        return v.name
    return v


__all__ = [
    "C_KERNELS",
    "DimC",
    "Gen",
    "Generator",
    "Spec",
    "broadcast_index",
    "c_kernels",
    "generate",
    "horner",
    "make_spec",
    "same_shape",
    "scratch_bytes",
    "unsupported",
]
