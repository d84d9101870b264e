"""What chunked labeling takes in, and what it gathers: bad arrays are one line; the client's
merge sees face summaries only; a cluster that loses a worker gives the same labels."""

from __future__ import annotations

import contextlib
import os
import threading

import dask
import dask.array as da
import numpy as np
import pytest

import ccl_cli
from ccl_cli.chunked import solve as solve_module
from ccl_cli.errors import BadType, BadValue

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(autouse=True)
def _synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.mark.parametrize(
    ("array", "options", "words"),
    [
        (da.zeros((4, 4), chunks=2, dtype=np.uint8), {"connectivity": 6}, "got 2-D shape"),
        (da.zeros((2, 4, 4, 4), chunks=2, dtype=np.uint8), {"connectivity": 26}, "got 4-D shape"),
        (
            da.zeros((4, 4, 4), chunks=2, dtype=np.uint8),
            {"connectivity": 8},
            "connectivity 6, 18 or 26",
        ),
        (da.zeros((0, 4, 4), chunks=2, dtype=np.uint8), {"connectivity": 6}, "chunks of 0 voxels"),
        (
            da.zeros((4, 4, 4), chunks=2, dtype=np.uint8),
            {"connectivity": 6, "erode": 1},
            "overlapping",
        ),
    ],
)
def test_bad_arrays_are_one_line(array, options, words) -> None:
    with pytest.raises(BadValue) as raised:
        ccl_cli.label(array, **options)
    assert words in str(raised.value) and "\n" not in str(raised.value)


def test_bad_dtype_and_out() -> None:
    with pytest.raises(BadType, match="complex128 arrays are not labeled"):
        ccl_cli.label(da.zeros((4, 4, 4), chunks=2, dtype=complex), connectivity=6)
    with pytest.raises(BadValue, match="out is not taken"):
        ccl_cli.label(
            da.zeros((4, 4, 4), chunks=2, dtype=np.uint8), connectivity=6, out=np.zeros(1)
        )


def test_the_merge_sees_face_pieces_only(monkeypatch) -> None:
    """Many components inside chunks, a few across faces: the client's union-find gets the
    pieces on faces and their pairs, never the interior ones, nor anything voxel-sized."""
    seen = {}
    real = solve_module.components

    def spy(face, pairs, floats):
        seen["pieces"] = sum(len(part) for part in face)
        seen["pairs"] = sum(len(p) for p in pairs)
        return real(face, pairs, floats)

    monkeypatch.setattr(solve_module, "components", spy)
    values = np.zeros((16, 16, 16), np.uint8)
    inside = [2, 4, 10, 12]  # off the planes 7 and 8 either side of the chunk boundaries
    values[np.ix_(inside, inside, inside)] = 1  # 64 single voxels, inside chunks of 8
    values[5, 6:10, 5] = 1  # one rod across the y boundary: 2 pieces, 1 pair
    labels, tables = ccl_cli.label(da.from_array(values, chunks=8), connectivity=6)
    expected, expected_tables = ccl_cli.label(values, connectivity=6)
    np.testing.assert_array_equal(labels.compute(), expected)
    assert tables[0].equals(expected_tables[0])
    assert len(tables[0]) == 65
    assert seen == {"pieces": 2, "pairs": 1}


@contextlib.contextmanager
def local_cluster(distributed, workers: int):
    """A client of a LocalCluster of `workers` worker processes (a nanny each, one thread
    each), the scheduler of dask's computations meanwhile."""
    with (
        distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
        dask.config.set(scheduler=client),
    ):
        yield client


def test_a_lost_worker_does_not_change_the_labels() -> None:
    """A LocalCluster of two worker processes; one is killed while the labels are computed:
    Dask reruns its tasks from their inputs, and the labels are the one-piece labels."""
    distributed = pytest.importorskip("distributed")
    values = (np.random.default_rng(8).random((24, 24, 24)) < 0.3).astype(np.uint8)
    expected, _ = ccl_cli.label(values, connectivity=26)
    with local_cluster(distributed, workers=2) as client:
        labels, count = ccl_cli.label(da.from_array(values, chunks=8), connectivity=26, stats=False)
        future = client.compute(labels)
        victim = sorted(client.scheduler_info()["workers"])[0]
        with contextlib.suppress(distributed.comm.core.CommClosedError):  # (it died answering)
            client.run(os._exit, 1, workers=[victim])
        got = future.result(timeout=120)
    np.testing.assert_array_equal(got, expected)
    assert int(count) == int(expected.max())


def test_the_seams_take_one_persist_and_one_compute(monkeypatch) -> None:
    """The whole solve is two persists (the chunks labeled, each read in the same task; then
    the rest, every chunk's final-label table staying where it is computed) and one gather
    of the merge's result; no voxel-sized array comes back to the client."""
    calls: list[str] = []
    gathered: list[int] = []
    real_persist, real_compute = dask.persist, dask.compute

    def persist(*args, **kwargs):
        calls.append("persist")
        return real_persist(*args, **kwargs)

    def compute(*args, **kwargs):
        calls.append("compute")
        results = real_compute(*args, **kwargs)
        gathered.extend(_largest_array(result) for result in results)
        return results

    monkeypatch.setattr(dask, "persist", persist)
    monkeypatch.setattr(dask, "compute", compute)
    values = (np.random.default_rng(3).random((24, 24, 24)) < 0.3).astype(np.uint8)
    labels, count = ccl_cli.label(da.from_array(values, chunks=8), connectivity=26, stats=False)
    assert calls == ["persist", "persist", "compute"]
    assert max(gathered) < 8**3  # face pieces and their labels, never a chunk's voxels
    monkeypatch.setattr(dask, "compute", real_compute)
    expected, _ = ccl_cli.label(values, connectivity=26)
    np.testing.assert_array_equal(labels.compute(), expected)
    assert int(count) == int(expected.max())


def _largest_array(value, depth: int = 0) -> int:
    """The most elements of any numpy array within `value` (dataclasses, tuples, lists)."""
    if isinstance(value, np.ndarray):
        return value.size
    if depth > 4:
        return 0
    if isinstance(value, (list, tuple)):
        parts = list(value)
    elif hasattr(value, "__dataclass_fields__"):
        parts = [getattr(value, name) for name in value.__dataclass_fields__]
    else:
        return 0
    return max((_largest_array(part, depth + 1) for part in parts), default=0)


def test_engine_threads_cap_holds_in_this_thread_only() -> None:
    from ccl_cli.backends.cpu import labels as cpu_labels

    every = cpu_labels.pool_size()
    seen: list[int] = []
    with cpu_labels.threads_at_most(3):
        inner = cpu_labels.pool_size()
        with cpu_labels.threads_at_most(8):  # a wider cap inside keeps the narrower one
            nested = cpu_labels.pool_size()
        other = threading.Thread(target=lambda: seen.append(cpu_labels.pool_size()))
        other.start()
        other.join()
    assert inner == min(3, every)
    assert nested == min(3, every)
    assert seen == [every]
    assert cpu_labels.pool_size() == every


@pytest.mark.parametrize(
    ("config", "chunks", "expected"),
    [
        ({"scheduler": "synchronous"}, 64, 16),
        ({"scheduler": "threads", "num_workers": 4}, 64, 4),
        ({"scheduler": "threads", "num_workers": 32}, 64, 1),
        ({"scheduler": "threads", "num_workers": 16}, 2, 8),
    ],
)
def test_a_chunk_task_takes_its_share_of_the_cores(monkeypatch, config, chunks, expected) -> None:
    """On 16 cores: every core with one task at a time, else the cores over the tasks that
    run at once (dask's threads, or fewer chunks)."""
    from ccl_cli.chunked import pieces

    monkeypatch.setattr(pieces, "usable_cores", lambda: 16)
    with dask.config.set(config):
        (got,) = dask.compute(dask.delayed(pieces.task_threads)(chunks))
    assert got == expected


def test_cluster_workers_label_on_their_own_threads() -> None:
    """A worker process a nanny starts (OMP_NUM_THREADS=1) labels each chunk on one engine
    thread: no helper threads start there, however many cores it sees."""
    distributed = pytest.importorskip("distributed")
    values = (np.random.default_rng(4).random((192, 96, 96)) < 0.3).astype(np.uint8)
    expected, _ = ccl_cli.label(values, connectivity=26, device="cpu")

    def helpers() -> tuple[int, int]:
        from ccl_cli.backends.base import usable_cores

        names = [thread.name for thread in threading.enumerate()]
        return names.count("gccl-cpu"), usable_cores()

    with local_cluster(distributed, workers=1) as client:
        lazy, _ = ccl_cli.label(
            da.from_array(values, chunks=96), connectivity=26, device="cpu", stats=False
        )
        got = lazy.compute()
        ((started, cores),) = client.run(helpers).values()
    np.testing.assert_array_equal(got, expected)
    assert cores >= 2  # (the engine would start helpers on two cores and more without the cap)
    assert started == 0
