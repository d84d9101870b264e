"""MultiDeviceBackend splits batches over several backends and gives one backend's answer."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ccl_cli.backends import make_backend
from ccl_cli.backends.base import BatchResult, split_bounds
from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.backends.multi import MultiDeviceBackend
from ccl_cli.config import resolve
from ccl_cli.contract.params import LabelParams
from ccl_cli.errors import UsageError


class Recording(CpuBackend):
    """A CPU backend that remembers the batch sizes it was given."""

    def __init__(self) -> None:
        super().__init__(threads=1)
        self.sizes: list[int] = []

    def label(
        self,
        batch: np.ndarray,
        params: LabelParams,
        out: np.ndarray | None = None,
        narrow: bool = False,
    ) -> BatchResult:
        self.sizes.append(len(batch))
        return super().label(batch, params, out, narrow)


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_split_batches_give_the_single_backend_answer(count: int) -> None:
    rng = np.random.default_rng(count)
    batch = (rng.random((count, 31, 43)) < 0.5) * rng.integers(1, 9, (count, 1, 1), np.uint8)
    params = LabelParams(tau=2, connectivity=4, min_area=2)
    parts = [Recording() for _ in range(3)]
    expected = CpuBackend(threads=1).label(batch, params)
    out = np.full(batch.shape, 7, np.uint32)
    result = MultiDeviceBackend(parts).label(batch, params, out=out)
    assert result.labels is out  # each part wrote its slice in place
    assert np.array_equal(out, expected.labels)
    assert result.components == expected.components
    assert all(a.equals(b) for a, b in zip(result.tables, expected.tables, strict=True))
    sizes = [size for part in parts for size in part.sizes]
    assert sum(sizes) == count
    assert max(sizes) - min(sizes) <= 1 or len(sizes) == 1


@pytest.mark.parametrize(("count", "parts"), [(1, 1), (1, 4), (5, 2), (7, 3), (64, 8), (3, 5)])
def test_split_bounds_cover_every_image_once_in_near_equal_parts(count: int, parts: int) -> None:
    bounds = split_bounds(count, parts)
    assert len(bounds) == min(count, parts)
    assert bounds[0][0] == 0 and bounds[-1][1] == count
    assert all(hi == lo for (_, hi), (lo, _) in itertools.pairwise(bounds))
    sizes = [hi - lo for lo, hi in bounds]
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1


def test_budget_is_the_sum() -> None:
    parts = [CpuBackend(), CpuBackend()]
    assert MultiDeviceBackend(parts).batch_budget_bytes() == 2 * CpuBackend().batch_budget_bytes()


@pytest.mark.parametrize(("value", "expected"), [("all", "all"), ("0, 1", "0,1"), ("3", "3")])
def test_devices_setting(value: str, expected: str) -> None:
    assert resolve([], {"devices": value}).devices == expected


@pytest.mark.parametrize("value", ["", "gpu", "0,,1", "-1", "0,0"])
def test_bad_devices_setting(value: str) -> None:
    with pytest.raises(UsageError, match="'devices' must be"):
        resolve([], {"devices": value})


def test_devices_do_not_go_with_the_cpu() -> None:
    with pytest.raises(UsageError, match="does not go with --device cpu"):
        make_backend("cpu", 1, lambda message: None, devices="0,1")


def test_split_batches_concatenate_the_outlines() -> None:
    rng = np.random.default_rng(5)
    batch = (rng.random((5, 19, 23)) < 0.5).astype(np.uint8)
    params = LabelParams(connectivity=8, min_area=2, polygons=True)
    expected = CpuBackend(threads=1).label(batch, params)
    result = MultiDeviceBackend([Recording() for _ in range(2)]).label(batch, params)
    assert result.polygons is not None and expected.polygons is not None
    assert len(result.polygons) == 5
    assert all(a.equals(b) for a, b in zip(result.polygons, expected.polygons, strict=True))
