"""Make the weights of the samples: mlp.npz, cnn.npz and transformer.npz.

Deterministic: the same numpy version gives byte-identical files. Every weight the .rx
files name is made here with the declared shape (checked by `relaxc check`).

    python samples/make_weights.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from relaxc.frontend.weights import npz_bytes

HERE = Path(__file__).resolve().parent


def _dense(rng: np.random.Generator, out_f: int, in_f: int) -> tuple[np.ndarray, np.ndarray]:
    w = rng.normal(0.0, (2.0 / in_f) ** 0.5, size=(out_f, in_f)).astype(np.float32)
    b = rng.normal(0.0, 0.01, size=(out_f,)).astype(np.float32)
    return w, b


def _conv(rng: np.random.Generator, o: int, i: int, k: int) -> np.ndarray:
    return rng.normal(0.0, (2.0 / (i * k * k)) ** 0.5, size=(o, i, k, k)).astype(np.float32)


def _bn(rng: np.random.Generator, c: int, prefix: str) -> dict[str, np.ndarray]:
    return {
        f"{prefix}.gamma": rng.uniform(0.5, 1.5, c).astype(np.float32),
        f"{prefix}.beta": rng.normal(0.0, 0.1, c).astype(np.float32),
        f"{prefix}.mean": rng.normal(0.0, 0.1, c).astype(np.float32),
        f"{prefix}.var": rng.uniform(0.5, 1.5, c).astype(np.float32),
    }


def mlp_weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    out: dict[str, np.ndarray] = {}
    for name, (o, i) in {"fc1": (128, 64), "fc2": (128, 128), "fc3": (10, 128)}.items():
        out[f"{name}.weight"], out[f"{name}.bias"] = _dense(rng, o, i)
    return out


def cnn_weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(2)
    out = {
        "conv1.weight": _conv(rng, 16, 3, 3),
        "branch_a.weight": _conv(rng, 8, 16, 1),
        "branch_b.weight": _conv(rng, 8, 16, 3),
        "conv3.weight": _conv(rng, 32, 16, 3),
    }
    out.update(_bn(rng, 16, "bn1"))
    out.update(_bn(rng, 32, "bn3"))
    out["fc.weight"], out["fc.bias"] = _dense(rng, 10, 32)
    return out


def transformer_weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    out: dict[str, np.ndarray] = {}
    for ln in ("ln1", "ln2"):
        out[f"{ln}.gamma"] = rng.uniform(0.8, 1.2, 64).astype(np.float32)
        out[f"{ln}.beta"] = rng.normal(0.0, 0.05, 64).astype(np.float32)
    for name in ("q", "k", "v", "out"):
        out[f"attn.{name}.weight"], out[f"attn.{name}.bias"] = _dense(rng, 64, 64)
    out["mlp.fc1.weight"], out["mlp.fc1.bias"] = _dense(rng, 256, 64)
    out["mlp.fc2.weight"], out["mlp.fc2.bias"] = _dense(rng, 64, 256)
    return out


def main() -> None:
    for name, make in (
        ("mlp", mlp_weights),
        ("cnn", cnn_weights),
        ("transformer", transformer_weights),
    ):
        path = HERE / f"{name}.npz"
        path.write_bytes(npz_bytes(make()))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
