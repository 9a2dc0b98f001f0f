"""``relaxc check``: parse and verify .rx files (and their weights when present)."""

from __future__ import annotations

from pathlib import Path

import click
from relaxc.frontend.weights import WeightsArchive, named_constants

from .errors import Sources, reported_errors
from .loading import Program
from .onnx_input import load_input
from .options import quiet_option


@click.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--params",
    type=click.Path(path_type=Path),
    help="Weights .npz (default: FILE with .npz suffix).",
)
@quiet_option
@click.pass_obj
def check_cmd(obj: dict, files: tuple[Path, ...], params: Path | None, quiet: bool) -> None:
    """Parse and verify each FILE and its weights; report every error found, one per file.

    The weights (the .npz beside the model, or --params) are checked as relaxc build would
    use them: every named constant present with its declared shape and dtype, and every
    array's data readable (read through once, not kept). A model with named constants and
    no weights is an error, as is a file with no functions. Exit status 1 if any file has an
    error; -q prints nothing but the errors.
    """
    failed = 0
    for path in files:
        sources = Sources()
        try:
            with reported_errors(sources, obj["debug"]):
                prog = load_input(path, sources, params, (), (), True, weight_data=False)
                if isinstance(prog.weights, WeightsArchive):
                    prog.weights.verify_data()
                if not quiet:
                    click.echo(f"{path}: ok ({_summary(prog)})")
        except SystemExit as e:
            if e.code not in (0, None):
                failed = max(failed, int(e.code))
    if failed:
        raise SystemExit(failed)  # 1 for input errors, 3 if relaxc itself failed on some file


def _summary(prog: Program) -> str:
    n = sum(len(f.body) for f in prog.module.functions)
    parts = [f"{len(prog.module.functions)} function(s), {n} statement(s)"]
    used = len({name for name, _ in named_constants(prog.module)})
    if prog.weights_path is not None:
        parts.append(f"weights {prog.weights_path}: {used} of {len(prog.weights)} array(s) used")
    return ", ".join(parts)
