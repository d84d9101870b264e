"""How the gccl process ends: with the command's exit code and without the interpreter's
teardown, or by the signal that stopped its run."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import NoReturn


def end_by(signum: int) -> NoReturn:
    """End the process by the signal that stopped its run, as a service manager expects of
    a program it stopped (systemd counts that as a clean stop; a shell reports 128 + signum).

    The run has written its outputs and summary and ended its worker processes; the
    standard streams are flushed first.
    """
    with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say there
        sys.stdout.flush()
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    signal.raise_signal(signum)
    os._exit(128 + signum)  # (where the signal is blocked)


#: The exit code of the finished command, for end_now; None: exit the usual way.
_exit_code: int | None = None


def end_with(code: int) -> NoReturn:
    """End the command with `code`; the process then ends without the interpreter's
    teardown (end_now), except under a profiler or tracer (cProfile, coverage), whose
    results are written in that teardown."""
    global _exit_code
    if sys.getprofile() is None and sys.gettrace() is None:
        _exit_code = code
    sys.exit(code)


def end_now() -> None:
    """The last exit handler (main registers it first): end the process with the command's
    code once every other handler has run (multiprocessing's ends its helper processes).

    A command that returns has closed its outputs, renamed them into place, released
    --out and ended its worker processes. What is left of a normal exit is Python freeing
    every module and the native libraries' teardown (CuPy's), a good part of a short run.
    """
    if _exit_code is None:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: what normal exit would also lose
        pass
    os._exit(_exit_code)
