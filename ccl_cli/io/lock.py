"""The --out lock: one run at a time writes into a folder.

The lock is an flock on GCCL_DIR/LOCK_NAME, a file in gccl's own folder of
--out (reached through the opened --out, out_dir.py), so it is gccl's by
where it is: no file of the user's is ever opened as a lock. The kernel
drops an flock when its holder dies, so a crashed run's successor takes
over without manual clean-up. The lock file itself stays (removing it would
let a third run lock a fresh file while a second still holds the old one).
The holder writes a line saying who it is, for the message a second run
gets.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
import time

from ..errors import OutputBusy, UsageError
from .out_dir import OutDir, kind_of
from .output_paths import GCCL_DIR, LOCK_NAME

#: The most bytes of the holder's line a second run reads.
_HOLDER_BYTES = 4096


class OutputLock:
    """An exclusive hold on an --out folder for the life of a run."""

    def __init__(self, out: OutDir) -> None:
        self.out = out
        self.path = out.root / GCCL_DIR / LOCK_NAME
        self._fd: int | None = None
        #: The lock file's modification time once taken: when the run started, on the clock
        #: of the file system that stamps the outputs.
        self.taken_ns = 0

    def __enter__(self) -> OutputLock:
        folder = self.out.gccl_folder()
        try:
            fd = os.open(
                LOCK_NAME,
                os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                0o666,
                dir_fd=folder,
            )
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise UsageError(
                    f"{self.path} is a link; remove it (gccl never follows it)"
                ) from None
            raise UsageError(
                f"cannot write into --out {self.out.root} ({error.strerror})"
            ) from None
        finally:
            os.close(folder)
        try:
            self._take(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def _take(self, fd: int) -> None:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{self.path} is {kind_of(info.st_mode)}; remove it")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, _HOLDER_BYTES, 0).decode("utf-8", "replace").strip()
            raise OutputBusy(
                f"{self.out.root} is in use by a running gccl ({holder or 'another process'}); "
                "wait for it to finish or choose another --out"
            ) from None
        line = (
            f"pid {os.getpid()} on {socket.gethostname()} since "
            f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n"
        )
        os.ftruncate(fd, 0)
        os.pwrite(fd, line.encode("utf-8"), 0)
        self.taken_ns = os.fstat(fd).st_mtime_ns

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
