"""Bad volume files: each fails as one InputError line giving the reason, before memory past
--max-image-bytes is taken, and no file outside the input's folder is ever read."""

from __future__ import annotations

import gzip
import sys
import tracemalloc
from pathlib import Path

import nibabel
import nrrd
import numpy as np
import pytest
import SimpleITK as sitk
import tifffile
from PIL import Image

from ccl_cli.errors import InputError
from ccl_cli.io.volumes import detached_data, read_slices, read_volume

MAX = 1 << 24


def _fails(path: Path, words: str, max_bytes: int = MAX) -> str:
    with pytest.raises(InputError) as caught:
        read_volume(path, max_bytes)
    message = str(caught.value)
    assert "\n" not in message
    assert words in message, message
    return message


def test_4d_nifti_says_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "series.nii.gz"
    nibabel.save(nibabel.Nifti1Image(np.zeros((4, 5, 6, 3), np.uint8), np.eye(4)), path)
    assert "time series or channels" in _fails(path, "4-D")


def test_4d_nifti_of_one_time_point_is_a_volume(tmp_path: Path) -> None:
    path = tmp_path / "one.nii"
    values = np.arange(120, dtype=np.uint8).reshape(4, 5, 6, 1)
    nibabel.save(nibabel.Nifti1Image(values, np.eye(4)), path)
    np.testing.assert_array_equal(read_volume(path, MAX).values, values[..., 0].T)


def test_nifti_header_that_lies_about_its_size(tmp_path: Path) -> None:
    path = tmp_path / "short.nii"
    nibabel.save(nibabel.Nifti1Image(np.zeros((40, 40, 40), np.int16), np.eye(4)), path)
    path.write_bytes(path.read_bytes()[:20000])
    _fails(path, "truncated NIfTI")


def test_nifti_declaring_more_than_max_bytes_is_refused_unread(tmp_path: Path) -> None:
    header = nibabel.Nifti1Header()
    header.set_data_shape((4000, 4000, 4000))
    header.set_data_dtype(np.int16)
    header["vox_offset"] = 352
    path = tmp_path / "huge.nii.gz"
    with gzip.open(path, "wb") as out:
        out.write(header.binaryblock + b"\0" * 4 + b"\0" * 1000)
    _fails(path, "--max-image-bytes")


def test_gzip_bomb_in_nii_gz_decodes_no_further_than_its_header(tmp_path: Path) -> None:
    header = nibabel.Nifti1Header()
    header.set_data_shape((64, 64, 64))
    header.set_data_dtype(np.uint8)
    header["vox_offset"] = 352
    path = tmp_path / "bomb.nii.gz"
    with gzip.open(path, "wb", compresslevel=9) as out:
        out.write(header.binaryblock + b"\0" * 4)
        block = b"\1" * (1 << 20)
        for _ in range(256):  # 256 MiB of data behind a 256 KiB volume
            out.write(block)
    assert path.stat().st_size < 2 << 20
    tracemalloc.start()
    try:
        volume = read_volume(path, MAX)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert volume.values.shape == (64, 64, 64)
    assert peak < 16 << 20


def test_nifti_extension_past_the_data_offset_is_refused(tmp_path: Path) -> None:
    header = nibabel.Nifti1Header()
    header.set_data_shape((2, 2, 2))
    header.set_data_dtype(np.uint8)
    header["vox_offset"] = 368
    extension = np.array([1 << 30, 0], "<i4").tobytes() + b"\0" * 8  # declares 1 GiB
    path = tmp_path / "ext.nii.gz"
    with gzip.open(path, "wb") as out:
        out.write(header.binaryblock + b"\1\0\0\0" + extension + b"\0" * 8)
    with pytest.raises(InputError):
        read_volume(path, MAX)


def _mhd(tmp_path: Path, data_file: str, shape: str = "4 3 2") -> Path:
    path = tmp_path / "scan.mhd"
    path.write_text(
        "ObjectType = Image\nNDims = 3\nDimSize = " + shape + "\nElementType = MET_UCHAR\n"
        "ElementSpacing = 1 1 1\nElementDataFile = " + data_file + "\n"
    )
    return path


def test_mhd_whose_data_file_is_missing(tmp_path: Path) -> None:
    _fails(_mhd(tmp_path, "scan.raw"), "scan.raw is missing")


@pytest.mark.parametrize("name", ["/etc/hostname", "../outside.raw", "sub/../../outside.raw"])
def test_mhd_pointing_outside_its_folder_is_refused(tmp_path: Path, name: str) -> None:
    inner = tmp_path / "in"
    inner.mkdir()
    (tmp_path / "outside.raw").write_bytes(b"\0" * 24)
    _fails(_mhd(inner, name), "outside the header's folder")


def test_mhd_whose_data_file_is_a_link_out_is_refused(tmp_path: Path) -> None:
    inner = tmp_path / "in"
    inner.mkdir()
    (tmp_path / "outside.raw").write_bytes(b"\0" * 24)
    (inner / "scan.raw").symlink_to(tmp_path / "outside.raw")
    _fails(_mhd(inner, "scan.raw"), "outside the header's folder")


@pytest.mark.parametrize("name", ["LIST", "slice_%03d.raw 1 2 1"])
def test_mhd_with_data_in_several_files_is_refused(tmp_path: Path, name: str) -> None:
    path = _mhd(tmp_path, name)
    _fails(path, "MetaImage data in several files")
    assert detached_data(path) is None  # (--skip-existing leaves it to the reading)


@pytest.mark.parametrize("name", ["LIST", "slice_%03d.raw 1 2 1"])
def test_nhdr_with_data_in_several_files_is_refused(tmp_path: Path, name: str) -> None:
    path = tmp_path / "a.nhdr"
    path.write_text(
        f"NRRD0004\ntype: uint8\ndimension: 3\nsizes: 4 3 2\nencoding: raw\ndata file: {name}\n\n"
    )
    _fails(path, "NRRD data in several files")
    assert detached_data(path) is None


def test_truncated_raw_behind_an_mhd(tmp_path: Path) -> None:
    (tmp_path / "scan.raw").write_bytes(b"\0" * 20)
    _fails(_mhd(tmp_path, "scan.raw"), "truncated data in scan.raw: 20 of 24 bytes")


def test_mhd_declaring_more_than_max_bytes(tmp_path: Path) -> None:
    (tmp_path / "scan.raw").write_bytes(b"\0" * 24)
    _fails(_mhd(tmp_path, "scan.raw", "5000 5000 5000"), "--max-image-bytes")


def test_metaimage_without_simpleitk_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = sitk.GetImageFromArray(np.zeros((2, 3, 4), np.uint8))
    sitk.WriteImage(image, str(tmp_path / "a.mha"))
    monkeypatch.setitem(sys.modules, "SimpleITK", None)
    _fails(tmp_path / "a.mha", "pip install 'gccl[metaimage]'")


@pytest.mark.parametrize("name", ["../elsewhere.raw", "/etc/hostname"])
def test_nhdr_pointing_elsewhere_is_refused(tmp_path: Path, name: str) -> None:
    inner = tmp_path / "in"
    inner.mkdir()
    (tmp_path / "elsewhere.raw").write_bytes(b"\0" * 24)
    path = inner / "a.nhdr"
    path.write_text(
        f"NRRD0004\ntype: uint8\ndimension: 3\nsizes: 4 3 2\nencoding: raw\ndata file: {name}\n\n"
    )
    _fails(path, "outside the header's folder")


def test_nrrd_gzip_bomb_decodes_no_further_than_its_header(tmp_path: Path) -> None:
    path = tmp_path / "bomb.nrrd"
    header = b"NRRD0004\ntype: uint8\ndimension: 3\nsizes: 4 3 2\nencoding: gzip\n\n"
    path.write_bytes(header + gzip.compress(b"\0" * (64 << 20)))
    _fails(path, "decodes past the 24 bytes")


def test_truncated_gzip_nrrd(tmp_path: Path) -> None:
    path = tmp_path / "short.nrrd"
    nrrd.write(str(path), np.arange(8000, dtype=np.uint16).reshape(20, 20, 20))
    path.write_bytes(path.read_bytes()[:-2000])
    _fails(path, "truncated NRRD data")


def test_truncated_raw_nrrd(tmp_path: Path) -> None:
    path = tmp_path / "short.nrrd"
    nrrd.write(str(path), np.zeros((20, 20, 20), np.uint16), {"encoding": "raw"})
    path.write_bytes(path.read_bytes()[:-100])
    _fails(path, "truncated NRRD data")


def test_compressed_tiff_stack_past_max_bytes_is_refused_before_decoding(tmp_path: Path) -> None:
    path = tmp_path / "stack.tif"
    tifffile.imwrite(
        path,
        np.zeros((64, 256, 256), np.uint16),
        imagej=True,
        compression="zlib",
        metadata={"axes": "ZYX"},
    )
    assert path.stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        _fails(path, "--max-image-bytes", max_bytes=4 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20


def test_tiff_with_channels_is_4d(tmp_path: Path) -> None:
    path = tmp_path / "channels.tif"
    tifffile.imwrite(path, np.zeros((3, 2, 8, 8), np.uint8), imagej=True, metadata={"axes": "ZCYX"})
    _fails(path, "time series or channels")


def test_slices_that_disagree_name_the_odd_slice(tmp_path: Path) -> None:
    for z in range(3):
        Image.fromarray(np.zeros((6, 7), np.uint8)).save(tmp_path / f"s{z}.png")
    Image.fromarray(np.zeros((6, 8), np.uint8)).save(tmp_path / "s3.png")
    paths = [tmp_path / f"s{z}.png" for z in range(4)]
    with pytest.raises(InputError, match=r"slice s3\.png is 8x6 uint8 where s0\.png is 7x6 uint8"):
        read_slices(paths, MAX)
    Image.fromarray(np.zeros((6, 7), np.uint16)).save(tmp_path / "s3.png")
    with pytest.raises(InputError, match=r"slice s3\.png is 7x6 uint16"):
        read_slices(paths, MAX)


def test_slices_past_max_bytes_are_refused_at_the_first(tmp_path: Path) -> None:
    paths = []
    for z in range(10):
        paths.append(tmp_path / f"s{z}.png")
        Image.fromarray(np.zeros((100, 100), np.uint8)).save(paths[-1])
    paths[5].write_bytes(b"not read")  # never reached
    with pytest.raises(InputError, match="--max-image-bytes"):
        read_slices(paths, 50_000)


def test_npy_of_objects_and_fifo_are_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "obj.npy", np.empty((2, 2, 2), dtype=object), allow_pickle=True)
    _fails(tmp_path / "obj.npy", "pickle")
    fifo = tmp_path / "pipe.nii"
    import os

    os.mkfifo(fifo)
    _fails(fifo, "not a regular file")


def test_truncated_nii_gz(tmp_path: Path) -> None:
    path = tmp_path / "short.nii.gz"
    values = np.random.default_rng(1).integers(0, 255, (30, 30, 30)).astype(np.uint8)
    nibabel.save(nibabel.Nifti1Image(values, np.eye(4)), path)
    path.write_bytes(path.read_bytes()[:5000])
    _fails(path, "NIfTI")


def test_a_fifo_named_like_a_volume_is_no_volume_and_does_not_block(tmp_path: Path) -> None:
    import os

    from ccl_cli.io.volumes import volume_format

    for name in ("pipe.tif", "pipe.npy"):
        os.mkfifo(tmp_path / name)
        assert volume_format(tmp_path / name, volume_flag=True) is None


def test_tiff_pages_that_disagree_name_the_odd_page(tmp_path: Path) -> None:
    path = tmp_path / "mixed.tif"
    with tifffile.TiffWriter(path) as writer:
        for width in (7, 7, 8, 7):
            writer.write(np.zeros((6, width), np.uint8), photometric="minisblack", metadata=None)
    _fails(path, "page 3 is 8x6 uint8 where page 1 is 7x6 uint8")


def test_values_and_labels_past_available_memory_are_refused_from_the_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ccl_cli.io.volumes import limits

    path = tmp_path / "a.npy"
    np.save(path, np.zeros((10, 20, 30), np.uint8))  # 6000 values + 24000 bytes of labels
    monkeypatch.setattr(limits, "available_memory", lambda: 29_999)
    message = _fails(path, "labeling takes 30000 bytes, values and uint32 labels")
    assert "29999 bytes available" in message
    monkeypatch.setattr(limits, "available_memory", lambda: 30_000)
    assert read_volume(path, MAX).values.shape == (10, 20, 30)


def test_2d_nifti_is_a_volume_of_one_plane(tmp_path: Path) -> None:
    path = tmp_path / "plane.nii"
    values = np.arange(20, dtype=np.uint8).reshape(4, 5)  # (x, y)
    nibabel.save(nibabel.Nifti1Image(values, np.eye(4)), path)
    np.testing.assert_array_equal(read_volume(path, MAX).values, values.T[None])


def test_truncated_compressed_mha_is_refused_before_simpleitk_reads_it(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    values = np.random.default_rng(0).integers(0, 255, (20, 30, 40)).astype(np.uint8)
    sitk.WriteImage(sitk.GetImageFromArray(values), str(tmp_path / "full.mha"), True)
    data = (tmp_path / "full.mha").read_bytes()
    (tmp_path / "cut.mha").write_bytes(data[:-3000])
    _fails(tmp_path / "cut.mha", "truncated data in cut.mha")
    assert capfd.readouterr().err == ""  # nothing from MetaIO on stderr


def test_nibabel_warnings_stay_off_stderr(tmp_path: Path) -> None:
    import subprocess

    header = nibabel.Nifti1Header()
    header.set_data_shape((2, 2, 2))
    header.set_data_dtype(np.uint8)
    header["vox_offset"] = 376
    extension = np.array([24, 0], "<i4").tobytes() + b"\0" * 16  # size not a multiple of 16
    path = tmp_path / "odd.nii"
    path.write_bytes(header.binaryblock + b"\1\0\0\0" + extension + b"\1" * 8)
    code = (
        "import sys; from pathlib import Path; from ccl_cli.io.volumes import read_volume; "
        "print(read_volume(Path(sys.argv[1]), 1 << 20).values.shape)"
    )
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", code, str(path)], capture_output=True, text=True
    )
    assert (done.stdout.strip(), done.stderr) == ("(2, 2, 2)", "")
