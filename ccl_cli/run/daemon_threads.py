"""The run's pool of input/output threads, daemon threads that a stopping run can abandon,
and the wait on one of their results that answers stop requests."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import Any

#: How often a wait on the threads looks for a stop request, in seconds.
POLL_SECONDS = 0.1


class DaemonThreads:
    """A pool of daemon threads: a run that stops abandons a task that never ends
    (concurrent.futures' pool would wait for it at exit)."""

    def __init__(self, count: int) -> None:
        self.tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.count = count
        for _ in range(count):
            threading.Thread(target=self._serve, daemon=True, name="gccl-io").start()

    def submit(self, function: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self.tasks.put((future, function, args))
        return future

    def _serve(self) -> None:
        while (task := self.tasks.get()) is not None:
            future, function, args = task
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(function(*args))
            except BaseException as error:
                future.set_exception(error)

    def close(self) -> None:
        """Let the threads end once their current task does (without waiting for them)."""
        for _ in range(self.count):
            self.tasks.put(None)


def result_or_stop(future: Future[Any], check_stop: Callable[[], None]) -> Any:
    """The future's result, checking for a stop request every POLL_SECONDS while waiting."""
    while True:
        check_stop()
        if wait([future], timeout=POLL_SECONDS).done:
            return future.result()
