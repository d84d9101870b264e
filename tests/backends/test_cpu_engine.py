"""The compiled engine against cc3d's labeling (tests/cc3d_reference.py) bit for bit, the
same bytes whatever the strips and threads."""

from __future__ import annotations

import numpy as np
import pytest
from cc3d_reference import label_image as cc3d_label_image
from cc3d_reference import matches
from conftest import pixel_values
from hypothesis import given, settings
from hypothesis import strategies as st
from shapes import checkerboard, rings, snake, spiral

from ccl_cli.backends.cpu import labels as engine
from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.contract.params import SUPPORTED_DTYPES, LabelParams


@pytest.fixture(autouse=True)
def thin_strips(monkeypatch: pytest.MonkeyPatch) -> None:
    """Strips of one row and up, so that small images have many seams; the
    per-component passes spread over the threads however few components there are."""
    monkeypatch.setattr(engine, "MIN_STRIP_ROWS", 1)
    monkeypatch.setattr(engine, "MIN_STRIP_PIXELS", 1)
    monkeypatch.setattr(engine, "SPREAD_COMPONENTS", 0)


def assert_same(values: np.ndarray, params: LabelParams, threads: int) -> None:
    """The engine with `threads` strips equals cc3d's labeling: labels, K and every statistic."""
    want_labels, want_table, want_count = cc3d_label_image(values, params)
    out = np.empty((1, *values.shape), np.uint32)
    labeled = engine.label_batch(values[np.newaxis], params, threads, out)
    np.testing.assert_array_equal(out[0], want_labels)
    assert labeled.components == [want_count]
    assert matches(labeled.tables[0], want_table)


@st.composite
def cases(draw: st.DrawFn) -> tuple[np.ndarray, LabelParams, int]:
    dtype = draw(st.sampled_from(SUPPORTED_DTYPES))
    shape = draw(
        st.one_of(
            st.tuples(st.integers(1, 40), st.integers(1, 40)),
            st.tuples(st.just(1), st.integers(1, 90)),
            st.tuples(st.integers(1, 90), st.just(1)),
        )
    )
    values = pixel_values(draw, dtype, shape)
    foreground = draw(st.sampled_from(["background", "none", "threshold"]))
    params = LabelParams(
        background=None if foreground == "none" else draw(st.sampled_from([0, 1, -1, 255])),
        invert=draw(st.booleans()),
        threshold=(
            draw(st.sampled_from([0, 0.5, 2, 127, 255])) if foreground == "threshold" else None
        ),
        tau=draw(st.sampled_from([None, 0, 0.5, 1, 2, 3.5, 255, 2**32])),
        connectivity=draw(st.sampled_from([4, 8])),
        min_area=draw(st.sampled_from([0, 0, 2, 5])),
    )
    return values, params, draw(st.integers(1, 9))


@pytest.mark.slow
@settings(max_examples=400)
@given(case=cases())
def test_matches_cc3d_on_generated_images(case: tuple[np.ndarray, LabelParams, int]) -> None:
    assert_same(*case)


def seam_cases() -> list[tuple[str, np.ndarray]]:
    """Images whose components cross every seam of any strip plan."""
    rng = np.random.default_rng(7)
    columns = np.zeros((37, 23), bool)
    columns[:, ::2] = True
    diagonal = np.eye(41, 29, dtype=bool) | np.eye(41, 29, k=3, dtype=bool)
    return [
        ("spiral", spiral(33)),
        ("snake", snake(31)),
        ("checkerboard", checkerboard(29, 17)),
        ("rings", rings(36)[0]),
        ("giant", np.ones((45, 19), bool)),
        ("columns", columns),
        ("diagonals", diagonal),
        ("random", rng.random((53, 47)) < 0.55),
    ]


@pytest.mark.parametrize("name, mask", seam_cases())
@pytest.mark.parametrize("connectivity", [4, 8])
def test_seams_give_the_same_bytes_for_every_strip_count(
    name: str, mask: np.ndarray, connectivity: int
) -> None:
    values = np.where(mask, np.arange(mask.size).reshape(mask.shape) % 7 + 1, 0).astype(np.uint16)
    for params in (
        LabelParams(connectivity=connectivity),
        LabelParams(connectivity=connectivity, tau=2, min_area=3),
    ):
        for threads in (1, 2, 3, 5, 8, len(mask)):
            assert_same(values, params, threads)


def test_thread_counts_give_identical_bytes() -> None:
    """A batch through CpuBackend with 1..8 threads: same labels, tables and K, byte for byte."""
    rng = np.random.default_rng(3)
    batch = (rng.random((3, 70, 50)) < 0.5) * rng.integers(1, 40, (3, 70, 50))
    batch = batch.astype(np.float32)
    batch[0, 5:9, 5:9] = -0.0
    for params in (LabelParams(), LabelParams(tau=3, connectivity=4, min_area=4)):
        want = CpuBackend(threads=1).label(batch, params)
        for threads in range(2, 9):
            got = CpuBackend(threads=threads).label(batch, params)
            assert got.labels.tobytes() == want.labels.tobytes()
            assert got.components == want.components
            assert all(a.equals(b) for a, b in zip(got.tables, want.tables, strict=True))


def test_a_batch_labels_each_image_as_alone() -> None:
    rng = np.random.default_rng(5)
    batch = rng.integers(0, 4, (4, 33, 21)).astype(np.int16)
    params = LabelParams(tau=1, min_area=2)
    result = CpuBackend(threads=3).label(batch, params)
    for i, image in enumerate(batch):
        want_labels, want_table, want_count = cc3d_label_image(image, params)
        np.testing.assert_array_equal(result.labels[i], want_labels)
        assert matches(result.tables[i], want_table) and result.components[i] == want_count


def test_narrowed_labels_fall_back_to_uint32_past_65535() -> None:
    """A checkerboard with more 4-connected components than uint16 holds comes back wide."""
    board = checkerboard(2, 70000)[np.newaxis].astype(np.uint8)
    small = np.ones((1, 2, 70000), np.uint8)
    result = CpuBackend(threads=2).label(
        np.concatenate([board, small]), LabelParams(connectivity=4), narrow=True
    )
    assert result.labels.dtype == np.uint16 and set(result.wide) == {0}
    assert result.wide[0].dtype == np.uint32 and result.wide[0].max() == 70000
    assert result.labels[1].max() == 1


def test_unsupported_dtypes_are_refused_as_by_the_cuda_backend() -> None:
    with pytest.raises(ValueError, match="unsupported dtype int64"):
        CpuBackend(threads=1).label(np.ones((1, 2, 2), np.int64), LabelParams())


def test_working_arrays_kept_between_calls_change_nothing() -> None:
    """A dense image, then a sparse smaller one, then the dense one again on the same
    thread (its kept working arrays hold the earlier call's data): each equals cc3d."""
    rng = np.random.default_rng(11)
    dense = ((rng.random((64, 48)) < 0.5) * rng.integers(1, 9, (64, 48))).astype(np.uint16)
    sparse = (rng.random((20, 70)) < 0.1).astype(np.uint8)
    for values, params in (
        (dense, LabelParams(tau=2, min_area=2)),
        (sparse, LabelParams(connectivity=4)),
        (dense, LabelParams(tau=2, min_area=2)),
        (dense, LabelParams()),
    ):
        for threads in (1, 3):
            assert_same(values, params, threads)
