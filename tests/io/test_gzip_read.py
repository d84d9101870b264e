"""GzipReader gives a gzip file's bytes as Python's gzip does (one member or several, zero bytes
between members), whatever sizes it is asked for, checks each member's trailer where it reads
to it, and decodes no further than asked (one byte more at most, checking a member's end)."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest

from ccl_cli.io.volumes.gzip_read import _INPUT_BYTES, GzipReader


def _read(path: Path, sizes: list[int]) -> bytes:
    """The bytes of readinto calls of `sizes` (the last repeated to the end)."""
    chunks = []
    with open(path, "rb", buffering=0) as handle:
        reader = GzipReader(handle)
        for index in range(1 << 20):
            buffer = np.empty(sizes[min(index, len(sizes) - 1)], np.uint8)
            count = reader.readinto(buffer)
            chunks.append(buffer[:count].tobytes())
            if count < buffer.size:
                break
        reader.read_past()
    return b"".join(chunks)


@pytest.mark.parametrize("sizes", [[1 << 24], [1, 7, 1000, 333], [70000]])
@pytest.mark.parametrize("members", [1, 3])
@pytest.mark.parametrize("padding", [0, 7])
def test_reads_what_python_gzip_reads(
    tmp_path: Path, sizes: list[int], members: int, padding: int
) -> None:
    rng = np.random.default_rng(members + padding)
    data = np.repeat(rng.integers(0, 256, 60000), rng.integers(1, 9, 60000)).astype(np.uint8)
    parts = np.array_split(data, members)
    path = tmp_path / "data.gz"
    path.write_bytes((b"\0" * padding).join(gzip.compress(part.tobytes()) for part in parts))
    expected = gzip.decompress(path.read_bytes())
    assert expected == data.tobytes()
    got = _read(path, sizes)
    assert got == expected


def _read_once(path: Path, size: int) -> bytes:
    """The first `size` bytes, read in one call, and the member's end checked."""
    with open(path, "rb", buffering=0) as handle:
        reader = GzipReader(handle)
        buffer = np.empty(size, np.uint8)
        count = reader.readinto(buffer)
        reader.read_past()
    return buffer[:count].tobytes()


def test_a_trailer_past_the_last_data_slice_is_still_checked(tmp_path: Path) -> None:
    """One stored block whose data ends at the end of the first slice zlib is handed: the
    CRC-32 comes in the next, which only read_past reads."""
    size = _INPUT_BYTES - 15  # 10 bytes of gzip header, 5 of block header, the data
    data = np.random.default_rng(1).integers(0, 256, size).astype(np.uint8).tobytes()
    packed = bytearray(gzip.compress(data, compresslevel=0, mtime=0))
    assert len(packed) - 8 == _INPUT_BYTES
    path = tmp_path / "stored.gz"
    path.write_bytes(bytes(packed))
    assert _read_once(path, size) == data
    packed[-8] ^= 1  # the CRC-32 no longer matches
    path.write_bytes(bytes(packed))
    with pytest.raises(zlib.error, match="incorrect data check"):
        _read_once(path, size)


def test_data_past_what_is_asked_is_not_decoded(tmp_path: Path) -> None:
    path = tmp_path / "bomb.gz"
    path.write_bytes(gzip.compress(b"\1" * (16 << 20), compresslevel=9))
    tracemalloc.start()
    try:
        got = _read_once(path, 1000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == b"\1" * 1000
    assert peak < 1 << 20


@pytest.mark.parametrize(
    ("parts", "read", "past"),
    [
        ([b"a" * 5000], 5000, False),  # read to the end
        ([b"a" * 5000], 4999, True),  # one byte left in the member
        ([b"a" * 5000, b"b"], 5000, True),  # a member follows
        ([b"a" * 5000, b""], 5000, False),  # an empty member follows
    ],
)
def test_read_past_says_whether_data_follows(
    tmp_path: Path, parts: list[bytes], read: int, past: bool
) -> None:
    path = tmp_path / "data.gz"
    path.write_bytes(b"".join(gzip.compress(part) for part in parts))
    with open(path, "rb", buffering=0) as handle:
        reader = GzipReader(handle)
        buffer = np.empty(read, np.uint8)
        assert reader.readinto(buffer) == read
        assert reader.read_past() is past


def test_a_file_that_ends_before_its_trailer_has_nothing_past(tmp_path: Path) -> None:
    path = tmp_path / "short.gz"
    path.write_bytes(gzip.compress(b"a" * 5000)[:-8])
    with open(path, "rb", buffering=0) as handle:
        reader = GzipReader(handle)
        buffer = np.empty(5000, np.uint8)
        assert reader.readinto(buffer) == 5000
        assert reader.read_past() is False
