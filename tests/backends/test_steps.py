"""Labelings in steps (backends/steps.py): interleaved, and the StepRunner thread.

The labelings here are plain generators; `Gate` stands for the CUDA event a
step waits for, so the tests decide when it is done.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ccl_cli.backends.base import BatchResult
from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.backends.steps import StepRunner, interleaved
from ccl_cli.contract.params import LabelParams


class Gate:
    """What a step waits for: done once opened; synchronize blocks until then. It
    counts the queries of `done` (a stepping thread that polled would make many)."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.queries = 0

    @property
    def done(self) -> bool:
        self.queries += 1
        return self.opened.is_set()

    def synchronize(self) -> None:
        self.opened.wait()


def result(count: int) -> BatchResult:
    return BatchResult(None, [], [count])


def counting(name: str, count: int, taken: list[tuple[str, int]], waits=None):  # type: ignore[no-untyped-def]
    """A labeling of `count` steps that records each; step i + 1 waits for waits[i]."""
    for step in range(count):
        taken.append((name, step))
        yield None if waits is None else waits[step]
    return result(count)


def test_interleaved_labelings_take_steps_in_turn_and_return_in_order() -> None:
    taken: list[tuple[str, int]] = []
    results = interleaved(
        [counting("a", 3, taken), counting("b", 1, taken), counting("c", 2, taken)]
    )
    assert [result.components for result in results] == [[3], [1], [2]]
    assert taken == [("a", 0), ("b", 0), ("c", 0), ("a", 1), ("c", 1), ("a", 2)]


def test_interleaved_steps_a_ready_labeling_while_another_waits() -> None:
    """a's second step waits for a gate that b's last step opens: b's steps run
    meanwhile, and the calling thread asks the gate once, never polling it."""
    taken: list[tuple[str, int]] = []
    gate = Gate()

    def opening(count: int):  # type: ignore[no-untyped-def]
        for step in range(count):
            taken.append(("b", step))
            if step == count - 1:
                gate.opened.set()
            yield None
        return result(count)

    results = interleaved([counting("a", 2, taken, [gate, None]), opening(3)])
    assert [result.components for result in results] == [[2], [3]]
    assert taken == [("a", 0), ("b", 0), ("b", 1), ("b", 2), ("a", 1)]
    assert gate.queries == 1


def test_a_failing_labeling_closes_the_others() -> None:
    cleaned: list[str] = []

    def steps(name: str, fail_at: int | None):  # type: ignore[no-untyped-def]
        try:
            for step in range(3):
                if step == fail_at:
                    raise RuntimeError(name)
                yield
        finally:
            cleaned.append(name)
        return result(0)

    with pytest.raises(RuntimeError, match="b"):
        interleaved([steps("a", None), steps("b", 1), steps("c", None)])
    assert sorted(cleaned) == ["a", "b", "c"]


def test_the_step_runner_interleaves_what_it_is_given_and_returns_each_result() -> None:
    """Labelings handed over from several threads run in the runner's one thread, a
    step each in turn (waiting ones skipped until their wait is over), and each
    caller gets its own result."""
    taken: list[tuple[str, int]] = []
    threads_seen: set[str] = set()
    release = threading.Event()
    gates = {name: Gate() for name in "abc"}

    def labeling(name: str, count: int):  # type: ignore[no-untyped-def]
        release.wait()  # every labeling is handed over before any step is taken
        for step in range(count):
            threads_seen.add(threading.current_thread().name)
            taken.append((name, step))
            if name == "c" and step == 0:
                for gate in gates.values():
                    gate.opened.set()
            yield gates[name] if step == 0 else None
        return result(count)

    runner = StepRunner()
    try:
        futures = [runner.submit(labeling(name, 3)) for name in "abc"]
        release.set()
        assert [future.result(10).components for future in futures] == [[3], [3], [3]]
    finally:
        runner.close()
    assert threads_seen == {"gccl-steps"}
    assert sorted(taken) == [(name, step) for name in "abc" for step in range(3)]
    assert taken[:3] == [("a", 0), ("b", 0), ("c", 0)]  # in turn, not one after the other


def test_the_step_runner_sleeps_while_every_labeling_waits() -> None:
    """While a labeling waits, the runner asks its wait once and leaves it to a
    waiting thread (no polling) until it is over; one handed over meanwhile runs."""
    gate = Gate()
    taken: list[str] = []

    def waiting():  # type: ignore[no-untyped-def]
        taken.append("waiting 0")
        yield gate
        taken.append("waiting 1")
        return result(1)

    runner = StepRunner()
    try:
        slow = runner.submit(waiting())
        assert runner.submit(counting("quick", 2, [])).result(10).components == [2]
        assert not slow.done()
        gate.opened.set()
        assert slow.result(10).components == [1]
    finally:
        runner.close()
    assert gate.queries == 1
    assert taken == ["waiting 0", "waiting 1"]


def test_a_labeling_that_fails_in_the_runner_fails_only_its_own_result() -> None:
    def failing():  # type: ignore[no-untyped-def]
        yield None
        raise ValueError("no such image")

    runner = StepRunner()
    try:
        bad = runner.submit(failing())
        good = runner.submit(counting("ok", 2, []))
        with pytest.raises(ValueError, match="no such image"):
            bad.result(10)
        assert good.result(10).components == [2]
        assert runner.submit(counting("later", 1, [])).result(10).components == [1]
    finally:
        runner.close()


def test_the_cpu_backend_labels_in_one_step_into_out() -> None:
    batch = (np.random.default_rng(3).random((3, 17, 29)) < 0.5).astype(np.uint8)
    params = LabelParams(connectivity=4, min_area=2)
    out = np.zeros(batch.shape, np.uint16)
    steps = CpuBackend(threads=1).label_steps(batch, params, out, True)
    with pytest.raises(StopIteration) as finished:
        next(steps)
    want = CpuBackend(threads=1).label(batch, params, narrow=True)
    assert np.array_equal(out, want.labels)
    assert finished.value.value.components == want.components


class Broken:
    """A wait whose query fails, as a CUDA event's does after a device error."""

    @property
    def done(self) -> bool:
        raise RuntimeError("device fault")

    def synchronize(self) -> None:
        raise RuntimeError("device fault")


class BrokenLater(Gate):
    """A wait not over at first, whose synchronize then fails (a device error)."""

    def synchronize(self) -> None:
        raise RuntimeError("device fault while waiting")


@pytest.mark.parametrize("wait", [Broken, BrokenLater])
def test_a_wait_that_fails_fails_its_labeling_and_runs_its_cleanup(wait: type) -> None:
    cleaned: list[str] = []

    def waiting_on_a_broken_device():  # type: ignore[no-untyped-def]
        try:
            yield wait()
        finally:
            cleaned.append("cleaned")
        return result(0)

    runner = StepRunner()
    try:
        broken = runner.submit(waiting_on_a_broken_device())
        with pytest.raises(RuntimeError, match="device fault"):
            broken.result(10)
        assert cleaned == ["cleaned"]
        assert runner.submit(counting("after", 1, [])).result(10).components == [1]
    finally:
        runner.close()
