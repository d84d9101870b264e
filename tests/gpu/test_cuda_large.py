"""A batch of more than 2**31 pixels (64-bit indexing), on GPUs with >= 40 GB free."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import backends, gpu, skip_unless_free_gib

from ccl_cli.contract.params import LabelParams

pytestmark = gpu

SIDE, IMAGES = 4096, 130  # 130 * 4096**2 = 2.18e9 pixels > 2**31


@pytest.mark.parametrize("params", [LabelParams(min_area=2), LabelParams(connectivity=4)], ids=repr)
def test_batch_over_2_31_pixels(params):
    skip_unless_free_gib(40)
    import cupy

    cuda, cpu = backends()
    rng = np.random.default_rng(31)
    distinct = [(rng.random((SIDE, SIDE)) < d).astype(np.uint8) for d in (0.3, 0.5, 0.7)]
    batch = cupy.empty((IMAGES, SIDE, SIDE), cupy.uint8)
    for i in range(IMAGES):
        batch[i] = cupy.asarray(distinct[i % 3])
    assert batch.size > 2**31
    got = cuda.label(batch, params)
    del batch
    want = [cpu.label(image[None], params) for image in distinct]
    for i in range(IMAGES):
        reference = want[i % 3]
        assert got.components[i] == reference.components[0], f"image {i}"
        assert got.tables[i].equals(reference.tables[0]), f"statistics of image {i}"
        np.testing.assert_array_equal(got.labels[i].get(), reference.labels[0], f"image {i}")
