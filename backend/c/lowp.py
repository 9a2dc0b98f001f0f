"""bf16 and the low-precision dtypes in C: their storage and the exact conversions ``cast``
makes to and from them (the only kernel the C target runs on them).

Each is stored as ml_dtypes holds it: bf16 in a ``uint16_t`` (its bits), the 8- and 4-bit
floats and the 4- and 2-bit integers in a ``uint8_t`` (a 4- or 2-bit value in the low bits).
A value is read (:func:`load`) as a double (the floats: a table of the type's values, or
bf16's bits moved up into a float) or an ``int64_t`` (the integers, sign-extended), and
written (:func:`store`) by a helper that rounds a double once, to nearest even, the way
ml_dtypes converts and ONNX's Cast defines (ir/lowp.py): overflow saturates (with
``saturate`` for the 8-bit floats, always for f4e2m1) or gives the type's infinity or NaN;
f8e8m0 rounds the float32 exponent by ``round_mode``; an integer keeps its low bits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from relaxc.ir.lowp import ROUND_MODES

try:
    import ml_dtypes

    HAVE_ML_DTYPES = True
except ImportError:  # pragma: no cover - ml_dtypes comes with onnx
    HAVE_ML_DTYPES = False


@dataclass(frozen=True)
class SmallFloat:
    """An IEEE-like float of ``mantissa`` bits whose smallest normal exponent is ``emin``."""

    name: str
    numpy: str
    mantissa: int
    emin: int
    max_code: int
    overflow: int | None
    """The magnitude code of an overflow without saturation (infinity or NaN); None: always
    saturates."""
    sign: int
    """The sign bit."""
    nan: str
    """The C expression of a NaN's code, over ``s`` (the sign bit of x, if set)."""
    unsigned_zero: bool = False
    """fnuz: no -0 (a negative value that rounds to 0 gives +0; the sign bit with a zero
    magnitude is the NaN)."""


FLOATS = (
    SmallFloat("f8e4m3fn", "float8_e4m3fn", 3, -6, 0x7E, 0x7F, 0x80, "s | 0x7Fu"),
    SmallFloat("f8e4m3fnuz", "float8_e4m3fnuz", 3, -7, 0x7F, 0x80, 0x80, "0x80u", True),
    SmallFloat("f8e5m2", "float8_e5m2", 2, -14, 0x7B, 0x7C, 0x80, "s | 0x7Eu"),
    SmallFloat("f8e5m2fnuz", "float8_e5m2fnuz", 2, -15, 0x7F, 0x80, 0x80, "0x80u", True),
    # ml_dtypes writes a NaN as 0 when its sign is set, else as -0
    SmallFloat("f4e2m1", "float4_e2m1fn", 1, 0, 0x7, None, 0x8, "(s ? 0u : 0x8u)"),
    SmallFloat("bf16", "bfloat16", 7, -126, 0x7F7F, 0x7F80, 0x8000, "s | 0x7FC0u"),
)
SATURATE = ("f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz")
"""The types whose casts follow ``saturate``."""
INTS = {"i4": (4, True), "u4": (4, False), "i2": (2, True), "u2": (2, False)}
"""The small integers: (bits, signed)."""

STORAGE = {"bf16": "uint16_t", **{f.name: "uint8_t" for f in FLOATS if f.name != "bf16"}}
STORAGE.update({"f8e8m0": "uint8_t", **{n: "uint8_t" for n in INTS}})
"""The C storage type of each narrow dtype (empty without ml_dtypes: C refuses them)."""
if not HAVE_ML_DTYPES:  # pragma: no cover
    STORAGE = {}


def _encoder(f: SmallFloat) -> str:
    ct = "uint16_t" if f.name == "bf16" else "uint8_t"
    sat = "sat" if f.overflow is not None else "1"
    ovf = f"s | {f.overflow:#x}u" if f.overflow is not None else f"s | {f.max_code:#x}u"
    zero = "    if (c == 0) return 0;\n" if f.unsigned_zero else ""
    return f"""\
/* A double as {f.name}, rounded once to nearest even (ml_dtypes; ONNX Cast). */
static {ct} {{p}}_enc_{f.name}(double x, int sat)
{{{{
    double a = fabs(x);
    uint32_t s = signbit(x) ? {f.sign:#x}u : 0u;
    uint32_t c;
    int e;
    (void)sat;
    if (x != x) return ({ct})({f.nan});
    if (a == INFINITY) return ({ct})({sat} ? (s | {f.max_code:#x}u) : ({ovf}));
    if (a == 0.0) {{{{
        c = 0;
    }}}} else {{{{
        (void)frexp(a, &e);
        e -= 1;
        if (e < {f.emin})
            c = (uint32_t)rint(ldexp(a, {f.mantissa - f.emin}));
        else
            c = ((uint32_t)(e - ({f.emin})) << {f.mantissa})
                + (uint32_t)rint(ldexp(a, {f.mantissa} - e));
    }}}}
    if (c > {f.max_code:#x}u) return ({ct})({sat} ? (s | {f.max_code:#x}u) : ({ovf}));
{zero}    return ({ct})(s | c);
}}}}"""


_E8M0 = """\
/* A double as f8e8m0 as ONNX's reference computes it: the float32 exponent, rounded up by
 * round_mode (0 up, 1 down, 2 nearest), below NaN with sat; NaN and infinity give NaN. */
static uint8_t {p}_enc_f8e8m0(double x, int sat, int mode)
{{
    float f = (float)x;
    uint32_t b, e;
    int up = 0;
    memcpy(&b, &f, sizeof b);
    e = (b >> 23) & 0xFFu;
    if (e == 0xFFu) return 0xFF;
    if (mode == 0) up = (b & 0x7FFFFFu) != 0;
    if (mode == 2) up = (b & 0x400000u) && ((b & 0x200000u) || (b & 0x1FFFFFu) || e > 0);
    if (sat && e == 0xFEu) up = 0;
    return (uint8_t)(e + (uint32_t)up);
}}"""

_BF16_DEC = """\
static double {p}_dec_bf16(uint16_t h)
{{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, sizeof f);
    return (double)f;
}}"""


def _table(name: str, numpy_name: str, count: int) -> str:
    values = (
        np.arange(count, dtype=np.uint8).view(getattr(ml_dtypes, numpy_name)).astype(np.float32)
    )
    items = []
    for v in values:
        if np.isnan(v):  # its sign kept: a cast to f4e2m1 reads it
            items.append("-NAN" if np.signbit(v) else "NAN")
        elif np.isinf(v):
            items.append("INFINITY" if v > 0 else "-INFINITY")
        else:
            items.append(np.format_float_scientific(v, unique=True, trim="0") + "f")
    rows = [", ".join(items[i : i + 8]) for i in range(0, len(items), 8)]
    body = ",\n    ".join(rows)
    mask = f" & {count - 1:#x}u" if count < 256 else ""
    return f"""\
static double {{p}}_dec_{name}(uint8_t c)
{{{{
    static const float values[{count}] = {{{{
    {body}
    }}}};
    return (double)values[c{mask}];
}}}}"""


def _int_decoder(name: str, bits: int, signed: bool) -> str:
    mask = (1 << bits) - 1
    half = 1 << (bits - 1)
    value = (
        f"(((int64_t)(c & {mask:#x}u) ^ {half}) - {half})"
        if signed
        else f"(int64_t)(c & {mask:#x}u)"
    )
    return f"static int64_t {{p}}_dec_{name}(uint8_t c) {{{{ return {value}; }}}}"


def helpers() -> dict[str, tuple[tuple[str, ...], str]]:
    """The C helpers (name -> (dependencies, definition with {p})), for backend/c/helpers.py."""
    if not HAVE_ML_DTYPES:  # pragma: no cover
        return {}
    out: dict[str, tuple[tuple[str, ...], str]] = {}
    for f in FLOATS:
        out[f"enc_{f.name}"] = ((), _encoder(f))
        if f.name != "bf16":
            out[f"dec_{f.name}"] = ((), _table(f.name, f.numpy, 16 if f.name == "f4e2m1" else 256))
    out["dec_bf16"] = ((), _BF16_DEC)
    out["enc_f8e8m0"] = ((), _E8M0)
    out["dec_f8e8m0"] = ((), _table("f8e8m0", "float8_e8m0fnu", 256))
    for name, (bits, signed) in INTS.items():
        out[f"dec_{name}"] = ((), _int_decoder(name, bits, signed))
    return out


def is_narrow(dtype: str) -> bool:
    return dtype in STORAGE


def int_range(dtype: str) -> tuple[int, int]:
    bits, signed = INTS[dtype]
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def load(h: Any, dtype: str, expr: str) -> str:
    """An element of narrow ``dtype`` as a double (floats) or an int64_t (integers)."""
    return f"{h.use('dec_' + dtype)}({expr})"


def store(h: Any, dtype: str, value: str, attrs: Any) -> str:
    """A value (a double, or an integer for the small integers) as narrow ``dtype``."""
    if dtype in INTS:
        return f"(uint8_t)((uint64_t)({value}) & {(1 << INTS[dtype][0]) - 1:#x}u)"
    saturate = int(bool(attrs.get("saturate", True)))
    if dtype == "f8e8m0":
        mode = ROUND_MODES.index(attrs.get("round_mode", "up"))
        return f"{h.use('enc_f8e8m0')}((double)({value}), {saturate}, {mode})"
    return f"{h.use('enc_' + dtype)}((double)({value}), {saturate if dtype in SATURATE else 0})"
