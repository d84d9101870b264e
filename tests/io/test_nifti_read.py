"""NIfTI files read by gccl hold what nibabel.load reads from them: the values (scaled where the
header scales them), their dtype, the affine and the units, for every data type, byte order,
header version, compression (one gzip member or several), header extensions and odd shapes.
The references are nibabel's own reading of each file."""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import nibabel
import numpy as np
import pytest

from ccl_cli.errors import InputError
from ccl_cli.io.volumes import read_volume
from ccl_cli.io.volumes.gzip_members import gzip_members

MAX = 1 << 26
#: nibabel's unit names and how gccl spells them in column names.
UNITS = {"mm": "mm", "micron": "um", "meter": "m", "unknown": ""}


def _as_zyx(xyz: np.ndarray) -> np.ndarray:
    """nibabel's (x, y[, z[, 1...]]) array as the (z, y, x) volume gccl labels."""
    shape = list(xyz.shape)
    while len(shape) > 3 and shape[-1] == 1:
        shape.pop()
    shape += [1] * (3 - len(shape))
    return xyz.reshape(shape).transpose(2, 1, 0)


def _values(shape: tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray:
    """(x, y, z, ...) values of `dtype` spanning its range, every voxel likely different."""
    rng = np.random.default_rng(seed)
    kind = np.dtype(dtype)
    if kind.kind == "f":
        return (rng.normal(0, 1000, shape)).astype(kind)
    info = np.iinfo(kind)
    return rng.integers(info.min, int(info.max) + 1, shape).astype(kind)


def _affine(seed: int) -> np.ndarray:
    """A rotated, scaled, shifted affine (every column a different length)."""
    rng = np.random.default_rng(seed)
    rotation, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    affine = np.eye(4)
    affine[:3, :3] = rotation * np.array([0.5, 0.75, 1.25])
    affine[:3, 3] = rng.uniform(-50, 50, 3)
    return affine


def _assert_reads_as_nibabel(path: Path) -> None:
    """read_volume's values, dtype, affine and units equal nibabel.load's of `path`."""
    reference = nibabel.load(path)
    expected = _as_zyx(np.asanyarray(reference.dataobj))
    volume = read_volume(path, MAX)
    np.testing.assert_array_equal(volume.values, expected)
    assert volume.values.dtype.isnative and volume.values.flags.c_contiguous
    if reference.dataobj.slope == 1.0 and reference.dataobj.inter == 0.0:
        assert volume.values.dtype == reference.get_data_dtype().newbyteorder("=")
    np.testing.assert_allclose(
        volume.geometry.in_space("RAS").matrix(), reference.affine, rtol=1e-6, atol=1e-9
    )
    assert volume.geometry.units == UNITS[reference.header.get_xyzt_units()[0]]


def _save(image: nibabel.Nifti1Image, path: Path) -> Path:
    nibabel.save(image, path)
    return path


@pytest.mark.parametrize("suffix", [".nii", ".nii.gz"])
@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64"])
def test_every_data_type_reads_as_nibabel_reads_it(tmp_path: Path, suffix: str, dtype: str) -> None:
    image = nibabel.Nifti1Image(_values((7, 6, 5), dtype), _affine(1))
    image.header.set_xyzt_units("micron")
    _assert_reads_as_nibabel(_save(image, tmp_path / f"v{suffix}"))


@pytest.mark.parametrize("suffix", [".nii", ".nii.gz"])
@pytest.mark.parametrize("header_class", [nibabel.Nifti1Header, nibabel.Nifti2Header])
def test_big_endian_files_read_as_nibabel_reads_them(
    tmp_path: Path, suffix: str, header_class: type
) -> None:
    header = header_class(endianness=">")
    image_class = (
        nibabel.Nifti2Image if header_class is nibabel.Nifti2Header else nibabel.Nifti1Image
    )
    image = image_class(_values((9, 4, 3), "int16"), _affine(2), header)
    path = _save(image, tmp_path / f"big{suffix}")
    start = path.read_bytes()
    start = gzip.decompress(start) if suffix.endswith(".gz") else start
    assert struct.unpack(">i", start[:4])[0] in (348, 540)  # written big-endian
    _assert_reads_as_nibabel(path)


@pytest.mark.parametrize(
    ("dtype", "slope", "inter"), [("int16", 2.0, -1000.0), ("uint8", 0.5, 3.0)]
)
def test_scaled_data_reads_scaled_as_nibabel(
    tmp_path: Path, dtype: str, slope: float, inter: float
) -> None:
    image = nibabel.Nifti1Image(_values((5, 6, 7), dtype), _affine(3))
    image.header.set_slope_inter(slope, inter)
    path = _save(image, tmp_path / "scaled.nii.gz")
    assert nibabel.load(path).dataobj.slope == slope  # the file is scaled
    _assert_reads_as_nibabel(path)


@pytest.mark.parametrize("suffix", [".nii", ".nii.gz"])
def test_nifti2_reads_as_nibabel_reads_it(tmp_path: Path, suffix: str) -> None:
    image = nibabel.Nifti2Image(_values((6, 5, 4), "float32"), _affine(4))
    image.header.set_xyzt_units("meter")
    _assert_reads_as_nibabel(_save(image, tmp_path / f"two{suffix}"))


@pytest.mark.parametrize("suffix", [".nii", ".nii.gz"])
def test_header_extensions_before_the_data_are_skipped(tmp_path: Path, suffix: str) -> None:
    image = nibabel.Nifti1Image(_values((4, 5, 6), "int16"), _affine(5))
    image.header.extensions.append(nibabel.nifti1.Nifti1Extension("comment", b"x" * 1000))
    path = _save(image, tmp_path / f"ext{suffix}")
    assert nibabel.load(path).dataobj.offset > 1352
    _assert_reads_as_nibabel(path)


@pytest.mark.parametrize("suffix", [".nii", ".nii.gz"])
@pytest.mark.parametrize(
    "shape", [(1, 7, 5), (7, 1, 5), (6, 5), (4, 5, 6, 1), (3, 4, 5, 1, 1), (2, 3, 4), (1, 1, 1)]
)
def test_odd_shapes_read_as_nibabel_reads_them(
    tmp_path: Path, suffix: str, shape: tuple[int, ...]
) -> None:
    """Small volumes among them: their data starts within the header's first 552 bytes."""
    image = nibabel.Nifti1Image(_values(shape, "uint8"), _affine(6))
    _assert_reads_as_nibabel(_save(image, tmp_path / f"odd{suffix}"))


@pytest.mark.parametrize(("sform_code", "qform_code"), [(2, 1), (0, 1), (1, 0), (4, 3), (0, 0)])
def test_the_affine_is_nibabels_for_every_sform_and_qform_code(
    tmp_path: Path, sform_code: int, qform_code: int
) -> None:
    image = nibabel.Nifti1Image(_values((5, 6, 7), "uint8"), None)
    image.header.set_qform(_affine(7), code=qform_code)
    image.header.set_sform(_affine(8), code=sform_code)
    image.header.set_zooms((0.5, 0.75, 1.25))
    image.header.set_xyzt_units("mm")
    path = _save(image, tmp_path / "codes.nii")
    header = nibabel.load(path).header
    assert (int(header["sform_code"]), int(header["qform_code"])) == (sform_code, qform_code)
    _assert_reads_as_nibabel(path)


def _multi_member(tmp_path: Path, cut: Callable[[bytes], list[bytes]]) -> Path:
    """A .nii.gz of the members gzip_members makes of the pieces `cut` makes of a nibabel .nii."""
    values = _values((40, 30, 20), "int16", seed=9)
    plain = _save(nibabel.Nifti1Image(values, _affine(9)), tmp_path / "plain.nii")
    path = tmp_path / "members.nii.gz"
    path.write_bytes(b"".join(gzip_members(cut(plain.read_bytes()))))
    first = zlib.decompressobj(wbits=31)
    first.decompress(path.read_bytes())
    assert first.eof and first.unused_data  # more than one member
    return path


def test_multi_member_nii_gz_reads_as_nibabel_reads_it(tmp_path: Path) -> None:
    """Members that split the header, the data offset and the data at odd places."""
    cuts = [0, 100, 351, 353, 5000, 5001, 40000]
    path = _multi_member(
        tmp_path, lambda data: [data[a:b] for a, b in zip(cuts, [*cuts[1:], None], strict=True)]
    )
    _assert_reads_as_nibabel(path)


def test_zero_bytes_between_gzip_members_are_skipped_as_by_python_gzip(tmp_path: Path) -> None:
    path = _multi_member(tmp_path, lambda data: [data[:10000], data[10000:]])
    members = path.read_bytes()
    # gzip_members writes the first member whole before the second: find where it ends.
    first = zlib.decompressobj(wbits=31)
    first.decompress(members)
    end = len(members) - len(first.unused_data)
    path.write_bytes(members[:end] + b"\0" * 5 + members[end:])
    _assert_reads_as_nibabel(path)


@pytest.mark.parametrize("where", [-8, -4])  # the trailer's CRC-32, its length
def test_nii_gz_whose_trailer_disagrees_with_its_data_is_refused(
    tmp_path: Path, where: int
) -> None:
    path = _save(
        nibabel.Nifti1Image(_values((30, 20, 10), "uint8"), np.eye(4)), tmp_path / "c.nii.gz"
    )
    data = bytearray(path.read_bytes())
    data[where] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(InputError) as caught:
        read_volume(path, MAX)
    assert "NIfTI" in str(caught.value) and "check" in str(caught.value)


def test_truncated_multi_member_nii_gz_names_the_bytes_missing(tmp_path: Path) -> None:
    path = _multi_member(tmp_path, lambda data: [data[:20000], data[20000:]])
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(InputError) as caught:
        read_volume(path, MAX)
    message = str(caught.value)
    assert message.startswith("truncated NIfTI: the header declares 48352 bytes, the gzip data")
    assert "\n" not in message
