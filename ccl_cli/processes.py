"""`gccl label --processes N`: the run spread over N local worker processes.

The statistics CSVs, TIFF writing and the bookkeeping around each image hold
Python's GIL, so one process's threads cannot use many cores for them (on the
16-core H200 machine one process labeled 4000 depth maps at 376 images/s,
8 processes at 558). N processes each run the pipeline (threads for the
codecs) on tasks of a few inputs (tasks.py). This process keeps the lock,
progress, stopping and the summary. On a GPU it also keeps the only CUDA
backend: the workers send their batches to its labeling service
(service.py), so they start without a CUDA context each and every GPU of
--devices serves them in turn.

Workers ignore Ctrl-C, which a terminal sends to the whole process group:
the client asks them to stop (it cancels tasks not yet started and waits for
the running ones). They keep SIGTERM's default: Python's pool terminates the
workers of a broken pool with it, and a worker that ignored it kept that
pool's clean-up spinning forever (a hang at exit, seen in the tests). A
worker killed mid-write leaves a temporary that the next run removes.
Workers come from a fork server, which is started while this process sets
up its backend. A worker that dies (the kernel's out-of-memory killer, a
crash in a codec, a SIGTERM) breaks Python's pool and every task in it: the
pool is replaced and those tasks are sent again, up to RETRIES times each,
as Dask does for a cluster's workers.
"""

from __future__ import annotations

import multiprocessing
import signal
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from multiprocessing import forkserver
from typing import Any

from .backends.base import Backend
from .config import Settings
from .pipeline import Admitted, Outcomes, usable_cores
from .service import LabelingService, ServedBackend, ServiceAddress
from .tasks import TaskRunner, label_task, spread_task_size, use_backend

#: Resends of a task whose pool broke (a worker died) before it is failed.
RETRIES = 2
#: Cores per process --processes auto gives (each process runs that many threads).
AUTO_CORES_PER_PROCESS = 2
#: Inputs per process --processes auto asks for: a short job stays in this process,
#: where it starts at once.
AUTO_INPUTS_PER_PROCESS = 8


def process_count(setting: int | str, inputs: int, cores: int) -> int:
    """How many worker processes --processes `setting` means for `inputs` inputs.

    auto: one per AUTO_CORES_PER_PROCESS cores and at most one per
    AUTO_INPUTS_PER_PROCESS inputs. On 16 cores of the H200 machines (1000
    depth maps, 200 scans), 8 processes were within 2% of the best of 1, 8
    and 15, where one process took 14% (depth maps) and 79% (scans) longer.
    """
    if isinstance(setting, int):
        return setting
    return max(1, min(cores // AUTO_CORES_PER_PROCESS, inputs // AUTO_INPUTS_PER_PROCESS))


class LocalProcesses:
    """A pool of `count` worker processes, and the labeling of admitted records on them."""

    def __init__(self, count: int, backend: Backend, context: Any, inputs: int) -> None:
        """backend: this process's; on a GPU the workers label through its service.
        context: start_fork_server's. inputs: how many the run has (sizes the tasks)."""
        self.count = count
        self.task_size = spread_task_size(inputs, count)
        self.context = context
        self.service = LabelingService(_devices(backend), count) if _serves(backend) else None
        self.lock = threading.Lock()
        self.closing = False
        self.pool = self._new_pool()

    def close(self) -> None:
        """Stop the workers once their running tasks end, then the labeling service."""
        with self.lock:
            self.closing = True
            pool = self.pool
        pool.shutdown(wait=True, cancel_futures=True)
        if self.service is not None:
            self.service.close()

    def label(
        self,
        admitted: Iterable[Admitted],
        settings: Settings,
        outcomes: Outcomes,
        check_stop: Callable[[], None],
    ) -> None:
        """Label `admitted` in tasks on the worker processes (tasks.TaskRunner)."""
        cores = usable_cores()
        worker_settings = replace(
            settings,
            workers=settings.workers or max(1, cores // self.count),
            device="cpu",  # what a worker without the service uses
            devices=None,
        )
        runner = TaskRunner(self._submit, _cancel, "a worker process failed", self.task_size)
        runner.label(admitted, worker_settings, outcomes, check_stop)

    def _new_pool(self) -> ProcessPoolExecutor:
        address = None if self.service is None else self.service.address
        return ProcessPoolExecutor(
            self.count, mp_context=self.context, initializer=_start_worker, initargs=(address,)
        )

    def _submit(self, task: list[Admitted], settings: Settings) -> Future[Any]:
        """Send a task; its future ends with the result, or with the error of its last try."""
        outcome: Future[Any] = Future()
        self._send(task, settings, outcome, RETRIES)
        return outcome

    def _send(
        self, task: list[Admitted], settings: Settings, outcome: Future[Any], retries: int
    ) -> None:
        with self.lock:
            pool = self.pool
            try:
                attempt = pool.submit(label_task, task, settings)
            except (BrokenProcessPool, RuntimeError) as error:  # broken, or shut down
                _settle(outcome, error=error)
                return

        def landed(attempt: Future[Any]) -> None:
            if attempt.cancelled():
                outcome.cancel()
                return
            error = attempt.exception()
            if isinstance(error, BrokenProcessPool) and retries > 0 and self._renew(pool):
                self._send(task, settings, outcome, retries - 1)
            elif error is not None:
                _settle(outcome, error=error)
            else:
                _settle(outcome, result=attempt.result())

        attempt.add_done_callback(landed)

    def _renew(self, broken: ProcessPoolExecutor) -> bool:
        """Replace the pool if it is still `broken` (once for all its tasks); False when closing."""
        with self.lock:
            if self.closing:
                return False
            if self.pool is broken:
                self.pool = self._new_pool()
        broken.shutdown(wait=False, cancel_futures=True)
        return True


def start_fork_server() -> Any:
    """The fork-server context of the workers, its server started (or starting) now.

    The server imports the pipeline once and every worker forks from it with
    the modules loaded. Starting it takes about as long as those imports, so
    it is started in a thread, before this process sets up its backend.
    """
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["ccl_cli.tasks", "ccl_cli.service"])
    threading.Thread(target=forkserver.ensure_running, daemon=True).start()
    return context


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


def _serves(backend: Backend) -> bool:
    """Whether the workers label through this process's service (on a GPU), not on their own."""
    return backend.name != "cpu"


def _devices(backend: Backend) -> list[Backend]:
    """The one-GPU backends of `backend` (several for --devices)."""
    return list(getattr(backend, "backends", [backend]))


def _start_worker(service: ServiceAddress | None) -> None:
    """A worker's set-up: ignore Ctrl-C (the client stops it), label through the service."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if service is not None:
        use_backend(ServedBackend(service))
