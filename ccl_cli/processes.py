"""`gccl label --processes N`: the run spread over N local worker processes.

The statistics CSVs, TIFF writing and the bookkeeping around each image hold
Python's GIL, so one process's threads cannot use many cores for them (on the
16-core H200 machine one process labeled 4000 depth maps at 376 images/s,
8 processes at 558). N processes each run the pipeline (threads for
the codecs, their own backend: with CUDA, their own context on the same GPU,
or with --devices one GPU each, round robin) on tasks of a few inputs
(tasks.py). This process keeps the lock, progress, stopping and the summary.

Workers ignore Ctrl-C, which a terminal sends to the whole process group:
the client asks them to stop (it cancels tasks not yet started and waits for
the running ones). They keep SIGTERM's default: Python's pool terminates the
workers of a broken pool with it, and a worker that ignored it kept that
pool's clean-up spinning forever (a hang at exit, seen in the tests). A
worker killed mid-write leaves a temporary that the next run removes.
Workers come from a fork server, so they never inherit this process's CUDA
state. A worker that dies (the kernel's out-of-memory killer, a crash in a
codec, a SIGTERM) breaks Python's pool and every task in it: the pool is
replaced and those tasks are sent again, up to RETRIES times each, as Dask
does for a cluster's workers.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from typing import Any

from .config import Settings
from .pipeline import Admitted, Outcomes, usable_cores
from .tasks import TaskRunner, label_task

#: Resends of a task whose pool broke (a worker died) before it is failed.
RETRIES = 2
#: Most processes --processes auto starts (each CUDA context costs device memory).
AUTO_PROCESS_LIMIT = 4
#: Inputs per process --processes auto asks for: each process costs about a
#: second to start (Python, CuPy, a CUDA context).
AUTO_INPUTS_PER_PROCESS = 64


def process_count(setting: int | str, inputs: int, cores: int) -> int:
    """How many worker processes --processes `setting` means for `inputs` inputs.

    auto: one per four cores (each runs its own decode and encode threads),
    at most AUTO_PROCESS_LIMIT, and one per AUTO_INPUTS_PER_PROCESS inputs:
    a short job stays in this process, where it starts at once. On 16 cores
    of the H200 machines, 4 processes stayed within a third of the best of
    1, 4 and 8 on every job measured (1000 and 4000 depth maps, 200 and 600
    scans), where 8 were up to 44% slower (1000 depth maps) and 1 took twice
    as long (600 scans).
    """
    if isinstance(setting, int):
        return setting
    return max(1, min(cores // 4, AUTO_PROCESS_LIMIT, inputs // AUTO_INPUTS_PER_PROCESS))


class LocalProcesses:
    """A pool of `count` worker processes, and the labeling of admitted records on them."""

    def __init__(self, count: int, settings: Settings, on_gpu: bool) -> None:
        """on_gpu: whether the backend this process chose for --device runs on CUDA."""
        self.count = count
        self.device = _worker_device(settings, on_gpu)
        self.gpus = _gpus(settings.devices) if on_gpu else []
        self.context = multiprocessing.get_context("forkserver")
        # The server imports the pipeline once (and CuPy, for GPU runs: importing it
        # touches no device); every worker forks from it with them loaded.
        self.context.set_forkserver_preload(["ccl_cli.tasks", *(["cupy"] if on_gpu else [])])
        self.started = self.context.Value("i", 0)  # workers ever started: deals out the GPUs
        self.lock = threading.Lock()
        self.closing = False
        self.pool = self._new_pool()

    def close(self) -> None:
        """Stop the workers once their running tasks end."""
        with self.lock:
            self.closing = True
            pool = self.pool
        pool.shutdown(wait=True, cancel_futures=True)

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
            device=self.device,
            devices=None,
        )
        runner = TaskRunner(self._submit, _cancel, "a worker process failed")
        runner.label(admitted, worker_settings, outcomes, check_stop)

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            self.count,
            mp_context=self.context,
            initializer=_start_worker,
            initargs=(self.gpus, self.started),
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


def _worker_device(settings: Settings, on_gpu: bool) -> str:
    """--device for the workers: what this process chose, never auto (one decision, one notice).

    A worker of --devices sees only its own GPU (_start_worker), as cuda.
    """
    if not on_gpu:
        return "cpu"
    if settings.devices is None and settings.device.startswith("cuda"):
        return settings.device
    return "cuda"


def _gpus(devices: str | None) -> list[str]:
    """CUDA_VISIBLE_DEVICES values of the GPUs of --devices, to deal out to the workers.

    --devices numbers the GPUs this process sees, which an inherited
    CUDA_VISIBLE_DEVICES may already have picked and renumbered. [] without --devices.
    """
    if devices is None:
        return []
    if devices == "all":
        from .backends.cuda import cuda_status

        indices = list(range(len(cuda_status().devices)))
    else:
        indices = [int(i) for i in devices.split(",")]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
    if visible == [""]:
        return [str(i) for i in indices]
    return [visible[i].strip() for i in indices]


def _start_worker(gpus: list[str], started: Any) -> None:
    """A worker's set-up: ignore Ctrl-C (the client stops it), take its GPU."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with started.get_lock():
        index = started.value
        started.value += 1
    if gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus[index % len(gpus)]
