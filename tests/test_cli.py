"""`gccl label`, `gccl config show` and `gccl info` driven as a user would drive them."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage as ndi
import tifffile
from label_files import read_label_image
from PIL import Image
from typer.testing import CliRunner

from ccl_cli.cli import app
from ccl_cli.io.lock import OutputLock
from ccl_cli.io.out_dir import OutDir
from ccl_cli.io.output_paths import GCCL_DIR, LOCK_NAME

EIGHT = np.ones((3, 3), bool)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def save_png(path: Path, array: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)
    return path


def random_mask(rng: np.random.Generator, shape: tuple[int, int], density: float) -> np.ndarray:
    return ((rng.random(shape) < density) * 255).astype(np.uint8)


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def summary(out: Path) -> dict[str, dict[str, str]]:
    return {Path(row["path"]).name: row for row in read_csv(out / "summary.csv")}


def gccl(runner: CliRunner, *args: str, stdin: str | None = None):
    return runner.invoke(app, ["label", *args, "--quiet"], input=stdin)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    rng = np.random.default_rng(7)
    root = tmp_path / "in"
    save_png(root / "a.png", random_mask(rng, (40, 50), 0.4))
    save_png(root / "nested" / "b.png", random_mask(rng, (40, 50), 0.6))
    np.save(root / "c.npy", rng.integers(0, 3, (31, 17)).astype(np.uint16))
    return root


def test_labels_a_folder_and_mirrors_its_tree(runner: CliRunner, folder: Path, tmp_path: Path):
    out = tmp_path / "out"
    result = gccl(runner, str(folder), "--recursive", "--out", str(out), "--device", "cpu")
    assert result.exit_code == 0, result.output
    for relative, source in [
        ("a", folder / "a.png"),
        ("nested/b", folder / "nested" / "b.png"),
        ("c", folder / "c.npy"),
    ]:
        values = np.load(source) if source.suffix == ".npy" else np.asarray(Image.open(source))
        expected, count = ndi.label(values != 0, structure=EIGHT)
        labels = read_label_image(out / f"{relative}.labels.png")
        assert np.array_equal(labels, expected)
        rows = read_csv(out / f"{relative}.stats.csv")
        assert [int(row["label"]) for row in rows] == list(range(1, count + 1))
        assert [int(row["area"]) for row in rows] == list(np.bincount(expected.ravel())[1:])
    rows = summary(out)
    assert set(rows) == {"a.png", "b.png", "c.npy"}
    assert {row["status"] for row in rows.values()} == {"ok"}
    assert rows["c.npy"]["dtype"] == "uint16"
    assert (rows["c.npy"]["width"], rows["c.npy"]["height"]) == ("17", "31")


def test_json_lines_on_stdout(runner: CliRunner, folder: Path, tmp_path: Path):
    out = tmp_path / "out"
    result = gccl(runner, str(folder), "--out", str(out), "--json", "--device", "cpu")
    assert result.exit_code == 0
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted(Path(o["path"]).name for o in objects) == ["a.png", "c.npy"]
    for obj in objects:
        assert obj["status"] == "ok"
        assert obj["components"] >= obj["kept"] >= 1
        assert Path(obj["outputs"]["labels"]).exists()
        assert Path(obj["outputs"]["stats"]).exists()
        assert obj["seconds"] >= 0


def test_min_area_and_tau_through_the_cli(runner: CliRunner, tmp_path: Path):
    image = np.zeros((20, 30), np.uint16)
    image[2:4, 2:4] = 100  # 4 px
    image[10:15, 5:25] = np.arange(20, dtype=np.uint16) * 3 + 200  # a ramp of step 3
    image[0, 29] = 7  # 1 px
    path = tmp_path / "d.npy"
    np.save(path, image)
    out = tmp_path / "out"
    result = gccl(runner, str(path), "--out", str(out), "--tau", "3", "--min-area", "4")
    assert result.exit_code == 0, result.output
    labels = read_label_image(out / "d.labels.png")
    assert labels.max() == 2
    assert set(np.unique(labels[2:4, 2:4])) == {1}
    assert set(np.unique(labels[10:15, 5:25])) == {2}
    assert labels[0, 29] == 0
    row = summary(out)["d.npy"]
    assert (row["components"], row["kept"]) == ("3", "2")
    result = gccl(runner, str(path), "--out", str(tmp_path / "o2"), "--tau", "2")
    assert read_label_image(tmp_path / "o2" / "d.labels.png").max() == 22


def test_stdin_paths(runner: CliRunner, folder: Path, tmp_path: Path):
    out = tmp_path / "out"
    result = gccl(runner, "-", "--out", str(out), stdin=f"{folder / 'c.npy'}\n")
    assert result.exit_code == 0
    assert (out / "c.labels.png").exists()


def test_bad_inputs_fail_alone(runner: CliRunner, folder: Path, tmp_path: Path):
    bad = {
        "empty.png": b"",
        "text.png": b"hello, I am not an image\n",
        "truncated.png": (folder / "a.png").read_bytes()[:60],
    }
    for name, data in bad.items():
        (folder / name).write_bytes(data)
    save_png(folder / "rgb.png", np.zeros((4, 4, 3), np.uint8))
    np.save(folder / "cube.npy", np.zeros((2, 2, 3, 4), np.uint8))  # 4-D: no volume
    np.save(folder / "wide.npy", np.zeros((3, 4), np.int64))
    before = {p: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    out = tmp_path / "out"
    result = gccl(runner, str(folder), "--out", str(out), "--device", "cpu")
    assert result.exit_code == 1
    rows = summary(out)
    failed = {name for name, row in rows.items() if row["status"] == "failed"}
    assert failed == {"empty.png", "text.png", "truncated.png", "rgb.png", "cube.npy", "wide.npy"}
    assert rows["a.png"]["status"] == rows["c.npy"]["status"] == "ok"
    assert "--color-to-gray" in rows["rgb.png"]["message"]
    assert "int64" in rows["wide.npy"]["message"]
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("gccl: ")]
    for name in failed:
        assert sum(name in line for line in error_lines) == 1
    assert "Traceback" not in result.output
    assert not (out / "rgb.labels.png").exists()
    assert {p: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
    converted = gccl(runner, str(folder / "rgb.png"), "--out", str(out), "--color-to-gray", "luma")
    assert converted.exit_code == 0


def test_fail_fast_stops_at_the_first_failure(runner: CliRunner, folder: Path, tmp_path: Path):
    (folder / "0-broken.png").write_bytes(b"")
    out = tmp_path / "out"
    result = gccl(runner, str(folder), "--out", str(out), "--fail-fast", "--workers", "1")
    assert result.exit_code == 1
    statuses = {name: row["status"] for name, row in summary(out).items()}
    assert statuses["0-broken.png"] == "failed"
    assert "not-run" in statuses.values()
    assert "ok" not in statuses.values()


def test_missing_input_is_a_failed_row(runner: CliRunner, folder: Path, tmp_path: Path):
    out = tmp_path / "out"
    result = gccl(runner, str(folder / "a.png"), str(folder / "nope.png"), "--out", str(out))
    assert result.exit_code == 1
    assert summary(out)["nope.png"]["message"] == "no such file or directory"


def test_skip_existing_redoes_only_missing(runner: CliRunner, folder: Path, tmp_path: Path):
    out = tmp_path / "out"
    assert gccl(runner, str(folder), "--out", str(out)).exit_code == 0
    (out / "a.stats.csv").unlink()
    stamp = (out / "c.labels.png").stat().st_mtime_ns
    assert gccl(runner, str(folder), "--out", str(out), "--skip-existing").exit_code == 0
    statuses = {name: row["status"] for name, row in summary(out).items()}
    assert statuses == {"a.png": "ok", "c.npy": "skipped"}
    assert (out / "c.labels.png").stat().st_mtime_ns == stamp


def test_many_components_need_tiff(runner: CliRunner, tmp_path: Path):
    board = (np.indices((400, 400)).sum(axis=0) % 2).astype(np.uint8)  # 80000 4-components
    path = tmp_path / "board.npy"
    np.save(path, board)
    out = tmp_path / "out"
    forced = gccl(
        runner,
        str(path),
        "--out",
        str(out),
        "-o",
        str(out),
        "--connectivity",
        "4",
        "--label-format",
        "png",
    )
    assert forced.exit_code == 1
    assert "do not fit a 16-bit PNG" in summary(out)["board.npy"]["message"]
    assert not (out / "board.labels.png").exists()
    auto = gccl(runner, str(path), "--out", str(out), "--connectivity", "4")
    assert auto.exit_code == 0
    labels = read_label_image(out / "board.labels.tif")
    assert labels.dtype == np.uint32
    assert labels.max() == 80000
    expected, _ = ndi.label(board)
    assert np.array_equal(labels, expected)


def test_tiff_compression_zstd_writes_zstd_label_tiffs(runner: CliRunner, tmp_path: Path):
    image = np.zeros((30, 40), np.uint8)
    image[3:9, 4:20] = image[15:25, 30:38] = 1
    np.save(tmp_path / "two.npy", image)
    out = tmp_path / "out"
    args = ("--label-format", "tiff", "--tiff-compression", "zstd")
    assert gccl(runner, str(tmp_path / "two.npy"), "--out", str(out), *args).exit_code == 0
    with tifffile.TiffFile(out / "two.labels.tif") as tiff:
        assert tiff.pages.first.compression == tifffile.COMPRESSION.ZSTD
    expected, _ = ndi.label(image, structure=np.ones((3, 3)))
    np.testing.assert_array_equal(read_label_image(out / "two.labels.tif"), expected)


def test_preview_is_written(runner: CliRunner, folder: Path, tmp_path: Path):
    out = tmp_path / "out"
    assert gccl(runner, str(folder / "a.png"), "--out", str(out), "--preview").exit_code == 0
    preview = Image.open(out / "a.preview.png")
    assert preview.mode == "RGB"
    assert preview.size == (50, 40)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--connectivity", "5"], "'connectivity' must be 4 or 8 (images), or 6, 18 or 26"),
        (["--tau", "abc"], "'tau' must be a number"),
        (["--device", "tpu"], "'device' must be auto, cpu, cuda or cuda:N"),
    ],
)
def test_usage_errors_exit_2(runner: CliRunner, folder: Path, tmp_path: Path, args, needle):
    result = gccl(runner, str(folder), "--out", str(tmp_path / "o"), *args)
    assert result.exit_code == 2
    assert needle in result.stderr
    assert not (tmp_path / "o").exists()


def test_missing_out_and_out_inside_input(runner: CliRunner, folder: Path):
    assert "--out is required" in gccl(runner, str(folder)).stderr
    result = gccl(runner, str(folder), "--recursive", "--out", str(folder / "labels"))
    assert result.exit_code == 2
    assert "inside the input folder" in result.stderr
    assert not (folder / "labels").exists()


def test_config_file_and_flag_precedence(runner: CliRunner, folder: Path, tmp_path: Path):
    config = tmp_path / "c.yaml"
    config.write_text("min-area: 100000\nconnectivity: 4\n")
    out = tmp_path / "out"
    result = gccl(runner, str(folder / "a.png"), "--out", str(out), "--config", str(config))
    assert result.exit_code == 0
    assert summary(out)["a.png"]["kept"] == "0"
    result = gccl(
        runner, str(folder / "a.png"), "--out", str(out), "--config", str(config), "--min-area", "0"
    )
    values = np.asarray(Image.open(folder / "a.png"))
    assert summary(out)["a.png"]["kept"] == str(ndi.label(values)[1])
    config.write_text("min-area: 1\nshape: round\n")
    result = gccl(runner, str(folder), "--out", str(out), "--config", str(config))
    assert result.exit_code == 2
    assert "unknown key 'shape'" in result.stderr
    assert str(config) in result.stderr


def test_config_show(runner: CliRunner, tmp_path: Path):
    config = tmp_path / "c.yaml"
    config.write_text("tau: 20\nbackground: none\n")
    result = runner.invoke(app, ["config", "show", "--config", str(config)])
    assert result.exit_code == 0
    assert "tau: 20\n" in result.stdout
    assert "background: none\n" in result.stdout
    assert "connectivity: 8\n" in result.stdout


def test_info_names_backends(runner: CliRunner):
    result = runner.invoke(app, ["info"])
    assert result.exit_code == 0
    assert "cpu: available" in result.stdout
    assert "cuda:" in result.stdout
    assert "fatbin: SASS sm_75, sm_80, sm_90, sm_100, sm_120; PTX compute_75" in result.stdout


def test_busy_out_is_refused(runner: CliRunner, folder: Path, tmp_path: Path):
    out = tmp_path / "out"
    with OutDir.open(out) as opened, OutputLock(opened):
        result = gccl(runner, str(folder), "--out", str(out))
    assert result.exit_code == 4
    assert "in use by a running gccl" in result.stderr
    assert not (out / "summary.csv").exists()


def run_gccl(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ccl_cli", "label", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


@pytest.fixture
def many(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    root = tmp_path / "many"
    for i in range(40):
        save_png(root / f"img{i:02d}.png", random_mask(rng, (300, 300), 0.5))
    return root


def wait_for_outputs(process: subprocess.Popen, count: int) -> None:
    assert process.stdout is not None
    for _ in range(count):
        assert json.loads(process.stdout.readline())["status"] == "ok"


@pytest.mark.slow
def test_subprocess_run_and_version(folder: Path, tmp_path: Path):
    version = subprocess.run(
        [sys.executable, "-m", "ccl_cli", "--version"], capture_output=True, text=True
    )
    assert version.returncode == 0
    assert version.stdout.startswith("gccl ")
    process = run_gccl(str(folder), "--out", str(tmp_path / "out"), "--json")
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    assert len(stdout.splitlines()) == 2
    assert "labeled 2 of 2 input(s)" in stderr


@pytest.mark.slow
def test_killed_run_leaves_no_partial_file_and_resumes(many: Path, tmp_path: Path):
    out = tmp_path / "out"
    process = run_gccl(
        str(many),
        "--out",
        str(out),
        "--json",
        "--workers",
        "1",
        "--batch-size",
        "1",
        "--preview",
        "--quiet",
    )
    wait_for_outputs(process, 3)
    process.kill()
    process.wait()
    for path in out.iterdir():
        if path.name.startswith("."):
            continue  # the lock file and temporaries, never final names
        if path.suffix == ".png":
            Image.open(path).load()  # a partial PNG would fail to decode
        elif path.suffix == ".csv":
            assert read_csv(path)[-1]["max"] != ""
    resumed = run_gccl(str(many), "--out", str(out), "--skip-existing", "--preview", "--quiet")
    _, stderr = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, stderr
    assert not [p for p in out.iterdir() if ".gccl-tmp-" in p.name]
    rows = summary(out)
    assert sum(row["status"] == "skipped" for row in rows.values()) >= 3
    assert all(row["status"] in ("ok", "skipped") for row in rows.values())
    for i in range(40):
        values = np.asarray(Image.open(many / f"img{i:02d}.png"))
        expected, _ = ndi.label(values, structure=EIGHT)
        assert np.array_equal(read_label_image(out / f"img{i:02d}.labels.png"), expected)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_writes_summary_and_ends_by_its_signal(many: Path, tmp_path: Path, signum: int):
    """Ctrl-C exits 130; SIGTERM ends the process by SIGTERM itself (a shell reports 143)."""
    out = tmp_path / "out"
    process = run_gccl(
        str(many), "--out", str(out), "--json", "--workers", "1", "--batch-size", "1", "--quiet"
    )
    wait_for_outputs(process, 2)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == (130 if signum == signal.SIGINT else -signal.SIGTERM), stderr
    statuses = [row["status"] for row in summary(out).values()]
    assert len(statuses) == 40
    assert statuses.count("ok") >= 2
    assert "not-run" in statuses
    assert "Traceback" not in stderr
    assert (out / GCCL_DIR / LOCK_NAME).exists()
    with OutDir.open(out) as opened, OutputLock(opened):  # released
        pass


def test_cuda_request_without_cuda_is_a_clear_error(runner: CliRunner, folder: Path, tmp_path):
    from ccl_cli.backends.cuda.loader import cuda_status

    if cuda_status().usable:
        pytest.skip("this machine has a usable CUDA device")
    result = gccl(runner, str(folder), "--out", str(tmp_path / "o"), "--device", "cuda")
    assert result.exit_code == 2
    assert "--device cuda" in result.stderr
    auto = gccl(runner, str(folder), "-o", str(tmp_path / "o"), "--device", "auto", "--no-quiet")
    assert auto.exit_code == 0
    # A CPU installation (no CuPy) labels on the CPU without a word; a broken GPU says why.
    assert ("labeling on the CPU" in auto.stderr) == (cuda_status().cupy_version is not None)
    quiet = gccl(runner, str(folder), "-o", str(tmp_path / "o"), "--device", "auto")
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_time_is_reported(folder: Path, tmp_path: Path):
    started = time.perf_counter()
    process = run_gccl(str(folder), "--out", str(tmp_path / "out"), env={**os.environ})
    process.communicate(timeout=120)
    seconds = [float(row["seconds"]) for row in summary(tmp_path / "out").values()]
    assert all(0 < s < time.perf_counter() - started for s in seconds)


def test_unusable_out_is_a_usage_error(runner: CliRunner, folder: Path, tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = gccl(runner, str(folder), "--out", str(blocker / "sub"))
    assert result.exit_code == 2
    assert "cannot write into --out" in result.stderr
    assert "Traceback" not in result.output


def test_empty_folder_says_so_and_exits_3(runner: CliRunner, tmp_path: Path):
    (tmp_path / "empty").mkdir()
    out = tmp_path / "out"
    result = gccl(runner, str(tmp_path / "empty"), "-o", str(out), "--device", "cpu")
    assert result.exit_code == 3
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert [(row["status"], row["message"]) for row in rows] == [
        ("no-images", "no images in this folder")
    ]


def test_cleaning_options_from_the_command_line_and_a_config_file(
    runner: CliRunner, tmp_path: Path
):
    mask = np.zeros((20, 30), np.uint8)
    mask[2:12, 2:12] = 255
    mask[5:9, 5:9] = 0  # the square ring's hole: 16 pixels
    mask[15:18, 20:23] = 255  # a 9-pixel square
    mask[0, 25] = 255  # a speck
    image = save_png(tmp_path / "in" / "m.png", mask)
    out = tmp_path / "out"
    result = gccl(runner, str(image), "-o", str(out), "--fill-holes", "--largest", "2")
    assert result.exit_code == 0, result.output
    rows = read_csv(out / "m.stats.csv")
    assert [(row["label"], row["area"]) for row in rows] == [("1", "100"), ("2", "9")]
    labels = read_label_image(out / "m.labels.png")
    assert (labels[2:12, 2:12] == 1).all() and labels[0, 25] == 0
    config = tmp_path / "clean.yaml"
    config.write_text("max-area: 50\nfill-holes: true\n")
    result = gccl(runner, str(image), "-o", str(out), "--config", str(config))
    assert result.exit_code == 0, result.output
    assert [row["area"] for row in read_csv(out / "m.stats.csv")] == ["1", "9"]
    result = gccl(runner, str(image), "-o", str(out), "--min-area", "10", "--max-area", "5")
    assert result.exit_code == 2 and "'max-area' (5) is below 'min-area' (10)" in result.output
