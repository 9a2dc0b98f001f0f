"""The ``relaxc`` command: a click group that composes the subcommands."""

from __future__ import annotations

import click

from .cmd_build import build_cmd
from .cmd_check import check_cmd
from .cmd_disasm import disasm_cmd
from .cmd_fmt import fmt_cmd
from .cmd_import import import_cmd
from .cmd_passes import passes_cmd
from .cmd_report import report_cmd
from .cmd_run import run_cmd
from .errors import Interrupted, OutputClosed
from .version import relaxc_version


class RelaxcGroup(click.Group):
    """The command group; Ctrl-C and a closed stdout leave it as :class:`Interrupted` and
    :class:`OutputClosed`, which click lets pass, for :func:`relaxc.cli.entry.main` to end
    with 130 and 0 (click itself would print ``Aborted!`` or exit 1)."""

    def make_context(self, *args, **kwargs) -> click.Context:  # type: ignore[override]
        try:  # ``relaxc --help`` and ``--version`` print here, before any command runs
            return super().make_context(*args, **kwargs)
        except BrokenPipeError:
            raise OutputClosed() from None

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted() from None
        except BrokenPipeError:
            raise OutputClosed() from None
        except SystemExit as e:
            if isinstance(e.__context__, BrokenPipeError):  # rich's Console.on_broken_pipe
                raise OutputClosed() from None
            raise


@click.group(
    cls=RelaxcGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(
    relaxc_version(), "--version", prog_name="relaxc", message="%(prog)s %(version)s"
)
@click.option(
    "--debug",
    is_flag=True,
    envvar="RELAXC_DEBUG",
    help="Show Python tracebacks for errors (also RELAXC_DEBUG=1).",
)
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """relaxc: a compiler driver for tensor programs whose subject is memory.

    Where does every tensor live, how much memory does this model need, and does the
    compiled program stay inside it?
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


cli.add_command(build_cmd)
cli.add_command(check_cmd)
cli.add_command(disasm_cmd)
cli.add_command(fmt_cmd)
cli.add_command(import_cmd)
cli.add_command(passes_cmd)
cli.add_command(report_cmd)
cli.add_command(run_cmd)


if __name__ == "__main__":  # pragma: no cover - python -m relaxc.cli.main
    # Run as the console script does (relaxc.cli.entry: a quiet Ctrl-C, a closed pipe). This
    # module is then __main__; entry imports relaxc.cli.main afresh for the group, so the
    # two do not import each other.
    from relaxc.cli.entry import main

    main()
