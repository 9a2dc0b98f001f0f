"""``relaxc fmt``: rewrite .rx files in the canonical format (comments kept)."""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

import click

from relaxc.frontend.comments import attach_comments
from relaxc.frontend.parser import parse_module
from relaxc.frontend.printer import print_module

from .errors import EXIT_USER_ERROR, Sources, reported_errors
from .files import normalize_newlines, read_source, write_atomic, written_text
from .options import quiet_option


def canonical_text(path: Path, sources: Sources) -> tuple[str, str]:
    """(original text, canonical text) of one file; comments are carried over."""
    raw = read_source(path, keep_newlines=True)
    text = normalize_newlines(raw)
    sources[str(path)] = text
    module = parse_module(text, str(path))
    return raw, print_module(module, attach_comments(text, module))


@click.command("fmt")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--check", is_flag=True, help="Change nothing; exit 1 if a file is not canonical.")
@click.option("--diff", is_flag=True, help="With --check, show what would change.")
@click.option(
    "--stdout", "to_stdout", is_flag=True, help="Print the canonical text instead of rewriting."
)
@quiet_option
@click.pass_obj
def fmt_cmd(
    obj: dict, files: tuple[Path, ...], check: bool, diff: bool, to_stdout: bool, quiet: bool
) -> None:
    """Rewrite each FILE in the canonical .rx format, in place and atomically.

    Formatting only parses (no verification), keeps comments, and never changes meaning:
    the result parses to the same module. A file that does not parse is left untouched.
    """
    failed = 0
    unformatted = []
    for path in files:
        sources = Sources()
        try:
            with reported_errors(sources, obj["debug"]):
                old, new = canonical_text(path, sources)
                if to_stdout:
                    sys.stdout.write(new)
                elif check:
                    if old != new:
                        unformatted.append(path)
                        click.echo(f"{path}: would reformat", err=True)
                        if diff:
                            sys.stdout.writelines(
                                difflib.unified_diff(
                                    old.splitlines(True),
                                    new.splitlines(True),
                                    str(path),
                                    f"{path} (formatted)",
                                )
                            )
                elif old != new:
                    write_atomic(path, new)
                    if not quiet:
                        click.echo(f"reformatted {written_text(path)}", err=True)
        except SystemExit as e:
            if e.code not in (0, None):
                failed = max(failed, int(e.code))
    if failed or unformatted:
        raise SystemExit(failed or EXIT_USER_ERROR)  # 3 if relaxc itself failed on some file
