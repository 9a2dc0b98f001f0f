"""Programs the memory benchmarks run on: the samples, and generated deep decoders.

``decoder(layers, bounded)`` repeats the transformer sample's block ``layers`` times (every
layer reads the same weights, from samples/transformer.npz), over a sequence of ``n``
tokens, with ``n`` bounded (``n <= 128``) or unbounded (every allocation dynamic).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"


def _block_lines() -> list[str]:
    text = (SAMPLES / "transformer.rx").read_text()
    main = text[text.index("fn @main") :]
    body = main[main.index("{\n") + 2 : main.rindex("return")]
    return [ln.strip() for ln in body.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def decoder(layers: int, bounded: bool = False) -> str:
    """Text of a ``layers``-deep decoder; the primitive softmax function is shared."""
    text = (SAMPLES / "transformer.rx").read_text()
    prelude = text[: text.index("fn @main")]
    block = _block_lines()
    attrs = "\n    attrs {upper_bounds = {n = 128}}" if bounded else ""
    out = [prelude + f"fn @main(%x: Tensor[(n, 64), f32]) -> Tensor[(n, 64), f32]{attrs} {{"]
    current = "x"
    for layer in range(layers):
        names: dict[str, str] = {"x": current}

        def rename(m: re.Match) -> str:
            name = m.group(1)
            if name not in names:
                names[name] = f"l{layer}_{name}"
            return "%" + names[name]

        for ln in block:
            out.append("  " + re.sub(r"%([A-Za-z0-9_]+)", rename, ln))
        current = names["out"]
    out.append(f"  return %{current}")
    out.append("}")
    return "\n".join(out) + "\n"


def unbounded_transformer() -> str:
    """The transformer sample without its upper bound: every allocation is dynamic."""
    return (
        (SAMPLES / "transformer.rx")
        .read_text()
        .replace("\n    attrs {upper_bounds = {n = 128}}", "")
    )
