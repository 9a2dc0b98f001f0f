"""C identifiers, comments and string literals made from IR text: nothing reaches C unchecked.

IR names (``%value``, ``@function``, dim names, weight names, which are arbitrary strings)
become C identifiers only through :class:`Scope`, which keeps ``[A-Za-z0-9_]``, replaces
every other character, never starts with a digit or an underscore, avoids every C keyword
and standard-library name a C file may see, and resolves collisions with a numeric suffix.
Comments and string literals are built by :func:`comment` and :func:`c_string`, which admit
a fixed set of harmless characters only (no ``*/``, no backslash, no trigraph ``??``).
"""

from __future__ import annotations

import re
from collections import Counter

C_KEYWORDS = frozenset(
    """
auto break case char const continue default do double else enum extern float for goto if
inline int long register restrict return short signed sizeof static struct switch typedef
union unsigned void volatile while _Bool _Complex _Imaginary _Alignas _Alignof _Atomic
_Generic _Noreturn _Static_assert _Thread_local alignas alignof bool constexpr false
nullptr static_assert thread_local true typeof typeof_unqual asm fortran
""".split()
)

RESERVED = C_KEYWORDS | frozenset(
    """
main NULL EOF errno assert offsetof size_t ptrdiff_t wchar_t int8_t int16_t int32_t int64_t
uint8_t uint16_t uint32_t uint64_t intptr_t uintptr_t intmax_t uintmax_t stdin stdout stderr
FILE va_list setjmp longjmp jmp_buf signal raise exit abort malloc calloc realloc free
memcpy memset memmove memcmp strlen strcmp printf fprintf sprintf snprintf fopen fclose fread
fwrite sqrt sqrtf exp expf log logf tanh tanhf erf erff pow powf fabs fabsf floor ceil trunc
rint fmax fmin isnan isinf isfinite signbit frexp ldexp INFINITY NAN HUGE_VAL INT8_MIN INT8_MAX
INT16_MIN INT16_MAX INT32_MIN INT32_MAX INT64_MIN INT64_MAX UINT8_MAX UINT16_MAX UINT32_MAX
UINT64_MAX SIZE_MAX INT64_C UINT64_C TVMValue DLTensor DLDevice DLDataType kTVMArgInt kTVMArgFloat
kTVMOpaqueHandle kTVMNullptr kTVMDLTensorHandle kDLCPU
""".split()
)
"""Names generated code must never declare: keywords (C99 to C23) and library names."""

MAX_IDENT = 48
_BAD = re.compile(r"[^A-Za-z0-9_]")


def sanitize(text: str) -> str:
    """``text`` as identifier characters: others become ``_``, runs of ``_`` collapse."""
    s = _BAD.sub("_", text)
    s = re.sub(r"__+", "_", s).strip("_")
    return s[:MAX_IDENT].rstrip("_")


def is_identifier(text: str) -> bool:
    return (
        bool(re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", text))
        and "__" not in text
        and text not in RESERVED
    )


class Scope:
    """Hands out unique C identifiers; a child scope also avoids every name of its parents."""

    def __init__(self, parent: "Scope | None" = None):
        self.parent = parent
        self.used: set[str] = set()
        # base -> the first numeric suffix that may be free: names are only ever added, so
        # the suffixes below it stay taken (v_args, v_args_2, ... are handed out in O(1)).
        self._next: dict[str, int] = {}

    def taken(self, name: str) -> bool:
        s: Scope | None = self
        while s is not None:
            if name in s.used:
                return True
            s = s.parent
        return name in RESERVED

    def reserve(self, name: str) -> str:
        """Claim a fixed name (generated, known to be valid); it must be free."""
        assert not self.taken(name), name
        self.used.add(name)
        return name

    def name(self, prefix: str, text: str = "") -> str:
        """A fresh identifier ``prefix`` + sanitized ``text``, e.g. ``v_`` + ``%c1`` -> ``v_c1``."""
        body = sanitize(text)
        base = (prefix + body) if body else (prefix.rstrip("_") or "x")
        if not base[0].isalpha():
            base = "x" + base
        base = re.sub(r"__+", "_", base)
        cand = base
        if self.taken(cand):
            i = self._next.get(base, 2)
            cand = f"{base}_{i}"
            while self.taken(cand):
                i += 1
                cand = f"{base}_{i}"
            self._next[base] = i + 1
        self.used.add(cand)
        return cand

    def child(self) -> "Scope":
        return Scope(self)


_COMMENT_OK = re.compile(r"[A-Za-z0-9 _.,:;()\[\]{}=+\-<>%#@!|&^~'*]")


def comment(text: str, limit: int = 120) -> str:
    """``text`` made safe inside ``/* ... */``: characters outside a small set become ``_``.

    ``/``, ``\\``, ``?`` and ``"`` are never kept, so the text cannot end the comment, splice
    lines or form a trigraph.
    """
    out = "".join(c if _COMMENT_OK.fullmatch(c) else "_" for c in text)
    if len(out) > limit:
        out = out[: limit - 3] + "..."
    return out


def c_string(text: str) -> str:
    """A C string literal holding ``text`` (UTF-8); anything but plain printable ASCII is
    an octal escape, and so are ``?`` (trigraphs), ``"`` and ``\\``."""
    out = []
    for b in text.encode("utf-8"):
        c = chr(b)
        if 0x20 <= b < 0x7F and c not in '"\\?':
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def comment_string(text: str) -> str:
    """``text`` as :func:`c_string` spells it, made safe inside ``/* ... */`` too (a ``/``
    next to a ``*`` becomes its octal escape): a name the reader can copy into C as it is."""
    quoted = c_string(text)
    while "*/" in quoted or "/*" in quoted:
        quoted = quoted.replace("*/", "*\\057").replace("/*", "\\057*")
    return quoted


_WORD = re.compile(r"\w+")


def word_counts(text: str) -> Counter[str]:
    """How often each word (a maximal run of word characters) occurs in ``text``: for an
    identifier ``name``, ``word_counts(text)[name]`` is the number of matches of
    ``\\bname\\b``. One pass over the text, so that checking many names is linear."""
    return Counter(_WORD.findall(text))


def macro_name(text: str) -> str:
    """An upper-case macro fragment (callers add a prefix and keep it unique)."""
    return sanitize(text).upper() or "X"
