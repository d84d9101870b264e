"""`gccl label volume.zarr --out DIR`: the label store, the statistics CSV and the summary of a
Zarr volume, their guarantees, and bad input (one line each, nothing half-written)."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage as ndi
import zarr
from cli_helpers import gccl, summary
from hypothesis import given as for_any
from hypothesis import strategies as st

import ccl_cli
from ccl_cli.chunked import zarr_store
from ccl_cli.chunked.zarr_store import work_blocks

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def volume(seed: int = 0, shape: tuple[int, int, int] = (10, 12, 14)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 9, shape).astype(np.uint16)
    values[rng.random(shape) < 0.55] = 0
    return values


def zarr_volume(path: Path, values: np.ndarray, chunks: tuple, zarr_format: int = 3) -> Path:
    array = zarr.create_array(
        store=str(path),
        shape=values.shape,
        chunks=chunks,
        dtype=values.dtype,
        zarr_format=zarr_format,
        fill_value=0,
    )
    array[:] = values
    array.attrs["origin"] = "test"
    return path


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@for_any(
    shape=st.tuples(*[st.integers(1, 40)] * 3),
    chunks=st.tuples(*[st.integers(1, 12)] * 3),
    most=st.integers(1, 5000),
)
def test_work_blocks_are_whole_chunks_within_the_bound(shape, chunks, most) -> None:
    blocks = work_blocks(shape, chunks, most)
    for axis in range(3):
        sizes = blocks[axis]
        assert sum(sizes) == shape[axis]
        assert all(size % chunks[axis] == 0 for size in sizes[:-1])  # whole chunks
        assert len(set(sizes[:-1])) <= 1  # the last block may be shorter
    first = [sizes[0] for sizes in blocks]
    one_chunk = [min(c, n) for c, n in zip(chunks, shape, strict=True)]
    assert np.prod(first) <= max(most, np.prod(one_chunk))
    # None could take one more chunk along an axis and stay within the bound.
    for axis in range(3):
        if first[axis] < shape[axis]:
            grown = list(first)
            grown[axis] = min(first[axis] + chunks[axis], shape[axis])
            assert np.prod(grown) > most


def test_a_volume_of_many_work_blocks(tmp_path: Path, monkeypatch) -> None:
    """Blocks of 2x2x1 chunks (the bound made small): labels and statistics equal one piece,
    the store keeps the source's chunks."""
    made = []

    def recorded(*args):
        made.append(work_blocks(*args))
        return made[-1]

    monkeypatch.setattr(zarr_store, "WORK_BLOCK_VOXELS", 4 * 5 * 6 * 4)
    monkeypatch.setattr(zarr_store, "work_blocks", recorded)
    values = volume(seed=5)
    source = zarr_volume(tmp_path / "vol.zarr", values, (4, 5, 6))
    out = tmp_path / "out"
    code, _, err = gccl(str(source), "--connectivity", "6", "--out", str(out))
    assert code == 0, err
    stored = zarr.open_array(str(out / "vol.labels.zarr"), mode="r")
    expected, count = ndi.label(values > 0)
    assert stored.chunks == (4, 5, 6) and count > 1
    np.testing.assert_array_equal(stored[:], expected)
    rows = read_csv(out / "vol.stats.csv")
    assert [int(r["area"]) for r in rows] == list(np.bincount(expected.ravel())[1:])
    assert made == [((8, 2), (10, 2), (6, 6, 2))]  # the volume was read in those blocks


def test_past_65535_labels_the_store_is_uint32(tmp_path: Path) -> None:
    """67240 isolated voxels (every other one along each axis, none in the last chunks along
    x): the labels need uint32, and every chunk is in the store, the background ones too."""
    values = np.zeros((82, 82, 82), np.uint8)
    values[::2, ::2, ::2] = 1
    values[:, :, 80:] = 0  # chunks of background only, along the last axis
    source = zarr_volume(tmp_path / "dots.zarr", values, (41, 41, 40))
    out = tmp_path / "out"
    code, _, err = gccl(str(source), "--connectivity", "6", "--out", str(out))
    assert code == 0, err
    stored = zarr.open_array(str(out / "dots.labels.zarr"), mode="r")
    expected, count = ndi.label(values)
    assert count == 41 * 41 * 40 > 65535 and stored.dtype == np.uint32
    np.testing.assert_array_equal(stored[:], expected)
    assert stored.nchunks_initialized == stored.nchunks == 2 * 2 * 3


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_labels_stats_and_summary_equal_one_piece(tmp_path: Path, zarr_format: int) -> None:
    values = volume()
    source = zarr_volume(tmp_path / "vol.zarr", values, (4, 5, 6), zarr_format)
    out = tmp_path / "out"
    code, _, err = gccl(
        str(source), "--connectivity", "18", "--tau", "2", "--min-area", "2", "--out", str(out)
    )
    assert code == 0, err
    labels, tables = ccl_cli.label(values, connectivity=18, tau=2, min_area=2, device="cpu")
    stored = zarr.open_array(str(out / "vol.labels.zarr"), mode="r")
    assert stored.chunks == (4, 5, 6) and stored.dtype == np.uint16  # (K <= 65535)
    assert stored.metadata.zarr_format == zarr_format
    assert stored.attrs["origin"] == "test"
    np.testing.assert_array_equal(stored[:], labels)
    rows = read_csv(out / "vol.stats.csv")
    table = tables[0]
    assert [int(r["label"]) for r in rows] == list(range(1, len(table) + 1))
    for name in table.columns[1:]:
        got = np.array([float(r[name]) for r in rows])
        np.testing.assert_array_equal(got, table[name].astype(np.float64), err_msg=name)
    row = summary(out)[str(source)]
    assert row["status"] == "ok" and int(row["kept"]) == len(table)
    # A second run replaces the store the first made (the record claims it).
    code, _, err = gccl(str(source), "--connectivity", "6", "--out", str(out))
    assert code == 0, err
    expected, _ = ndi.label(values > 0)
    np.testing.assert_array_equal(
        zarr.open_array(str(out / "vol.labels.zarr"), mode="r")[:], expected
    )
    assert not [name for name in os.listdir(out) if name.startswith(".gccl-tmp")]


def test_ome_zarr_keeps_its_voxel_size(tmp_path: Path) -> None:
    values = volume(1)
    group = zarr.open_group(str(tmp_path / "image.zarr"), mode="w", zarr_format=2)
    multiscales = [
        {
            "version": "0.4",
            "axes": [{"name": a, "type": "space", "unit": "micrometer"} for a in "zyx"],
            "datasets": [
                {
                    "path": "0",
                    "coordinateTransformations": [{"type": "scale", "scale": [2.0, 0.5, 0.5]}],
                },
                {
                    "path": "1",
                    "coordinateTransformations": [{"type": "scale", "scale": [4.0, 1.0, 1.0]}],
                },
            ],
        }
    ]
    group.attrs["multiscales"] = multiscales
    group.create_array("0", shape=values.shape, chunks=(5, 6, 7), dtype=values.dtype)[:] = values
    group.create_array("1", shape=(5, 6, 7), chunks=(5, 6, 7), dtype=values.dtype)[:] = 0
    out = tmp_path / "out"
    code, _, err = gccl(str(tmp_path / "image.zarr"), "--connectivity", "26", "--out", str(out))
    assert code == 0, err
    labeled = zarr.open_group(str(out / "image.labels.zarr"), mode="r")
    (scale,) = labeled.attrs["multiscales"]
    assert scale["axes"] == multiscales[0]["axes"]
    assert scale["datasets"] == multiscales[0]["datasets"][:1]
    expected, _ = ccl_cli.label(values, connectivity=26)
    np.testing.assert_array_equal(labeled["0"][:], expected)


def test_missing_chunks_read_as_the_fill_value(tmp_path: Path) -> None:
    path = tmp_path / "sparse.zarr"
    array = zarr.create_array(
        store=str(path), shape=(6, 6, 6), chunks=(3, 3, 3), dtype=np.uint8, fill_value=7
    )
    array[0:3, 0:3, 0:3] = np.zeros((3, 3, 3), np.uint8)  # one chunk written, seven missing
    out = tmp_path / "out"
    code, _, err = gccl(str(path), "--connectivity", "6", "--out", str(out))
    assert code == 0, err
    values = np.full((6, 6, 6), 7, np.uint8)
    values[0:3, 0:3, 0:3] = 0
    expected, _ = ndi.label(values > 0)
    np.testing.assert_array_equal(
        zarr.open_array(str(out / "sparse.labels.zarr"), mode="r")[:], expected
    )


def test_a_store_gccl_did_not_make_stays(tmp_path: Path) -> None:
    source = zarr_volume(tmp_path / "vol.zarr", volume(), (5, 6, 7))
    out = tmp_path / "out"
    theirs = zarr.create_array(store=str(out / "vol.labels.zarr"), shape=(2, 2, 2), dtype=np.uint8)
    theirs[:] = 3
    code, _, err = gccl(str(source), "--connectivity", "6", "--out", str(out))
    assert code == 1
    (line,) = err.strip().splitlines()
    assert "vol.labels.zarr was not made by gccl" in line
    assert (zarr.open_array(str(out / "vol.labels.zarr"), mode="r")[:] == 3).all()
    assert not (out / "vol.stats.csv").exists()
    assert summary(out)[str(source)]["status"] == "failed"


@pytest.mark.parametrize("shape", [(12, 14), (2, 3, 4, 5)])
def test_not_a_volume_is_one_line(tmp_path: Path, shape: tuple) -> None:
    path = tmp_path / "flat.zarr"
    zarr.create_array(store=str(path), shape=shape, dtype=np.uint8)[...] = 1
    code, _, err = gccl(str(path), "--connectivity", "6", "--out", str(tmp_path / "out"))
    assert code == 1
    (line,) = err.strip().splitlines()
    assert f"{len(shape)}-D array" in line and str(path) in line
    assert not (tmp_path / "out" / "flat.labels.zarr").exists()


def test_a_chunk_that_fails_to_read_names_itself(tmp_path: Path) -> None:
    source = zarr_volume(tmp_path / "vol.zarr", volume(), (5, 6, 7), zarr_format=2)
    (source / "1.0.1").write_bytes(b"not a compressed chunk")
    out = tmp_path / "out"
    code, _, err = gccl(str(source), "--connectivity", "26", "--out", str(out))
    assert code == 1
    (line,) = err.strip().splitlines()
    assert "chunk 1.0.1 ([5:10, 0:6, 7:14]) could not be read" in line
    assert not (out / "vol.labels.zarr").exists() and not (out / "vol.stats.csv").exists()
    assert not [name for name in os.listdir(out) if name.startswith(".gccl-tmp")]


def test_a_killed_runs_temporary_store_is_removed(tmp_path: Path) -> None:
    source = zarr_volume(tmp_path / "vol.zarr", volume(), (5, 6, 7))
    out = tmp_path / "out"
    left = out / ".gccl-tmp-zarr-1234-abcd0123"
    zarr.create_array(store=str(left), shape=(2, 2, 2), dtype=np.uint32)
    code, _, err = gccl(str(source), "--connectivity", "6", "--out", str(out))
    assert code == 0, err
    assert not left.exists()
    made = (out / ".gccl" / "made").read_text().splitlines()
    assert any(json.loads(line)[0] == "vol.labels.zarr" for line in made)


def test_image_connectivities_are_taken_in_the_volume_rank(tmp_path: Path) -> None:
    values = volume()
    source = zarr_volume(tmp_path / "vol.zarr", values, (5, 6, 7))
    for given, rank in ((None, 3), ("4", 1), ("8", 3)):  # (the default 8 is 26 for a volume)
        out = tmp_path / f"out-{given}"
        code, _, err = gccl(
            str(source), "--out", str(out), *(["--connectivity", given] * bool(given))
        )
        assert code == 0, err
        want, _ = ndi.label(values != 0, ndi.generate_binary_structure(3, rank))
        stored = zarr.open_array(str(out / "vol.labels.zarr"), mode="r")
        np.testing.assert_array_equal(stored[:], want)


def test_a_scheduler_that_does_not_answer_is_one_line(tmp_path: Path) -> None:
    source = zarr_volume(tmp_path / "vol.zarr", volume(), (5, 6, 7))
    out = tmp_path / "out"
    code, _, err = gccl(
        str(source), "--connectivity", "6", "--out", str(out), "--scheduler", "tcp://127.0.0.1:1"
    )
    assert code == 2
    (line,) = err.strip().splitlines()
    assert "--scheduler tcp://127.0.0.1:1" in line
    assert not (out / "vol.labels.zarr").exists()


@pytest.mark.parametrize(
    ("given", "named"),
    [
        (["--preview"], "--preview"),
        (["--label-format", "npy"], "--label-format"),
        (["--tiff-compression", "zstd"], "--tiff-compression"),
        (["--spacing", "1,1,2"], "--spacing"),
        (["--skip-existing"], "--skip-existing"),
        (["--relative-to", "."], "--relative-to"),
        (["--keep-extension"], "--keep-extension"),
        (["--color-to-gray", "red"], "--color-to-gray"),
        (["--batch-size", "4"], "--batch-size"),
        (["--batch-window", "5"], "--batch-window"),
        (["--processes", "2"], "--processes"),
        (["--devices", "0"], "--devices"),
        (["--max-image-bytes", "1000"], "--max-image-bytes"),
        (["--workers", "2", "--scheduler", "tcp://127.0.0.1:1"], "--workers"),
    ],
)
def test_options_a_zarr_run_does_not_take_are_refused(
    tmp_path: Path, given: list[str], named: str
) -> None:
    """An option that would change what a run writes, or how, is not passed over in silence."""
    source = zarr_volume(tmp_path / "vol.zarr", volume(), (5, 6, 7))
    out = tmp_path / "out"
    code, _, err = gccl(str(source), "--out", str(out), *given)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert named in line
    assert "not available for Zarr volumes" in line or "--scheduler" in line
    assert not out.exists()


def test_workers_are_the_threads_of_a_run_without_a_scheduler(tmp_path: Path, monkeypatch) -> None:
    import dask

    values = volume(3)
    source = zarr_volume(tmp_path / "vol.zarr", values, (5, 6, 7))
    seen: list[object] = []
    real_store = zarr_store.create_labels

    def create_labels(*args, **kwargs):
        seen.append((dask.config.get("scheduler"), dask.config.get("num_workers")))
        return real_store(*args, **kwargs)

    monkeypatch.setattr(zarr_store, "create_labels", create_labels)
    code, _, err = gccl(str(source), "--out", str(tmp_path / "out"), "--workers", "3")
    assert code == 0, err
    assert seen == [("threads", 3)]
    want, _ = ndi.label(values != 0, ndi.generate_binary_structure(3, 3))
    stored = zarr.open_array(str(tmp_path / "out" / "vol.labels.zarr"), mode="r")
    np.testing.assert_array_equal(stored[:], want)


def test_fail_fast_leaves_the_rest_not_run(tmp_path: Path) -> None:
    flat = tmp_path / "flat.zarr"
    zarr.create_array(store=str(flat), shape=(12, 14), dtype=np.uint8)[...] = 1
    good = zarr_volume(tmp_path / "vol.zarr", volume(), (5, 6, 7))
    out = tmp_path / "out"
    code, _, _ = gccl(str(flat), str(good), "--out", str(out), "--fail-fast")
    assert code == 1
    rows = summary(out)
    assert rows[str(flat)]["status"] == "failed"
    assert rows[str(good)]["status"] == "not-run"
    assert "--fail-fast" in rows[str(good)]["message"]
    assert not (out / "vol.labels.zarr").exists()
    code, _, _ = gccl(str(flat), str(good), "--out", str(out))
    assert code == 1
    assert summary(out)[str(good)]["status"] == "ok"


def test_a_big_endian_zarr_v2_store(tmp_path: Path) -> None:
    values = volume(5)
    source = tmp_path / "vol.zarr"
    stored = zarr.create_array(
        store=str(source), shape=values.shape, chunks=(5, 6, 7), dtype=">u2", zarr_format=2
    )
    stored[:] = values
    out = tmp_path / "out"
    code, _, err = gccl(str(source), "--out", str(out), "--connectivity", "6")
    assert code == 0, err
    want, count = ndi.label(values != 0, ndi.generate_binary_structure(3, 1))
    np.testing.assert_array_equal(zarr.open_array(str(out / "vol.labels.zarr"))[:], want)
    rows = read_csv(out / "vol.stats.csv")
    assert len(rows) == count
    assert [int(row["area"]) for row in rows] == list(np.bincount(want.ravel())[1:])
