"""Elementwise ops: numpy-broadcasting binary arithmetic and unary math."""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from relaxc.ir.registry import AttrSpec, InferFn, KernelFn, OpDef, OpError, Registry
from relaxc.ir.types import DTYPES, TensorType, Type

from .checks import as_contiguous, require_numeric
from .common import broadcast_shapes, require_computable, require_float, same_dtype, tensors


# On bool, numpy's kernels of these ops do not give bool (subtract and negative raise, divide
# gives float64, power int8): they need a numeric tensor. The others are logic on bool.
NOT_ON_BOOL = frozenset({"subtract", "divide", "power", "negative", "sign", "prelu"})


def _binary_infer(name: str, float_only: bool = False) -> InferFn:
    def infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
        a, b = tensors(inputs, name)
        dtype = same_dtype([a, b], name)
        require_computable(dtype, name)
        if name in NOT_ON_BOOL:
            require_numeric(dtype, name)
        if float_only:
            require_float(dtype, name)
        return TensorType(broadcast_shapes([a.shape, b.shape], name), dtype)

    return infer


def _unary_infer(name: str, float_only: bool) -> InferFn:
    def infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
        (a,) = tensors(inputs, name)
        require_computable(a.dtype, name)
        if name in NOT_ON_BOOL:
            require_numeric(a.dtype, name)
        if float_only:
            require_float(a.dtype, name)
        return a

    return infer


def float_to_int(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """float64 values as integers of ``dtype`` the way C converts on x86 (the C target's
    f2i32/f2i64): truncated, through int32 for 8- and 16-bit types and i32 or through int64
    for u32, i64 and u64, a value out of that range (or nan) giving its minimum, then wrapped.
    numpy's astype leaves out-of-range values undefined: its result even depends on the
    array's length (a SIMD loop gives 0 where the scalar loop wraps)."""
    dt = np.dtype(dtype)
    wide = np.int32 if dt.itemsize <= 2 or dt == np.int32 else np.int64
    with np.errstate(invalid="ignore"):
        if wide is np.int32:
            ok = (v > -2147483649.0) & (v < 2147483648.0)
        else:
            ok = (v >= -9223372036854775808.0) & (v < 9223372036854775808.0)
        w = np.where(ok, np.trunc(v), 0).astype(wide)
    w[~ok] = np.iinfo(wide).min
    return w.astype(dt)


def _divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype == np.uint64:  # exact: a quotient of 64 bits does not fit a double
        return np.where(y == 0, x.dtype.type(0), x // np.where(y == 0, x.dtype.type(1), y))
    if x.dtype.kind in "iu":
        # Integer division truncates toward zero (C semantics); division by zero gives 0.
        with np.errstate(divide="ignore", invalid="ignore"):
            safe = np.where(y == 0, 1, y)
            q = np.trunc(x.astype(np.float64) / safe.astype(np.float64))
            return float_to_int(np.where(y == 0, 0, q), x.dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(x, y)


def _power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        if x.dtype.kind in "iu":
            return float_to_int(np.power(x.astype(np.float64), y.astype(np.float64)), x.dtype)
        return np.power(x, y)


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))


def _erf_kernel(x: np.ndarray) -> np.ndarray:
    """erf in float64 (math.erf, the C library's erf), rounded once to x's dtype."""
    return _erf(x).astype(x.dtype)


def _gelu(x: np.ndarray) -> np.ndarray:
    y = 0.5 * x.astype(np.float64) * (1.0 + _erf(x / math.sqrt(2.0)))
    return y.astype(x.dtype)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(x.dtype)


def _silu(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # -inf * 0 is nan, quietly
        return (x.astype(np.float64) * _sigmoid(x.astype(np.float64))).astype(x.dtype)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return (1.0 / np.sqrt(x)).astype(x.dtype)


def _leaky_relu(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """ONNX LeakyRelu: x where x >= 0, else alpha * x (NaN stays NaN).

    The product is computed in x's dtype with alpha rounded to it, except that f16 computes
    in f32 (alpha as f32) and rounds the result once to f16, as the C backend does.
    """
    x = xs[0]
    ct = np.dtype(np.float32) if x.dtype == np.float16 else x.dtype
    with np.errstate(all="ignore"):
        xc = x.astype(ct, copy=False)
        y = np.where(xc >= 0, xc, xc * ct.type(attrs["alpha"]))
        return as_contiguous(y, x.dtype)


def _safe(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    def run(x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return fn(x).astype(x.dtype, copy=False)

    return run


# name -> (summary, kernel, scalar formula or None)
BINARY: dict[str, tuple[str, Callable[[np.ndarray, np.ndarray], np.ndarray], str | None]] = {
    "add": ("a + b", np.add, "x0 + x1"),
    "subtract": ("a - b", np.subtract, "x0 - x1"),
    "multiply": ("a * b", np.multiply, "x0 * x1"),
    "divide": ("a / b (integers truncate toward zero; x / 0 is 0)", _divide, None),
    "maximum": ("elementwise larger of a and b", np.maximum, None),  # NaN propagates
    "minimum": ("elementwise smaller of a and b", np.minimum, None),
    "power": ("a ** b", _power, None),  # ** in Python, pow() in C
}

# name -> (summary, kernel, float_only); negative's scalar formula is set below.
UNARY: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray], bool]] = {
    "negative": ("-x", np.negative, False),
    "abs": ("|x|", np.abs, False),
    "exp": ("e ** x", _safe(np.exp), True),
    "log": ("natural logarithm", _safe(np.log), True),
    "sqrt": ("square root", _safe(np.sqrt), True),
    "rsqrt": ("1 / sqrt(x)", _rsqrt, True),
    "tanh": ("hyperbolic tangent", np.tanh, True),
    "sigmoid": ("1 / (1 + e ** -x)", _sigmoid, True),
    "relu": ("max(x, 0)", lambda x: np.maximum(x, np.zeros((), x.dtype)), False),
    "gelu": ("x * Phi(x) (exact, with erf)", _gelu, True),
    "silu": ("x * sigmoid(x)", _silu, True),
    "erf": ("Gauss error function", _erf_kernel, True),
}


def in_double(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """``fn`` computed in float64 and rounded once to x's dtype (f16 and f32 included): what
    the C kernels compute, in double."""

    def run(x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.asarray(fn(x.astype(np.float64))).astype(x.dtype)

    return run


def softplus(d: np.ndarray) -> np.ndarray:
    """log(1 + e ** d) without overflow: d + log1p(e ** -d) for d > 0."""
    return np.where(d > 0, d + np.log1p(np.exp(-np.abs(d))), np.log1p(np.exp(np.minimum(d, 0))))


GELU_TANH_SCALE = math.sqrt(2.0 / math.pi)
"""sqrt(2 / pi), the tanh form of gelu's scale (0.7978845608028654)."""


# Unary float math, each computed in float64 and rounded once (name -> summary, kernel).
FLOAT_MATH: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray]]] = {
    "reciprocal": ("1 / x", lambda d: 1.0 / d),
    "floor": ("largest integer <= x", np.floor),
    "ceil": ("smallest integer >= x", np.ceil),
    "round": ("nearest integer, halves to even", np.rint),
    "sin": ("sine", np.sin),
    "cos": ("cosine", np.cos),
    "tan": ("tangent", np.tan),
    "asin": ("arcsine", np.arcsin),
    "acos": ("arccosine", np.arccos),
    "atan": ("arctangent", np.arctan),
    "sinh": ("hyperbolic sine", np.sinh),
    "cosh": ("hyperbolic cosine", np.cosh),
    "asinh": ("inverse hyperbolic sine", np.arcsinh),
    "acosh": ("inverse hyperbolic cosine", np.arccosh),
    "atanh": ("inverse hyperbolic tangent", np.arctanh),
    "softplus": ("log(1 + e ** x) (ONNX Softplus)", softplus),
    "softsign": ("x / (1 + |x|) (ONNX Softsign)", lambda d: d / (1.0 + np.abs(d))),
    "mish": ("x * tanh(softplus(x)) (ONNX Mish)", lambda d: d * np.tanh(softplus(d))),
    "gelu_tanh": (
        "0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x ** 3))) (ONNX Gelu, approximate='tanh')",
        lambda d: 0.5 * d * (1.0 + np.tanh(GELU_TANH_SCALE * (d + 0.044715 * d * d * d))),
    ),
}


def _elu(d: np.ndarray, a: Mapping[str, Any]) -> np.ndarray:
    return np.where(d < 0, a["alpha"] * np.expm1(d), d)


def _selu(d: np.ndarray, a: Mapping[str, Any]) -> np.ndarray:
    return a["gamma"] * np.where(d > 0, d, a["alpha"] * np.expm1(d))


def _celu(d: np.ndarray, a: Mapping[str, Any]) -> np.ndarray:
    """max(0, x) + min(0, alpha (e ** (x / alpha) - 1)), NaN kept: x where x > 0, else
    0 + alpha (e ** (x / alpha) - 1) (the same for every alpha but 0; the 0 + makes -0 +0, as
    the max of 0 and -0 is 0 and numpy's fmax on arrays may give either zero)."""
    alpha = a["alpha"]
    y = np.where(d > 0, d, 0.0 + alpha * np.expm1(d / alpha))
    return np.where(np.isnan(d), d, y)


def _thresholded_relu(d: np.ndarray, a: Mapping[str, Any]) -> np.ndarray:
    return np.where(d > a["alpha"], d, 0.0)


def _shrink(d: np.ndarray, a: Mapping[str, Any]) -> np.ndarray:
    lambd, bias = a["lambd"], a["bias"]
    return np.where(d < -lambd, d + bias, np.where(d > lambd, d - bias, 0.0))


ActivationFn = Callable[[np.ndarray, Mapping[str, Any]], np.ndarray]

# Activations with attributes, computed in float64 and rounded once to x's dtype:
# name -> (summary, attributes, kernel over float64, whether integers are allowed).
ACTIVATIONS: dict[str, tuple[str, tuple[AttrSpec, ...], ActivationFn, bool]] = {
    "elu": (
        "x if x >= 0 else alpha (e ** x - 1) (ONNX Elu)",
        (AttrSpec("alpha", "float", 1.0, "scale of the negative part"),),
        _elu,
        False,
    ),
    "selu": (
        "gamma (x if x > 0 else alpha (e ** x - 1)) (ONNX Selu)",
        (
            AttrSpec("alpha", "float", 1.67326319217681884765625, "scale of the negative part"),
            AttrSpec("gamma", "float", 1.05070102214813232421875, "scale of the result"),
        ),
        _selu,
        False,
    ),
    "celu": (
        "max(0, x) + min(0, alpha (e ** (x / alpha) - 1)) (ONNX Celu)",
        (AttrSpec("alpha", "float", 1.0, "the negative part's scale and steepness"),),
        _celu,
        False,
    ),
    "thresholded_relu": (
        "x if x > alpha else 0 (ONNX ThresholdedRelu)",
        (AttrSpec("alpha", "float", 1.0, "the threshold"),),
        _thresholded_relu,
        False,
    ),
    "shrink": (
        "x + bias if x < -lambd, x - bias if x > lambd, else 0 (ONNX Shrink; integers "
        "truncate the result)",
        (
            AttrSpec("bias", "float", 0.0, "added below -lambd, subtracted above lambd"),
            AttrSpec("lambd", "float", 0.5, "the half width of the band set to 0"),
        ),
        _shrink,
        True,
    ),
}


def _activation_infer(name: str, ints: bool) -> InferFn:
    def infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
        (a,) = tensors(inputs, name)
        require_numeric(a.dtype, name)
        if not ints:
            require_float(a.dtype, name)
        if name == "celu" and attrs["alpha"] == 0:
            raise OpError("celu: alpha must not be 0 (it divides x)")
        return a

    return infer


def _activation_kernel(fn: ActivationFn) -> KernelFn:
    def kernel(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        x = xs[0]
        with np.errstate(all="ignore"):
            y = np.asarray(fn(x.astype(np.float64), attrs), dtype=np.float64)
        if x.dtype.kind in "iu":
            return float_to_int(y, x.dtype)
        return y.astype(x.dtype)

    return kernel


def _sign_kernel(x: np.ndarray) -> np.ndarray:
    """-1, 0 or 1 in x's dtype; NaN stays NaN and -0 gives 0 (numpy's sign)."""
    return as_contiguous(np.sign(x), x.dtype)


def _prelu(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """x where x >= 0 (NaN too), else x * slope in x's dtype (integers wrap)."""
    with np.errstate(all="ignore"):
        return as_contiguous(np.where(x < 0, x * slope, x), x.dtype)


def _int_infer(name: str) -> InferFn:
    def infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
        (a,) = tensors(inputs, name)
        if DTYPES[a.dtype].kind not in ("int", "uint"):
            raise OpError(f"{name}: needs an integer tensor, got {a.dtype}")
        return a

    return infer


def _mod_infer(inputs: Sequence[Type], attrs: Mapping[str, Any]) -> Type:
    a, b = tensors(inputs, "mod")
    dtype = same_dtype([a, b], "mod")
    require_numeric(dtype, "mod")
    return TensorType(broadcast_shapes([a.shape, b.shape], "mod"), dtype)


def _mod(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """The remainder of a / b: with the divisor's sign (Python's %, fmod false) or the
    dividend's (C's fmod, fmod true); an integer remainder by 0 is 0, a float one NaN."""
    a, b = xs
    with np.errstate(all="ignore"):
        r = np.fmod(a, b) if attrs["fmod"] else np.mod(a, b)
    return as_contiguous(r, a.dtype)


def _binary_kernel(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> KernelFn:
    return lambda xs, attrs: fn(xs[0], xs[1])


def _unary_kernel(fn: Callable[[np.ndarray], np.ndarray]) -> KernelFn:
    return lambda xs, attrs: fn(xs[0])


def _may_hold_nan(a: np.ndarray) -> bool:
    return a.dtype.kind in "fc" and bool(np.isnan(a).any())


def _ufunc_into(
    fn: np.ufunc,
) -> Callable[[Sequence[np.ndarray], Mapping[str, Any], np.ndarray], bool]:
    """A binary ufunc's kernel written into ``out``: the bits of ``fn(a, b)``.

    ``out`` may be an operand's own storage (the op running in place) unless both operands
    hold a NaN: where two NaNs meet, numpy's in-place loop may keep the other operand's NaN
    (another sign) than the fresh result the interpreter computes (the fuzzer, docs/
    fuzzing.md 20). With at most one NaN at any position, every loop gives that NaN, and any
    other result is the one IEEE result of the operation. The smaller operand is checked
    first (often a per-channel constant)."""

    def into(xs: Sequence[np.ndarray], attrs: Mapping[str, Any], out: np.ndarray) -> bool:
        a, b = xs
        if a.dtype != b.dtype or a.dtype != out.dtype:
            return False
        if out.shape != (a.shape if a.shape == b.shape else np.broadcast_shapes(a.shape, b.shape)):
            return False
        if np.may_share_memory(out, a) or np.may_share_memory(out, b):
            small, large = (a, b) if a.size <= b.size else (b, a)
            if _may_hold_nan(small) and _may_hold_nan(large):
                return False
        fn(a, b, out=out)
        return True

    return into


def _relu_into(xs: Sequence[np.ndarray], attrs: Mapping[str, Any], out: np.ndarray) -> bool:
    """relu written into ``out``, which may be ``x``'s own storage: the other operand of the
    maximum is a zero, never a NaN, so the in-place loop gives the kernel's bits (see
    :func:`_ufunc_into`)."""
    x = xs[0]
    if out.shape != x.shape or out.dtype != x.dtype:
        return False
    if x.size <= _RELU_BLOCK or not (x.flags.c_contiguous and out.flags.c_contiguous):
        np.maximum(x, np.zeros((), x.dtype), out=out)
        return True
    # numpy's maximum of two contiguous arrays is a vector loop, of an array and a scalar
    # a scalar one (2-3x slower here): the zero comes as a block of zeros, x in blocks of it.
    zeros = np.zeros(_RELU_BLOCK, x.dtype)
    xf, of = x.reshape(-1), out.reshape(-1)
    for start in range(0, x.size, _RELU_BLOCK):
        stop = min(x.size, start + _RELU_BLOCK)
        np.maximum(xf[start:stop], zeros[: stop - start], out=of[start:stop])
    return True


_RELU_BLOCK = 16384
"""Elements per vector maximum of relu (a 64 KiB block of f32 zeros, made per call)."""


# -- hard_sigmoid and hard_swish (ONNX HardSigmoid, HardSwish) ---------------------------------


def _compute_dtype(dt: np.dtype) -> np.dtype:
    """The dtype an activation with float constants computes in: f16 in f32 (rounded once
    to f16 at the end, as the C backend does), the others in their own."""
    return np.dtype(np.float32) if dt == np.float16 else dt


def _clamp01(t: np.ndarray) -> np.ndarray:
    """``t`` clamped to [0, 1], NaN staying NaN (C's ternaries ``t < 0 ? 0 : ...``)."""
    zero, one = t.dtype.type(0), t.dtype.type(1)
    return np.where(t < zero, zero, np.where(t > one, one, t))


def hard_sigmoid_of(x: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    """max(0, min(1, alpha * x + beta)) in the compute dtype, alpha and beta rounded to it."""
    ct = _compute_dtype(x.dtype)
    with np.errstate(all="ignore"):
        xc = x.astype(ct, copy=False)
        return _clamp01(xc * ct.type(alpha) + ct.type(beta))


def _hard_sigmoid(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x = xs[0]
    return as_contiguous(hard_sigmoid_of(x, attrs["alpha"], attrs["beta"]), x.dtype)


def _hard_swish(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """x * hard_sigmoid(x) with alpha 1/6 and beta 0.5 (ONNX HardSwish)."""
    x = xs[0]
    ct = _compute_dtype(x.dtype)
    with np.errstate(all="ignore"):
        y = x.astype(ct, copy=False) * hard_sigmoid_of(x, 1.0 / 6.0, 0.5)
    return as_contiguous(y, x.dtype)


def _register_hard_activations(reg: Registry) -> None:
    reg.register(
        OpDef(
            "hard_sigmoid",
            "max(0, min(1, alpha * x + beta)) (ONNX HardSigmoid; f16 computes in f32)",
            "kernel",
            _unary_infer("hard_sigmoid", True),
            kernel=_hard_sigmoid,
            elementwise=True,
            input_names=("x",),
            attrs=(
                AttrSpec("alpha", "float", 0.2, "slope"),
                AttrSpec("beta", "float", 0.5, "offset"),
            ),
            inplace=(0,),
            float_only=True,
        )
    )
    reg.register(
        OpDef(
            "hard_swish",
            "x * max(0, min(1, x / 6 + 0.5)) (ONNX HardSwish; f16 computes in f32)",
            "kernel",
            _unary_infer("hard_swish", True),
            kernel=_hard_swish,
            elementwise=True,
            input_names=("x",),
            inplace=(0,),
            float_only=True,
        )
    )


def register_all(reg: Registry) -> None:
    # Every elementwise op may write its output over an input of the output's type: the
    # element at a position is read before the output element there is written.
    for name, (summary, fn, scalar) in BINARY.items():
        reg.register(
            OpDef(
                name,
                summary,
                "kernel",
                _binary_infer(name),
                min_inputs=2,
                max_inputs=2,
                kernel=_binary_kernel(fn),
                kernel_into=_ufunc_into(fn) if isinstance(fn, np.ufunc) else None,
                elementwise=True,
                input_names=("lhs", "rhs"),
                inplace=(0, 1),
                scalar=scalar,
            )
        )
    for name, (summary, ufn, float_only) in UNARY.items():
        reg.register(
            OpDef(
                name,
                summary,
                "kernel",
                _unary_infer(name, float_only),
                kernel=_unary_kernel(ufn),
                kernel_into=_relu_into if name == "relu" else None,
                elementwise=True,
                input_names=("x",),
                inplace=(0,),
                float_only=float_only,
                scalar="-x0" if name == "negative" else None,
            )
        )
    reg.register(
        OpDef(
            "leaky_relu",
            "x if x >= 0 else alpha * x (ONNX LeakyRelu; f16 computes in f32)",
            "kernel",
            _unary_infer("leaky_relu", True),
            kernel=_leaky_relu,
            elementwise=True,
            input_names=("x",),
            attrs=(AttrSpec("alpha", "float", 0.01, "slope for x < 0"),),
            inplace=(0,),
            float_only=True,
        )
    )
    for name, (summary, math_fn) in FLOAT_MATH.items():
        reg.register(
            OpDef(
                name,
                summary + " (computed in float64, rounded once)",
                "kernel",
                _unary_infer(name, True),
                kernel=_unary_kernel(in_double(math_fn)),
                elementwise=True,
                input_names=("x",),
                inplace=(0,),
                float_only=True,
            )
        )
    for name, (summary, specs, act, ints) in ACTIVATIONS.items():
        reg.register(
            OpDef(
                name,
                summary,
                "kernel",
                _activation_infer(name, ints),
                kernel=_activation_kernel(act),
                elementwise=True,
                input_names=("x",),
                attrs=specs,
                inplace=(0,),
                float_only=not ints,
            )
        )
    reg.register(
        OpDef(
            "sign",
            "-1, 0 or 1 by the sign of x (NaN stays NaN)",
            "kernel",
            _unary_infer("sign", False),
            kernel=_unary_kernel(_sign_kernel),
            elementwise=True,
            input_names=("x",),
            inplace=(0,),
        )
    )
    reg.register(
        OpDef(
            "bitwise_not",
            "~x, the bits of an integer flipped",
            "kernel",
            _int_infer("bitwise_not"),
            kernel=_unary_kernel(lambda x: as_contiguous(np.invert(x), x.dtype)),
            elementwise=True,
            input_names=("x",),
            inplace=(0,),
        )
    )
    reg.register(
        OpDef(
            "prelu",
            "x if x >= 0 else x * slope, slope broadcast (ONNX PRelu)",
            "kernel",
            _binary_infer("prelu"),
            min_inputs=2,
            max_inputs=2,
            kernel=_binary_kernel(_prelu),
            elementwise=True,
            input_names=("x", "slope"),
            inplace=(0, 1),
        )
    )
    reg.register(
        OpDef(
            "mod",
            "remainder of a / b, with b's sign (fmod false, Python's %) or a's (fmod true)",
            "kernel",
            _mod_infer,
            min_inputs=2,
            max_inputs=2,
            kernel=_mod,
            elementwise=True,
            input_names=("lhs", "rhs"),
            attrs=(AttrSpec("fmod", "bool", False, "the remainder takes the dividend's sign"),),
            inplace=(0, 1),
        )
    )
    _register_hard_activations(reg)
