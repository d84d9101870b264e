"""The Python API on the host: labels only, out=, Labeler, option checks, PyTorch CPU tensors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from oracles import bfs_labels, filter_min_area

import ccl_cli
from ccl_cli import api
from ccl_cli.contract.params import LabelParams
from ccl_cli.errors import UsageError


def sample(shape=(3, 37, 53), seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random(shape) < 0.5).astype(np.uint8) * rng.integers(1, 4, shape).astype(np.uint8)


def reference(batch: np.ndarray, params: LabelParams) -> np.ndarray:
    labels = [bfs_labels(image, params) for image in batch]
    if params.min_area:
        labels = [filter_min_area(image, params.min_area) for image in labels]
    return np.stack(labels).astype(np.uint32)


@pytest.mark.parametrize("min_area", [0, 3])
@pytest.mark.parametrize("connectivity", [4, 8])
def test_labels_only_batch_matches_the_oracle(connectivity, min_area):
    batch = sample()
    params = LabelParams(connectivity=connectivity, min_area=min_area)
    labels, counts = ccl_cli.label(
        batch, stats=False, connectivity=connectivity, min_area=min_area, device="cpu"
    )
    want = reference(batch, params)
    np.testing.assert_array_equal(labels, want)
    assert isinstance(counts, np.ndarray) and counts.dtype == np.uint32
    assert counts.tolist() == [int(image.max()) for image in want]


def test_single_image_counts_are_zero_dimensional():
    image = sample((1, 20, 30), seed=1)[0]
    labels, count = ccl_cli.label(image, stats=False, device="cpu")
    assert labels.shape == image.shape and isinstance(count, np.ndarray) and count.shape == ()
    assert int(count) == int(labels.max()) > 0


def test_labels_land_in_out():
    batch = sample(seed=2)
    out = np.full(batch.shape, 99, np.uint32)
    labels, tables = ccl_cli.label(batch, out=out, device="cpu")
    assert labels is out
    np.testing.assert_array_equal(out, reference(batch, LabelParams()))
    assert [len(t) for t in tables] == [int(image.max()) for image in out]


@pytest.mark.parametrize(
    "out",
    [
        np.zeros((3, 37, 53), np.int32),
        np.zeros((3, 37, 52), np.uint32),
        np.zeros((3, 53, 37), np.uint32).transpose(0, 2, 1),
        [[0]],
    ],
    ids=["dtype", "shape", "strided", "list"],
)
def test_bad_out_is_a_usage_error(out):
    with pytest.raises(UsageError, match="out"):
        ccl_cli.label(sample(seed=3), out=out, device="cpu")


def test_labeler_checks_options_once_and_labels_like_label():
    with pytest.raises(UsageError):
        ccl_cli.Labeler(connectivity=6)
    with pytest.raises(UsageError):
        ccl_cli.Labeler(device="tpu")
    with pytest.raises(UsageError, match="stats"):
        ccl_cli.Labeler(stats="no")  # type: ignore[arg-type]
    labeler = ccl_cli.Labeler(connectivity=4, min_area=2, stats=False, device="cpu")
    batch = sample(seed=4)
    for _ in range(2):
        labels, counts = labeler(batch)
        want, want_counts = ccl_cli.label(
            batch, connectivity=4, min_area=2, stats=False, device="cpu"
        )
        np.testing.assert_array_equal(labels, want)
        np.testing.assert_array_equal(counts, want_counts)


def test_label_rejects_unknown_and_bad_options():
    with pytest.raises(TypeError, match="colour"):
        ccl_cli.label(sample(seed=5), colour="red")  # type: ignore[call-arg]
    with pytest.raises(UsageError, match="tau"):
        ccl_cli.label(sample(seed=5), tau=[1], device="cpu")  # unhashable: checked uncached


def test_label_and_labeler_take_the_same_options():
    import inspect

    def keywords(function):
        parameters = inspect.signature(function).parameters.values()
        return {p.name: p.default for p in parameters if p.kind is p.KEYWORD_ONLY}

    assert keywords(api.label) == {**keywords(api.Labeler), "out": None}
    assert tuple(keywords(api.Labeler)) == api._LABELER_OPTIONS


def test_torch_cpu_tensors_give_tensors():
    torch = pytest.importorskip("torch")
    batch = sample(seed=6)
    tensor = torch.from_numpy(batch)
    labels, counts = ccl_cli.label(tensor, stats=False, device="cpu")
    assert isinstance(labels, torch.Tensor) and labels.dtype == torch.int32
    np.testing.assert_array_equal(labels.numpy(), reference(batch, LabelParams()))
    assert isinstance(counts, torch.Tensor) and counts.tolist() == [
        int(image.max()) for image in labels.numpy()
    ]
    out = torch.zeros((3, 19, 53), dtype=torch.int32)
    labels, tables = ccl_cli.label(tensor[:, ::2], out=out, device="cpu")
    assert labels is out and len(tables) == 3
    want = reference(np.ascontiguousarray(batch[:, ::2]), LabelParams())
    np.testing.assert_array_equal(out.numpy(), want)


def test_the_api_does_not_import_cupy_or_torch_for_numpy():
    code = (
        "import sys, numpy as np, ccl_cli\n"
        "ccl_cli.label(np.eye(5, dtype=np.uint8), stats=False, device='cpu')\n"
        "ccl_cli.Labeler(device='cpu')(np.eye(4, dtype=np.uint8))\n"
        "assert 'cupy' not in sys.modules and 'torch' not in sys.modules, sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
