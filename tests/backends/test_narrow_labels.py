"""Narrowed labels: a uint16 labels array, and the images that do not fit on their own.

Every backend path (CPU, several backends) must
give the same images as without narrowing, and return exactly the images
whose kept labels exceed 16 bits as uint32 arrays of their own.
"""

from __future__ import annotations

import numpy as np
import pytest

from ccl_cli.backends.base import NARROW_LIMIT, BatchResult, joined
from ccl_cli.backends.cpu import labels
from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.backends.multi import MultiDeviceBackend
from ccl_cli.contract.params import LabelParams
from ccl_cli.io.label_images import encode_label_png

PARAMS = LabelParams(connectivity=4)


def mixed_batch() -> np.ndarray:
    """512x512 images: isolated dots (65536 components, one too many for 16 bits)
    between two random images with far fewer."""
    rng = np.random.default_rng(5)
    batch = (rng.random((3, 512, 512)) < 0.3).astype(np.uint8)
    batch[1] = 0
    batch[1, ::2, ::2] = 1
    return batch


def assert_narrowed_as_expected(got: BatchResult, want: BatchResult) -> None:
    """`got` (narrowed) holds `want`'s images, uint16 exactly where they fit."""
    assert got.labels.dtype == np.uint16 and got.labels.shape == want.labels.shape
    assert sorted(got.wide) == [i for i, kept in enumerate(want.kept) if kept > NARROW_LIMIT]
    for i in range(len(want.labels)):
        image = got.image(i)
        assert image.dtype == (np.uint32 if i in got.wide else np.uint16)
        assert image.shape == want.labels[i].shape
        assert np.array_equal(image, want.labels[i])
    assert got.components == want.components
    assert all(a.equals(b) for a, b in zip(got.tables, want.tables, strict=True))


def test_the_mixed_batch_has_one_image_too_many_for_16_bits():
    kept = CpuBackend(threads=1).label(mixed_batch(), PARAMS).kept
    assert kept[1] == NARROW_LIMIT + 1 and max(kept[0], kept[2]) < NARROW_LIMIT


def test_cpu_narrows_into_out_and_returns_the_wide_image_apart():
    batch = mixed_batch()
    want = CpuBackend(threads=1).label(batch, PARAMS)
    assert want.wide == {} and want.image(1).dtype == np.uint32
    out = np.full(batch.shape, 0xBEEF, np.uint16)
    got = CpuBackend(threads=2).label(batch, PARAMS, out, narrow=True)
    assert got.labels is out
    assert_narrowed_as_expected(got, want)


@pytest.mark.parametrize("images_per_chunk", [1, 2])
def test_a_batch_past_the_chunk_size_labels_as_one_call(
    monkeypatch: pytest.MonkeyPatch, images_per_chunk: int
) -> None:
    """A batch cut into chunks of images gives the whole call's labels, tables, counts
    and wide images (their indexes in the batch, not in the chunk)."""
    batch = np.concatenate([mixed_batch(), mixed_batch()[::-1]])
    want = CpuBackend(threads=2).label(batch, PARAMS)
    monkeypatch.setattr(labels, "CHUNK_PIXELS", images_per_chunk * 512 * 512)
    got = CpuBackend(threads=2).label(batch, PARAMS, narrow=True)
    assert sorted(got.wide) == [1, 4]
    assert_narrowed_as_expected(got, want)


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_several_backends_narrow_each_image_on_its_own(parts: int):
    batch = mixed_batch()
    backends = [CpuBackend(threads=1) for _ in range(parts)]
    got = MultiDeviceBackend(backends).label(batch, PARAMS, narrow=True)
    assert_narrowed_as_expected(got, CpuBackend(threads=1).label(batch, PARAMS))


def test_joined_parts_renumber_their_wide_images():
    def part(count: int, wide: dict[int, str]) -> BatchResult:
        return BatchResult(None, [None] * count, [0] * count, None, wide)  # type: ignore[list-item]

    parts = [part(2, {1: "a"}), part(3, {}), part(2, {0: "b", 1: "c"})]
    assert joined("labels", parts, PARAMS).wide == {1: "a", 5: "b", 6: "c"}


def test_a_narrowed_image_writes_the_same_png_bytes():
    batch = mixed_batch()[::2]
    got = CpuBackend(threads=1).label(batch, PARAMS, narrow=True)
    want = CpuBackend(threads=1).label(batch, PARAMS)
    for i in range(len(batch)):
        assert got.image(i).dtype == np.uint16
        assert encode_label_png(got.image(i)) == encode_label_png(want.labels[i])
