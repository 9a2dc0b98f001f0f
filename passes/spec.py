"""Parsing pipeline specifications and pass options.

A pipeline is written ``Pass1,Pass2{key=value other=value},Pass3`` (options inside braces,
separated by spaces or commas), or as the name of a named pipeline. ``--pass-config
Name.key=value`` sets an option of a pass wherever it appears. Names are the canonical
CamelCase ones or their kebab-case spellings (``plan-memory``).
"""

from __future__ import annotations

import difflib
import re
import typing
from dataclasses import MISSING, replace
from typing import Any, Literal, Mapping, Sequence

from relaxc.ir.diagnostics import RxError

from .base import Pass


class SpecError(RxError):
    """A malformed pipeline or option; ``notes`` show the text with a caret."""


def kebab(name: str) -> str:
    """``PlanMemory`` → ``plan-memory``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def _caret(text: str, start: int, width: int) -> tuple[str, ...]:
    return ("  " + text, "  " + " " * start + "^" * max(1, width))


def resolve_pass_name(
    name: str, registry: Mapping[str, type[Pass]], text: str = "", start: int = 0
) -> type[Pass]:
    """The pass class named ``name`` (CamelCase or kebab-case), or a SpecError with alternatives."""
    if name in registry:
        return registry[name]
    by_kebab = {kebab(n): cls for n, cls in registry.items()}
    if name in by_kebab:
        return by_kebab[name]
    candidates = list(registry) + list(by_kebab)
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.5)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    snippet = _caret(text, start, len(name)) if text else ()
    raise SpecError(
        f"unknown pass '{name}'{hint}",
        snippet=snippet,
        notes=("passes: " + ", ".join(sorted(registry)),),
    )


def option_types(cls: type[Pass]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in cls.option_fields()}


def coerce_option(cls: type[Pass], key: str, raw: str) -> Any:
    """Convert the text ``raw`` to the type of option ``key`` of ``cls``."""
    types = option_types(cls)
    if key not in types:
        close = difflib.get_close_matches(key, list(types), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        known = ", ".join(types) or "none"
        raise SpecError(f"{cls.name} has no option '{key}'{hint} (options: {known})")
    t = types[key]
    if typing.get_origin(t) is Literal:
        choices = typing.get_args(t)
        if raw not in choices:
            raise SpecError(
                f"{cls.name}.{key} must be one of {', '.join(map(str, choices))}; got '{raw}'"
            )
        return raw
    if t is bool:
        low = raw.lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        raise SpecError(f"{cls.name}.{key} must be true or false; got '{raw}'")
    if t is int:
        try:
            return int(raw, 0)
        except ValueError:
            try:
                return int(raw, 10)  # "010" is ten, not an error
            except ValueError:
                raise SpecError(f"{cls.name}.{key} must be an integer; got '{raw}'") from None
    if t is float:
        try:
            return float(raw)
        except ValueError:
            raise SpecError(f"{cls.name}.{key} must be a number; got '{raw}'") from None
    return raw


def make_pass(cls: type[Pass], options: Mapping[str, str]) -> Pass:
    values = {k: coerce_option(cls, k, v) for k, v in options.items()}
    try:
        p = cls(**values)
    except ValueError as e:
        raise SpecError(f"{cls.name}: {e}") from None
    return p


_ENTRY = re.compile(r"\s*([A-Za-z][A-Za-z0-9_-]*)\s*(\{[^{}]*\})?\s*")


def parse_pipeline(text: str, registry: Mapping[str, type[Pass]]) -> list[Pass]:
    """Parse ``Pass1,Pass2{k=v}`` into pass instances (an empty text gives no passes)."""
    out: list[Pass] = []
    pos = 0
    text_s = text.strip()
    if not text_s:
        return out
    while pos < len(text):
        m = _ENTRY.match(text, pos)
        brace = text.find("{", pos)
        if (
            (m is None or m.group(2) is None)
            and brace != -1
            and "}" not in text[brace:]
            and (m is None or brace == m.end() or text[m.end() : brace].strip() == "")
        ):
            raise SpecError(
                "unclosed '{': the options of a pass end with '}'", snippet=_caret(text, brace, 1)
            )
        if not m or m.end() == pos:
            raise SpecError(
                "malformed pass pipeline",
                snippet=_caret(text, pos, 1),
                notes=(
                    "write passes separated by commas, options in braces: "
                    "ManifestAlloc,PlanMemory{planner=greedy-size}",
                ),
            )
        cls = resolve_pass_name(m.group(1), registry, text, m.start(1))
        options: dict[str, str] = {}
        if m.group(2):
            body = m.group(2)[1:-1]
            base = m.start(2) + 1
            for om in re.finditer(r"[^\s,]+", body):
                item = om.group()
                k, sep, v = item.partition("=")
                if not sep or not k:
                    raise SpecError(
                        f"option '{item}' of {cls.name} is not key=value",
                        snippet=_caret(text, base + om.start(), len(item)),
                    )
                options[k] = v
        try:
            out.append(make_pass(cls, options))
        except SpecError as e:
            raise SpecError(
                e.message, snippet=_caret(text, m.start(1), m.end() - m.start(1)), notes=e.notes
            ) from None
        pos = m.end()
        if pos < len(text):
            if text[pos] != ",":
                raise SpecError("expected ',' between passes", snippet=_caret(text, pos, 1))
            pos += 1
    return out


def apply_pass_config(
    passes: Sequence[Pass], configs: Sequence[str], registry: Mapping[str, type[Pass]]
) -> list[Pass]:
    """Apply ``Name.key=value`` settings to every matching pass of ``passes``."""
    result = list(passes)
    for item in configs:
        target, sep, value = item.partition("=")
        name, dot, key = target.partition(".")
        if not sep or not dot or not name or not key:
            raise SpecError(
                f"--pass-config '{item}' is not NAME.KEY=VALUE (for example "
                "PlanMemory.planner=greedy-size)"
            )
        cls = resolve_pass_name(name, registry)
        coerced = coerce_option(cls, key, value)
        if not any(type(p) is cls for p in result):
            raise SpecError(
                f"--pass-config '{item}': {cls.name} is not in the pipeline "
                f"({', '.join(p.name for p in result) or 'empty'})"
            )
        try:
            result = [replace(p, **{key: coerced}) if type(p) is cls else p for p in result]
        except ValueError as e:
            raise SpecError(f"--pass-config '{item}': {cls.name}: {e}") from None
    return result


def describe_options(cls: type[Pass]) -> list[tuple[str, str, str]]:
    """(name, type, default) of each option, for help listings."""
    out = []
    types = option_types(cls)
    for f in cls.option_fields():
        t = types[f.name]
        if typing.get_origin(t) is Literal:
            tname = "|".join(map(str, typing.get_args(t)))
        else:
            tname = getattr(t, "__name__", str(t))
        default = (
            ""
            if f.default is MISSING
            else str(f.default).lower()
            if isinstance(f.default, bool)
            else str(f.default)
        )
        out.append((f.name, tname, default))
    return out
