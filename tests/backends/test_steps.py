"""Labelings in steps (backends/steps.py), run together by interleaved.

The labelings here are plain generators; `Gate` stands for the CUDA event a
step waits for, so the tests decide when it is done.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ccl_cli.backends.base import BatchResult
from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.backends.steps import interleaved
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

    taken: list[tuple[str, int]] = []
    with pytest.raises(RuntimeError, match="device fault"):
        interleaved([waiting_on_a_broken_device(), counting("other", 3, taken)])
    assert cleaned == ["cleaned"]
    assert interleaved([counting("after", 1, [])])[0].components == [1]
