"""`gccl label --scheduler ADDRESS`: the same run on the workers of a Dask distributed cluster.

The run is sent in tasks (tasks.py); `dask cuda worker` gives each worker one
GPU, so --device auto or cuda takes it. Workers read inputs and write outputs
on shared storage, by absolute paths. A worker that dies has its task rerun on
another by Dask.

Before Dask connects, the address is probed by hand (`_probe`): Dask's own
connect waits without bound on a peer that accepts and stays silent, and
reads a peer that is not Dask (an HTTP server) as a frame of exabytes.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterable
from typing import Any

from ..config import Settings
from ..errors import UsageError
from .context import RunContext
from .records import Admitted
from .tasks import Task, TaskRunner, label_task

#: Seconds to wait for the scheduler to answer.
CONNECT_TIMEOUT = 10.0
#: Reruns of a task that raised (a worker that dies has its task rerun anyway).
RETRIES = 2
#: The most bytes a scheduler's first message (its handshake) may announce.
_MAX_HANDSHAKE_BYTES = 1 << 20


class Cluster:
    """A connection to a Dask scheduler, and the labeling of admitted records on its workers."""

    def __init__(self, address: str) -> None:
        try:
            from distributed import Client
        except ImportError:
            raise UsageError(
                "--scheduler needs Dask distributed: pip install 'gccl[cluster]'"
            ) from None
        _probe(address, CONNECT_TIMEOUT)
        try:
            self.client = Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
        except OSError:  # includes the timeout; config checked the address's form
            raise UsageError(_silent(address)) from None
        except Exception as error:
            raise UsageError(f"--scheduler {address}: cannot connect ({error})") from None

    def close(self) -> None:
        """Disconnect from the scheduler."""
        self.client.close()

    def label(self, admitted: Iterable[Admitted | None], run: RunContext) -> None:
        """Label `admitted` in tasks on the cluster's workers (tasks.TaskRunner)."""
        TaskRunner(self._submit, self.client.cancel, "the cluster task failed").label(admitted, run)

    def _submit(self, task: Task, settings: Settings) -> Any:
        # pure=False: a fresh key, so a second run never gets an earlier run's result.
        return self.client.submit(label_task, task, settings, pure=False, retries=RETRIES)


def _silent(address: str) -> str:
    return f"--scheduler {address}: no Dask scheduler answered within {CONNECT_TIMEOUT:g} s"


def _probe(address: str, timeout: float) -> None:
    """Check within `timeout` seconds that a Dask scheduler listens at `address`.

    A Dask peer sends its handshake as soon as it accepts: an 8-byte length,
    then that many bytes. UsageError (one line) when nothing answers in time
    or what answers is not Dask.
    """
    host, _, port = address.removeprefix("tcp://").rpartition(":")
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as sock:
            length = _receive(sock, 8, deadline)
            size = struct.unpack("<Q", length)[0] if length is not None else 0
            if not 0 < size <= _MAX_HANDSHAKE_BYTES or _receive(sock, size, deadline) is None:
                raise UsageError(f"--scheduler {address}: not a Dask scheduler")
    except (TimeoutError, OSError):
        raise UsageError(_silent(address)) from None


def _receive(sock: socket.socket, size: int, deadline: float) -> bytes | None:
    """`size` bytes from `sock` before `deadline` (TimeoutError after it); None when the peer
    closes first."""
    data = b""
    while len(data) < size:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        sock.settimeout(remaining)
        chunk = sock.recv(min(size - len(data), 1 << 16))
        if not chunk:
            return None
        data += chunk
    return data
