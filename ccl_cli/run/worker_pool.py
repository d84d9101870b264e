"""A pool of worker processes, each running one task at a time over a pipe of its own.

Each worker has a slot in the client: a thread that hands it one task, waits
for the answer and settles that task's future. A worker holds at most one
task, so the pool always knows which task a dead worker held: its slot starts
a new worker and sends that task again, RETRIES times at most, and no other
task is touched. (Python's ProcessPoolExecutor fails every task of the pool
when one worker dies; its other workers are ended while the tasks they ran
are sent again, and a task submitted while the pool breaks can be lost.)

A worker is gone once its end of the pipe is: the kernel closes it when the
worker's last thread has ended, so a task is sent again only when the try
before it can write nothing more. The process's sentinel is watched too (the
fork server reports the exit, or its own death): a worker reported gone is
killed, and its pipe awaited. A worker that cannot be started (the fork server
was killed) is a lost try of the task its slot holds. Every wait is bounded
and looks at the pool's state again, so every task ends and closing ends in
bounded time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

#: Sends again of a task whose worker died (or could not be started) before it fails.
RETRIES = 2
#: Seconds a slot waits before it starts a worker again after a start failed.
START_PAUSE_SECONDS = 0.2
#: Seconds between two looks at the pool's state while a slot waits.
POLL_SECONDS = 0.2
#: Seconds a killed worker's pipe, or a stopped worker's exit, is waited for.
END_SECONDS = 5.0


class WorkerLost(Exception):
    """The worker process that ran a task ended before it answered, or none could be started."""


@dataclass
class _Job:
    function: Callable[..., Any]
    args: tuple[Any, ...]
    future: Future[Any] = field(default_factory=Future)
    #: Tries left: each worker that dies with the job, or cannot be started for it, takes one.
    tries: int = RETRIES + 1


class WorkerPool:
    """`size` worker processes of `context` (started as tasks arrive), each running
    `initializer` first, then tasks one at a time."""

    def __init__(
        self, size: int, context: Any, initializer: Callable[[], None] | None = None
    ) -> None:
        self.context = context
        self.initializer = initializer
        self.jobs: deque[_Job] = deque()
        self.changed = threading.Condition()
        #: No task comes any more: idle workers are stopped, and a lost try is not sent again.
        self.leaving = False
        #: Past closing's deadline: workers still running are killed.
        self.killing = False
        #: The workers alive, by slot (close kills those still running at its deadline).
        self.workers: set[_Worker] = set()
        #: multiprocessing starts one process at a time.
        self.starting = threading.Lock()
        self.slots = [
            threading.Thread(target=self._slot, name=f"gccl-worker-slot-{n}", daemon=True)
            for n in range(size)
        ]
        for slot in self.slots:
            slot.start()

    def submit(self, function: Callable[..., Any], *args: Any) -> Future[Any]:
        """Queue function(*args); its future ends with the result, or the error of the last
        try (WorkerLost when no try got an answer). Cancelling it withdraws it unless a worker
        has it."""
        job = _Job(function, args)
        with self.changed:
            if self.leaving:
                raise RuntimeError("the worker pool is closed")
            self.jobs.append(job)
            self.changed.notify()
        return job.future

    def let_go(self) -> None:
        """Take no more tasks and cancel those no worker has; each worker exits once its task
        ends. Returns at once."""
        with self.changed:
            self.leaving = True
            waiting = list(self.jobs)
            self.jobs.clear()
            self.changed.notify_all()
        for job in waiting:
            job.future.cancel()

    def close(self, timeout: float) -> None:
        """let_go, wait `timeout` seconds for the running tasks, kill the workers still
        running then, and wait (bounded) for every slot to end."""
        self.let_go()
        deadline = time.monotonic() + timeout
        for slot in self.slots:
            slot.join(max(0.0, deadline - time.monotonic()))
        with self.changed:
            self.killing = True
            running = list(self.workers)
        for worker in running:
            worker.kill()
        deadline = time.monotonic() + END_SECONDS
        for slot in self.slots:
            slot.join(max(0.0, deadline - time.monotonic()))

    def _slot(self) -> None:
        """One worker's life in the client: a job at a time until the pool is let go."""
        worker: _Worker | None = None
        try:
            while (job := self._take()) is not None:
                try:
                    worker = self._run(job, worker)
                except Exception as error:  # a fault of the pool's own: the job still ends
                    _settle(job.future, False, error)
                    if worker is not None:
                        self._end(worker, stop=False)
                    worker = None
        finally:
            if worker is not None:
                self._end(worker, stop=True)

    def _take(self) -> _Job | None:
        """The next job not cancelled; None once the pool is let go and none is waiting."""
        while True:
            with self.changed:
                while not self.jobs and not self.leaving:
                    self.changed.wait(POLL_SECONDS)
                if not self.jobs:
                    return None
                job = self.jobs.popleft()
            if job.future.set_running_or_notify_cancel():
                return job

    def _run(self, job: _Job, worker: _Worker | None) -> _Worker | None:
        """Run `job` on this slot's worker, started (again) where there is none, until it
        answers or no try is left. Returns the worker, None if it is gone."""
        while True:
            if worker is None:
                try:
                    worker = self._start()
                except Exception as error:  # the fork server killed, no processes left
                    if self._lost(job, error):
                        return None
                    with self.changed:
                        self.changed.wait_for(lambda: self.leaving, START_PAUSE_SECONDS)
                    continue
            try:
                ok, value = worker.run(job.function, job.args, lambda: self.killing)
            except WorkerLost as error:
                self._end(worker, stop=False)
                worker = None
                if self._lost(job, error):
                    return None
                continue
            _settle(job.future, ok, value)
            return worker

    def _start(self) -> _Worker:
        with self.starting:
            worker = _Worker(self.context, self.initializer)
        with self.changed:
            self.workers.add(worker)
            killing = self.killing
        if killing:  # close's kill came while it started
            worker.kill()
        return worker

    def _forget(self, worker: _Worker) -> None:
        with self.changed:
            self.workers.discard(worker)

    def _end(self, worker: _Worker, stop: bool) -> None:
        """Stop an idle worker (stop), else kill it; it leaves the pool once it has ended."""
        if stop:
            worker.stop()
        else:
            worker.kill()
            worker.process.join(END_SECONDS)
        self._forget(worker)
        worker.connection.close()

    def _lost(self, job: _Job, error: BaseException) -> bool:
        """Count a lost try of `job`; True when it is settled failed (no try left, or the
        pool is let go: nobody waits for it)."""
        job.tries -= 1
        if job.tries > 0 and not self.leaving:
            return False
        _settle(job.future, False, error)
        return True


class _Worker:
    """A started worker process and the client's end of its pipe."""

    def __init__(self, context: Any, initializer: Callable[[], None] | None) -> None:
        here, there = context.Pipe()
        self.process = context.Process(
            target=_serve, args=(there, initializer), name="gccl-worker", daemon=True
        )
        try:
            self.process.start()
        except BaseException:
            here.close()
            raise
        finally:
            there.close()  # the worker's end lives in the worker alone: it ends with it
        self.connection: Connection = here
        #: The pipe ended: the worker's last thread is gone.
        self.ended = False

    def run(
        self, function: Callable[..., Any], args: tuple[Any, ...], killing: Callable[[], bool]
    ) -> tuple[bool, Any]:
        """Send a task and wait for its answer: (True, result) or (False, error).

        WorkerLost once the worker has ended without one (its pipe ended). A worker its
        sentinel reports gone, or one still running when `killing()`, is killed first.
        """
        try:
            self.connection.send((function, args))
        except OSError:  # it died idle, before the task reached it
            return self._answer()
        except Exception as error:  # a task that cannot be pickled: the worker never saw it
            return False, error
        while True:
            ready = wait([self.connection, self.process.sentinel], POLL_SECONDS)
            if self.connection in ready:
                return self._answer()
            if ready or killing():
                self.kill()
                if wait([self.connection], END_SECONDS):
                    return self._answer()
                raise WorkerLost("the worker process did not end when killed")

    def _answer(self) -> tuple[bool, Any]:
        """The answer in the pipe; WorkerLost when the pipe ended without one."""
        try:
            answer: tuple[bool, Any] = self.connection.recv()
        except (EOFError, OSError):
            self.ended = True
            raise WorkerLost(f"the worker process ended ({self._ending()})") from None
        except Exception as error:  # an answer that could not be unpickled here
            return False, error
        return answer

    def _ending(self) -> str:
        self.process.join(END_SECONDS)
        code = self.process.exitcode
        if code is None:
            return "still running"
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exit code {code}"

    def kill(self) -> None:
        """SIGKILL the worker unless its pipe has ended (then so has it).

        By its pid: a worker whose fork server died is reported ended by its sentinel, and
        Process.kill spares it, while it may still be running.
        """
        if not self.ended:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGKILL)

    def stop(self) -> None:
        """Tell an idle worker to exit and wait for it; kill it if it does not in
        END_SECONDS."""
        with contextlib.suppress(OSError):
            self.connection.send(None)
        self.process.join(END_SECONDS)
        if self.process.exitcode is None:
            self.kill()
            self.process.join(END_SECONDS)


def _settle(future: Future[Any], ok: bool, value: Any) -> None:
    """End a running job's future with its result (ok) or error, unless it has ended."""
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


def _serve(connection: Connection, initializer: Callable[[], None] | None) -> None:
    """A worker: its set-up, then one task at a time until told to stop or its pool's end of
    the pipe is gone."""
    if initializer is not None:
        initializer()
    while True:
        try:
            task = connection.recv()
        except EOFError:
            return
        if task is None:
            return
        function, args = task
        try:
            answer: tuple[bool, Any] = (True, function(*args))
        except Exception as error:
            answer = (False, error)
        try:
            connection.send(answer)
        except OSError:  # the client is gone
            return
        except Exception as error:  # an answer that cannot be pickled
            reason = f"the task's answer could not be sent back ({type(error).__name__}: {error})"
            connection.send((False, RuntimeError(reason)))
