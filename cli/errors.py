"""Turning errors into messages and exit codes (the only place relaxc decides how to fail).

Exit status: 0 success, 1 an error in the user's input (IR, weights, inputs, a budget
exceeded), 2 a usage error (click's own), 3 an internal error (a bug in relaxc). Tracebacks
appear only with ``--debug``.
"""

from __future__ import annotations

import sys
import traceback
from contextlib import contextmanager
from typing import Iterator

import click

from relaxc.ir.diagnostics import InternalError, RxError, render_error

EXIT_USER_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3


class Sources(dict):
    """File name → text of every source read in this invocation (for carets in errors)."""


@contextmanager
def reported_errors(sources: Sources, debug: bool) -> Iterator[None]:
    """Render RxError as ``file:line:col: error: ...`` with a caret, exit 1; bugs exit 3."""
    try:
        yield
    except RxError as e:
        if debug:
            traceback.print_exc(file=sys.stderr)
        click.echo(render_error(e, sources), err=True)
        sys.exit(EXIT_USER_ERROR)
    except (click.exceptions.Exit, click.ClickException, SystemExit, KeyboardInterrupt):
        raise
    except RecursionError:
        if debug:
            traceback.print_exc(file=sys.stderr)
        where = f"{list(sources)[-1]}: " if sources else ""
        click.echo(f"{where}error: the program nests expressions too deeply for relaxc "
                   "(split long dimension expressions into several bindings)", err=True)
        sys.exit(EXIT_USER_ERROR)
    except (InternalError, Exception) as e:  # noqa: BLE001 - the last line of defence
        if debug:
            traceback.print_exc(file=sys.stderr)
            click.echo(f"internal error: {type(e).__name__}: {e}", err=True)
        else:
            click.echo(
                f"internal error: {type(e).__name__}: {e}\n"
                "this is a bug in relaxc; re-run with --debug for a traceback and please report it",
                err=True,
            )
        sys.exit(EXIT_INTERNAL)
