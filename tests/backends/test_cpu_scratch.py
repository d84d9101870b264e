"""The CPU engine's scratch memory (backends/cpu/scratch.py): one owner for the image and
volume engines' working memory, a bound on what is kept between calls, and its release."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from scipy import ndimage

import ccl_cli
from ccl_cli.backends.cpu import scratch
from ccl_cli.native import gccl_cpu


@pytest.fixture(autouse=True)
def _bound_restored():
    before = scratch.limit()
    yield
    scratch.set_scratch_limit(before)


def _blobs(shape: tuple[int, ...], seed: int) -> np.ndarray:
    noise = np.random.default_rng(seed).random(shape)
    return (ndimage.uniform_filter(noise, 3) > 0.5).astype(np.uint8)


def _label_some() -> list[np.ndarray]:
    """Images and volumes of growing sizes labeled, their labels (as a loop over files)."""
    out = []
    for seed, side in enumerate((40, 90, 160, 300)):
        labels, _ = ccl_cli.label(_blobs((side, side + 7), seed), device="cpu")
        out.append(labels)
    for seed, side in enumerate((20, 48, 64)):
        labels, _ = ccl_cli.label(_blobs((side, side, side), seed), device="cpu", connectivity=26)
        out.append(labels)
    return out


def test_nothing_is_kept_under_a_bound_of_zero_and_the_labels_are_the_same():
    scratch.set_scratch_limit(1 << 30)
    kept_labels = _label_some()
    assert scratch.kept_bytes() > 0
    scratch.set_scratch_limit(0)
    assert scratch.kept_bytes() == 0  # what was kept beyond the new bound is released
    fresh_labels = _label_some()
    assert scratch.kept_bytes() == 0
    for kept, fresh in zip(kept_labels, fresh_labels, strict=True):
        assert np.array_equal(kept, fresh)
        assert np.array_equal(kept > 0, ndimage.label(kept > 0)[0] > 0)


@pytest.mark.parametrize("bound", [1 << 16, 1 << 20, 3 << 20])
def test_what_is_kept_stays_within_the_bound_over_a_loop_of_files(bound):
    scratch.release_scratch()
    scratch.set_scratch_limit(bound)
    for _ in range(2):
        _label_some()
        assert 0 < scratch.kept_bytes() <= bound


def test_release_gives_back_every_kept_array_and_block():
    scratch.set_scratch_limit(1 << 30)
    _label_some()
    assert gccl_cpu.spare_bytes() > 0  # the volume engine's slab blocks
    scratch.release_scratch()
    assert scratch.kept_bytes() == 0
    assert gccl_cpu.spare_bytes() == 0
    _label_some()  # and the next call makes what it needs again
    assert scratch.kept_bytes() > 0


def test_the_bound_refuses_what_is_no_number_of_bytes():
    for bad in (-1, 1.5, True, "1G"):
        with pytest.raises(ValueError, match="scratch limit"):
            scratch.set_scratch_limit(bad)  # type: ignore[arg-type]


def test_the_environment_sets_the_bound():
    code = textwrap.dedent(
        """
        import json
        import numpy as np
        import ccl_cli
        from ccl_cli.backends.cpu import scratch
        ccl_cli.label(np.ones((200, 300), np.uint8), device="cpu")
        ccl_cli.label(np.ones((30, 40, 50), np.uint8), device="cpu", connectivity=6)
        print(json.dumps([scratch.limit(), scratch.kept_bytes()]))
        """
    )
    env = {**os.environ, scratch.LIMIT_VARIABLE: "12345"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    bound, kept = json.loads(done.stdout)
    assert bound == 12345
    assert kept <= 12345
