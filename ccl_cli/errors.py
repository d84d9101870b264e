"""The two kinds of failure gccl knows, and the exit codes they map to.

`UsageError` aborts the run (exit 2; `OutputBusy` 4); `InputError` fails one input and the run
goes on (exit 1 at the end). Only the CLI edge turns them into messages. A bad option or
array is also a `ValueError` (`BadValue`) or a `TypeError` (`BadType`), which is what
callers of the Python API catch, as they do for numpy, scipy and scikit-image.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_SOME_FAILED = 1
EXIT_USAGE = 2
#: The inputs held nothing to label (no image named or found).
EXIT_NO_INPUTS = 3
#: Another gccl run holds the --out folder.
EXIT_BUSY = 4
#: Ctrl-C (128 + SIGINT).
EXIT_INTERRUPTED = 130
#: SIGHUP (128 + SIGHUP): a closed terminal or ssh session; the process ends by the signal, as
#: for SIGTERM.
EXIT_HANGUP = 129
#: SIGTERM (128 + SIGTERM): a process that ends by it exits by the signal itself (cli.main), so a
#: service manager sees a clean stop and a shell reports this code.
EXIT_TERMINATED = 143


class GcclError(Exception):
    """Base of every error gccl reports to the user as one line."""

    #: The exit code of a run this error ends.
    exit_code = EXIT_USAGE


class UsageError(GcclError):
    """A bad option, configuration file or output location: the run cannot start."""


class BadValue(UsageError, ValueError):
    """An option's value, or an array, that gccl cannot take (a ValueError to API callers)."""


class BadType(UsageError, TypeError):
    """An option or array of a type gccl does not take (a TypeError to API callers)."""


class InputError(GcclError):
    """One input cannot be labeled (unreadable, corrupt, unsupported); the others go on."""


class OutputBusy(UsageError):
    """Another run holds the --out folder's lock."""

    exit_code = EXIT_BUSY


class BackendUnavailable(UsageError):
    """The requested compute device cannot be used (no CUDA, no CuPy, bad index)."""
