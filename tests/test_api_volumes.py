"""The Python API on volumes: `ccl_cli.label(volume, connectivity=26)`, batches of volumes,
out=, Labeler, stats, the stages, and one clear error for every shape or place a volume
cannot be labeled in; labels against scipy.ndimage.label and the 3-D references."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy import ndimage
from stage_oracles import scipy_mask
from volume_oracles import filter_min_area_3d, scipy_volume, volume_stats

import ccl_cli
from ccl_cli.contract.params import LabelParams
from ccl_cli.errors import BackendUnavailable


def volume(shape=(7, 9, 11), seed=0, density=0.4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random(shape) < density).astype(np.uint8) * rng.integers(1, 5, shape, np.uint8)


@pytest.mark.parametrize("connectivity", [6, 18, 26])
def test_a_volume_is_labeled_as_scipy_labels_it(connectivity):
    values = volume()
    labels, tables = ccl_cli.label(values, connectivity=connectivity, device="cpu")
    want, count = scipy_volume(values != 0, connectivity)
    assert labels.shape == values.shape and labels.dtype == np.uint32
    np.testing.assert_array_equal(labels, want)
    (table,) = tables
    assert table.is_volume and len(table) == count
    rows = volume_stats(want, values)
    assert table["area"].tolist() == [row["area"] for row in rows]
    assert table["z"].tolist() == [row["z"] for row in rows]
    assert table["centroid_z"].tolist() == [row["centroid_z"] for row in rows]
    assert table[0].depth == rows[0]["depth"] and table[0].label == 1


def test_a_4d_array_is_a_batch_of_volumes_and_auto_labels_on_the_cpu():
    batch = np.stack([volume(seed=s) for s in range(3)])
    labels, counts = ccl_cli.label(batch, connectivity=6, min_area=2, stats=False)
    assert labels.shape == batch.shape and counts.dtype == np.uint32
    for n in range(3):
        want = filter_min_area_3d(scipy_volume(batch[n] != 0, 6)[0], 2)
        np.testing.assert_array_equal(labels[n], want)
        assert counts[n] == want.max()
    labels, count = ccl_cli.label(batch[0], connectivity=6, stats=False, device="cpu")
    assert count.shape == () and int(count) == int(labels.max())


def test_with_4_or_8_a_3d_array_stays_a_batch_of_images():
    values = volume((4, 9, 11), seed=1)
    labels, tables = ccl_cli.label(values, connectivity=8, device="cpu")
    for n in range(4):
        want, _ = ndimage.label(values[n] != 0, np.ones((3, 3)))
        np.testing.assert_array_equal(labels[n], want)
        assert not tables[n].is_volume
    volume_labels, _ = ccl_cli.label(values, connectivity=26, device="cpu")
    assert volume_labels.max() < sum(int(t.label.max(initial=0)) for t in tables)


def test_volume_labels_land_in_out_and_a_labeler_labels_like_label():
    values = volume(seed=2)
    out = np.full(values.shape, 99, np.uint32)
    labels, _ = ccl_cli.label(values, connectivity=18, out=out, device="cpu")
    assert labels is out
    np.testing.assert_array_equal(out, scipy_volume(values != 0, 18)[0])
    with pytest.raises(ValueError, match=r"out must have shape \(7, 9, 11\)"):
        ccl_cli.label(values, connectivity=18, out=np.zeros((7, 9, 10), np.uint32))
    labeler = ccl_cli.Labeler(connectivity=18, tau=1, min_area=3)
    for _ in range(2):
        got, got_tables = labeler(values)
        want, want_tables = ccl_cli.label(values, connectivity=18, tau=1, min_area=3)
        np.testing.assert_array_equal(got, want)
        assert got_tables[0].equals(want_tables[0])


def test_the_stages_apply_in_3d():
    mask = volume(seed=3, density=0.55) != 0
    labels, _ = ccl_cli.label(mask, connectivity=6, open=1, close=1, device="cpu")
    staged = scipy_mask(mask, [("open", 1), ("close", 1)], 6)
    np.testing.assert_array_equal(labels, scipy_volume(staged, 6)[0])


@pytest.mark.parametrize(
    ("shape", "options", "words"),
    [
        ((9, 11), {"connectivity": 26}, "a 2-D image takes connectivity 4 or 8"),
        ((2, 3, 4, 5), {"connectivity": 8}, "a 4-D array is a batch of volumes"),
        ((2, 3, 4, 5, 6), {"connectivity": 26}, r"got shape \(2, 3, 4, 5, 6\)"),
        ((3, 0, 4), {"connectivity": 6}, "a volume needs a voxel along every axis"),
        ((0, 3, 4, 5), {"connectivity": 18}, "a volume needs a voxel along every axis"),
        ((3, 4, 5), {"connectivity": 26, "batch": True}, r"\(N, D, H, W\) batch of volumes"),
        ((2, 3, 4, 5), {"connectivity": 26, "batch": False}, r"a \(D, H, W\) volume"),
    ],
)
def test_a_shape_that_is_no_volume_is_one_clear_error(shape, options, words):
    with pytest.raises(ValueError, match=words) as raised:
        ccl_cli.label(np.zeros(shape, np.uint8), device="cpu", **options)
    assert "\n" not in str(raised.value)


def test_device_volumes_and_device_cuda_need_cuda(monkeypatch):
    """A device volume is labeled on its device, and device='cuda' labels a host volume on
    the GPU: where CUDA is missing both say so in one line (tests/gpu/ label them)."""
    monkeypatch.setitem(sys.modules, "cupy", None)  # as where CuPy is missing

    class DeviceVolume:  # what the API sees of a CuPy array or a CUDA tensor
        shape = (4, 5, 6)
        dtype = np.dtype(np.uint8)
        __cuda_array_interface__ = ("the", "interface")  # only its presence is read

    for array, device in ((DeviceVolume(), "auto"), (volume(), "cuda")):
        with pytest.raises(BackendUnavailable, match="CuPy is not installed") as raised:
            ccl_cli.label(array, connectivity=26, device=device)
        assert "\n" not in str(raised.value)


def test_labels_that_cannot_fit_in_memory_are_refused_before_anything_is_allocated():
    huge = np.broadcast_to(np.zeros(1, np.uint8), (4096, 4096, 1 << 20))  # 64 TiB of labels
    with pytest.raises(MemoryError, match=r"need 65536\.0 GiB"):
        ccl_cli.label(huge, connectivity=6, device="cpu")


def test_volume_statistics_of_floats_and_min_area_renumbering():
    rng = np.random.default_rng(4)
    values = rng.integers(-3, 4, (6, 7, 8)).astype(np.float32) * np.float32(0.25)
    labels, (table,) = ccl_cli.label(values, connectivity=26, tau=0.25, min_area=3)
    params = LabelParams(connectivity=26, tau=0.25, min_area=3)
    assert params.rank == 3
    rows = volume_stats(labels.astype(np.int64), values)
    assert len(table) == len(rows) == labels.max() > 0
    assert (table["area"] >= 3).all()
    assert table["min"].tolist() == [row["min"] for row in rows]


def test_max_area_and_largest_select_as_for_images_and_fill_holes_is_refused():
    values = volume(seed=6, density=0.3)
    labels, (table,) = ccl_cli.label(values, connectivity=6, min_area=2, max_area=5, largest=3)
    raw, count = scipy_volume(values != 0, 6)
    area = np.bincount(raw.ravel())[1:]
    inside = [c for c in range(count) if 2 <= area[c] <= 5]
    chosen = sorted(sorted(inside, key=lambda c: (-area[c], c))[:3])  # ties: the lower label
    want = np.zeros_like(raw)
    for new, old in enumerate(chosen, start=1):
        want[raw == old + 1] = new
    np.testing.assert_array_equal(labels, want)
    assert table["area"].tolist() == [int(area[c]) for c in chosen]
    with pytest.raises(ValueError, match="fill_holes fills the holes of 2-D images"):
        ccl_cli.label(values, connectivity=26, fill_holes=True)


def test_a_tolerance_that_grows_with_the_values_joins_far_voxels_along_z():
    # Planes of 1000, 1010, ... 1090: 10 apart, so tau 5 keeps them apart; relative 0.01
    # (tolerance 5 + 10.x) joins them all, and quadratic 4e-6 (5 + 4.x .. 4.75) does not.
    ramp = np.broadcast_to((1000 + 10 * np.arange(10, dtype=np.uint16))[:, None, None], (10, 4, 5))
    ramp = np.ascontiguousarray(ramp)
    for keywords, count in (
        ({"tau": 5}, 10),
        ({"tau": 5, "tau_relative": 0.01}, 1),
        ({"tau": 5, "tau_quadratic": 4e-6}, 10),
        ({"tau": 5, "tau_quadratic": 5e-6}, 1),
    ):
        _, counts = ccl_cli.label(ramp, connectivity=6, stats=False, **keywords)
        assert int(counts) == count, keywords


def test_torch_cpu_volumes_give_tensors():
    torch = pytest.importorskip("torch")
    values = volume(seed=5)
    labels, counts = ccl_cli.label(torch.from_numpy(values), connectivity=26, stats=False)
    assert isinstance(labels, torch.Tensor) and labels.dtype == torch.int32
    np.testing.assert_array_equal(labels.numpy(), scipy_volume(values != 0, 26)[0])
    assert int(counts) == int(labels.max())


def test_volumes_do_not_import_cupy_or_torch():
    code = (
        "import sys, numpy as np, ccl_cli\n"
        "ccl_cli.label(np.ones((3, 4, 5), np.uint8), connectivity=26)\n"
        "assert 'cupy' not in sys.modules and 'torch' not in sys.modules, sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
