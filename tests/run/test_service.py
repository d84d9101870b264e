"""The labeling service of --processes on a GPU (service.py), exercised with the CPU backend.

A worker's ServedBackend must give exactly what the service's backend gives
when called directly, with the batch and labels passing through shared memory.
"""

from __future__ import annotations

import csv
import mmap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_helpers import WAIT_SECONDS, files, gccl, make_inputs
from clocks import TestClock
from hypothesis import given
from hypothesis import strategies as st

from ccl_cli.backends import hybrid
from ccl_cli.backends.base import WARM_UP_DTYPES, Backend, warm_up
from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.contract.params import LabelParams
from ccl_cli.errors import BackendUnavailable
from ccl_cli.run import processes
from ccl_cli.run import service as service_module
from ccl_cli.run.service import (
    CONCURRENT_BATCHES,
    DeviceLabeler,
    LabelingService,
    ServedBackend,
    block_size,
)

PARAMS = [
    LabelParams(),
    LabelParams(connectivity=4, min_area=3),
    LabelParams(tau=2, polygons=True),
]


@pytest.fixture
def served() -> Iterator[ServedBackend]:
    service = LabelingService(workers=2)
    service.serve([CpuBackend()])
    backend = ServedBackend(service.address, threads=1)
    yield backend
    if backend.connection is not None:
        backend.connection.close()
    service.close()


def random_batch(backend: Backend, shape: tuple[int, int, int], seed: int) -> np.ndarray:
    batch = backend.empty_batch(shape, np.dtype(np.uint8))
    batch[...] = np.random.default_rng(seed).integers(0, 4, shape)
    return batch


def assert_same_result(got: object, want: object) -> None:
    assert np.array_equal(got.labels, want.labels)  # type: ignore[attr-defined]
    assert got.components == want.components  # type: ignore[attr-defined]
    for mine, theirs in zip(got.tables, want.tables, strict=True):  # type: ignore[attr-defined]
        assert mine.equals(theirs)
    assert (got.polygons is None) == (want.polygons is None)  # type: ignore[attr-defined]
    for mine, theirs in zip(got.polygons or [], want.polygons or [], strict=True):  # type: ignore[attr-defined]
        assert mine.equals(theirs)


@pytest.mark.parametrize("params", PARAMS)
def test_served_results_equal_the_backends_own(served: ServedBackend, params: LabelParams):
    for seed, shape in enumerate([(3, 37, 51), (1, 1, 1), (2, 1, 64), (5, 64, 1)]):
        batch = random_batch(served, shape, seed)
        assert served.blocks.locate(batch) is not None  # it lies in shared memory
        assert_same_result(served.label(batch, params), CpuBackend().label(batch, params))


def test_a_batch_outside_shared_memory_and_a_given_out(served: ServedBackend):
    batch = np.random.default_rng(3).integers(0, 3, (4, 40, 30)).astype(np.uint16)[:, :, ::2]
    out = np.full(batch.shape, 7, np.uint32)
    result = served.label(batch, LabelParams(tau=1), out=out)
    assert result.labels is out
    assert_same_result(result, CpuBackend().label(np.ascontiguousarray(batch), LabelParams(tau=1)))


def test_blocks_are_reused_once_their_arrays_are_gone(served: ServedBackend):
    first = served.empty_batch((2, 100, 100), np.dtype(np.uint8))
    block = served.blocks.locate(first).block  # type: ignore[union-attr]
    del first
    again = served.empty_batch((4, 50, 100), np.dtype(np.uint8))  # same size class
    assert served.blocks.locate(again).block == block  # type: ignore[union-attr]
    held = served.empty_batch((4, 50, 100), np.dtype(np.uint8))  # the first is in use
    assert served.blocks.locate(held).block != block  # type: ignore[union-attr]


@given(st.integers(1, 1 << 34))
def test_block_sizes_are_whole_pages_wasting_at_most_an_eighth(nbytes: int):
    size = block_size(nbytes)
    assert size >= nbytes and size % mmap.PAGESIZE == 0
    if nbytes > 8 * mmap.PAGESIZE:
        assert size <= nbytes * 9 / 8
    assert block_size(size) == size  # a class's size is in its own class
    assert block_size(nbytes - 1 if nbytes > 1 else 1) <= size  # classes grow with the size


class _Failing(CpuBackend):
    def label(self, batch, params, out=None, narrow=False):  # type: ignore[no-untyped-def]
        if batch.shape[0] == 2:
            raise ValueError("two images are too many")
        return super().label(batch, params, out, narrow)


class _Locking(CpuBackend):
    """Records the memory the service page-locks and unlocks."""

    def __init__(self) -> None:
        super().__init__(threads=1)
        self.locked: list[tuple[int, int]] = []
        self.unlocked: list[tuple[int, int]] = []

    def page_lock(self, address: int, size: int):  # type: ignore[no-untyped-def]
        self.locked.append((address, size))
        return lambda: self.unlocked.append((address, size))


class _Stepped(CpuBackend):
    """A CPU backend that labels in steps, each waiting a while, and records how many
    of its labelings were in flight at once."""

    def __init__(self) -> None:
        super().__init__(threads=1)
        self.in_flight = 0
        self.most_in_flight = 0

    def label_steps(self, batch, params, out, narrow):  # type: ignore[no-untyped-def]
        self.in_flight += 1  # the runner's thread only: no lock needed
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            for _ in range(3):
                yield _Timed(0.03)
            return self.label(batch, params, out, narrow)
        finally:
            self.in_flight -= 1


class _Timed:
    """A wait that is done `seconds` after it was made (a CUDA event, in the real
    thing): long enough for every thread to hand its batch over meanwhile."""

    def __init__(self, seconds: float) -> None:
        self.when = time.monotonic() + seconds

    @property
    def done(self) -> bool:
        return time.monotonic() >= self.when

    def synchronize(self) -> None:
        time.sleep(max(0.0, self.when - time.monotonic()))


def test_the_device_labeler_steps_at_most_two_batches_per_device_at_once():
    """Six threads hand batches to one device at once; each gets its own result."""
    stepped = _Stepped()
    labeler = DeviceLabeler([stepped])
    batches = [
        (np.random.default_rng(seed).random((2, 9, 13)) < 0.5).astype(np.uint8) for seed in range(6)
    ]
    outs = [np.zeros(batch.shape, np.uint32) for batch in batches]
    results: dict[int, object] = {}
    start = threading.Barrier(len(batches))

    def hand_over(i: int) -> None:
        start.wait()
        results[i] = labeler.label(0, batches[i], LabelParams(), outs[i], False)

    threads = [threading.Thread(target=hand_over, args=(i,)) for i in range(len(batches))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
    finally:
        labeler.close()
    assert stepped.most_in_flight == CONCURRENT_BATCHES == 2
    for i, batch in enumerate(batches):
        want = CpuBackend(threads=1).label(batch, LabelParams())
        assert np.array_equal(outs[i], want.labels)
        assert results[i].components == want.components  # type: ignore[attr-defined]


def test_the_service_page_locks_each_shared_block_once_and_unlocks_it_at_the_end():
    service = LabelingService(workers=1)
    locking = _Locking()
    service.serve([locking])
    backend = ServedBackend(service.address, threads=1)
    try:
        for seed in range(3):  # the same two blocks (batch and labels) every time
            batch = random_batch(backend, (2, 30, 40), seed)
            assert_same_result(
                backend.label(batch, LabelParams()), CpuBackend().label(batch, LabelParams())
            )
            del batch
        assert len(locking.locked) == 2 == len(set(locking.locked))
        assert all(size >= 2 * 30 * 40 for _, size in locking.locked)
        assert locking.unlocked == []
    finally:
        assert backend.connection is not None
        backend.connection.close()
        service.close()  # waits for the connection to end: its blocks are unlocked
    assert sorted(locking.unlocked) == sorted(locking.locked)


def test_a_failure_in_the_service_is_raised_in_the_worker_which_goes_on():
    service = LabelingService(workers=1)
    service.serve([_Failing()])
    backend = ServedBackend(service.address, threads=1)
    try:
        with pytest.raises(RuntimeError, match="ValueError: two images are too many"):
            backend.label(random_batch(backend, (2, 8, 8), 0), LabelParams())
        batch = random_batch(backend, (1, 8, 8), 1)
        assert_same_result(
            backend.label(batch, LabelParams()), CpuBackend().label(batch, LabelParams())
        )
    finally:
        assert backend.connection is not None
        backend.connection.close()
        service.close()


def test_requests_wait_for_the_backend_then_a_failed_one_is_every_answer():
    service = LabelingService(workers=1)
    backend = ServedBackend(service.address, threads=1)
    answers: list[BaseException] = []

    def ask() -> None:
        try:
            backend.label(random_batch(backend, (1, 4, 4), 0), LabelParams())
        except RuntimeError as error:
            answers.append(error)

    asking = threading.Thread(target=ask)
    asking.start()
    asking.join(0.5)
    assert asking.is_alive()  # no backend yet: the request waits
    service.fail("--device cuda: no CUDA device")
    asking.join(10)
    assert [str(error) for error in answers] == [
        "the labeling process failed (--device cuda: no CUDA device)"
    ]
    assert backend.connection is not None
    backend.connection.close()
    service.close()


class _Served(CpuBackend):
    """A CPU backend served as a GPU's would be."""

    name = "cuda"
    uses_gpu = True


def test_with_cpu_meanwhile_batches_are_labeled_by_the_worker_until_the_gpu_is_served():
    service = LabelingService(workers=1, cpu_meanwhile=True)
    backend = ServedBackend(service.address, threads=2)
    params = LabelParams(tau=1, min_area=2)
    try:
        before = random_batch(backend, (2, 20, 30), 0)
        want = CpuBackend().label(before, params)
        got = backend.label(before, params)  # nothing served yet: labeled at once
        assert_same_result(got, want)
        assert got.backend == "cpu" and backend.local is None  # for this batch only
        assert backend.connection is None  # without asking the service
        service.serve([_Served()])
        after = random_batch(backend, (2, 20, 30), 1)
        got = backend.label(after, params)
        assert_same_result(got, CpuBackend().label(after, params))
        assert got.backend == "cuda"  # the served backend labeled it
    finally:
        assert backend.connection is not None
        backend.connection.close()
        service.close()


def test_batches_are_sized_for_the_backend_that_labels_them():
    """A run asks its backend's budget again when the name changes (local.py): the CPU's
    while the worker labels on its own, the service's share once it is served."""
    cpu_budget = CpuBackend().batch_budget_bytes()
    service = LabelingService(workers=1, cpu_meanwhile=True)
    assert service.address.batch_budget != cpu_budget
    backend = ServedBackend(service.address, threads=1)
    try:
        backend.label(random_batch(backend, (2, 20, 30), 0), LabelParams())
        assert (backend.name, backend.batch_budget_bytes()) == ("cpu", cpu_budget)
        service.serve([_Served()])
        backend.label(random_batch(backend, (2, 20, 30), 1), LabelParams())
        assert backend.name == "served"
        assert backend.batch_budget_bytes() == service.address.batch_budget
    finally:
        assert backend.connection is not None
        backend.connection.close()
        service.close()
    waiting = LabelingService(workers=1)  # --device cuda: every batch waits for the service
    assert ServedBackend(waiting.address, threads=1).name == "served"
    waiting.close()
    none = LabelingService(workers=1)
    none.serve([])  # no GPU: the worker labels on its own from its first batch on
    backend = ServedBackend(none.address, threads=1)
    try:
        backend.label(random_batch(backend, (1, 8, 8), 0), LabelParams())
        assert (backend.name, backend.batch_budget_bytes()) == ("cpu", cpu_budget)
    finally:
        assert backend.connection is not None
        backend.connection.close()
        none.close()


def test_with_cpu_meanwhile_a_failing_gpu_is_dropped_with_one_notice():
    notices: list[str] = []
    service = LabelingService(workers=1, cpu_meanwhile=True, notice=notices.append)
    service.serve([_Failing()])
    backend = ServedBackend(service.address, threads=1)
    try:
        for seed in range(3):  # the first fails on the GPU and is labeled by the worker
            batch = random_batch(backend, (2, 8, 8), seed)
            got = backend.label(batch, LabelParams())
            assert_same_result(got, CpuBackend().label(batch, LabelParams()))
            assert got.backend == "cpu"
        assert isinstance(backend.local, CpuBackend)  # labels on its own from then on
        assert len(notices) == 1 and "two images are too many" in notices[0]
    finally:
        assert backend.connection is not None
        backend.connection.close()
        service.close()


def serve_the_cpu_as_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """--device cpu runs as a GPU would: the client makes the backend and serves it."""
    monkeypatch.setattr(CpuBackend, "uses_gpu", True)
    monkeypatch.setattr(processes, "cpu_only", lambda device, devices: False)


def test_a_worker_asks_for_the_gpu_once_its_cpu_labeling_is_what_it_waits_for(
    monkeypatch: pytest.MonkeyPatch,
):
    """With a service that makes its backend on request (--device auto), a worker whose
    batches come back to back asks once; its later batches go to the GPU once served."""
    monkeypatch.setattr(hybrid, "START_AFTER_SECONDS", 0.0)
    asked: list[int] = []
    service = LabelingService(workers=1, cpu_meanwhile=True, start=lambda: asked.append(1))
    backend = ServedBackend(service.address, threads=1)
    try:
        for seed in range(3):  # the first batch is not counted (the engine's start)
            got = backend.label(random_batch(backend, (2, 20, 30), seed), LabelParams())
            assert got.backend == "cpu"
        deadline = time.monotonic() + WAIT_SECONDS
        while not asked and time.monotonic() < deadline:
            time.sleep(0.01)
        assert asked == [1]  # once, however many batches asked
        service.serve([_Served()])
        assert backend.label(random_batch(backend, (2, 20, 30), 3), LabelParams()).backend == "cuda"
    finally:
        assert backend.connection is not None
        backend.connection.close()
        service.close()


def test_a_worker_that_labels_a_small_share_of_its_time_never_asks_for_the_gpu(
    monkeypatch: pytest.MonkeyPatch,
):
    clock = TestClock()
    monkeypatch.setattr(service_module, "time", clock)

    class TimedCpu(CpuBackend):  # labels in 2 ms of the test clock
        def label(self, *args: Any, **kwargs: Any) -> Any:
            clock.now += 0.002
            return super().label(*args, **kwargs)

    service = LabelingService(workers=1, cpu_meanwhile=True, start=lambda: None)
    backend = ServedBackend(service.address, threads=1)
    backend.cpu = TimedCpu(1)
    batch = random_batch(backend, (8, 20, 30), 0)  # batches of many images: not a sign here
    try:
        for _ in range(2000):  # 20 s of batches, each labeled in 2 ms of every 10
            assert backend.label(batch, LabelParams()).backend == "cpu"
            clock.now += 0.008
        assert backend.connection is None  # never asked
    finally:
        service.close()


def test_without_a_gpu_to_serve_the_worker_labels_on_its_own():
    service = LabelingService(workers=1)
    service.serve([])
    backend = ServedBackend(service.address, threads=2)
    try:
        for seed in range(2):
            batch = random_batch(backend, (2, 20, 30), seed)
            want = CpuBackend().label(batch, LabelParams(min_area=2))
            assert_same_result(backend.label(batch, LabelParams(min_area=2)), want)
            assert isinstance(backend.local, CpuBackend) and backend.local.threads == 2
    finally:
        assert backend.connection is not None
        backend.connection.close()
        service.close()


def test_workers_served_by_this_process_write_what_one_process_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    serve_the_cpu_as_a_gpu(monkeypatch)
    make_inputs(tmp_path / "in", 13, 40)
    args = [str(tmp_path / "in"), "-r", "--min-area", "2", "--preview", "--polygons"]
    assert gccl(*args, "--out", str(tmp_path / "one"), "--processes", "1")[0] == 0
    code, _, stderr = gccl(
        *args, "--out", str(tmp_path / "many"), "--processes", "3", "--batch-size", "2"
    )
    assert code == 0, stderr
    assert files(tmp_path / "many") == files(tmp_path / "one")
    with open(tmp_path / "many" / "summary.csv", newline="") as handle:
        assert [row["status"] for row in csv.DictReader(handle)] == ["ok"] * 13


def test_the_served_backend_is_warmed_up_with_the_runs_parameters_before_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    serve_the_cpu_as_a_gpu(monkeypatch)
    warmed: list[tuple[str, LabelParams]] = []
    monkeypatch.setattr(
        processes, "warm_up", lambda backend, params: warmed.append((backend.name, params))
    )
    make_inputs(tmp_path / "in", 5, 40)
    args = [str(tmp_path / "in"), "-r", "--min-area", "2", "--polygons", "--tau", "3"]
    assert gccl(*args, "--out", str(tmp_path / "out"), "--processes", "2")[0] == 0
    assert warmed == [("cpu", LabelParams(tau=3, min_area=2, polygons=True))]


def test_warm_up_labels_tiny_images_and_swallows_what_fails():
    class Recording(CpuBackend):
        def __init__(self, fail: bool) -> None:
            super().__init__(threads=1)
            self.fail = fail
            self.calls: list[tuple[tuple[int, ...], np.dtype, bool]] = []

        def label(self, batch, params, out=None, narrow=False):  # type: ignore[no-untyped-def]
            self.calls.append((batch.shape, batch.dtype, narrow))
            if self.fail:
                raise RuntimeError("no device")
            return super().label(batch, params, out, narrow)

    for fail in (False, True):
        backend = Recording(fail)
        warm_up(backend, LabelParams(tau=1, polygons=True))
        assert backend.calls == [((1, 4, 4), np.dtype(dtype), True) for dtype in WARM_UP_DTYPES]


def test_device_auto_without_a_gpu_labels_in_the_workers(tmp_path: Path):
    """--device auto picks the CPU here (no CUDA on CI): the workers label on their own."""
    from typer.testing import CliRunner

    from ccl_cli.cli import app

    make_inputs(tmp_path / "in", 13, 40)
    args = ["label", str(tmp_path / "in"), "-r", "--min-area", "2", "--quiet"]
    assert gccl(*args[1:-1], "--out", str(tmp_path / "one"), "--processes", "1")[0] == 0
    result = CliRunner().invoke(
        app, [*args, "--out", str(tmp_path / "many"), "--processes", "2", "--device", "auto"]
    )
    assert result.exit_code == 0, result.output
    assert files(tmp_path / "many") == files(tmp_path / "one")


def test_device_auto_ends_without_waiting_for_a_gpu_still_starting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The workers label on the CPU meanwhile, and the run ends when they are done."""
    from typer.testing import CliRunner

    from ccl_cli.cli import app

    class AskedAtOnce(LabelingService):  # as if a worker asked for the GPU at once
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._start_once()

    monkeypatch.setattr(service_module, "LabelingService", AskedAtOnce)
    release = threading.Event()
    made: list[CpuBackend] = []

    def starting(*args: object, **kwargs: object) -> CpuBackend:
        release.wait(WAIT_SECONDS)  # a GPU that is not ready before the run ends
        made.append(CpuBackend(1))
        return made[-1]

    monkeypatch.setattr(processes, "make_backend", starting)
    monkeypatch.setattr(processes, "cpu_only", lambda device, devices: False)
    make_inputs(tmp_path / "in", 13, 40)
    args = ["label", str(tmp_path / "in"), "-r", "--quiet", "--device", "auto"]
    try:
        result = CliRunner().invoke(
            app, [*args, "--out", str(tmp_path / "out"), "--processes", "2"]
        )
        assert not made  # the run did not wait for the backend
    finally:
        release.set()
    assert result.exit_code == 0, result.output
    with open(tmp_path / "out" / "summary.csv", newline="") as handle:
        assert [row["status"] for row in csv.DictReader(handle)] == ["ok"] * 13


def test_an_unusable_device_found_while_workers_start_is_exit_2_with_nothing_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    def unusable(*args: object, **kwargs: object) -> None:
        time.sleep(0.3)  # the workers are up by now
        raise BackendUnavailable("--device cuda: no CUDA device")

    monkeypatch.setattr(processes, "make_backend", unusable)
    monkeypatch.setattr(processes, "cpu_only", lambda device, devices: False)  # a GPU is asked
    make_inputs(tmp_path / "in", 13, 40)
    code, _, stderr = gccl(
        str(tmp_path / "in"), "-r", "--out", str(tmp_path / "out"), "--processes", "2"
    )
    assert code == 2
    assert "--device cuda: no CUDA device" in stderr
    assert not (tmp_path / "out").exists()


def test_an_unusable_device_is_exit_2_even_when_every_input_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    make_inputs(tmp_path / "in", 13, 40)
    out = tmp_path / "out"
    assert gccl(str(tmp_path / "in"), "-r", "--out", str(out), "--processes", "2")[0] == 0

    def unusable(*args: object, **kwargs: object) -> None:
        raise BackendUnavailable("--device cuda: no CUDA device")

    monkeypatch.setattr(processes, "make_backend", unusable)
    monkeypatch.setattr(processes, "cpu_only", lambda device, devices: False)  # a GPU is asked
    options = ["-r", "--out", str(out), "--processes", "2", "--skip-existing"]
    code, _, stderr = gccl(str(tmp_path / "in"), *options)
    assert code == 2 and "no CUDA device" in stderr


def test_without_memory_files_workers_label_on_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Systems without memfd (macOS) run --processes without the service, on the CPU."""
    monkeypatch.setattr(service_module, "SHARED_MEMORY", False)  # read as workers start
    make_inputs(tmp_path / "in", 13, 40)
    args = [str(tmp_path / "in"), "-r", "--min-area", "2"]
    assert gccl(*args, "--out", str(tmp_path / "one"), "--processes", "1")[0] == 0
    assert gccl(*args, "--out", str(tmp_path / "many"), "--processes", "2")[0] == 0
    assert files(tmp_path / "many") == files(tmp_path / "one")
    serve_the_cpu_as_a_gpu(monkeypatch)
    code, _, stderr = gccl(*args, "--out", str(tmp_path / "gpu"), "--processes", "2")
    assert code == 2 and "needs Linux" in stderr
    assert not (tmp_path / "gpu").exists()  # found before the workers started
