"""The --out lock: one run at a time writes into a folder.

The lock is an flock, which the kernel drops when its holder dies, so a
crashed run's successor takes over without manual clean-up. The lock file
itself stays (removing it would let a third run lock a fresh file while a
second still holds the old one).
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
import time
from pathlib import Path

from ..errors import OutputBusy, UsageError
from .out_dir import OutDir, kind_of
from .output_paths import LOCK_NAME

_LOCK_MARK = "pid "


class OutputLock:
    """An exclusive hold on an --out folder for the life of a run.

    The lock file is opened without following a link and must be a regular
    file holding nothing but a gccl lock line: a link planted there, or a
    file of the user's by that name, is refused rather than overwritten.
    """

    def __init__(self, out: Path) -> None:
        self.path = out / LOCK_NAME
        self._fd: int | None = None

    def __enter__(self) -> OutputLock:
        out = self.path.parent
        with OutDir(out) as folder:
            try:
                fd = os.open(
                    LOCK_NAME,
                    os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                    0o666,
                    dir_fd=folder.fd,
                )
            except OSError as error:
                if error.errno == errno.ELOOP:
                    raise UsageError(
                        f"{self.path} is a link; remove it (gccl never follows it)"
                    ) from None
                raise UsageError(
                    f"cannot write into --out {out} ({error.strerror or error})"
                ) from None
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
        content = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        if content and not content.startswith(_LOCK_MARK):
            raise UsageError(f"{self.path} is not a gccl lock file; move it")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = content.strip() or "another process"
            raise OutputBusy(
                f"{self.path.parent} is in use by a running gccl ({holder}); "
                "wait for it to finish or choose another --out"
            ) from None
        line = (
            f"{_LOCK_MARK}{os.getpid()} on {socket.gethostname()} since "
            f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n"
        )
        os.ftruncate(fd, 0)
        os.pwrite(fd, line.encode("utf-8"), 0)

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
