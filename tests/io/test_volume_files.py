"""Volume files of every format: read with their geometry, label volumes written in kind and read
back by the format's own library (nibabel, pynrrd, SimpleITK, tifffile, numpy) with the input's
axes and geometry. Every volume is non-cubic with distinct spacings and a rotated frame where the
format has one: a swapped axis cannot pass."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import nibabel
import nrrd
import numpy as np
import pytest
import SimpleITK as sitk
import tifffile
from PIL import Image
from scipy import ndimage

from ccl_cli.io.volumes import (
    Geometry,
    encode_label_volume,
    label_volume_suffix,
    natural_order,
    physical_columns,
    read_slices,
    read_volume,
    volume_format,
    volume_preview,
    volume_stem,
)

MAX = 1 << 24
#: (D, H, W) = (z, y, x): every axis a different length.
SHAPE = (5, 6, 7)
SPACING = (0.5, 0.75, 1.25)  # x, y, z
ORIGIN = (10.0, -20.0, 30.0)
#: Columns are the world directions of voxel axes x, y, z: x goes along world y, y along -x.
DIRECTION = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])


def _values() -> np.ndarray:
    """(z, y, x) int16 values whose every voxel differs, with a few blobs above 100."""
    values = np.arange(np.prod(SHAPE), dtype=np.int16).reshape(SHAPE) % 97
    values[1:3, 1:4, 2:5] += 200
    values[4, 5, 0] = 300
    return values


def _labels(values: np.ndarray) -> tuple[np.ndarray, int]:
    labels, count = ndimage.label(values > 100, np.ones((3, 3, 3)))
    return labels.astype(np.uint32), int(count)


def _affine() -> np.ndarray:
    affine = np.eye(4)
    affine[:3, :3] = DIRECTION * np.array(SPACING)
    affine[:3, 3] = ORIGIN
    return affine


def _written(tmp_path: Path, data: object, suffix: str) -> Path:
    out = tmp_path / f"out{suffix}"
    out.write_bytes(data if isinstance(data, bytes) else b"".join(data))  # type: ignore[arg-type]
    return out


@pytest.mark.parametrize("name", ["ct.nii", "ct.nii.gz"])
def test_nifti_axes_geometry_and_labels_round_trip(tmp_path: Path, name: str) -> None:
    values = _values()
    image = nibabel.Nifti1Image(values.transpose(2, 1, 0), _affine())  # nibabel: (x, y, z)
    image.header.set_xyzt_units("mm")
    image.header.set_qform(_affine(), code=1)
    image.header.set_sform(_affine(), code=2)
    path = tmp_path / name
    nibabel.save(image, path)
    source = nibabel.load(path)

    volume = read_volume(path, MAX)
    assert volume_format(path) == "nifti" and volume.format == "nifti"
    np.testing.assert_array_equal(volume.values, np.asarray(source.dataobj).transpose(2, 1, 0))
    np.testing.assert_allclose(volume.geometry.spacing, SPACING, rtol=1e-6)
    np.testing.assert_allclose(volume.geometry.origin, ORIGIN)
    np.testing.assert_allclose(volume.geometry.direction, DIRECTION, atol=1e-7)
    assert volume.geometry.units == "mm" and volume.geometry.space == "RAS"

    labels, count = _labels(volume.values)
    assert label_volume_suffix("nifti", None) == ".labels.nii.gz"
    out = _written(tmp_path, encode_label_volume(labels, count, volume), ".nii.gz")
    back = nibabel.load(out)
    assert back.get_data_dtype() == np.uint16
    np.testing.assert_array_equal(np.asarray(back.dataobj), labels.transpose(2, 1, 0))
    np.testing.assert_array_equal(back.affine, source.affine)
    np.testing.assert_array_equal(back.header.get_qform(), source.header.get_qform())
    assert back.header["qform_code"] == 1 and back.header["sform_code"] == 2
    assert back.header.get_xyzt_units()[0] == "mm"


def test_nifti_labels_past_65535_are_uint32(tmp_path: Path) -> None:
    values = np.zeros((3, 400, 400), dtype=np.uint8)
    values[::2, ::2, ::2] = 1  # 80000 isolated voxels
    path = tmp_path / "many.nii.gz"
    nibabel.save(nibabel.Nifti1Image(values.transpose(2, 1, 0), np.eye(4)), path)
    volume = read_volume(path, MAX)
    labels, count = ndimage.label(volume.values)
    assert count > 65535
    back = nibabel.load(_written(tmp_path, encode_label_volume(labels, count, volume), ".nii.gz"))
    assert back.get_data_dtype() == np.uint32
    np.testing.assert_array_equal(np.asarray(back.dataobj).transpose(2, 1, 0), labels)


def test_nifti_scaled_values_are_read_scaled(tmp_path: Path) -> None:
    raw = _values()
    image = nibabel.Nifti1Image(raw.transpose(2, 1, 0), np.eye(4))
    image.header.set_slope_inter(2.0, -1000.0)
    path = tmp_path / "hu.nii"
    nibabel.save(image, path)
    volume = read_volume(path, MAX)
    np.testing.assert_array_equal(volume.values, raw * 2.0 - 1000.0)


@pytest.mark.parametrize(
    ("name", "encoding", "detached"),
    [
        ("a.nrrd", "gzip", False),
        ("b.nrrd", "raw", False),
        ("c.nhdr", "raw", True),
        ("d.seg.nrrd", "bzip2", False),
    ],
)
def test_nrrd_axes_geometry_and_labels_round_trip(
    tmp_path: Path, name: str, encoding: str, detached: bool
) -> None:
    values = _values()
    header = {
        "encoding": encoding,
        "space": "left-posterior-superior",
        "space directions": (DIRECTION * np.array(SPACING)).T,  # one row per axis
        "space origin": np.array(ORIGIN),
        "space units": ["mm", "mm", "mm"],
        "kinds": ["domain"] * 3,
    }
    path = tmp_path / name
    nrrd.write(str(path), values, header, index_order="C", detached_header=detached)

    volume = read_volume(path, MAX)
    assert volume_format(path) == "nrrd"
    np.testing.assert_array_equal(volume.values, nrrd.read(str(path), index_order="C")[0])
    np.testing.assert_allclose(volume.geometry.spacing, SPACING)
    np.testing.assert_allclose(volume.geometry.origin, ORIGIN)
    np.testing.assert_allclose(volume.geometry.direction, DIRECTION, atol=1e-12)
    assert (volume.geometry.units, volume.geometry.space) == ("mm", "LPS")

    labels, count = _labels(volume.values)
    out = _written(tmp_path, encode_label_volume(labels, count, volume), ".nrrd")
    back, back_header = nrrd.read(str(out), index_order="C")
    assert back.dtype == np.uint16
    np.testing.assert_array_equal(back, labels)
    assert back_header["space"] == "left-posterior-superior"
    np.testing.assert_array_equal(back_header["space directions"], header["space directions"])
    np.testing.assert_array_equal(back_header["space origin"], header["space origin"])
    assert back_header["space units"] == ["mm", "mm", "mm"]


def test_nrrd_with_a_list_axis_of_one_layer_reads_as_its_volume(tmp_path: Path) -> None:
    values = _values()
    directions = np.vstack([[np.nan] * 3, np.diag(SPACING)])
    header = {"space": "RAS", "space directions": directions, "kinds": ["list"] + ["domain"] * 3}
    path = tmp_path / "layers.seg.nrrd"
    nrrd.write(str(path), values[..., None], header, index_order="C")  # the list axis fastest
    volume = read_volume(path, MAX)
    np.testing.assert_array_equal(volume.values, values)
    assert volume.geometry.spacing == SPACING


@pytest.mark.parametrize(
    ("name", "compress"), [("a.mha", False), ("b.mha", True), ("c.mhd", False), ("d.mhd", True)]
)
def test_metaimage_axes_geometry_and_labels_round_trip(
    tmp_path: Path, name: str, compress: bool
) -> None:
    values = _values()
    image = sitk.GetImageFromArray(values)  # SimpleITK: arrays (z, y, x), geometry (x, y, z)
    image.SetSpacing(SPACING)
    image.SetOrigin(ORIGIN)
    image.SetDirection(tuple(DIRECTION.reshape(-1)))
    path = tmp_path / name
    sitk.WriteImage(image, str(path), compress)

    volume = read_volume(path, MAX)
    assert volume_format(path) == "metaimage"
    np.testing.assert_array_equal(volume.values, values)
    assert volume.geometry.spacing == SPACING and volume.geometry.origin == ORIGIN
    np.testing.assert_array_equal(volume.geometry.direction, DIRECTION)

    labels, count = _labels(volume.values)
    assert label_volume_suffix("metaimage", None) == ".labels.mha"
    out = _written(tmp_path, encode_label_volume(labels, count, volume), ".mha")
    back = sitk.ReadImage(str(out))
    np.testing.assert_array_equal(sitk.GetArrayFromImage(back), labels)
    assert back.GetPixelID() == sitk.sitkUInt16
    assert back.GetSpacing() == SPACING and back.GetOrigin() == ORIGIN
    assert back.GetDirection() == image.GetDirection()


@pytest.mark.parametrize("kind", ["imagej", "ome"])
def test_tiff_stack_voxel_size_and_labels_round_trip(tmp_path: Path, kind: str) -> None:
    values = _values().astype(np.uint16)
    path = tmp_path / "stack.tif"
    if kind == "imagej":
        tifffile.imwrite(
            path,
            values,
            imagej=True,
            resolution=(1 / SPACING[0], 1 / SPACING[1]),
            metadata={"spacing": SPACING[2], "unit": "micron", "axes": "ZYX"},
        )
    else:
        tifffile.imwrite(
            path,
            values,
            ome=True,
            metadata={
                "axes": "ZYX",
                "PhysicalSizeX": SPACING[0],
                "PhysicalSizeY": SPACING[1],
                "PhysicalSizeZ": SPACING[2],
            },
        )
    volume = read_volume(path, MAX)
    assert volume_format(path) == "tiff"
    np.testing.assert_array_equal(volume.values, tifffile.imread(path))
    np.testing.assert_allclose(volume.geometry.spacing, SPACING, rtol=1e-6)
    assert volume.geometry.units == "um"

    for count in (3, 70000):  # uint16: an ImageJ hyperstack; uint32: OME-TIFF
        labels, found = _labels(volume.values)
        labels[labels > 0] += count - found
        out = _written(tmp_path, encode_label_volume(labels, count, volume), ".tif")
        with tifffile.TiffFile(out) as back:
            np.testing.assert_array_equal(back.asarray(), labels)
            assert back.series[0].axes == "ZYX"
            assert back.is_imagej == (count <= 65535)
            assert back.asarray().dtype == (np.uint16 if count <= 65535 else np.uint32)
        again = read_volume(out, MAX).geometry
        np.testing.assert_allclose(again.spacing, volume.geometry.spacing, rtol=1e-6)
        assert again.units == "um"


def test_plain_multipage_tiff_is_pages_unless_volume_flag(tmp_path: Path) -> None:
    values = _values().astype(np.uint8)
    path = tmp_path / "pages.tif"
    with tifffile.TiffWriter(path) as writer:
        for plane in values:
            writer.write(plane, photometric="minisblack", metadata=None)
    assert volume_format(path) is None
    assert volume_format(path, volume_flag=True) == "tiff"
    volume = read_volume(path, MAX)
    np.testing.assert_array_equal(volume.values, values)
    assert volume.geometry.spacing is None


def test_npy_volume_any_order_and_byte_order(tmp_path: Path) -> None:
    values = _values()
    np.save(tmp_path / "f.npy", np.asfortranarray(values.astype(">i2")))
    np.save(tmp_path / "flat.npy", values[0])
    assert volume_format(tmp_path / "f.npy") == "npy"
    assert volume_format(tmp_path / "flat.npy") is None  # a 2-D .npy is an image
    volume = read_volume(tmp_path / "f.npy", MAX)
    assert volume.values.dtype == np.int16 and volume.values.flags.c_contiguous
    np.testing.assert_array_equal(volume.values, values)
    labels, count = _labels(values)
    back = np.load(io.BytesIO(encode_label_volume(labels, count, volume)))  # type: ignore[arg-type]
    assert back.dtype == np.uint16
    np.testing.assert_array_equal(back, labels)


@pytest.mark.parametrize("label_format", ["nifti", "nrrd", "metaimage", "tiff", "npy"])
def test_label_format_forces_a_format_with_the_geometry(tmp_path: Path, label_format: str) -> None:
    values = _values()
    image = sitk.GetImageFromArray(values)
    image.SetSpacing(SPACING)
    sitk.WriteImage(image, str(tmp_path / "in.mha"))
    volume = read_volume(tmp_path / "in.mha", MAX)
    labels, count = _labels(values)
    suffix = label_volume_suffix("metaimage", label_format)
    out = _written(tmp_path, encode_label_volume(labels, count, volume, label_format), suffix)
    back = read_volume(out, MAX)
    np.testing.assert_array_equal(back.values, labels)
    if label_format != "npy":
        np.testing.assert_allclose(back.geometry.spacing, SPACING, rtol=1e-6)


def test_slices_stack_in_natural_order(tmp_path: Path) -> None:
    values = _values().astype(np.uint8)
    for z, plane in enumerate(values):
        Image.fromarray(plane).save(tmp_path / f"slice_{z * 5}.png")  # 0, 5, 10, 15, 20
    paths = natural_order(tmp_path.glob("*.png"))
    assert [p.name for p in paths] == [f"slice_{z * 5}.png" for z in range(5)]
    volume = read_slices(paths, MAX)
    assert volume.format == "slices"
    np.testing.assert_array_equal(volume.values, values)
    assert label_volume_suffix("slices", None) == ".labels.tif"


def test_natural_order_numbers_and_names() -> None:
    names = ["s10.png", "s2.png", "s1.png", "a.png", "s02b.png", "s2a.png"]
    ordered = [p.name for p in natural_order(Path(n) for n in names)]
    assert ordered == ["a.png", "s1.png", "s2.png", "s2a.png", "s02b.png", "s10.png"]


def test_volume_stem_drops_the_whole_format_ending() -> None:
    assert volume_stem(Path("d/ct.nii.gz")) == "ct"
    assert volume_stem(Path("heart.seg.nrrd")) == "heart.seg"
    assert volume_stem(Path("Scan.MHA")) == "Scan"


def test_physical_columns_are_voxel_columns_through_the_geometry() -> None:
    geometry = Geometry(SPACING, ORIGIN, tuple(tuple(r) for r in DIRECTION), "mm", "RAS")
    columns = {
        "area": np.array([1, 10, 27]),
        "centroid_x": np.array([0.0, 2.5, 6.0]),
        "centroid_y": np.array([0.0, 1.0, 5.5]),
        "centroid_z": np.array([0.0, 3.0, 4.0]),
    }
    found = physical_columns(columns, geometry)
    assert sorted(found) == ["volume_mm3", "world_x_mm", "world_y_mm", "world_z_mm"]
    np.testing.assert_allclose(found["volume_mm3"], columns["area"] * 0.5 * 0.75 * 1.25)
    for row in range(3):  # world = origin + D @ (spacing * voxel), one component at a time
        x, y, z = (columns[f"centroid_{a}"][row] for a in "xyz")
        step = (x * 0.5, y * 0.75, z * 1.25)
        expected = (10.0 - step[1], -20.0 + step[0], 30.0 + step[2])  # x along +y, y along -x
        got = tuple(found[f"world_{a}_mm"][row] for a in "xyz")
        np.testing.assert_allclose(got, expected)
    assert physical_columns(columns, Geometry()) == {}
    assert "volume" in physical_columns(columns, Geometry(spacing=(1.0, 1.0, 1.0)))


def test_preview_keeps_the_physical_aspect_and_colours_components() -> None:
    labels = np.zeros((10, 20, 40), dtype=np.uint32)  # z, y, x
    labels[2:4, 5:8, 10:30] = 1
    labels[7, 15, 35] = 2
    png = volume_preview(labels, Geometry(spacing=(1.0, 1.0, 4.0)))
    picture = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    # Physical extents 40 x 20 x 40 (x, y, z), scaled up to at least 256 pixels a side:
    # top (y, x) 20 x 40 units, side (y, z) 20 x 40, bottom (z, x) 40 x 40.
    height, width, _ = picture.shape
    scale = (width - 2) / 80
    assert height == pytest.approx(60 * scale + 2, abs=2)
    top = picture[: round(20 * scale), : round(40 * scale)]
    colours = {tuple(c) for c in top.reshape(-1, 3)}
    assert (0, 0, 0) in colours and len(colours) == 3  # background and the two components
    # Component 1 spans x 10..29 of 40 in the top view: half its width.
    row = top[round(6.5 * scale)]
    assert (row != 0).any(axis=1).sum() == pytest.approx(20 * scale, abs=2)


@pytest.mark.parametrize("fmt", ["nifti", "nrrd"])
def test_large_gzipped_label_volumes_read_whole_in_every_library(tmp_path: Path, fmt: str) -> None:
    """Past 4 MiB of labels a .nii.gz holds several gzip members: nibabel and SimpleITK (zlib's
    gzread) read them all, gccl's own reader too; a .nrrd stays one member, which pynrrd needs."""
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 3000, (40, 256, 256)).astype(np.uint32)  # 5 MiB as uint16
    source_path = tmp_path / "zeros.npy"
    np.save(source_path, np.zeros(labels.shape, np.uint8))
    source = read_volume(source_path, 1 << 30)
    out = _written(
        tmp_path, encode_label_volume(labels, 2999, source, fmt), label_volume_suffix("npy", fmt)
    )
    np.testing.assert_array_equal(read_volume(out, 1 << 30).values, labels)
    np.testing.assert_array_equal(sitk.GetArrayFromImage(sitk.ReadImage(str(out))), labels)
    if fmt == "nifti":
        np.testing.assert_array_equal(np.asarray(nibabel.load(out).dataobj).T, labels)
    else:
        np.testing.assert_array_equal(nrrd.read(str(out), index_order="C")[0], labels)


def test_importing_the_package_imports_no_format_library() -> None:
    import subprocess
    import sys

    code = (
        "import sys, ccl_cli.io.volumes; "
        "print(sorted(m for m in ('nibabel', 'nrrd', 'SimpleITK', 'tifffile') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_nrrd_of_several_gzip_members_reads_whole(tmp_path: Path) -> None:
    import gzip

    values = _values()
    data = values.astype("<i2").tobytes()
    path = tmp_path / "members.nrrd"
    header = (
        b"NRRD0004\ntype: int16\ndimension: 3\nsizes: 7 6 5\nendian: little\nencoding: gzip\n\n"
    )
    path.write_bytes(header + gzip.compress(data[:100]) + gzip.compress(data[100:]))
    np.testing.assert_array_equal(read_volume(path, MAX).values, values)


def test_gzip_nrrd_byte_skip_counts_decompressed_bytes(tmp_path: Path) -> None:
    import gzip

    values = _values()
    data = b"\x07" * 11 + values.astype(">i2").tobytes()
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.raw.gz").write_bytes(gzip.compress(data))
    path = folder / "a.nhdr"
    path.write_bytes(
        b"NRRD0004\ntype: int16\ndimension: 3\nsizes: 7 6 5\nendian: big\nencoding: gzip\n"
        b"byte skip: 11\ndata file: a.raw.gz\n\n"
    )
    np.testing.assert_array_equal(read_volume(path, MAX).values, values)


def _source_file(tmp_path: Path, fmt: str) -> Path:
    """A volume in `fmt` with the module's rotated geometry, written by the format's library."""
    values = _values()
    if fmt == "nifti":
        path = tmp_path / "in.nii.gz"
        image = nibabel.Nifti1Image(values.transpose(2, 1, 0), _affine())
        image.header.set_qform(_affine(), code=1)
        image.header.set_sform(_affine(), code=1)
        nibabel.save(image, path)
    elif fmt == "nrrd":
        path = tmp_path / "in.nrrd"
        nrrd.write(
            str(path),
            values,
            {
                "space": "left-posterior-superior",
                "space directions": (DIRECTION * np.array(SPACING)).T,
                "space origin": np.array(ORIGIN),
            },
            index_order="C",
        )
    else:
        path = tmp_path / "in.mha"
        image = sitk.GetImageFromArray(values)
        image.SetSpacing(SPACING)
        image.SetOrigin(ORIGIN)
        image.SetDirection(tuple(DIRECTION.reshape(-1)))
        sitk.WriteImage(image, str(path))
    return path


@pytest.mark.parametrize("source_format", ["nifti", "nrrd", "metaimage"])
@pytest.mark.parametrize("label_format", ["nifti", "nrrd", "metaimage"])
def test_forced_formats_put_labels_where_the_input_is(
    tmp_path: Path, source_format: str, label_format: str
) -> None:
    """SimpleITK reads all three formats into one world (LPS): the label volume of any input,
    in any of them, lies where the input does, voxel for voxel (NIfTI's RAS converted)."""
    path = _source_file(tmp_path, source_format)
    volume = read_volume(path, MAX)
    labels, count = _labels(volume.values)
    out = _written(
        tmp_path,
        encode_label_volume(labels, count, volume, label_format),
        label_volume_suffix(source_format, label_format),
    )
    source, back = sitk.ReadImage(str(path)), sitk.ReadImage(str(out))
    np.testing.assert_array_equal(sitk.GetArrayFromImage(back), labels)
    np.testing.assert_allclose(back.GetSpacing(), source.GetSpacing(), rtol=1e-6)
    np.testing.assert_allclose(back.GetOrigin(), source.GetOrigin(), atol=1e-5)
    np.testing.assert_allclose(back.GetDirection(), source.GetDirection(), atol=1e-6)


@pytest.mark.parametrize(
    ("name", "foreground", "count", "spacing"),
    [
        ("part_ct.tif", lambda v: v < 120, 6, (0.05, 0.05, 0.1)),
        ("part_ct.mha", lambda v: v < 120, 6, (0.05, 0.05, 0.1)),
        ("organs.nii.gz", lambda v: v != 0, 3, (0.8, 0.8, 2.5)),
        ("organs.seg.nrrd", lambda v: v != 0, 3, (0.8, 0.8, 2.5)),
        ("cells.npy", lambda v: v != 0, 1, None),
    ],
)
def test_sample_volumes_read_as_documented(
    name: str,
    foreground: Callable[[np.ndarray], np.ndarray],
    count: int,
    spacing: tuple[float, float, float] | None,
) -> None:
    """sample_data/README.md's components (scipy, 26-connectivity) and voxel sizes."""
    volume = read_volume(Path(__file__).parents[2] / "sample_data" / "volumes" / name, MAX)
    assert ndimage.label(foreground(volume.values), np.ones((3, 3, 3)))[1] == count
    if spacing is None:
        assert volume.geometry.spacing is None
    else:
        np.testing.assert_allclose(volume.geometry.spacing, spacing, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.int64, np.uint16])
@pytest.mark.parametrize("depth", [1, 3, 17])
def test_narrowed_labels_keep_every_value(dtype: type, depth: int) -> None:
    from ccl_cli.io.volumes.encode import narrowed

    rng = np.random.default_rng(depth)
    labels = rng.integers(0, 70_000, (depth, 5, 6)).astype(dtype)
    kept = int(labels.max())
    got = narrowed(labels, kept)
    assert got.dtype == (np.uint16 if kept <= 65535 else np.uint32)
    np.testing.assert_array_equal(got.astype(np.int64), labels.astype(np.int64))
    small = (labels % 60_000).astype(dtype)
    got = narrowed(small, 60_000)
    assert got.dtype == np.uint16
    np.testing.assert_array_equal(got.astype(np.int64), small.astype(np.int64))


@pytest.mark.parametrize("plane", [0, 8, 16])
@pytest.mark.parametrize("bad", [70_000, -1])
def test_labels_out_of_range_in_any_slab_are_refused(plane: int, bad: int) -> None:
    from ccl_cli.io.volumes.encode import narrowed

    labels = np.ones((17, 4, 4), np.int64)
    labels[plane, 2, 3] = bad
    with pytest.raises(ValueError, match=f"0..100, got {min(bad, 1)}..{max(bad, 1)}"):
        narrowed(labels, 100)
