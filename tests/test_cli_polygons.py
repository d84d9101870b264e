"""`gccl label --polygons` as a user drives it: the GeoJSON file, --json, --skip-existing."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from label_files import read_label_image
from PIL import Image
from typer.testing import CliRunner

from ccl_cli.cli import app


@pytest.fixture
def image(tmp_path: Path) -> Path:
    rng = np.random.default_rng(11)
    path = tmp_path / "in" / "scan.png"
    path.parent.mkdir()
    Image.fromarray(((rng.random((30, 40)) < 0.45) * 255).astype(np.uint8)).save(path)
    return path


def gccl(*args: str):
    return CliRunner().invoke(app, ["label", *args, "--quiet", "--device", "cpu"])


def stats_areas(path: Path) -> list[int]:
    with open(path, newline="") as handle:
        return [int(row["area"]) for row in csv.DictReader(handle)]


def test_polygons_file_lists_every_kept_component(image: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = gccl(str(image), "--out", str(out), "--polygons", "--min-area", "3", "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    path = out / "scan.polygons.geojson"
    assert record["outputs"]["polygons"] == str(path)
    collection = json.loads(path.read_text())
    features = collection["features"]
    labels = read_label_image(out / "scan.labels.png")
    assert [f["properties"]["label"] for f in features] == list(range(1, labels.max() + 1))
    assert [f["properties"]["area"] for f in features] == stats_areas(out / "scan.stats.csv")
    assert min(stats_areas(out / "scan.stats.csv")) >= 3
    assert {f["geometry"]["type"] for f in features} <= {"Polygon", "MultiPolygon"}


def test_no_polygons_file_without_the_option(image: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert gccl(str(image), "--out", str(out)).exit_code == 0
    assert (out / "scan.stats.csv").exists()
    assert not (out / "scan.polygons.geojson").exists()


def test_skip_existing_needs_the_polygons_file(image: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert gccl(str(image), "--out", str(out)).exit_code == 0
    result = gccl(str(image), "--out", str(out), "--skip-existing", "--polygons", "--json")
    assert json.loads(result.stdout)["status"] == "ok"
    assert (out / "scan.polygons.geojson").exists()
    result = gccl(str(image), "--out", str(out), "--skip-existing", "--polygons", "--json")
    assert json.loads(result.stdout)["status"] == "skipped"


def test_config_key_and_its_check(image: Path, tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("polygons: true\n")
    out = tmp_path / "out"
    assert gccl(str(image), "--out", str(out), "--config", str(config)).exit_code == 0
    assert (out / "scan.polygons.geojson").exists()
    config.write_text("polygons: sometimes\n")
    result = gccl(str(image), "--out", str(out), "--config", str(config))
    assert result.exit_code == 2
    assert "'polygons'" in result.stderr
