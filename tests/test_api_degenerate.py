"""The API on degenerate arrays: images and batches of no pixels return at once whatever
their other extents, and counts without statistics cost no table per image."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

#: Seconds a call on no pixels may take in a fresh process (imports included): a run over
#: 2**40 empty rows takes hours, a MemoryError for (0, 10**9) comes at once but fails.
AT_ONCE_SECONDS = 60

#: (shape, batch): arrays of no pixels whose other extents are far beyond any memory.
NO_PIXELS = [
    ((2**40, 0), None),
    ((0, 10**9), None),
    ((0, 0), None),
    ((3, 2**40, 0), None),
    ((2, 0, 10**9), True),
    ((0, 2**20, 2**20), True),
    ((10**8, 0, 0), True),
]


def _run(code: str, timeout: float) -> str:
    """stdout of `code` run in a fresh interpreter (the test fails if it takes `timeout`)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(
    ("shape", "batch", "stats"),
    [
        (shape, batch, stats)
        for shape, batch in NO_PIXELS
        for stats in (True, False)
        # a table per image is what stats=True promises: not for 10**8 images
        if not (stats and len(shape) == 3 and shape[0] > 1000)
    ],
)
def test_no_pixels_return_at_once_with_empty_results(shape, batch, stats):
    code = f"""
        import json
        import numpy as np
        import ccl_cli
        array = np.zeros({shape!r}, np.uint16)
        labels, rest = ccl_cli.label(array, stats={stats}, batch={batch!r}, device="cpu")
        if {stats}:
            rest = rest if isinstance(rest, list) else [rest]
            result = [[len(t), t.integer_values, list(t.columns)] for t in rest]
        else:
            result = [list(rest.shape), str(rest.dtype), int(np.count_nonzero(rest))]
        print(json.dumps([list(labels.shape), str(labels.dtype), result]))
    """
    shape_out, dtype, result = json.loads(_run(code, AT_ONCE_SECONDS))
    assert tuple(shape_out) == shape
    assert dtype == "uint32"
    images = shape[0] if len(shape) == 3 else None
    if stats:
        assert len(result) == (images if images is not None else 1)
        for rows, integer, columns in result:
            assert rows == 0
            assert integer is True
            assert "area" in columns and "centroid_x" in columns
    else:
        counts_shape, counts_dtype, nonzero = result
        assert counts_shape == ([images] if images is not None else [])
        assert counts_dtype == "uint32"
        assert nonzero == 0


def test_backend_batch_of_no_pixels_returns_at_once():
    code = """
        import json
        import numpy as np
        from ccl_cli.backends.cpu.backend import CpuBackend
        from ccl_cli.contract.params import LabelParams
        images = CpuBackend().label(np.zeros((3, 2**40, 0), np.uint8), LabelParams())
        volumes = CpuBackend().label(
            np.zeros((2, 2**40, 0, 5), np.uint8), LabelParams(connectivity=26)
        )
        print(json.dumps([
            images.kept, images.components, [len(t) for t in images.tables],
            volumes.kept, volumes.components, [t.is_volume for t in volumes.tables],
        ]))
    """
    result = json.loads(_run(code, AT_ONCE_SECONDS))
    assert result == [[0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0], [0, 0], [True, True]]


#: Images of one pixel each: a table per image costs kilobytes each (3.4 GB for a million).
MANY_IMAGES = 200_000
#: The most memory a 1x1 image may take without statistics: its labels, its count and the
#: engine's working arrays for it (its strip, slots and records), with room to spare.
BYTES_PER_TINY_IMAGE = 1000


def test_counts_of_many_tiny_images_build_no_table_per_image():
    code = f"""
        import json, resource
        import numpy as np
        import ccl_cli
        masks = np.ones(({MANY_IMAGES}, 1, 1), np.uint8)
        masks[::3] = 0
        ccl_cli.label(masks[:2], stats=False, device="cpu")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        labels, counts = ccl_cli.label(masks, stats=False, device="cpu")
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps([(after - before) * 1024, counts.tolist(), labels.ravel().tolist()]))
    """
    grown, counts, labels = json.loads(_run(code, 300))
    masks = np.ones(MANY_IMAGES, np.uint8)
    masks[::3] = 0
    assert counts == masks.tolist()  # a 1x1 image has one component where it is foreground
    assert labels == masks.tolist()
    assert grown / MANY_IMAGES < BYTES_PER_TINY_IMAGE
