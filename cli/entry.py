"""The ``relaxc`` console script: start the click group and end the way Unix tools end.

This module imports nothing of relaxc's at load time, so that Ctrl-C pressed while the rest
(numpy, rich, the op registry) is still being imported ends as quietly as Ctrl-C later:

* Ctrl-C (SIGINT) exits with status 130 (128 + SIGINT), printing ``relaxc: interrupted``
  and no traceback (``--debug`` or ``RELAXC_DEBUG=1`` shows one).
* A closed pipe on stdout (``relaxc passes m.rx --dump-after all | head -1``) is a normal
  end: nothing more is written, nothing is printed, and the status is 0, in every command
  and whenever the reader left. A command whose whole output fits in the pipe never sees
  the reader leave and ends 0; so the only status that does not depend on timing (and
  lets ``set -o pipefail`` scripts use ``| head``) is 0 for all (ripgrep and fd do the same).
  A command that had already failed keeps its own status.
"""

from __future__ import annotations

import os
import sys
import traceback

EXIT_INTERRUPTED = 130
EXIT_OUTPUT_CLOSED = 0


def _debug() -> bool:
    return "--debug" in sys.argv[1:] or os.environ.get("RELAXC_DEBUG", "") not in ("", "0")


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def main() -> None:
    """Console-script entry point: run ``relaxc`` and exit with its status."""
    try:
        from .errors import Interrupted, OutputClosed
    except KeyboardInterrupt:
        _interrupted()
    try:
        from .main import cli

        try:
            cli.main(prog_name="relaxc")
            status: int | str | None = 0
        except SystemExit as e:
            status = e.code
        try:
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's shutdown
        except BrokenPipeError:
            if status in (0, None):
                _output_closed()
            _silence_stdout()  # the command failed before: its status stands
        sys.exit(status)
    except (KeyboardInterrupt, Interrupted):
        _interrupted()
    except (BrokenPipeError, OutputClosed):
        _output_closed()


def _output_closed() -> None:
    _silence_stdout()
    sys.exit(EXIT_OUTPUT_CLOSED)


def _interrupted() -> None:
    if _debug():
        traceback.print_exc()
    sys.stderr.write("relaxc: interrupted\n")
    sys.exit(EXIT_INTERRUPTED)
