"""`gccl label --processes N`: the run spread over N local worker processes.

The statistics CSVs, TIFF writing and the bookkeeping around each image hold
Python's GIL, so one process's threads cannot use many cores for them. N
processes each run the pipeline on the CPU backend (threads for the codecs) on
tasks of a few inputs (tasks.py). This process keeps the lock, progress,
stopping and the summary. A run on a GPU (--device cuda, --devices) labels in
this process instead (process_count): labeling is a small share of a
whole run, and a GPU's context, memory and start are paid once there.

Workers ignore Ctrl-C, which a terminal sends to the whole process group:
the client asks them to stop: it cancels tasks not yet started, waits up to
CLOSE_SECONDS for the running ones (their results count: an input a worker
finished is ok in the summary) and kills those still running, all before it
reads what the workers recorded (tasks.TaskRunner's fence). A terminal's
hang-up (SIGHUP), sent to the whole group too, is ignored the same way. A
worker killed mid-write leaves a temporary that the run removes once its
tasks are done (command.py).
Workers die with this process and write nothing into --out after it (its
lock is gone then, and another run may write there). A worker watches the
pipe multiprocessing keeps from this process to it, which ends when this
process dies however it dies: a thread blocked on it ends the worker at once,
and every file is created, renamed into place or removed only after a check
of that pipe (out_changes.check_before_changes). The kernel kills a worker whose
parent, the fork server, is gone (PR_SET_PDEATHSIG); the fork server exits once
this process and the workers have (each holds its pipe). Closing waits
CLOSE_SECONDS for the workers to finish their tasks, then kills them: a
stopped run ends in bounded time even when a worker's decode hangs.
Workers come from multiprocessing's fork server and run in worker_pool.py's
pool: a worker that dies (the kernel's out-of-memory killer, a crash in a
codec, a SIGTERM) or cannot be started (the fork server was killed) costs its
task one try, and that task alone is sent again, as Dask does for a cluster's
workers.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import threading
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import replace
from functools import partial
from multiprocessing.connection import wait
from typing import Any

from ..backends.base import usable_cores
from ..config import Settings
from ..errors import UsageError
from ..io.out_changes import check_before_changes
from .context import RunContext
from .records import Admitted
from .tasks import Task, TaskRunner, guided_task_sizes, label_task
from .worker_pool import WorkerPool

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
        self.pool = WorkerPool(count, context, _start_worker)

    def close(self) -> None:
        """Stop the workers once their running tasks end, killing those still running after
        CLOSE_SECONDS."""
        self.pool.close(CLOSE_SECONDS)

    def label(self, admitted: Iterable[Admitted | None], run: RunContext) -> None:
        """Label `admitted` in tasks on the worker processes (tasks.TaskRunner), each
        on the CPU backend."""
        worker_settings = replace(run.settings, workers=self.threads, device="cpu", devices=None)
        runner = TaskRunner(
            self._submit, _cancel, "a worker process failed", self.task_sizes, self.close
        )
        runner.label(admitted, replace(run, settings=worker_settings))
        self.pool.let_go()  # no task comes after these: the workers exit while the run ends

    def _submit(self, task: Task, settings: Settings) -> Future[Any]:
        return self.pool.submit(label_task, task, settings)


def _cancel(futures: list[Any]) -> None:
    for future in futures:
        future.cancel()


def _start_worker() -> None:
    """A worker's set-up: die with the client and change nothing in --out after it (module
    docstring), ignore Ctrl-C and SIGHUP (the client stops it)."""
    _die_with_parent()
    client = multiprocessing.parent_process()
    if client is not None:
        check_before_changes(partial(_exit_unless_alive, client.sentinel))
        threading.Thread(
            target=_watch, args=(client.sentinel,), daemon=True, name="gccl-watch"
        ).start()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


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


def _exit_unless_alive(client_sentinel: int) -> None:
    """End this worker at once if its client is gone: the client's sentinel (its pipe to
    this process) is ready once the client has ended."""
    if wait([client_sentinel], timeout=0):
        os._exit(1)


def _watch(client_sentinel: int) -> None:
    """End this worker as soon as its client is gone."""
    wait([client_sentinel])
    os._exit(1)
