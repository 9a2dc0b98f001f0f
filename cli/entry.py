"""The ``relaxc`` console script: start the click group and end the way Unix tools end.

This module imports nothing of relaxc's at load time, so that Ctrl-C pressed while the rest
(numpy, rich, the op registry) is still being imported ends as quietly as Ctrl-C later:

* Ctrl-C (SIGINT) exits with status 130 (128 + SIGINT), printing ``relaxc: interrupted``
  and no traceback (``--debug`` or ``RELAXC_DEBUG=1`` shows one).
* A closed pipe on stdout (``relaxc passes m.rx --dump-after all | head -1``) is a normal
  end: nothing more is written, nothing is printed, and the status is 141 (128 + SIGPIPE),
  the status a shell reports for ``yes | head -1``'s ``yes``.
"""

from __future__ import annotations

import os
import sys
import traceback

EXIT_INTERRUPTED = 130
EXIT_OUTPUT_CLOSED = 141


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
        try:
            from .main import cli

            cli.main(prog_name="relaxc")
        finally:
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's shutdown
    except (KeyboardInterrupt, Interrupted):
        _interrupted()
    except (BrokenPipeError, OutputClosed):
        _silence_stdout()
        sys.exit(EXIT_OUTPUT_CLOSED)


def _interrupted() -> None:
    if _debug():
        traceback.print_exc()
    sys.stderr.write("relaxc: interrupted\n")
    sys.exit(EXIT_INTERRUPTED)
