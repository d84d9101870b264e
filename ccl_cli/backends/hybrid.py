"""--device auto on a GPU machine: label on the CPU at once, on the GPU once it is ready.

Making a CUDA backend (CuPy's import, the driver, a context, the kernels)
takes longer than a small job takes on the CPU, and its imports compete
with the run for Python's GIL: a stream's images wait meanwhile, and the
process grows by CuPy's and the driver's memory. So
batches are labeled on the CPU, and the GPU is started (in a daemon thread)
only once the CPU has labeled for START_AFTER_SECONDS and the labeling is
what the run waits for: it took at least BUSY_SHARE of the time since it
began, or inputs were waiting for it (batches of BEHIND_IMAGES images and
more on average: a list of inputs, or a stream faster than the CPU). A job
done sooner never pays for CUDA, nor does a stream the CPU keeps up with.
The count is measured over periods of PERIOD_SECONDS at least, so that a
stream that idled for hours and then floods in starts the GPU too. Each
batch goes to the GPU if it is ready by then. The backends give the same
bytes, so which one labels a batch changes nothing in the outputs
(BatchResult.backend says which did). A run that ends first never waits for
the thread: a daemon thread does not hold up the interpreter's exit. A GPU
that fails later (a lost device, out of memory beyond what splitting
handles) is dropped with one notice, and that batch and the rest are labeled
on the CPU.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..contract.params import LabelParams
from .base import Backend, BatchResult

#: Seconds of CPU labeling after which the GPU may start (0: at once): half of
#: what its start costs.
START_AFTER_SECONDS = 0.5
#: The least share of the time since the CPU began labeling that it spent labeling.
BUSY_SHARE = 0.5
#: Images per batch, on average, that mean inputs were waiting for the labeling: a
#: stream the CPU keeps up with has what arrived while the last batch was labeled, one or two.
BEHIND_IMAGES = 4
#: Shortest period over which these are measured before the count starts anew.
PERIOD_SECONDS = 2.0


class CpuLoad:
    """Whether CPU labeling is what a run waits for (module docstring), from the CPU
    batches it labels: `count` says when the GPU's start is due."""

    def __init__(self) -> None:
        self._busy = 0.0  # seconds of CPU labeling since self._since
        self._batches = 0  # CPU batches since self._since, and their images
        self._images = 0
        self._since: float | None = None  # None: before the first CPU batch ended

    def count(self, began: float, ended: float, images: int) -> bool:
        """Add one CPU batch (monotonic times); whether the GPU's start is due.

        The first batch does not count: its time is mostly the engine's one-time
        start (loading its compiled kernels, or compiling them on a new machine).
        """
        if self._since is None:
            self._since = ended
            return False
        self._busy += ended - began
        self._batches += 1
        self._images += images
        elapsed = ended - self._since
        behind = self._images >= BEHIND_IMAGES * self._batches
        waited_for = self._busy >= BUSY_SHARE * elapsed or behind
        if self._busy >= START_AFTER_SECONDS and waited_for:
            return True
        if elapsed >= PERIOD_SECONDS and not waited_for:
            self._since, self._busy, self._batches, self._images = ended, 0.0, 0, 0
        return False


class HybridBackend(Backend):
    """The CPU backend until the one `start` makes is ready, then that one (module docstring).

    start: makes the GPU backend (in a thread); it raises when there is none,
    and the run stays on the CPU (then `notice` gets why, if `why` names it).
    """

    def __init__(
        self,
        cpu: Backend,
        start: Callable[[], Backend],
        notice: Callable[[str], None],
        why: Callable[[BaseException], str | None] = lambda error: None,
    ) -> None:
        self.cpu = cpu
        self.notice = notice
        self.gpu: Backend | None = None
        #: The backend batches go to now.
        self.name = cpu.name
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._start, args=(start, why), name="gccl-gpu-start", daemon=True
        )
        self._load = CpuLoad()
        self._started = False
        if START_AFTER_SECONDS <= 0:
            self._start_gpu()

    def _start_gpu(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
        self._thread.start()

    def _start(
        self, start: Callable[[], Backend], why: Callable[[BaseException], str | None]
    ) -> None:
        try:
            gpu = start()
        except Exception as error:  # no usable GPU: the CPU labels everything
            message = why(error)
            if message:
                self.notice(message)
            return
        with self._lock:
            self.gpu = gpu
            self.name = gpu.name

    def wait_started(self, timeout: float | None = None) -> bool:
        """Wait for the GPU's start to end (made or given up); False if it is still going
        or has not begun."""
        if not self._started:
            return False
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _current(self) -> Backend:
        with self._lock:
            return self.gpu or self.cpu

    def label(
        self,
        batch: Any,
        params: LabelParams,
        out: np.ndarray | None = None,
        narrow: bool = False,
        statistics: bool = True,
    ) -> BatchResult:
        """Label on the GPU if it is ready, else (or if it fails now) on the CPU; without
        `statistics`, asked of both (backends.base)."""
        backend = self._current()
        if backend is not self.cpu:
            try:
                result = backend.label(batch, params, out, narrow, statistics)
            except Exception as error:
                self._drop(backend, error)
            else:
                result.backend = result.backend or backend.name
                return result
        began = time.monotonic()
        result = self.cpu.label(batch, params, out, narrow, statistics)
        result.backend = result.backend or self.cpu.name
        if not self._started and self._load.count(began, time.monotonic(), len(batch)):
            self._start_gpu()
        return result

    def _drop(self, gpu: Backend, error: Exception) -> None:
        """Stop using `gpu` after its failure, saying so once."""
        with self._lock:
            if self.gpu is not gpu:
                return
            self.gpu = None
            self.name = self.cpu.name
        self.notice(
            f"the {gpu.name} backend failed ({type(error).__name__}: {error}); "
            "labeling the rest on the CPU"
        )

    def batch_budget_bytes(self) -> int:
        """The budget of the backend batches go to now."""
        return self._current().batch_budget_bytes()

    def empty_batch(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """Memory for the backend batches go to now (page-locked once on the GPU)."""
        return self._current().empty_batch(shape, dtype)
