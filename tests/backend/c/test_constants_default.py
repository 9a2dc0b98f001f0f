"""Where ``relaxc build -t c`` puts the weights by default (issue 28, item 2): in
``PREFIX_weights.bin`` (linked by ``PREFIX_weights.S``) when the named weights the program
reads are more than ``INLINE_CONSTANTS_LIMIT`` (64 KiB), in ``PREFIX.c`` otherwise;
``--constants inline`` and ``--constants file`` decide it whatever the size."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

from relaxc.backend.c import INLINE_CONSTANTS_LIMIT, constants_mode, emit_c
from relaxc.cli.main import cli
from relaxc.frontend.parser import parse_module
from relaxc.frontend.weights import npz_bytes

from .cbuild import compile_c, compile_module, needs_cc, run_c, write_sources

SAMPLES_DIR = Path(__file__).resolve().parents[3] / "samples"


def program(uses: list[tuple[str, int]]) -> str:
    """@main adding, for each (weight name, elements) of ``uses``, that f32 weight to an input
    of its shape; a name may be used twice (with one size)."""
    params, body, outs = [], [], []
    for i, (name, k) in enumerate(uses):
        params.append(f"%x{i}: Tensor[({k},), f32]")
        body.append(f'  %w{i}: Tensor[({k},), f32] = const("{name}")')
        body.append(f"  %y{i} = add(%x{i}, %w{i})")
        outs.append(f"Tensor[({k},), f32]")
    ret = outs[0] if len(outs) == 1 else f"Tuple[{', '.join(outs)}]"
    result = "%y0" if len(uses) == 1 else "(" + ", ".join(f"%y{i}" for i in range(len(uses))) + ")"
    return (
        f"fn @main({', '.join(params)}) -> {ret} {{\n"
        + "\n".join(body)
        + f"\n  return {result}\n}}\n"
    )


def weights_of(uses: list[tuple[str, int]]) -> dict[str, np.ndarray]:
    return {name: np.arange(k, dtype=np.float32) for name, k in uses}


def invoke(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@given(
    st.lists(
        st.tuples(st.sampled_from("abcd"), st.integers(1, INLINE_CONSTANTS_LIMIT // 4 + 8)),
        min_size=1,
        max_size=4,
    )
)
def test_auto_files_the_weights_exactly_above_the_limit(uses: list[tuple[str, int]]) -> None:
    """The decision counts each distinct weight once, by its bytes."""
    sizes = dict(uses)  # a name used twice is one weight (of the size last drawn)
    uses = [(name, sizes[name]) for name, _ in uses]
    module = parse_module(program(uses), "t.rx")
    total = 4 * sum(sizes.values())
    want = "file" if total > INLINE_CONSTANTS_LIMIT else "inline"
    assert constants_mode(module, weights_of(uses)) == want


@pytest.mark.parametrize(
    ("elements", "files"),
    [(INLINE_CONSTANTS_LIMIT // 4, False), (INLINE_CONSTANTS_LIMIT // 4 + 1, True)],
)
def test_emit_c_auto_at_the_limit(elements: int, files: bool) -> None:
    uses = [("w", elements)]
    sources = emit_c(
        compile_module(parse_module(program(uses), "t.rx")),
        weights_of(uses),
        prefix="m",
        constants="auto",
    )
    assert ("m_weights.bin" in sources.files) is files
    assert ("m_weights.S" in sources.files) is files
    assert sources.info.weights_bytes == (4 * elements if files else 0)


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    folder = tmp_path / "samples"
    folder.mkdir()
    for name in ("cnn.rx", "cnn.npz", "transformer.rx", "transformer.npz"):
        shutil.copy(SAMPLES_DIR / name, folder / name)
    return folder


def test_build_files_a_models_weights_by_default(samples: Path, tmp_path: Path) -> None:
    """transformer.rx reads 199,936 bytes of weights: they go to the file, and the C file
    holds none of them."""
    out = tmp_path / "out"
    result = invoke("build", samples / "transformer.rx", "-t", "c", "-o", out)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [
        "transformer.c",
        "transformer.h",
        "transformer_weights.S",
        "transformer_weights.bin",
    ]
    assert (out / "transformer_weights.bin").stat().st_size == 199_936
    assert (out / "transformer.c").stat().st_size < 2 * 199_936  # no weight written as C


def test_build_inlines_small_weights_by_default(samples: Path, tmp_path: Path) -> None:
    """cnn.rx reads 27,368 bytes of weights: below the limit, they stay in the C file."""
    out = tmp_path / "out"
    result = invoke("build", samples / "cnn.rx", "-t", "c", "-o", out)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["cnn.c", "cnn.h"]


@pytest.mark.parametrize(
    ("model", "mode", "files"),
    [("transformer", "inline", False), ("cnn", "file", True), ("cnn", "auto", False)],
)
def test_an_explicit_choice_wins(
    samples: Path, tmp_path: Path, model: str, mode: str, files: bool
) -> None:
    out = tmp_path / "out"
    result = invoke("build", samples / f"{model}.rx", "-t", "c", "-o", out, "--constants", mode)
    assert result.exit_code == 0, result.output
    assert (out / f"{model}_weights.bin").exists() is files


@needs_cc
def test_the_default_build_compiles_and_runs(tmp_path: Path) -> None:
    """Weights above the limit, emitted with the default of relaxc build: the stub links the
    file and the program adds the weights (the C file alone does not define them)."""
    k = INLINE_CONSTANTS_LIMIT // 4 + 16
    uses = [("w", k)]
    src = tmp_path / "big.rx"
    src.write_text(program(uses))
    (tmp_path / "big.npz").write_bytes(npz_bytes(weights_of(uses)))
    out = tmp_path / "out"
    result = invoke("build", src, "-t", "c", "-o", out, "--emit-main")
    assert result.exit_code == 0, result.output
    assert (out / "big_weights.bin").stat().st_size == 4 * k
    sources = emit_c(
        compile_module(parse_module(program(uses), "big.rx")),
        weights_of(uses),
        prefix="big",
        source="big.rx",
        emit_main=True,
        constants="auto",
    )
    folder = tmp_path / "cc"
    folder.mkdir()
    write_sources(folder, sources)
    assert sorted(sources.files) == sorted(p.name for p in out.iterdir())
    for name in sources.files:  # what relaxc build wrote is what emit_c(auto) gives
        assert (out / name).read_bytes() == (folder / name).read_bytes(), name
    x = np.ones(k, dtype=np.float32)
    (y,) = run_c(compile_c(folder, sources), [x])
    np.testing.assert_array_equal(y, x + weights_of(uses)["w"])
