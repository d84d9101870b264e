"""`gccl label` on volume files: each file (or --volume folder of slices) one input, its labels
read back with the format's own library equal scipy.ndimage.label's, its statistics
skimage.measure.regionprops', the physical columns the voxel columns times the spacing;
connectivity taken in each input's rank; what a volume cannot take, and bad volume files,
one line each, exit 1, the rest labeled."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import nibabel
import nrrd
import numpy as np
import pytest
import SimpleITK as sitk
import tifffile
from cli_helpers import gccl, summary
from PIL import Image
from scipy import ndimage
from skimage.measure import regionprops

#: The random volume's shape (z, y, x): odd sizes, each axis different.
SHAPE = (9, 13, 17)


def volume(seed: int = 0, shape: tuple[int, ...] = SHAPE, density: float = 0.3) -> np.ndarray:
    """Random uint8 values 1..9 on a sparse foreground, (z, y, x)."""
    rng = np.random.default_rng(seed)
    values = rng.integers(1, 10, shape) * (rng.random(shape) < density)
    return values.astype(np.uint8)


def scipy_labels(values: np.ndarray, connectivity: int) -> np.ndarray:
    rank = values.ndim
    order = {4: 1, 8: 2, 6: 1, 18: 2, 26: 3}[connectivity]
    labels, _ = ndimage.label(values != 0, ndimage.generate_binary_structure(rank, order))
    return labels


def write_file(kind: str, path: Path, values: np.ndarray, spacing=(1.0, 1.0, 1.0)) -> Path:
    """`values` (z, y, x) written with the format's own library."""
    sx, sy, sz = spacing
    if kind == "npy":
        np.save(path, values)
    elif kind == "nifti":
        image = nibabel.Nifti1Image(values.transpose(2, 1, 0), np.diag([sx, sy, sz, 1]))
        image.header.set_xyzt_units("mm")
        nibabel.save(image, path)
    elif kind == "nrrd":
        nrrd.write(str(path), values.transpose(2, 1, 0), {"spacings": [sx, sy, sz]})
    elif kind == "metaimage":
        image = sitk.GetImageFromArray(values)
        image.SetSpacing((sx, sy, sz))
        sitk.WriteImage(image, str(path))
    else:
        tifffile.imwrite(path, values, imagej=True, metadata={"axes": "ZYX", "spacing": sz})
    return path


def read_labels(kind: str, path: Path) -> np.ndarray:
    """A label volume read back with the format's own library, as (z, y, x)."""
    if kind == "npy":
        return np.load(path)
    if kind == "nifti":
        return np.asarray(nibabel.load(path).dataobj).transpose(2, 1, 0)
    if kind == "nrrd":
        return nrrd.read(str(path))[0].transpose(2, 1, 0)
    if kind == "metaimage":
        return sitk.GetArrayFromImage(sitk.ReadImage(str(path)))
    return tifffile.imread(path)


def stats_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


FILES = {
    "npy": ("part.npy", "part.labels.npy"),
    "nifti": ("mask.nii.gz", "mask.labels.nii.gz"),
    "nrrd": ("seg.nrrd", "seg.labels.nrrd"),
    "metaimage": ("ct.mha", "ct.labels.mha"),
    "tiff": ("stack.tif", "stack.labels.tif"),
}


@pytest.mark.parametrize("kind", sorted(FILES))
def test_a_volume_file_is_labeled_in_kind_as_scipy_and_regionprops_say(tmp_path, kind):
    values = volume(seed=len(kind))
    name, label_name = FILES[kind]
    write_file(kind, tmp_path / name, values)
    image = tmp_path / "flat.png"
    Image.fromarray(values[4] * 20).save(image)
    out = tmp_path / "out"
    code, stdout, _ = gccl(str(tmp_path / name), str(image), "--out", str(out), "--dry-run")
    assert code == 0 and f"{out / label_name}" in stdout  # the label volume's name, in kind
    code, stdout, stderr = gccl(str(tmp_path / name), str(image), "--out", str(out), "--json")
    assert code == 0, stderr
    lines = {obj["path"]: obj for obj in map(json.loads, stdout.splitlines())}
    assert lines[str(tmp_path / name)]["depth"] == SHAPE[0]
    assert lines[str(tmp_path / name)]["outputs"]["labels"] == str(out / label_name)
    assert lines[str(image)]["depth"] is None
    labels = read_labels(kind, out / label_name)
    assert labels.shape == values.shape
    assert np.array_equal(labels, scipy_labels(values, 26))  # 26 by default for volumes
    rows = stats_rows(out / (label_name.split(".labels")[0] + ".stats.csv"))
    props = regionprops(labels.astype(np.int32), intensity_image=values)
    assert len(rows) == len(props) == labels.max()
    for row, prop in zip(rows, props, strict=True):
        z0, y0, x0, z1, y1, x1 = prop.bbox
        assert int(row["label"]) == prop.label
        assert int(row["area"]) == prop.area
        assert (int(row["x"]), int(row["y"]), int(row["z"])) == (x0, y0, z0)
        assert (int(row["width"]), int(row["height"]), int(row["depth"])) == (
            x1 - x0,
            y1 - y0,
            z1 - z0,
        )
        cz, cy, cx = prop.centroid
        assert float(row["centroid_x"]) == pytest.approx(cx, abs=1e-12)
        assert float(row["centroid_y"]) == pytest.approx(cy, abs=1e-12)
        assert float(row["centroid_z"]) == pytest.approx(cz, abs=1e-12)
        assert float(row["mean"]) == pytest.approx(prop.intensity_mean, rel=1e-12)
        assert int(row["min"]) == prop.intensity_min
        assert int(row["max"]) == prop.intensity_max
    # the image beside it keeps its rank: 8-connectivity, a PNG
    flat = np.asarray(Image.open(out / "flat.labels.png"))
    assert np.array_equal(flat, scipy_labels(values[4], 8))
    rows = summary(out)
    assert rows[str(tmp_path / name)]["depth"] == str(SHAPE[0])
    assert rows[str(image)]["depth"] == ""


@pytest.mark.parametrize(
    ("given", "volume_connectivity", "image_connectivity"),
    [("4", 6, 4), ("6", 6, 4), ("8", 26, 8), ("18", 18, 8), ("26", 26, 8)],
)
def test_a_connectivity_is_taken_in_each_inputs_rank(
    tmp_path, given, volume_connectivity, image_connectivity
):
    values = volume(seed=3, density=0.45)
    np.save(tmp_path / "v.npy", values)
    np.save(tmp_path / "i.npy", values[2])
    args = ["--connectivity", given, "--label-format", "npy", "--out", str(tmp_path / "out")]
    code, _, stderr = gccl(str(tmp_path / "v.npy"), str(tmp_path / "i.npy"), *args)
    assert code == 0, stderr
    assert np.array_equal(
        np.load(tmp_path / "out/v.labels.npy"), scipy_labels(values, volume_connectivity)
    )
    assert np.array_equal(
        np.load(tmp_path / "out/i.labels.npy"), scipy_labels(values[2], image_connectivity)
    )


def test_physical_columns_are_voxel_columns_times_the_spacing(tmp_path):
    values = volume(seed=5)
    write_file("nifti", tmp_path / "a.nii", values, spacing=(0.5, 2.0, 3.0))
    np.save(tmp_path / "b.npy", values)
    out = tmp_path / "out"
    code, _, stderr = gccl(str(tmp_path / "a.nii"), "--out", str(out))
    assert code == 0, stderr
    code, _, stderr = gccl(str(tmp_path / "b.npy"), "--spacing", "0.5,2,3", "--out", str(out))
    assert code == 0, stderr
    for stats, unit in (("a.stats.csv", "_mm"), ("b.stats.csv", "")):
        rows = stats_rows(out / stats)
        assert rows
        for row in rows:
            assert float(row[f"volume{unit}3" if unit else "volume"]) == pytest.approx(
                int(row["area"]) * 3.0
            )
            for axis, size in zip("xyz", (0.5, 2.0, 3.0), strict=True):
                assert float(row[f"world_{axis}{unit}"]) == pytest.approx(
                    float(row[f"centroid_{axis}"]) * size
                )
    plain = stats_rows(out / "b.stats.csv")
    code, _, _ = gccl(str(tmp_path / "b.npy"), "--out", str(tmp_path / "plain"))
    assert code == 0
    assert "world_x" not in stats_rows(tmp_path / "plain/b.stats.csv")[0]
    assert len(plain) == int(scipy_labels(values, 26).max())


@pytest.mark.parametrize(
    ("option", "reason"),
    [
        (["--polygons"], "--polygons traces the outlines of 2-D images"),
        (["--fill-holes"], "--fill-holes fills the holes of 2-D images"),
        (["--label-format", "png"], "--label-format png holds 2-D images"),
    ],
)
def test_what_a_volume_cannot_take_fails_it_alone_in_runs_and_dry_runs(tmp_path, option, reason):
    np.save(tmp_path / "v.npy", volume())
    Image.fromarray(volume()[0] * 20).save(tmp_path / "i.png")
    out = tmp_path / "out"
    inputs = [str(tmp_path / "v.npy"), str(tmp_path / "i.png")]
    code, stdout, _ = gccl(*inputs, *option, "--out", str(out), "--dry-run", "--json")
    assert code == 1
    lines = {obj["path"]: obj for obj in map(json.loads, stdout.splitlines())}
    assert lines[inputs[0]]["action"] == "fail"
    assert lines[inputs[0]]["message"].startswith(reason)
    assert lines[inputs[1]]["action"] == "label"
    code, _, _ = gccl(*inputs, *option, "--out", str(out))
    assert code == 1
    rows = summary(out)
    assert rows[inputs[0]]["status"] == "failed"
    assert rows[inputs[0]]["message"].startswith(reason)
    assert "\n" not in rows[inputs[0]]["message"]
    assert rows[inputs[1]]["status"] == "ok"
    assert not list(out.glob("v.*"))


def test_a_volume_label_format_on_an_image_fails_it_alone(tmp_path):
    np.save(tmp_path / "v.npy", volume())
    np.save(tmp_path / "i.npy", volume()[0])
    out = tmp_path / "out"
    inputs = [str(tmp_path / "v.npy"), str(tmp_path / "i.npy")]
    code, _, _ = gccl(*inputs, "--label-format", "nifti", "--out", str(out))
    assert code == 1
    rows = summary(out)
    message = rows[str(tmp_path / "i.npy")]["message"]
    assert message.startswith("--label-format nifti writes volumes")
    labels = np.asarray(nibabel.load(out / "v.labels.nii.gz").dataobj).transpose(2, 1, 0)
    assert np.array_equal(labels, scipy_labels(volume(), 26))


def test_bad_volume_files_fail_one_line_each_and_the_rest_is_labeled(tmp_path):
    good = tmp_path / "good.npy"
    np.save(good, volume())
    four_d = tmp_path / "series.nii"
    nibabel.save(nibabel.Nifti1Image(np.zeros((4, 5, 6, 2), np.int16), np.eye(4)), four_d)
    header = tmp_path / "cut.mhd"
    header.write_text(
        "ObjectType = Image\nNDims = 3\nDimSize = 17 13 9\nElementType = MET_UCHAR\n"
        "ElementDataFile = cut.raw\n"
    )
    (tmp_path / "cut.raw").write_bytes(b"\0" * 100)  # 100 of 1989 bytes
    escaping = tmp_path / "escape.mhd"
    escaping.write_text(
        "ObjectType = Image\nNDims = 3\nDimSize = 2 2 2\nElementType = MET_UCHAR\n"
        "ElementDataFile = ../outside.raw\n"
    )
    out = tmp_path / "out"
    named = [good, four_d, header, escaping]
    code, _, stderr = gccl(*map(str, named), "--out", str(out))
    assert code == 1
    rows = summary(out)
    assert rows[str(good)]["status"] == "ok"
    for path in named[1:]:
        row = rows[str(path)]
        assert row["status"] == "failed", row
        assert row["message"] and "\n" not in row["message"]
        assert "Traceback" not in stderr
        assert not list(out.glob(path.name.split(".")[0] + ".*"))
    assert np.array_equal(np.load(out / "good.labels.npy"), scipy_labels(volume(), 26))


def test_a_folder_of_slices_with_volume_is_one_volume_in_natural_order(tmp_path):
    values = volume(seed=9, shape=(11, 8, 10))
    folder = tmp_path / "scan"
    folder.mkdir()
    for z, plane in enumerate(values):
        Image.fromarray(plane).save(folder / f"slice_{z + 1}.png")  # slice_2 before slice_10
    out = tmp_path / "out"
    code, _, stderr = gccl(str(folder), "--volume", "--out", str(out))
    assert code == 0, stderr
    labels = tifffile.imread(out / "scan.labels.tif")
    assert np.array_equal(labels, scipy_labels(values, 26))
    code, _, stderr = gccl(str(folder), "--volume", "--out", str(folder))
    assert code == 2 and "is the input folder" in stderr  # outputs would be read as slices
    Image.fromarray(np.zeros((8, 11), np.uint8)).save(folder / "slice_12.png")
    code, _, _ = gccl(str(folder), "--volume", "--out", str(tmp_path / "odd"))
    assert code == 1
    message = summary(tmp_path / "odd")[str(folder)]["message"]
    assert "slice_12.png" in message


def test_skip_existing_sees_a_slice_rewritten_in_place(tmp_path):
    """A slice rewritten in place (the folder's own time unchanged) makes the volume's outputs
    stale; unchanged slices keep them current."""
    values = volume(seed=3, shape=(5, 8, 10))
    folder = tmp_path / "scan"
    folder.mkdir()
    for z, plane in enumerate(values):
        Image.fromarray(plane).save(folder / f"slice_{z}.png")
    out = tmp_path / "out"
    assert gccl(str(folder), "--volume", "--out", str(out))[0] == 0
    code, _, _ = gccl(str(folder), "--volume", "--skip-existing", "--out", str(out))
    assert code == 0 and summary(out)[str(folder)]["status"] == "skipped"
    folder_time = os.stat(folder).st_mtime_ns
    values[2] = 0
    with open(folder / "slice_2.png", "r+b") as handle:  # the same file, new content
        Image.fromarray(values[2]).save(handle, format="PNG")
        handle.truncate()
    later = os.stat(folder / "slice_2.png").st_mtime_ns + 10**9
    os.utime(folder / "slice_2.png", ns=(later, later))
    os.utime(folder, ns=(folder_time, folder_time))
    code, _, _ = gccl(str(folder), "--volume", "--skip-existing", "--out", str(out))
    assert code == 0 and summary(out)[str(folder)]["status"] == "ok"
    assert np.array_equal(tifffile.imread(out / "scan.labels.tif"), scipy_labels(values, 26))


@pytest.mark.parametrize("shape", [(4, 5, 1), (4, 1, 5), (1, 4, 5), (3, 1, 1), (1, 1, 1)])
def test_label_stacks_of_one_voxel_across_read_back_whole(tmp_path, shape):
    values = np.zeros(shape, np.uint8)
    values.reshape(-1)[::2] = 1
    np.save(tmp_path / "v.npy", values)
    out = tmp_path / "out"
    code, _, err = gccl(str(tmp_path / "v.npy"), "--label-format", "tiff", "--out", str(out))
    assert code == 0, err
    labels = tifffile.imread(out / "v.labels.tif")
    assert labels.reshape(shape).shape == shape and labels.size == values.size
    assert np.array_equal(labels.reshape(shape), scipy_labels(values, 26))


@pytest.mark.parametrize("header", ["v.mhd", "v.nhdr"])
def test_skip_existing_sees_a_data_file_rewritten_in_place(tmp_path, header):
    """A detached data file rewritten in place (its header untouched) makes the volume's
    outputs stale."""
    values = volume(seed=8, shape=(4, 6, 7))
    (tmp_path / "v.raw").write_bytes(values.tobytes())
    if header == "v.mhd":
        text = "NDims = 3\nDimSize = 7 6 4\nElementType = MET_UCHAR\nElementDataFile = v.raw\n"
    else:
        text = (
            "NRRD0004\ntype: uint8\ndimension: 3\nsizes: 7 6 4\nencoding: raw\ndata file: v.raw\n\n"
        )
    (tmp_path / header).write_text(text)
    out = tmp_path / "out"
    assert gccl(str(tmp_path / header), "--out", str(out))[0] == 0
    code, _, _ = gccl(str(tmp_path / header), "--skip-existing", "--out", str(out))
    assert code == 0 and summary(out)[str(tmp_path / header)]["status"] == "skipped"
    values[1] = 0
    with open(tmp_path / "v.raw", "r+b") as handle:  # the same file, new content
        handle.write(values.tobytes())
    later = os.stat(tmp_path / header).st_mtime_ns + 10**9
    os.utime(tmp_path / "v.raw", ns=(later, later))
    code, _, _ = gccl(str(tmp_path / header), "--skip-existing", "--out", str(out))
    assert code == 0 and summary(out)[str(tmp_path / header)]["status"] == "ok"
    if header == "v.mhd":
        labels = sitk.GetArrayFromImage(sitk.ReadImage(str(out / "v.labels.mha")))
    else:
        labels = np.asarray(nrrd.read(str(out / "v.labels.nrrd"), index_order="C")[0])
    assert np.array_equal(labels, scipy_labels(values, 26))


def test_volume_makes_a_multi_page_tiff_one_z_stack(tmp_path):
    values = volume(seed=4)
    tifffile.imwrite(tmp_path / "pages.tif", values)  # no ImageJ metadata: pages by default
    code, _, _ = gccl(str(tmp_path / "pages.tif"), "--out", str(tmp_path / "pages"))
    assert code == 0
    pages = stats_rows(tmp_path / "pages" / "summary.csv")
    assert [row["page"] for row in pages] == [str(z + 1) for z in range(SHAPE[0])]
    code, _, _ = gccl(str(tmp_path / "pages.tif"), "--volume", "--out", str(tmp_path / "stack"))
    assert code == 0
    labels = tifffile.imread(tmp_path / "stack/pages.labels.tif")
    assert np.array_equal(labels, scipy_labels(values, 26))


def test_min_area_and_largest_on_a_volume_keep_what_scipy_counts(tmp_path):
    values = volume(seed=6, shape=(12, 14, 15), density=0.35)
    np.save(tmp_path / "v.npy", values)
    out = tmp_path / "out"
    options = ["--min-area", "3", "--largest", "4"]
    code, _, _ = gccl(str(tmp_path / "v.npy"), *options, "--out", str(out))
    assert code == 0
    reference = scipy_labels(values, 26)
    areas = np.bincount(reference.ravel())[1:]
    big = [label + 1 for label in range(len(areas)) if areas[label] >= 3]
    chosen = sorted(sorted(big, key=lambda label: (-areas[label - 1], label))[:4])
    expected = np.zeros_like(reference)
    for new, old in enumerate(chosen, start=1):
        expected[reference == old] = new
    assert np.array_equal(np.load(out / "v.labels.npy"), expected)


def test_skip_existing_skips_a_current_volume_and_processes_label_volumes(tmp_path):
    for seed in range(3):
        np.save(tmp_path / f"v{seed}.npy", volume(seed=seed))
    out = tmp_path / "out"
    code, _, _ = gccl(str(tmp_path), "--processes", "2", "--out", str(out))
    assert code == 0
    for seed in range(3):
        assert np.array_equal(
            np.load(out / f"v{seed}.labels.npy"), scipy_labels(volume(seed=seed), 26)
        )
    code, _, _ = gccl(str(tmp_path), "--skip-existing", "--out", str(out))
    assert code == 0
    assert {row["status"] for row in summary(out).values()} == {"skipped"}
