"""``relaxc check``: parse and verify .rx files (and their weights when present)."""

from __future__ import annotations

from pathlib import Path

import click


from .errors import Sources, reported_errors
from .loading import load_program


@click.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--params",
    type=click.Path(path_type=Path),
    help="Weights .npz (default: FILE with .npz suffix).",
)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on success.")
@click.pass_obj
def check_cmd(obj: dict, files: tuple[Path, ...], params: Path | None, quiet: bool) -> None:
    """Parse and verify each FILE; report every error found, one per file.

    Weights are checked against their declared types when a .npz is found beside the model
    (or given with --params). Exit status 1 if any file has an error.
    """
    failed = 0
    for path in files:
        sources = Sources()
        try:
            with reported_errors(sources, obj["debug"]):
                prog = load_program(path, sources, params, need_weights=False)
                if prog.weights_path is not None:
                    from relaxc.frontend.weights import check_weights

                    check_weights(prog.module, prog.weights, str(prog.weights_path))
                if not quiet:
                    n = sum(len(f.body) for f in prog.module.functions)
                    extra = f", weights {prog.weights_path}" if prog.weights_path else ""
                    click.echo(
                        f"{path}: ok ({len(prog.module.functions)} function(s), {n} "
                        f"statement(s){extra})"
                    )
        except SystemExit as e:
            if e.code not in (0, None):
                failed = max(failed, int(e.code))
    if failed:
        raise SystemExit(failed)  # 1 for input errors, 3 if relaxc itself failed on some file
