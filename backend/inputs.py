"""Runtime inputs of a function: binding arrays to parameters and symbolic dims.

Shared by the reference interpreter and the VM: the same checks (dtype, rank, fixed dims,
consistent symbolic dims, ``upper_bounds``) and the same error messages everywhere.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from relaxc.ir import dims as D
from relaxc.ir.diagnostics import RxError
from relaxc.ir.nodes import Bind, Function, Module
from relaxc.ir.types import (
    DTYPES,
    TensorType,
    Type,
    TupleType,
    dtype_from_numpy,
    numpy_dtype,
    type_to_str,
    tensor_leaves,
)
from relaxc.ir.verifier import ModuleTypes

MAX_RUNTIME_BYTES = 1 << 34
"""The largest single allocation (16 GiB) the interpreter and VM will attempt."""


def bind_dims(
    fn: Function, args: Sequence[object], given: Mapping[str, int] | None = None
) -> dict[str, int]:
    """Check ``args`` against ``fn``'s parameters and return the value of every symbolic dim.

    ``given`` (from ``--dim n=...``) must agree with the shapes of the inputs.
    """
    if len(args) != len(fn.params):
        raise RxError(f"@{fn.name} takes {len(fn.params)} input(s), got {len(args)}")
    env: dict[str, int] = {}
    source: dict[str, str] = {}
    for name, value in (given or {}).items():
        env[name] = int(value)
        source[name] = "--dim"
    for p, a in zip(fn.params, args):
        _bind_value(p.type, a, f"%{p.name}", env, source)
    for p, a in zip(fn.params, args):
        _bind_affine(p.type, a, f"%{p.name}", env, source)
    for p, a in zip(fn.params, args):
        _check_value(p.type, a, f"%{p.name}", env)
    check_bounds(fn, env)
    return env


def _bind_value(t: Type, a: object, what: str, env: dict[str, int], source: dict[str, str]) -> None:
    if isinstance(t, TensorType):
        if not isinstance(a, np.ndarray):
            raise RxError(f"input {what} must be an array of type {type_to_str(t)}")
        if a.ndim != len(t.shape):
            raise RxError(
                f"input {what} has rank {a.ndim} (shape {a.shape}) but {type_to_str(t)} has "
                f"rank {len(t.shape)}"
            )
        for i, (d, n) in enumerate(zip(t.shape, a.shape)):
            if isinstance(d, D.Sym):
                if d.name in env and env[d.name] != n:
                    raise RxError(
                        f"input {what} has {n} in dimension {i}, but '{d.name}' is {env[d.name]} "
                        f"(from {source[d.name]})"
                    )
                env.setdefault(d.name, int(n))
                source.setdefault(d.name, f"input {what}")
    elif isinstance(t, TupleType):
        if not isinstance(a, tuple) or len(a) != len(t.fields):
            raise RxError(f"input {what} must be a tuple of {len(t.fields)} values")
        for i, (f, x) in enumerate(zip(t.fields, a)):
            _bind_value(f, x, f"{what}.{i}", env, source)


def _bind_affine(
    t: Type, a: object, what: str, env: dict[str, int], source: dict[str, str]
) -> None:
    """Dims that appear only in a dimension ``a * n + b``: ``n`` from that dimension's size."""
    if isinstance(t, TensorType):
        assert isinstance(a, np.ndarray)
        for i, (d, size) in enumerate(zip(t.shape, a.shape)):
            aff = D.affine_in(d) if not isinstance(d, (int, D.Sym)) else None
            if aff is None or aff[0] in env:
                continue
            name, k, b = aff
            if (size - b) % k or (size - b) // k < 0:
                raise RxError(
                    f"input {what} has {size} in dimension {i}, which is not "
                    f"{D.dim_to_str(d)} for any '{name}' of 0 or more"
                )
            env[name] = (size - b) // k
            source[name] = f"input {what}"
    elif isinstance(t, TupleType) and isinstance(a, tuple):
        for i, (f, x) in enumerate(zip(t.fields, a)):
            _bind_affine(f, x, f"{what}.{i}", env, source)


def _check_value(t: Type, a: object, what: str, env: Mapping[str, int]) -> None:
    if isinstance(t, TensorType):
        assert isinstance(a, np.ndarray)
        want = dtype_from_numpy(a.dtype)
        if want != t.dtype:
            raise RxError(f"input {what} has dtype {a.dtype}, but {type_to_str(t)} needs {t.dtype}")
        shape = concrete_shape(t.shape, env)
        if tuple(a.shape) != shape:
            raise RxError(
                f"input {what} has shape {tuple(a.shape)}, expected {shape} for {type_to_str(t)}"
            )
    elif isinstance(t, TupleType):
        for i, (f, x) in enumerate(zip(t.fields, a)):  # type: ignore[arg-type]
            _check_value(f, x, f"{what}.{i}", env)


def check_bounds(fn: Function, env: Mapping[str, int]) -> None:
    """Every symbolic dim within ``upper_bounds``; the message names dim, value and bound."""
    for name, bound in fn.upper_bounds().items():
        value = env.get(name)
        if value is not None and value > bound:
            raise RxError(
                f"dimension '{name}' is {value}, larger than its upper bound {bound} "
                f"in @{fn.name}; the memory plan only holds sizes up to the bound (raise "
                "upper_bounds and rebuild)"
            )


def concrete_shape(shape: tuple[D.Dim, ...], env: Mapping[str, int]) -> tuple[int, ...]:
    """Evaluate a symbolic shape; a negative result is a runtime error."""
    out = []
    for d in shape:
        try:
            v = d if isinstance(d, int) else D.evaluate(d, env)
        except D.DimError as e:
            raise RxError(f"dimension {D.dim_to_str(d)} cannot be evaluated: {e}") from None
        if v < 0:
            raise RxError(f"dimension {D.dim_to_str(d)} evaluates to {v}, which is negative")
        out.append(v)
    return tuple(out)


def concrete_value(v: object, env: Mapping[str, int]) -> object:
    """An attribute value with every symbolic dim evaluated under ``env``."""
    if isinstance(v, (D.Sym, D.BinOp, D.DimCall)):
        try:
            return D.evaluate(v, env)
        except D.DimError as e:
            raise RxError(f"dimension {D.dim_to_str(v)} cannot be evaluated: {e}") from None
    if isinstance(v, tuple):
        return tuple(concrete_value(x, env) for x in v)
    return v


def _numpy_max_rank() -> int:
    try:
        np.empty((1,) * 64)
        return 64
    except ValueError:  # numpy 1.x
        return 32


NUMPY_MAX_RANK = _numpy_max_rank()
"""The highest rank of an array numpy makes (64 since numpy 2, 32 before)."""


def check_ranks(module: Module, types: ModuleTypes) -> None:
    """RxError at the first parameter or binding whose type holds a tensor of a rank numpy
    cannot make, before anything runs (the verifier allows any rank; numpy does not)."""
    for fn in module.functions:
        fn_types = types.get(fn.name, {})
        named = [(p.name, p.type, p.loc) for p in fn.params]
        named += [(s.name, fn_types.get(s.name), s.loc) for s in fn.body if isinstance(s, Bind)]
        for name, t, loc in named:
            for leaf in tensor_leaves(t) if t is not None else ():
                if len(leaf.shape) > NUMPY_MAX_RANK:
                    raise RxError(
                        f"%{name} has a tensor of rank {len(leaf.shape)}; relaxc runs "
                        f"tensors of rank at most {NUMPY_MAX_RANK} (numpy's limit)",
                        loc,
                    )


def check_alloc_size(nbytes: int, what: str) -> None:
    """Refuse to allocate absurd sizes before numpy tries."""
    if nbytes > MAX_RUNTIME_BYTES:
        raise RxError(
            f"{what} needs {nbytes:,} bytes, more than the {MAX_RUNTIME_BYTES:,}-byte limit"
        )


def resolve_dims(fn: Function, given: Mapping[str, int]) -> dict[str, int]:
    """Values of every symbolic dim of ``fn`` for generating inputs: ``--dim`` first, then
    the upper bound; an unbounded dim without ``--dim`` is an error naming the flag."""
    names: list[str] = []
    for p in fn.params:
        for leaf in tensor_leaves(p.type):
            for d in leaf.shape:
                if isinstance(d, D.Sym) and d.name not in names:
                    names.append(d.name)
    unknown = sorted(set(given) - set(names))
    if unknown:
        have = ", ".join(names) or "none"
        raise RxError(
            f"--dim {unknown[0]}=...: @{fn.name} has no symbolic dim '{unknown[0]}' "
            f"(it has: {have})"
        )
    bounds = fn.upper_bounds()
    env: dict[str, int] = {}
    for name in names:
        if name in given:
            env[name] = int(given[name])
        elif name in bounds:
            env[name] = bounds[name]
        else:
            raise RxError(
                f"dimension '{name}' of @{fn.name} has no upper bound; give its value "
                f"with --dim {name}=N"
            )
        if env[name] < 0:
            raise RxError(f"--dim {name}={env[name]}: a dimension cannot be negative")
    check_bounds(fn, env)
    return env


def random_inputs(fn: Function, env: Mapping[str, int], seed: int = 0) -> list[object]:
    """Deterministic random inputs of ``fn``'s parameter types (floats in [-1, 1))."""
    rng = np.random.default_rng(seed)
    return [_random_value(p.type, env, rng, f"%{p.name}") for p in fn.params]


def _random_value(t: Type, env: Mapping[str, int], rng: np.random.Generator, what: str) -> object:
    if isinstance(t, TupleType):
        return tuple(_random_value(f, env, rng, f"{what}.{i}") for i, f in enumerate(t.fields))
    if not isinstance(t, TensorType):
        raise RxError(f"cannot make a random value for {what} of type {type_to_str(t)}")
    shape = concrete_shape(t.shape, env)
    info = DTYPES[t.dtype]
    check_alloc_size(math.prod(shape) * info.nbytes, f"random input {what}")
    if info.numpy is None:
        raise RxError(f"cannot make random input {what}: dtype {t.dtype} is storage-only")
    dt = numpy_dtype(t.dtype)
    if info.kind == "float":
        return rng.uniform(-1.0, 1.0, size=shape).astype(dt)
    if info.kind == "bool":
        return rng.integers(0, 2, size=shape).astype(dt)
    lo, hi = (0, 10) if info.kind == "uint" else (-10, 10)
    return rng.integers(lo, hi, size=shape).astype(dt)
