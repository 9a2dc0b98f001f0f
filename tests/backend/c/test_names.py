"""IR names that look like C code, C keywords, library names or the backend's own names never
reach C unchecked: the program still compiles warning-free, runs right, and carries none of
the hostile text outside escaped comments and strings."""

from __future__ import annotations

import re

import numpy as np
import pytest

from relaxc.backend.c import default_prefix, emit_c
from relaxc.backend.c.names import Scope, c_string, comment, sanitize
from relaxc.backend.inputs import random_inputs, resolve_dims
from relaxc.backend.interpreter import Interpreter
from relaxc.frontend.parser import parse_module

from .cbuild import Built, assert_close, compile_c, compile_module, needs_cc, run_c

EVIL = r"*/ int evil(void) { return 1; } /* ??/ \" \\ \n #define x"
"""A weight name that would end a comment, define a function, splice lines with a trigraph
and open a string if it reached C verbatim (as written in .rx, with JSON escapes)."""

HOSTILE = """
fn @static(%int: Tensor[(sizeof, 2), f32], %return: Tensor[(sizeof, 2), f32]) -> Tensor[(sizeof, 2), f32]
    attrs {primitive = true} {
  %double = add(%int, %return)
  %0 = relu(%double)
  return %0
}

fn @model_run(%main: Tensor[(sizeof, 2), f32]) -> Tensor[(sizeof, 2), f32] attrs {primitive = true} {
  %NULL = negative(%main)
  return %NULL
}

fn @main(%int: Tensor[(sizeof, 2), f32], %v_int: Tensor[(sizeof, 2), f32], %0: Tensor[(sizeof, 2), f32],
         %ret_value: Tensor[(2,), f32], %model_c_w: Tensor[(2,), f32], %MODEL_OK: Tensor[(2,), f32],
         %DLTensor: Tensor[(2,), f32])
    -> Tuple[Tensor[(sizeof, 2), f32], Tensor[(sizeof, 2), f32], Tensor[(sizeof, 2), f32], Tensor[(2,), f32],
             Tensor[(2,), f32]]
    attrs {upper_bounds = {sizeof = 4}} {
  %w: Tensor[(2,), f32] = const("w")
  %evil: Tensor[(2,), f32] = const("EVIL")
  %arena = add(%int, %v_int)
  %memcpy = call @static(%arena, %0)
  %return = call @model_run(%memcpy)
  %d_sizeof = add(%return, %evil)
  %args = add(%ret_value, %w)
  %v_args = add(%args, %model_c_w)
  %errno = add(%v_args, %MODEL_OK)
  %out = multiply(%errno, %DLTensor)
  return (%d_sizeof, %int, %d_sizeof, %out, %w)
}
""".replace("EVIL", EVIL)  # noqa: E501


def hostile_weights() -> dict[str, np.ndarray]:
    module = parse_module(HOSTILE, "hostile.rx")
    evil = next(s.value.args[0] for s in module.get("main").body if s.name == "evil")
    return {"w": np.array([1.5, -2.0], np.float32), evil: np.array([0.25, 4.0], np.float32)}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Built]:
    out = {}
    module = parse_module(HOSTILE, "hostile.rx")
    for mode in ("packed", "unpacked"):
        folder = tmp_path_factory.mktemp(f"hostile_{mode}")
        sources = emit_c(
            compile_module(module, unpacked=mode == "unpacked"),
            hostile_weights(),
            prefix="model",
            source='evil */ "name".rx',
            emit_main=True,
        )
        for name, text in sources.files.items():
            (folder / name).write_text(text)
        out[mode] = compile_c(folder, sources)
    return out


@needs_cc
@pytest.mark.parametrize("mode", ["packed", "unpacked"])
def test_hostile_names_compile_and_run(hostile, mode: str) -> None:
    module = parse_module(HOSTILE, "hostile.rx")
    fn = module.get("main")
    env = resolve_dims(fn, {"sizeof": 3})
    args = random_inputs(fn, env, seed=2)
    want = Interpreter(module, hostile_weights()).run("main", args, env)
    assert_close(run_c(hostile[mode], args, env), want, mode)


@needs_cc
def test_hostile_text_stays_in_comments_and_strings(hostile) -> None:
    built = hostile["packed"]
    for name, text in built.sources.files.items():
        assert "??" not in text, name  # no trigraph anywhere
        code = strip_comments_and_strings(text)
        assert "evil(" not in code and "#define x" not in code, name
        assert "*/" not in code and "/*" not in code, name
    header = built.sources.files["model.h"]
    proto = re.search(r"int32_t model_run\((.*?)\);", header).group(1)
    # Keywords and library names became other names; the user's readable names stayed.
    assert "const float *int," not in proto and "const float *in_int," in proto
    assert "size_t dim_sizeof" in proto and "const float *v_int," in proto
    assert "*DLTensor" not in proto and "*MODEL_OK" not in proto and "*model_c_w" not in proto
    assert "*ret_value" not in proto
    params = re.findall(r"\*?(\w+)(?:,|$)", proto)
    assert len(params) == len(set(params))


def strip_comments_and_strings(text: str) -> str:
    out = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', out)


# ---------------------------------------------------------------------------------------
# The pieces.


@pytest.mark.parametrize(
    "text", ["int", "return", "0abc", "a.b-c", "__x", "", "é", "v_" * 40, "NULL", "DLTensor"]
)
def test_scope_names_are_identifiers_and_unique(text: str) -> None:
    scope = Scope()
    names = [scope.name("v_", text) for _ in range(3)] + [scope.name("", text) for _ in range(2)]
    assert len(set(names)) == len(names)
    for n in names:
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", n) and "__" not in n and len(n) <= 60
        assert n not in ("int", "return", "NULL", "DLTensor")


def test_comment_and_string_escaping() -> None:
    assert comment("a */ b ??/ c \\ d \n e") == "a *_ b ___ c _ d _ e"
    assert c_string('a"b\\c??/\n') == '"a\\042b\\134c\\077\\077\\057\\012"'.replace("\\057", "/")
    assert sanitize("x.y-z") == "x_y_z"


@pytest.mark.parametrize(
    "stem, prefix",
    [
        ("cnn", "cnn"),
        ("my-model", "my_model"),
        ("1x", "model_1x"),
        ("int", "m_int"),
        ("__", "model"),
        ("x" * 50, "x" * 32),
    ],
)
def test_default_prefix(stem: str, prefix: str) -> None:
    assert default_prefix(stem) == prefix
