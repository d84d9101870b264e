"""Labelings in steps, run from one thread.

A backend that can (CUDA) labels a host batch as a generator of steps
(LabelSteps): each step issues work to a device and returns without waiting,
except for what it needs, and yields what its next step will wait for. Run a
step at a time from one thread, ready steps first, many labelings keep
several devices, and several batches on one device, busy at once, and no
threads contend for Python's GIL for it. With a thread per batch (the
labeling service's connections used to label in their own threads), a thread
whose device was ready waited for the GIL up to the interpreter's switch
interval (5 ms) while others issued work. Measured on the two-GPU machine
(benchmarks/bench_multi_gpu.py, batches back to back, two in flight per
GPU): two GPUs took 9.4-10.9 ms a batch of 16 depth-like 4000x3000 frames
and 3.7-4.3 ms a batch of 32 1080p ramps with a thread per batch, 8.0-10.3
and 2.7-3.2 ms stepped from one thread.

interleaved runs a given set of labelings in the calling thread
(MultiDeviceBackend, CudaBackend.label); StepRunner is a thread that runs the
labelings handed to it as they come (the labeling service).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Generator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..contract.params import LabelParams
from .base import Backend, Labeled

#: A labeling in steps (a generator): each next() does a share of the work and
#: returns before waiting on a device again where the backend can, yielding
#: what its next step will wait for: an object whose `done` says whether that
#: has happened (a CUDA event), or None when the next step will not wait. The
#: generator's return value is what labeling gave.
LabelSteps = Generator[Any, None, Labeled]


def label_steps(
    backend: Backend,
    batch: np.ndarray,
    params: LabelParams,
    out: np.ndarray,
    narrow: bool,
    batches_at_once: int = 1,
) -> LabelSteps:
    """backend.label_steps(...) where the backend has it (CUDA), else backend.label
    in one step; `out` and `narrow` as in Backend.label; `batches_at_once`: the
    batches the caller labels on this backend at once (CudaBackend.label_steps)."""
    steps = getattr(backend, "label_steps", None)
    if steps is not None:
        return steps(batch, params, out, narrow, batches_at_once)
    return _in_one_step(backend, batch, params, out, narrow)


def _in_one_step(
    backend: Backend, batch: np.ndarray, params: LabelParams, out: np.ndarray, narrow: bool
) -> LabelSteps:
    yield from ()  # a generator that finishes on its first next()
    return Labeled.of(backend.label(batch, params, out, narrow))


def _ready(wait: Any) -> bool:
    """Whether a step that waits for `wait` (LabelSteps) would run without waiting."""
    return wait is None or bool(wait.done)


def interleaved(labelings: Sequence[LabelSteps]) -> list[Labeled]:
    """Run `labelings` step by step until all are done; their results, in order.

    The ready steps run in turn; while none is, the thread polls, yielding the
    GIL, so it never waits on one device while another has work to be issued.
    The last unfinished labeling takes its steps as they come (each waits
    where it must). If one fails, the others are closed (their cleanup runs)
    and the error propagates.
    """
    results: dict[int, Labeled] = {}
    waits: list[Any] = [None] * len(labelings)
    try:
        while len(results) < len(labelings):
            unfinished = [i for i in range(len(labelings)) if i not in results]
            ready = [i for i in unfinished if _ready(waits[i])]
            if not ready and len(unfinished) > 1:
                time.sleep(0)
                continue
            for i in ready or unfinished:
                try:
                    waits[i] = next(labelings[i])
                except StopIteration as done:
                    results[i] = done.value
    except BaseException:
        for steps in labelings:
            steps.close()
        raise
    return [results[i] for i in range(len(labelings))]


@dataclass
class _Running:
    """A labeling StepRunner has taken: its steps, its result to be, what it waits for."""

    steps: LabelSteps
    result: Future[Labeled]
    wait: Any = None


class StepRunner:
    """A thread that runs every labeling handed to it (submit), ready steps first.

    While labelings are running and none is ready, the thread polls (yielding
    the GIL), so that it takes new ones at once; idle, it sleeps until one comes.
    """

    def __init__(self) -> None:
        self._inbox: queue.SimpleQueue[_Running | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="gccl-steps", daemon=True)
        self._thread.start()

    def submit(self, steps: LabelSteps) -> Future[Labeled]:
        """Run `steps`; the future gets its result, or the error it raised."""
        running = _Running(steps, Future())
        self._inbox.put(running)
        return running.result

    def close(self) -> None:
        """Finish the labelings taken, then end the thread."""
        self._inbox.put(None)
        self._thread.join()

    def _run(self) -> None:
        running: list[_Running] = []
        closing = False
        while running or not closing:
            while not closing and (not running or not self._inbox.empty()):
                taken = self._inbox.get()  # blocks only while there is nothing to run
                if taken is None:
                    closing = True
                else:
                    running.append(taken)
            stepped = False
            for labeling in list(running):
                try:
                    if _ready(labeling.wait):
                        stepped = True
                        labeling.wait = next(labeling.steps)
                except StopIteration as done:
                    labeling.result.set_result(done.value)
                    running.remove(labeling)
                except Exception as error:  # the labeling's own (a device error, a bad batch)
                    labeling.steps.close()  # its cleanup, if it did not run
                    labeling.result.set_exception(error)
                    running.remove(labeling)
            if not stepped:
                time.sleep(0)
