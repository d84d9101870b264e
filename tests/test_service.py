"""The labeling service of --processes on a GPU (service.py), exercised with the CPU backend.

A worker's ServedBackend must give exactly what the service's backend gives
when called directly, with the batch and labels passing through shared memory.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import files, gccl, make_inputs

from ccl_cli import processes
from ccl_cli.backends.base import Backend
from ccl_cli.backends.cpu import CpuBackend
from ccl_cli.params import LabelParams
from ccl_cli.service import LabelingService, ServedBackend

PARAMS = [
    LabelParams(),
    LabelParams(connectivity=4, min_area=3),
    LabelParams(tau=2, polygons=True),
]


@pytest.fixture
def served() -> Iterator[ServedBackend]:
    service = LabelingService([CpuBackend()], workers=2)
    backend = ServedBackend(service.address)
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


class _Failing(CpuBackend):
    def label(self, batch, params, out=None):  # type: ignore[no-untyped-def]
        if batch.shape[0] == 2:
            raise ValueError("two images are too many")
        return super().label(batch, params, out)


def test_a_failure_in_the_service_is_raised_in_the_worker_which_goes_on():
    service = LabelingService([_Failing()], workers=1)
    backend = ServedBackend(service.address)
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


def test_workers_served_by_this_process_write_what_one_process_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(processes, "_serves", lambda backend: True)
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
