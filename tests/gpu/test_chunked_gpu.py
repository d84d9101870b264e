"""Chunked volumes labeled on CUDA (each chunk by the GPU, as on a `dask cuda worker`) equal
the same volume labeled in one piece on the CPU, bit for bit: labels and statistics, 6/18/26,
binary and tau, over chunkings that cut components across faces, edges and corners."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import gpu

import ccl_cli

pytestmark = [*gpu, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")


def blobs(shape: tuple[int, int, int], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mask = rng.random(shape) < 0.45
    return (mask * rng.integers(1, 7, shape)).astype(np.uint16)


@pytest.mark.parametrize("chunks", [(4, 4, 5), ((3, 4), (5, 3), (4, 5)), (1, 8, 9), (7, 8, 1)])
@pytest.mark.parametrize(
    "options",
    [
        {"connectivity": 6},
        {"connectivity": 18, "min_area": 2},
        {"connectivity": 26},
        {"connectivity": 26, "tau": 1, "largest": 3},
        {"connectivity": 6, "tau": 2, "tau_relative": 0.1},
    ],
)
def test_chunks_on_the_gpu_equal_one_piece_on_the_cpu(chunks: tuple, options: dict) -> None:
    values = blobs((7, 8, 9), seed=len(str(chunks)) + len(options))
    labels, tables = ccl_cli.label(values, device="cpu", **options)
    with dask.config.set(scheduler="synchronous"):
        lazy, chunked = ccl_cli.label(
            da.from_array(values, chunks=chunks), device="cuda", **options
        )
        got = lazy.compute()
    np.testing.assert_array_equal(got, labels)
    assert chunked[0].equals(tables[0]), (chunked[0].to_dict(), tables[0].to_dict())


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, ">u2", np.int64, np.float32])
def test_every_dtype_on_the_gpu_equals_one_piece_on_the_cpu(dtype: object) -> None:
    """Values the device takes as they are stay on it; int64 and big-endian ones are taken on
    the host first (as the API does): the same labels either way."""
    values = blobs((40, 45, 50), seed=5)
    values = (values > 0) if dtype is np.bool_ else values.astype(dtype)
    options = {"connectivity": 26} if dtype is np.bool_ else {"connectivity": 18, "tau": 1}
    labels, tables = ccl_cli.label(values, device="cpu", **options)
    with dask.config.set(scheduler="synchronous"):
        lazy, chunked = ccl_cli.label(
            da.from_array(values, chunks=(16, 20, 24)), device="cuda", **options
        )
        got = lazy.compute()
    np.testing.assert_array_equal(got, labels)
    assert chunked[0].equals(tables[0]), (chunked[0].to_dict(), tables[0].to_dict())


def test_a_larger_volume_in_uneven_chunks() -> None:
    values = blobs((96, 100, 110), seed=9)
    labels, tables = ccl_cli.label(values > 0, device="cpu", connectivity=26, min_area=3)
    with dask.config.set(scheduler="synchronous"):
        lazy, chunked = ccl_cli.label(
            da.from_array(values > 0, chunks=(40, 33, 64)),
            device="cuda",
            connectivity=26,
            min_area=3,
        )
        got = lazy.compute()
    np.testing.assert_array_equal(got, labels)
    assert chunked[0].equals(tables[0])
