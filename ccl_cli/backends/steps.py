"""Labelings in steps (Backend.label_steps), run together from one thread.

A backend that can (CUDA) labels a host batch as a generator of steps
(base.LabelSteps): each step issues work to a device and returns without
waiting, except for what it needs, and yields what its next step will wait
for. Run a step at a time from one thread, ready steps first, many labelings
keep several devices, and several batches on one device, busy at once, and no
threads contend for Python's GIL for it: with a thread per batch, a thread
whose device is ready would wait for the GIL up to the interpreter's switch
interval (sys.getswitchinterval) while others issue work.

The stepping thread never polls: a step's wait that is not over yet is handed
to a waiting thread (_WAITS), which blocks on it (a CUDA event's synchronize
releases the GIL) and then wakes the stepping thread. interleaved runs a given
set of labelings in the calling thread (MultiDeviceBackend, CudaBackend.label).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from .base import BatchResult, LabelSteps, Wait

#: Threads that block on steps' waits, at most (one per labeling in flight; made
#: as they are needed, and a wait beyond them only wakes its labeling later).
WAIT_THREADS = 64
_WAITS = ThreadPoolExecutor(max_workers=WAIT_THREADS, thread_name_prefix="gccl-wait")


@dataclass
class _Running:
    """A labeling being stepped: its steps, its result to be, and the error of its
    last wait (a device error), which fails it at its next turn."""

    steps: LabelSteps
    result: Future[BatchResult]
    failure: BaseException | None = None


class _Turns:
    """Labelings whose next step can run, in the order they became ready; a wait that
    is not over yet puts its labeling back once a waiting thread has seen it over."""

    def __init__(self) -> None:
        self.condition = threading.Condition()
        self.ready: deque[_Running] = deque()

    def put(self, running: _Running) -> None:
        with self.condition:
            self.ready.append(running)
            self.condition.notify()

    def after(self, wait: Wait | None, running: _Running) -> None:
        """Put `running` back now if `wait` is over (or None), else once it is."""
        try:
            if wait is None or wait.done:
                self.put(running)
                return
        except Exception as error:  # the wait's query failed: a device error
            running.failure = error
            self.put(running)
            return
        _WAITS.submit(self._wake_after, wait, running)

    def _wake_after(self, wait: Wait, running: _Running) -> None:
        try:
            wait.synchronize()
        except Exception as error:
            running.failure = error
        self.put(running)


def _step(running: _Running) -> tuple[bool, Wait | None]:
    """Take `running`'s next step (or fail it with its wait's error): whether it
    ended, and what its next step waits for."""
    try:
        if running.failure is not None:
            raise running.failure
        return False, next(running.steps)
    except StopIteration as done:
        running.result.set_result(done.value)
    except Exception as error:  # the labeling's own (a device error, a bad batch)
        running.steps.close()  # its cleanup, if it did not run
        running.result.set_exception(error)
    return True, None


def interleaved(labelings: Sequence[LabelSteps]) -> list[BatchResult]:
    """Run `labelings` step by step until all are done; their results, in order.

    Ready steps run in turn; while none is, the thread blocks until a wait is
    over, so it never waits on one device while another has work to be
    issued. The last unfinished labeling takes its steps as they come (each
    waits where it must). If one fails, the others are closed (their cleanup
    runs) and the error propagates.
    """
    turns = _Turns()
    running = [_Running(steps, Future()) for steps in labelings]
    for each in running:
        turns.put(each)
    left = len(running)
    try:
        while left:
            with turns.condition:
                while not turns.ready:
                    turns.condition.wait()
                taken = turns.ready.popleft()
            ended, wait = _step(taken)
            while not ended and left == 1:  # nothing else to issue meanwhile
                ended, wait = _step(taken)
            if not ended:
                turns.after(wait, taken)
                continue
            left -= 1
            error = taken.result.exception()
            if error is not None:
                raise error
    except BaseException:
        for steps in labelings:
            steps.close()
        raise
    return [each.result.result() for each in running]
