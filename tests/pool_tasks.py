"""Tasks for the worker pool's tests (run/test_worker_pool.py), run in worker processes.

Each new worker imports this module to find its task: it imports little, so that a worker
starts at once. Imported by name (`import pool_tasks`), like oracles.py.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any


def note(notes: Path, name: str, die: int = 0, hold: float = 0.0) -> tuple[str, int]:
    """Note this try of `name` (a line with this worker's pid); SIGKILL this worker on its
    first `die` tries; the first try that lives waits `hold` seconds, or until a file
    `release` appears. Returns (name, pid)."""
    path = notes / name
    with open(path, "a") as handle:
        handle.write(f"{os.getpid()}\n")
    tries = len(path.read_text().split())
    if tries <= die:
        os.kill(os.getpid(), signal.SIGKILL)
    deadline = time.monotonic() + (hold if tries == die + 1 else 0)
    while time.monotonic() < deadline and not (notes / "release").exists():
        time.sleep(0.01)
    return name, os.getpid()


def tries(notes: Path, name: str) -> list[int]:
    """The pids of the tries of `name`, in order."""
    path = notes / name
    return [int(pid) for pid in path.read_text().split()] if path.exists() else []


def fail(message: str) -> None:
    raise ValueError(message)


def unpicklable() -> Any:
    """An answer that cannot be sent back."""
    return threading.Lock()
