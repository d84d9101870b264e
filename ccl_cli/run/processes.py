"""`gccl label --processes N`: the run spread over N local worker processes.

The statistics CSVs, TIFF writing and the bookkeeping around each image hold
Python's GIL, so one process's threads cannot use many cores for them. N
processes each run the pipeline on the CPU backend (threads for the codecs) on
tasks of a few inputs (tasks.py). This process keeps the lock, progress,
stopping and the summary. A run on a GPU (--device cuda, --devices) labels in
this process instead (process_count): labeling is a small share of a
whole run, and a GPU's context, memory and start are paid once there.

Workers ignore Ctrl-C, which a terminal sends to the whole process group:
the client asks them to stop (it cancels tasks not yet started and waits for
the running ones). They keep SIGTERM's default: Python's pool terminates the
workers of a broken pool with it, and a worker that ignored it would keep
that pool's clean-up spinning forever (a hang at exit). A
worker killed mid-write leaves a temporary that the run removes once its
tasks are done (command.py).
Workers die with this process and write nothing into --out after it (its
lock is gone then, and another run may write there). A worker watches the
pipe multiprocessing keeps from this process to it, which ends when this
process dies however it dies: a thread blocked on it ends the worker at once,
and every file is created, renamed into place or removed only after a check
of that pipe (out_dir.check_before_changes). The kernel kills a worker whose
parent, the fork server, is gone (PR_SET_PDEATHSIG); the fork server exits once
this process and the workers have (each holds its pipe). Closing waits
CLOSE_SECONDS for the workers to finish their tasks, then kills them: a
stopped run ends in bounded time even when a worker's decode hangs.
Workers come from multiprocessing's fork server. A worker that dies
(the kernel's out-of-memory killer, a crash in a codec, a SIGTERM) breaks
Python's pool and every task in it: the pool is replaced and those tasks
are sent again, up to RETRIES times each, as Dask does for a cluster's
workers. A worker that cannot be started (the fork server was killed) is
a lost try of its task too: every task ends, none leaves the run waiting.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from functools import partial
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from typing import Any

from ..backends.base import usable_cores
from ..config import Settings
from ..errors import UsageError
from ..io.made import MadeFiles
from ..io.out_dir import OutDir, check_before_changes
from .records import Admitted, Outcomes
from .tasks import Task, TaskRunner, guided_task_sizes, label_task

#: Resends of a task whose pool broke (a worker died) before it is failed.
RETRIES = 2
#: Seconds a task waits before it is sent again after a worker could not be started.
START_PAUSE_SECONDS = 0.2
#: Seconds closing waits for the workers to end before it kills them.
CLOSE_SECONDS = 5.0
#: prctl(2)'s option that sends a signal on the parent's death (Linux).
_PR_SET_PDEATHSIG = 1
#: The process that imported this module: in a worker, the fork server that forked it
#: (it preloads WORKER_MODULES).
_IMPORTED_BY = os.getpid()
#: What the fork server imports once for every worker (worker_start.py).
WORKER_MODULES = ("ccl_cli.run.worker_start",)
#: Inputs per process --processes auto asks for: a short job stays in this process,
#: where it starts at once.
AUTO_INPUTS_PER_PROCESS = 8


def fork_server() -> Any:
    """multiprocessing's fork-server context for the workers, loading WORKER_MODULES once,
    before its first fork.

    The server starts with the pool's first worker: a fresh interpreter that imports
    those modules while this process lists and admits the inputs.
    """
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(WORKER_MODULES))
    return context


def process_count(setting: int | str, inputs: int, cores: int, gpu: bool = False) -> int:
    """How many worker processes --processes `setting` means for `inputs` inputs.

    auto: one per core, each on one thread (local.py then runs every step in
    that thread: a pool thread could only take turns with it for the GIL), and
    at most one per AUTO_INPUTS_PER_PROCESS inputs. gpu: the run asks for a GPU
    (--device cuda, --devices), which labels in this process: auto is 1, and
    more than one is a usage error.
    """
    if gpu:
        if isinstance(setting, int) and setting > 1:
            raise UsageError(
                f"--processes {setting} labels on the CPU of each worker process; a GPU "
                "(--device cuda, --devices) labels in this one: use one or the other"
            )
        return 1
    if isinstance(setting, int):
        return setting
    return max(1, min(cores, inputs // AUTO_INPUTS_PER_PROCESS))


class LocalProcesses:
    """A pool of `count` worker processes, and the labeling of admitted records on them."""

    def __init__(self, count: int, settings: Settings, context: Any, inputs: int) -> None:
        """context: fork_server's. inputs: how many the run has (sizes the tasks)."""
        self.count = count
        self.threads = settings.workers or max(1, usable_cores() // count)
        self.task_sizes = guided_task_sizes(inputs, count)
        self.context = context
        #: Multiprocessing children this process had before: not workers (_let_go).
        self.other_children = set(multiprocessing.active_children())
        self.lock = threading.Lock()
        self.closing = False
        #: The pool's shutdown, a thread, once the workers were told to exit (_let_go).
        self.leaving: threading.Thread | None = None
        self.pool = self._new_pool()

    def close(self) -> None:
        """Stop the workers once their running tasks end (_let_go), wait for them (killing
        those still running after CLOSE_SECONDS) and for the pool."""
        self._let_go()
        assert self.leaving is not None
        self.leaving.join(CLOSE_SECONDS)
        for child in multiprocessing.active_children():  # the workers (_let_go)
            if child not in self.other_children:
                child.kill()
        self.leaving.join()

    def _let_go(self) -> None:
        """Tell the workers to exit once their running tasks end (once), without waiting
        here: the pool's shutdown runs in a thread, which close waits for.

        That shutdown waits for the pool's workers and for its manager thread, which drops
        the pool's queues as it ends and so unlinks their semaphores: a process that exited
        before it would leave the resource tracker a semaphore to warn about ("leaked
        semaphore objects"). The workers are the multiprocessing children this process
        started since this object was made (a run starts no others), which close kills
        where a hung task holds one past its deadline.
        """
        with self.lock:
            self.closing = True
            if self.leaving is not None:
                return
            self.leaving = threading.Thread(
                target=self.pool.shutdown,
                kwargs={"wait": True, "cancel_futures": True},
                name="gccl-pool-shutdown",
                daemon=True,
            )
        self.leaving.start()

    def label(
        self,
        admitted: Iterable[Admitted | None],
        settings: Settings,
        outcomes: Outcomes,
        check_stop: Callable[[], None],
        out: OutDir,
        made: MadeFiles,
    ) -> None:
        """Label `admitted` in tasks on the worker processes (tasks.TaskRunner), each
        on the CPU backend."""
        worker_settings = replace(settings, workers=self.threads, device="cpu", devices=None)
        runner = TaskRunner(self._submit, _cancel, "a worker process failed", self.task_sizes)
        runner.label(admitted, worker_settings, outcomes, check_stop, out, made)
        self._let_go()  # no task comes after these: the workers exit while the run ends

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.count, mp_context=self.context, initializer=_start_worker)

    def _submit(self, task: Task, settings: Settings) -> Future[Any]:
        """Send a task; its future ends with the result, or with the error of its last try."""
        outcome: Future[Any] = Future()
        self._send(task, settings, outcome, RETRIES)
        return outcome

    def _send(self, task: Task, settings: Settings, outcome: Future[Any], retries: int) -> None:
        """Submit `task` to the pool; a lost try (a worker died, or could not be started:
        the fork server was killed) is sent again on a new pool, RETRIES times at most.

        Every path settles `outcome`: one left open would keep the run waiting forever.
        """
        if outcome.cancelled():
            return
        with self.lock:
            pool = self.pool
            try:
                attempt = pool.submit(label_task, task, settings)
            except Exception as error:  # broken, shut down, or a worker that did not start
                attempt = Future()
                attempt.set_exception(error)
        if attempt.done() and not attempt.cancelled() and attempt.exception() is not None:
            time.sleep(START_PAUSE_SECONDS)  # a killed fork server takes a moment to be seen gone
            self._retry(pool, task, settings, outcome, retries, attempt.exception())
            return

        def landed(attempt: Future[Any]) -> None:
            if attempt.cancelled():  # by closing, or by a pool replaced while it waited
                self._retry(pool, task, settings, outcome, retries, None)
                return
            error = attempt.exception()
            if isinstance(error, BrokenProcessPool):
                self._retry(pool, task, settings, outcome, retries, error)
            elif error is not None:
                _settle(outcome, error=error)
            else:
                _settle(outcome, result=attempt.result())

        attempt.add_done_callback(landed)

    def _retry(
        self,
        pool: ProcessPoolExecutor,
        task: Task,
        settings: Settings,
        outcome: Future[Any],
        retries: int,
        error: BaseException | None,
    ) -> None:
        """Send `task` again on a new pool, or end `outcome` with `error` (cancelled: None)."""
        if retries > 0 and self._renew(pool):
            self._send(task, settings, outcome, retries - 1)
        elif error is None:
            outcome.cancel()
        else:
            _settle(outcome, error=error)

    def _renew(self, broken: ProcessPoolExecutor) -> bool:
        """Replace the pool if it is still `broken` (once for all its tasks); False when closing.

        The tasks still waiting in `broken` are cancelled there and sent again.
        """
        with self.lock:
            if self.closing:
                return False
            if self.pool is broken:
                self.pool = self._new_pool()
        broken.shutdown(wait=False, cancel_futures=True)
        return True


def _settle(outcome: Future[Any], result: Any = None, error: BaseException | None = None) -> None:
    """Finish `outcome` unless the client cancelled it meanwhile."""
    if not outcome.set_running_or_notify_cancel():
        return
    if error is not None:
        outcome.set_exception(error)
    else:
        outcome.set_result(result)


def _cancel(futures: list[Any]) -> None:
    for future in futures:
        future.cancel()


def _start_worker() -> None:
    """A worker's set-up: die with the client and change nothing in --out after it (module
    docstring), ignore Ctrl-C (the client stops it)."""
    _die_with_parent()
    client = multiprocessing.parent_process()
    if client is not None:
        check_before_changes(partial(_exit_unless_alive, client))
        threading.Thread(target=_watch, args=(client,), daemon=True, name="gccl-watch").start()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _die_with_parent() -> None:
    """Have the kernel SIGKILL this process when its parent exits (Linux; elsewhere a no-op).

    The parent is the fork server that preloaded this module (_IMPORTED_BY), known even
    when it died before this worker asked: a worker left running then would outlive its
    pool, which counts it dead with its server.
    """
    parent = _IMPORTED_BY if os.getpid() != _IMPORTED_BY else os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request was in place
        os._exit(1)


def _exit_unless_alive(client: BaseProcess) -> None:
    """End this worker at once if its client is gone (its pipe to this process ended)."""
    if not client.is_alive():
        os._exit(1)


def _watch(client: BaseProcess) -> None:
    """End this worker as soon as its client is gone."""
    wait([client.sentinel])
    os._exit(1)
