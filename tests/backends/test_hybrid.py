"""--device auto's hybrid backend: CPU at once, a slow-starting GPU once it is ready.

The "GPU" here is a CPU backend under another name that starts when the test
lets it, so these run without CUDA; the outputs must be those of a CPU run.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_helpers import files, gccl, json_lines, make_inputs
from clocks import TestClock

from ccl_cli.backends import hybrid
from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.backends.hybrid import HybridBackend
from ccl_cli.contract.params import LabelParams
from ccl_cli.run import command


class FakeGpu(CpuBackend):
    """A CPU backend named like a GPU, that fails from its `fail_from`-th batch on."""

    name = "fake-gpu"

    def __init__(self, fail_from: int | None = None) -> None:
        super().__init__(1)
        self.calls = 0
        self.fail_from = fail_from

    def label(
        self, batch: Any, params: LabelParams, out: Any = None, narrow: bool = False, stats=True
    ):
        self.calls += 1
        if self.fail_from is not None and self.calls >= self.fail_from:
            raise RuntimeError("device lost")
        return super().label(batch, params, out, narrow, stats)


class CountingCpu(CpuBackend):
    """A CPU backend that calls `on_first` inside its first batch."""

    def __init__(self, on_first: Any = None) -> None:
        super().__init__(1)
        self.calls = 0
        self.on_first = on_first

    def label(
        self, batch: Any, params: LabelParams, out: Any = None, narrow: bool = False, stats=True
    ):
        self.calls += 1
        if self.calls == 1 and self.on_first is not None:
            self.on_first()
        return super().label(batch, params, out, narrow, stats)


def _run_with(monkeypatch: pytest.MonkeyPatch, backend: Any, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(command, "make_backend", lambda *a, **k: backend)
    return gccl(*args)


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    make_inputs(tmp_path / "in", 12, 20)
    return tmp_path / "in"


def _reference(inputs: Path, tmp_path: Path) -> tuple[dict[str, bytes], dict]:
    code, stdout, _ = gccl(str(inputs), "-r", "--out", str(tmp_path / "ref"), "--json")
    assert code == 0
    return files(tmp_path / "ref"), json_lines(stdout, moved=("ref", "out"))


@pytest.fixture
def at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hybrid backends made in the test start their GPU at construction."""
    monkeypatch.setattr(hybrid, "START_AFTER_SECONDS", 0)


@pytest.mark.usefixtures("at_once")
def test_small_job_finishes_on_the_cpu_without_waiting(
    inputs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    reference, reference_json = _reference(inputs, tmp_path)
    never = threading.Event()
    gpu = FakeGpu()

    def start() -> FakeGpu:
        never.wait()
        return gpu

    backend = HybridBackend(CpuBackend(1), start, lambda message: None)
    out = tmp_path / "out"
    code, stdout, _ = _run_with(
        monkeypatch, backend, str(inputs), "-r", "--out", str(out), "--json"
    )
    assert code == 0
    assert not backend.wait_started(0)  # the GPU never started, and the run did not wait
    assert gpu.calls == 0
    objects = json_lines(stdout)
    assert {obj["backend"] for obj in objects.values()} == {"cpu"}
    for obj in objects.values():
        del obj["backend"]
    for obj in reference_json.values():
        del obj["backend"]
    assert objects == reference_json
    assert files(out) == reference
    never.set()


@pytest.mark.usefixtures("at_once")
def test_large_job_uses_both_with_identical_outputs(
    inputs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    reference, _ = _reference(inputs, tmp_path)
    ready = threading.Event()
    gpu = FakeGpu()

    def start() -> FakeGpu:
        ready.wait()
        return gpu

    holder: list[HybridBackend] = []

    def first_batch() -> None:  # the GPU becomes ready while the CPU labels batch 1
        ready.set()
        assert holder[0].wait_started(30)

    backend = HybridBackend(CountingCpu(first_batch), start, lambda message: None)
    holder.append(backend)
    out = tmp_path / "out"
    args = [str(inputs), "-r", "--out", str(out), "--json", "--batch-size", "1", "--workers", "1"]
    code, stdout, _ = _run_with(monkeypatch, backend, *args)
    assert code == 0
    used = [obj["backend"] for obj in json_lines(stdout).values()]
    assert used.count("cpu") == 1
    assert used.count("fake-gpu") == len(used) - 1 == gpu.calls
    assert files(out) == reference


@pytest.mark.usefixtures("at_once")
def test_gpu_failure_moves_the_rest_to_the_cpu_with_one_notice(
    inputs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    reference, _ = _reference(inputs, tmp_path)
    gpu = FakeGpu(fail_from=3)
    notices: list[str] = []
    backend = HybridBackend(CpuBackend(1), lambda: gpu, notices.append)
    assert backend.wait_started(30)
    out = tmp_path / "out"
    args = [str(inputs), "-r", "--out", str(out), "--json", "--batch-size", "1", "--workers", "1"]
    code, stdout, stderr = _run_with(monkeypatch, backend, *args)
    assert code == 0, stderr
    used = [obj["backend"] for obj in json_lines(stdout).values()]
    assert used.count("fake-gpu") == 2
    assert used.count("cpu") == len(used) - 2
    assert len(notices) == 1 and "device lost" in notices[0] and "CPU" in notices[0]
    assert files(out) == reference


@pytest.mark.usefixtures("at_once")
def test_a_gpu_that_cannot_start_leaves_the_cpu_and_says_why():
    notices: list[str] = []

    def start() -> FakeGpu:
        raise RuntimeError("no driver")

    backend = HybridBackend(CpuBackend(1), start, notices.append, lambda error: f"no GPU ({error})")
    assert backend.wait_started(30)
    batch = np.zeros((2, 5, 5), np.uint8)
    batch[:, 1:3, 1:3] = 1
    result = backend.label(batch, LabelParams())
    assert result.backend == "cpu" and result.components == [1, 1]
    assert notices == ["no GPU (no driver)"]


class TimedCpu(CpuBackend):
    """A CPU backend whose labeling takes `seconds` on `clock` (the next call's `seconds`)."""

    def __init__(self, clock: TestClock) -> None:
        super().__init__(1)
        self.clock = clock
        self.seconds = 0.0

    def label(
        self, batch: Any, params: LabelParams, out: Any = None, narrow: bool = False, stats=True
    ):
        self.clock.now += self.seconds
        return super().label(batch, params, out, narrow, stats)


def timed_hybrid(monkeypatch: pytest.MonkeyPatch) -> tuple[HybridBackend, TimedCpu, list[int]]:
    """A hybrid backend on a test clock, and the list its GPU starts append to."""
    clock = TestClock()
    monkeypatch.setattr(hybrid, "time", clock)
    started: list[int] = []

    def start() -> FakeGpu:
        started.append(1)
        return FakeGpu()

    cpu = TimedCpu(clock)
    return HybridBackend(cpu, start, lambda message: None), cpu, started


BATCH = np.eye(8, dtype=np.uint8)[np.newaxis]


def test_the_gpu_starts_once_cpu_labeling_is_what_the_run_waits_for(
    monkeypatch: pytest.MonkeyPatch,
):
    backend, cpu, started = timed_hybrid(monkeypatch)
    assert not backend.wait_started(0)  # not at construction
    cpu.seconds = 5.0  # the first batch loads (or compiles) the kernels: not counted
    assert backend.label(BATCH, LabelParams()).backend == "cpu"
    cpu.seconds = hybrid.START_AFTER_SECONDS / 2.5  # then batches back to back
    for _ in range(2):
        backend.label(BATCH, LabelParams())
    assert not backend.wait_started(0) and started == []  # 0.8 of START_AFTER_SECONDS
    backend.label(BATCH, LabelParams())
    assert backend.wait_started(30) and started == [1]
    assert backend.label(BATCH, LabelParams()).backend == "fake-gpu"


@pytest.mark.slow
def test_a_stream_the_cpu_keeps_up_with_never_starts_the_gpu(monkeypatch: pytest.MonkeyPatch):
    backend, cpu, started = timed_hybrid(monkeypatch)
    cpu.seconds = 0.004  # an image every 10 ms, labeled in 4
    for _ in range(5000):  # 50 s, 20 s of it labeling
        assert backend.label(BATCH, LabelParams()).backend == "cpu"
        cpu.clock.now += 0.006
    assert not backend.wait_started(0) and started == []


def test_inputs_waiting_for_the_labeling_start_the_gpu(monkeypatch: pytest.MonkeyPatch):
    """Batches of many images: a list job, or a stream faster than the run (its decoding
    and writing), even when labeling is a small share of the time."""
    backend, cpu, started = timed_hybrid(monkeypatch)
    cpu.seconds = 0.004
    batch = np.repeat(BATCH, hybrid.BEHIND_IMAGES, axis=0)
    for _ in range(int(hybrid.START_AFTER_SECONDS / cpu.seconds) + 1):
        assert not started
        backend.label(batch, LabelParams())
        cpu.clock.now += 0.006
    assert backend.wait_started(30) and started == [1]


@pytest.mark.slow
def test_a_flood_after_a_quiet_hour_starts_the_gpu(monkeypatch: pytest.MonkeyPatch):
    backend, cpu, started = timed_hybrid(monkeypatch)
    cpu.seconds = 0.004
    for _ in range(3600):  # an image a second for an hour
        backend.label(BATCH, LabelParams())
        cpu.clock.now += 1.0
    assert started == []
    busy = 0.0  # then images back to back
    while not started and busy < hybrid.PERIOD_SECONDS + hybrid.START_AFTER_SECONDS + 0.1:
        backend.label(BATCH, LabelParams())
        busy += cpu.seconds
    assert backend.wait_started(30) and started == [1]


@pytest.mark.slow
def test_auto_run_does_not_wait_for_a_hung_cuda_start(tmp_path: Path):
    """A whole process: CUDA's start never ends, the run ends and the process exits."""
    make_inputs(tmp_path / "in", 3, 16)
    script = f"""
import sys, threading
import ccl_cli.backends as backends
backends.find_spec = lambda name: True  # as if CuPy were installed
backends._started_cuda = lambda params: threading.Event().wait()  # a start that never ends
import ccl_cli.backends.hybrid as hybrid
hybrid.START_AFTER_SECONDS = 0  # started at once
from ccl_cli.cli import app
sys.argv = ["gccl", "label", {str(tmp_path / "in")!r}, "-r", "--out", {str(tmp_path / "out")!r},
            "--quiet", "--json"]
app()
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert {obj["backend"] for obj in json_lines(done.stdout).values()} == {"cpu"}
