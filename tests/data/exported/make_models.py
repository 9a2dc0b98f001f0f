"""Writes the exporter-made test models of tests/frontend/onnx/test_exported_models.py.

Small networks with seeded random weights and tiny sizes (hidden 32, 2 layers), each exported
by ``torch.onnx.export`` twice: with the dynamo exporter (``*_dynamo.onnx``) and with the
TorchScript one (``dynamo=False``, ``*_script.onnx``), their batch and sequence (or image)
axes dynamic. They are what exporters write for shapes: ``Shape -> Gather -> Concat ->
Reshape`` chains, ``Range`` of a sequence length, ``Expand``/``ConstantOfShape`` of computed
shapes, ``Resize`` sizes and ``Slice`` bounds computed in the graph.

Needs torch, onnx, onnxscript and transformers, none of them a dependency of relaxc (the tests
read the committed files and need none of them)::

    python3 -m venv /tmp/torchvenv
    /tmp/torchvenv/bin/pip install torch onnx onnxscript transformers
    /tmp/torchvenv/bin/python tests/data/exported/make_models.py

Each model's inputs are listed in ``models.json`` beside them (name, dtype, shape with dim
names, the integer range of an id input), which the tests read to make feeds.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

HERE = Path(__file__).resolve().parent
VOCAB = 64


class Cnn(nn.Module):
    """Conv, F.interpolate(scale_factor=2), adaptive pooling, x.view(x.size(0), -1)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.pool = nn.AdaptiveAvgPool2d((2, 2))
        self.fc = nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.interpolate(x, scale_factor=2.0, mode="nearest")
        x = self.pool(x)
        return self.fc(x.view(x.size(0), -1))


class Upsampler(nn.Module):
    """Bilinear F.interpolate to twice the input's size, read from the tensor's shape."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        h, w = y.shape[2], y.shape[3]
        y = F.interpolate(y, size=(h * 2, w * 2), mode="bilinear", align_corners=False)
        return y.flatten(1).mean(dim=1, keepdim=True) + y[:, :, : h // 2].sum()


class Positions(nn.Module):
    """An embedding of token ids plus one of torch.arange(seq), a causal mask built from it."""

    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, 16)
        self.pos = nn.Embedding(32, 16)
        self.out = nn.Linear(16, 16)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        seq = ids.size(1)
        positions = torch.arange(seq, device=ids.device).unsqueeze(0)
        h = self.tok(ids) + self.pos(positions)
        mask = torch.ones(seq, seq).tril()
        scores = h @ h.transpose(1, 2) / 4.0
        scores = scores.masked_fill(mask == 0, float("-inf")).softmax(-1)
        return self.out(scores @ h).reshape(ids.size(0), seq, 4, 4).sum(-1)


class Patterns(nn.Module):
    """Shape idioms: cls_token.expand / .repeat(batch, 1, 1), torch.cat, torch.split, a causal
    mask from two aranges, x[:, -n:], torch.zeros(b, 2, 8) and F.pad to a multiple of 4."""

    def __init__(self) -> None:
        super().__init__()
        self.cls = nn.Parameter(torch.randn(1, 1, 8))
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n = x.size(0), x.size(1)
        h = torch.cat([self.cls.expand(b, -1, -1), x], dim=1) + self.cls.repeat(b, 1, 1)
        q, k = torch.split(h, 4, dim=2)
        causal = torch.arange(n + 1)[:, None] >= torch.arange(n + 1)[None, :]
        scores = (q @ k.transpose(1, 2)).masked_fill(~causal, -1e4).softmax(-1)
        o = (scores @ h)[:, -n:]
        o = torch.cat([o, torch.zeros(b, 2, 8)], 1)
        o = F.pad(o, (0, 0, 0, (4 - o.size(1) % 4) % 4))
        return self.lin(o)


class Encoder(nn.Module):
    """torch.nn.TransformerEncoderLayer (batch first) over (batch, seq, 32)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


def bert() -> nn.Module:
    from transformers import BertConfig, BertModel

    cfg = BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    return _last_hidden(BertModel(cfg))


class _Gpt2(nn.Module):
    """GPT-2 given position ids torch.arange(seq) and an all-ones attention mask (without
    them, transformers' mask code calls torch.diff, which TorchScript cannot export)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.size(1), device=x.device).unsqueeze(0)
        mask = torch.ones_like(x)
        return self.inner(x, position_ids=positions, attention_mask=mask, return_dict=False)[0]


def gpt2() -> nn.Module:
    from transformers import GPT2Config, GPT2Model

    cfg = GPT2Config(
        vocab_size=VOCAB,
        n_embd=32,
        n_layer=2,
        n_head=4,
        n_positions=64,
        use_cache=False,
        attn_implementation="eager",
        bos_token_id=0,
        eos_token_id=0,
    )
    return _Gpt2(GPT2Model(cfg))


def vit() -> nn.Module:
    from transformers import ViTConfig, ViTModel

    cfg = ViTConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        image_size=32,
        patch_size=8,
        num_channels=3,
        attn_implementation="eager",
    )
    return _last_hidden(ViTModel(cfg, add_pooling_layer=False))


def t5() -> nn.Module:
    from transformers import T5Config, T5EncoderModel

    cfg = T5Config(
        vocab_size=VOCAB,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=16,
        dropout_rate=0.0,
        attn_implementation="eager",
    )
    return _last_hidden(T5EncoderModel(cfg))


def whisper() -> nn.Module:
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    cfg = WhisperConfig(
        vocab_size=VOCAB,
        num_mel_bins=8,
        d_model=32,
        encoder_layers=2,
        encoder_attention_heads=4,
        decoder_layers=1,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_source_positions=16,
        max_target_positions=16,
        attn_implementation="eager",
    )
    return _last_hidden(WhisperEncoder(cfg))


class _LastHidden(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x, return_dict=False)[0]


def _last_hidden(model: nn.Module) -> nn.Module:
    return _LastHidden(model)


# name -> (factory, inputs: (name, dtype, shape with dim names, id range or None))
Spec = tuple[Callable[[], nn.Module], list[tuple[str, str, list[Any], int | None]]]
MODELS: dict[str, Spec] = {
    "cnn": (Cnn, [("x", "float32", ["batch", 3, 16, 16], None)]),
    "upsample": (Upsampler, [("x", "float32", ["batch", 2, "height", "width"], None)]),
    "positions": (Positions, [("ids", "int64", ["batch", "seq"], VOCAB)]),
    "patterns": (Patterns, [("x", "float32", ["batch", "seq", 8], None)]),
    "encoder": (Encoder, [("x", "float32", ["batch", "seq", 32], None)]),
    "bert": (bert, [("input_ids", "int64", ["batch", "seq"], VOCAB)]),
    "gpt2": (gpt2, [("input_ids", "int64", ["batch", "seq"], VOCAB)]),
    "t5": (t5, [("input_ids", "int64", ["batch", "seq"], VOCAB)]),
    "whisper": (whisper, [("input_features", "float32", ["batch", 8, 32], None)]),
    "vit": (vit, [("pixel_values", "float32", ["batch", 3, 32, 32], None)]),
}
EXAMPLE = {"batch": 2, "seq": 7, "height": 12, "width": 10}


def _example(inputs: list[tuple[str, str, list[Any], int | None]]) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    out = []
    for _, dtype, shape, high in inputs:
        dims = [EXAMPLE[d] if isinstance(d, str) else d for d in shape]
        if dtype == "int64":
            out.append(torch.randint(0, high or 2, dims, generator=g))
        else:
            out.append(torch.randn(dims, generator=g))
    return tuple(out)


def export(name: str, dynamo: bool) -> Path:
    factory, inputs = MODELS[name]
    torch.manual_seed(0)
    model = factory().eval()
    args = _example(inputs)
    path = HERE / f"{name}_{'dynamo' if dynamo else 'script'}.onnx"
    names = [n for n, *_ in inputs]
    axes = {
        n: {i: d for i, d in enumerate(shape) if isinstance(d, str)} for n, _, shape, _ in inputs
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            dims = {d: torch.export.Dim(d, min=1, max=64) for d in EXAMPLE}
            shapes = {
                n: {i: dims[d] for i, d in enumerate(shape) if isinstance(d, str)}
                for n, _, shape, _ in inputs
            }
            prog = torch.onnx.export(
                model,
                args,
                dynamo=True,
                input_names=names,
                output_names=["y"],
                dynamic_shapes=tuple(shapes[n] for n in names),
                external_data=False,
                optimize=True,
            )
            prog.save(str(path), external_data=False)
        else:
            torch.onnx.export(
                model,
                args,
                str(path),
                dynamo=False,
                input_names=names,
                output_names=["y"],
                dynamic_axes={**axes, "y": {0: "batch"}},
                opset_version=17,
            )
    return path


def strip(path: Path) -> None:
    """Drop what only records where each node came from in Python (the dynamo exporter's
    per-node metadata: stack traces, module paths), which is most of a small model's bytes."""
    import onnx

    model = onnx.load(str(path))
    for node in model.graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    del model.metadata_props[:]
    del model.graph.value_info[:]
    onnx.save(model, str(path))


def main(argv: list[str]) -> int:
    wanted = argv or sorted(MODELS)
    manifest_path = HERE / "models.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for name in wanted:
        for dynamo in (True, False):
            key = f"{name}_{'dynamo' if dynamo else 'script'}"
            try:
                path = export(name, dynamo)
                strip(path)
            except Exception as e:  # noqa: BLE001 - an exporter's failure: said, and the others go on
                print(f"{key}: export failed: {type(e).__name__}: {str(e)[:300]}")
                continue
            manifest[key] = {
                "inputs": [
                    {"name": n, "dtype": dt, "shape": shape, "high": high}
                    for n, dt, shape, high in MODELS[name][1]
                ]
            }
            print(f"{key}: {path.stat().st_size:,} bytes")
    manifest_path.write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
