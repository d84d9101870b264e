"""Labeling memory is bounded per pixel (README, "Data safety"): a whole `gccl label` of an
image whose every pixel, or every other one, is a component of its own stays within the
documented bytes per pixel above what a run of a tiny image takes; with --polygons, of the
images with the most outline per pixel, within that plus the outlines' own bound."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

#: README, "Data safety": labeling an image takes at most this many bytes per pixel.
BYTES_PER_PIXEL = 200
SIDE = 1500


def peak_rss(image: Path, out: Path, *options: str) -> int:
    """The peak resident bytes of `gccl label image` in a process of its own."""
    command = [sys.executable, "-m", "ccl_cli", "label", str(image), "--out", str(out), "-q"]
    measure = (
        "import resource, subprocess, sys\n"
        "code = subprocess.run(sys.argv[1:]).returncode\n"
        "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", measure, *command, "--device", "cpu", *options],
        capture_output=True,
        text=True,
        check=True,
    )
    code, kilobytes = map(int, result.stdout.split())
    assert code == 0, result.stderr
    return kilobytes * 1024


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> int:
    """What a run of a 2x2 image takes: the interpreter, the imports, the run's machinery."""
    folder = tmp_path_factory.mktemp("tiny")
    Image.fromarray(np.full((2, 2), 255, np.uint8)).save(folder / "tiny.png")
    return peak_rss(folder / "tiny.png", folder / "out")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("checkerboard", ("--connectivity", "4")),  # every other pixel a component
        ("noise", ("--tau", "0", "--connectivity", "4")),  # nearly every pixel one
    ],
)
def test_labeling_memory_stays_within_the_bound_per_pixel(
    tmp_path: Path, baseline: int, name: str, options: tuple[str, ...]
) -> None:
    if name == "checkerboard":
        values = (np.add.outer(np.arange(SIDE), np.arange(SIDE)) % 2 * 255).astype(np.uint8)
    else:
        values = np.random.default_rng(1).integers(1, 256, (SIDE, SIDE)).astype(np.uint8)
    Image.fromarray(values).save(tmp_path / f"{name}.png")
    used = peak_rss(tmp_path / f"{name}.png", tmp_path / "out", *options)
    assert used - baseline <= BYTES_PER_PIXEL * SIDE * SIDE, (used - baseline) / SIDE**2
    rows = (tmp_path / "out" / f"{name}.stats.csv").read_bytes().count(b"\n") - 1
    assert rows > SIDE * SIDE // 3  # the components were all there, and written


#: README, "Data safety": --polygons outlines take at most this many more bytes per pixel.
OUTLINE_BYTES_PER_PIXEL = 120


@pytest.mark.parametrize(
    ("options", "features"),
    [
        (("--tau", "0", "--connectivity", "4"), SIDE * SIDE),  # a square per pixel
        (("--tau", "0", "--connectivity", "8"), 2),  # two MultiPolygons of a square per pixel
        (("--connectivity", "4"), SIDE * SIDE // 2),  # every other pixel
    ],
)
def test_outline_memory_stays_within_the_bound_per_pixel(
    tmp_path: Path, baseline: int, options: tuple[str, ...], features: int
) -> None:
    values = (np.add.outer(np.arange(SIDE), np.arange(SIDE)) % 2 + 1).astype(np.uint8)
    if "--tau" not in options:
        values = (values - 1) * 255  # background and foreground
    Image.fromarray(values).save(tmp_path / "board.png")
    used = peak_rss(tmp_path / "board.png", tmp_path / "out", "--polygons", *options)
    bound = (BYTES_PER_PIXEL + OUTLINE_BYTES_PER_PIXEL) * SIDE * SIDE
    assert used - baseline <= bound, (used - baseline) / SIDE**2
    text = (tmp_path / "out" / "board.polygons.geojson").read_bytes()
    assert text.count(b'{"type":"Feature",') == features
    polygons = SIDE * SIDE if "--tau" in options else SIDE * SIDE // 2
    assert text.count(b"[[[") == polygons  # each polygon's exterior opens so
