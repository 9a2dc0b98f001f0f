"""Small C helper functions the generated code may need; each is emitted only when used.

Every helper is ``static`` and named with the model's prefix, so two models can live in one
program and an unused helper never exists (``-Wall -Werror`` stays quiet).
"""

from __future__ import annotations

from .lowp import helpers as lowp_helpers

# name -> (dependencies, C definition with {p} for the prefix)
HELPERS: dict[str, tuple[tuple[str, ...], str]] = {
    "pointer_fits_scratch": (
        (),
        """\
/* Kernel scratch is planned with 8 bytes per pointer: refuse to compile where a pointer is
 * larger (the array size would be negative). */
typedef char {p}_pointer_fits_scratch[sizeof(void *) <= 8 ? 1 : -1];""",
    ),
    "floordiv": (
        (),
        """\
static int64_t {p}_floordiv(int64_t a, int64_t b)
{{
    int64_t q;
    if (b == 0) return 0;
    q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return q;
}}""",
    ),
    "floormod": (
        ("floordiv",),
        """\
static int64_t {p}_floormod(int64_t a, int64_t b)
{{
    if (b == 0) return 0;
    return a - {p}_floordiv(a, b) * b;
}}""",
    ),
    "floorfmod": (
        (),
        """\
/* numpy's mod on floats (Python's %): the remainder with the divisor's sign; a zero
 * remainder is a zero of the divisor's sign. */
static double {p}_floorfmod(double a, double b)
{{
    double r = fmod(a, b);
    if (r != 0) {{
        if ((b < 0) != (r < 0)) r += b;
    }} else {{
        r = copysign(0.0, b);
    }}
    return r;
}}""",
    ),
    "max64": (
        (),
        """\
static int64_t {p}_max64(int64_t a, int64_t b)
{{
    return a > b ? a : b;
}}""",
    ),
    "min64": (
        (),
        """\
static int64_t {p}_min64(int64_t a, int64_t b)
{{
    return a < b ? a : b;
}}""",
    ),
    "fmaxnan": (
        (),
        """\
static double {p}_fmaxnan(double a, double b)
{{
    if (a != a) return a;
    if (b != b) return b;
    return a > b ? a : b;
}}""",
    ),
    "fminnan": (
        (),
        """\
static double {p}_fminnan(double a, double b)
{{
    if (a != a) return a;
    if (b != b) return b;
    return a < b ? a : b;
}}""",
    ),
    "fmaxnan_h": (
        (),
        """\
/* numpy's maximum on f16: like fmaxnan, but a tie (-0 and +0) gives the first operand. */
static double {p}_fmaxnan_h(double a, double b)
{{
    if (a != a) return a;
    if (b != b) return b;
    return a >= b ? a : b;
}}""",
    ),
    "fminnan_h": (
        (),
        """\
/* numpy's minimum on f16: a tie gives the first operand. */
static double {p}_fminnan_h(double a, double b)
{{
    if (a != a) return a;
    if (b != b) return b;
    return a <= b ? a : b;
}}""",
    ),
    "h2f": (
        (),
        """\
/* IEEE half (bits) to float, exactly. */
static float {p}_h2f(uint16_t h)
{{
    int e = (h >> 10) & 0x1f;
    int m = h & 0x3ff;
    float v;
    if (e == 0) v = ldexpf((float)m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexpf((float)(m | 0x400), e - 25);
    return (h & 0x8000) ? -v : v;
}}""",
    ),
    "f2h": (
        (),
        """\
/* double to IEEE half (bits), rounding to nearest even in one step. */
static uint16_t {p}_f2h(double x)
{{
    uint16_t sign = signbit(x) ? 0x8000u : 0u;
    double a = fabs(x), m;
    int e, ex;
    if (x != x) return (uint16_t)(sign | 0x7e00u);
    if (a >= 65520.0) return (uint16_t)(sign | 0x7c00u);
    if (a < 6.103515625e-05) return (uint16_t)(sign | (uint16_t)rint(a * 16777216.0));
    m = frexp(a, &e);
    m = rint((2.0 * m - 1.0) * 1024.0);
    ex = e - 1 + 15;
    if (m >= 1024.0) {{ m = 0.0; ex += 1; }}
    if (ex >= 31) return (uint16_t)(sign | 0x7c00u);
    return (uint16_t)(sign | (uint16_t)(ex << 10) | (uint16_t)m);
}}""",
    ),
    "f2i32": (
        (),
        """\
/* double to int32 as x86 converts it (out of range and nan: INT32_MIN), never undefined. */
static int32_t {p}_f2i32(double x)
{{
    if (!(x > -2147483649.0 && x < 2147483648.0)) return INT32_MIN;
    return (int32_t)x;
}}""",
    ),
    "f2i64": (
        (),
        """\
/* double to int64 as x86 converts it (out of range and nan: INT64_MIN), never undefined. */
static int64_t {p}_f2i64(double x)
{{
    if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0)) return INT64_MIN;
    return (int64_t)x;
}}""",
    ),
}
HELPERS.update(lowp_helpers())  # bf16 and the low-precision types (backend/c/lowp.py)


class Helpers:
    """Records which helpers the generated code calls, and emits them in dependency order."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.used: list[str] = []

    def use(self, name: str) -> str:
        """Mark ``name`` used and return its C name."""
        deps, _ = HELPERS[name]
        for d in deps:
            self.use(d)
        if name not in self.used:
            self.used.append(name)
        return f"{self.prefix}_{name}"

    def definitions(self) -> str:
        return "\n\n".join(HELPERS[n][1].format(p=self.prefix) for n in self.used)
