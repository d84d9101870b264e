"""`gccl label` as cron jobs and shell pipelines drive it: which inputs get rows, where their
outputs go, exit codes, quiet runs, error lines, stale outputs and the run record."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage as ndi
from label_files import read_label_image
from oracles import bfs_labels
from PIL import Image
from typer.testing import CliRunner

from ccl_cli.cli import app
from ccl_cli.contract.params import LabelParams
from ccl_cli.io.output_paths import RUN_RECORD_NAME

EIGHT = np.ones((3, 3), bool)


def label(*args: str, stdin: str | bytes | None = None, quiet: bool = True):
    """`gccl label ARGS --device cpu` in this process (with --quiet unless told)."""
    extra = ["--quiet"] if quiet else []
    return CliRunner().invoke(app, ["label", *args, "--device", "cpu", *extra], input=stdin)


def mask_png(path: Path, seed: int) -> np.ndarray:
    mask = np.random.default_rng(seed).random((24, 31)) < 0.45
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(mask.astype(np.uint8) * 255).save(path, format="PNG")
    return mask


def rows(out: Path) -> list[dict[str, str]]:
    with open(out / "summary.csv", newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def statuses(out: Path) -> list[tuple[str, str]]:
    return [(row["path"], row["status"]) for row in rows(out)]


# --- where outputs go ----------------------------------------------------------------


@pytest.fixture
def cameras(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, np.ndarray]:
    monkeypatch.chdir(tmp_path)
    return {
        "c/cam1/f.png": mask_png(Path("c/cam1/f.png"), 1),
        "c/cam2/f.png": mask_png(Path("c/cam2/f.png"), 2),
    }


def test_same_name_in_two_folders_from_stdin_fails_and_names_the_way_out(cameras) -> None:
    result = label("-", "--out", "o", stdin="c/cam1/f.png\nc/cam2/f.png\n")
    assert result.exit_code == 1
    assert "overwrite those of c/cam1/f.png (--relative-to keeps their folders apart)" in (
        result.stderr
    )


def test_relative_to_mirrors_stdin_paths_below_root(cameras) -> None:
    result = label("-", "--relative-to", "c", "--out", "o", stdin="c/cam1/f.png\nc/cam2/f.png\n")
    assert result.exit_code == 0, result.output
    for name, mask in cameras.items():
        labels = read_label_image(
            Path("o") / Path(name).relative_to("c").with_suffix(".labels.png")
        )
        np.testing.assert_array_equal(labels, ndi.label(mask, EIGHT)[0])
    # Files named on the command line and found in folders mirror below ROOT too.
    result = label("c/cam1/f.png", "c/cam2", "--relative-to", ".", "--out", "o2")
    assert result.exit_code == 0, result.output
    assert Path("o2/c/cam1/f.labels.png").is_file() and Path("o2/c/cam2/f.labels.png").is_file()


def test_relative_to_never_writes_outside_out(cameras, tmp_path: Path) -> None:
    mask_png(Path("x.png"), 3)
    mask_png(Path("y.png"), 4)
    before = set(tmp_path.rglob("*"))
    result = label(
        "c/cam1/../../x.png", os.path.abspath("y.png"), "--relative-to", "c", "--out", "o"
    )
    assert result.exit_code == 1
    assert {row["message"] for row in rows(Path("o"))} == {"not below --relative-to c"}
    made = set(tmp_path.rglob("*")) - before
    assert made and all(Path("o").resolve() in [p, *p.parents] for p in map(Path.resolve, made))


# --- every input gets a row ------------------------------------------------------------


def test_dangling_links_and_unreadable_sub_folders_get_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "in"
    mask_png(root / "a.png", 1)
    mask_png(root / "locked" / "b.png", 2)
    (root / "gone.png").symlink_to(tmp_path / "nowhere.png")
    scandir = os.scandir

    def refusing(path=".", *args, **kwargs):
        # root ignores permissions: refuse like a 0700 folder (fwalk's descriptors pass)
        if isinstance(path, (str, os.PathLike)) and Path(path) == root / "locked":
            raise PermissionError(13, "Permission denied")
        return scandir(path, *args, **kwargs)

    monkeypatch.setattr(os, "scandir", refusing)
    out = tmp_path / "out"
    result = label(str(root), "-r", "--out", str(out))
    assert result.exit_code == 1
    by_path = {row["path"]: (row["status"], row["message"]) for row in rows(out)}
    assert by_path == {
        str(root / "a.png"): ("ok", ""),
        str(root / "gone.png"): ("failed", "a link to a file that does not exist"),
        str(root / "locked"): ("failed", "cannot read the folder (Permission denied)"),
    }


def test_unreadable_top_folder_is_a_failed_row_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "in"
    mask_png(root / "a.png", 1)
    scandir = os.scandir

    def refusing(path=".", *args, **kwargs):
        if isinstance(path, (str, os.PathLike)) and Path(path) == root:
            raise PermissionError(13, "Permission denied")
        return scandir(path, *args, **kwargs)

    monkeypatch.setattr(os, "scandir", refusing)
    result = label(str(root), "--out", str(tmp_path / "out"))
    assert result.exit_code == 1 and result.exception is not None
    assert "Traceback" not in result.output
    assert f"gccl: {root}: cannot read the folder (Permission denied)" in result.stderr
    assert statuses(tmp_path / "out") == [(str(root), "failed")]


def test_folder_of_sub_folders_without_r_is_no_inputs_with_a_hint(tmp_path: Path) -> None:
    mask_png(tmp_path / "in" / "day1" / "a.png", 1)
    mask_png(tmp_path / "in" / "day2" / "a.png", 2)
    result = label(str(tmp_path / "in"), "--out", str(tmp_path / "out"), quiet=False)
    assert result.exit_code == 3
    assert "no images found" in result.stderr
    assert [(row["status"], row["message"]) for row in rows(tmp_path / "out")] == [
        ("no-images", "no images in this folder; its 2 sub-folder(s) are scanned with --recursive")
    ]


def test_nothing_on_stdin_is_no_inputs(tmp_path: Path) -> None:
    assert label("-", "--out", str(tmp_path / "out"), stdin="").exit_code == 3


def test_another_run_holding_out_is_exit_4(tmp_path: Path) -> None:
    from ccl_cli.io.lock import OutputLock
    from ccl_cli.io.out_dir import OutDir

    mask_png(tmp_path / "a.png", 1)
    with OutDir.open(tmp_path / "out") as out, OutputLock(out):
        result = label(str(tmp_path / "a.png"), "--out", str(tmp_path / "out"))
    assert result.exit_code == 4
    assert result.stderr.startswith("gccl: error: ") and "in use by a running gccl" in result.stderr


def test_empty_out_is_refused_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mask_png(tmp_path / "a.png", 1)
    monkeypatch.chdir(tmp_path)
    result = label("a.png", "--out", "")
    assert result.exit_code == 2
    assert result.stderr == "gccl: error: command line: 'out' must be a path, got ''\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png"]


# --- names on stdin ------------------------------------------------------------------


def test_stdin_names_keep_their_spaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    lead = mask_png(Path(" lead.png"), 1)
    trail = mask_png(Path("trail.png "), 2)
    result = label("-", "--out", "o", stdin=" lead.png\ntrail.png \r\n\n")
    assert result.exit_code == 0, result.output
    assert statuses(Path("o")) == [(" lead.png", "ok"), ("trail.png ", "ok")]
    np.testing.assert_array_equal(
        read_label_image(Path("o/ lead.labels.png")), ndi.label(lead, EIGHT)[0]
    )
    np.testing.assert_array_equal(
        read_label_image(Path("o/trail.labels.png")), ndi.label(trail, EIGHT)[0]
    )


def test_nul_separated_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    mask_png(Path("a.png"), 1)
    mask_png(Path("new\nline.png"), 2)
    listing = b"a.png\0new\nline.png\0"
    result = label("-0", "-", "--out", "o", stdin=listing)
    assert result.exit_code == 0, result.output
    assert statuses(Path("o")) == [("a.png", "ok"), ("new\nline.png", "ok")]
    # Without -0, the listing is one name holding NUL bytes: one failed row, no NUL in the CSV.
    result = label("-", "--out", "p", stdin=listing)
    assert result.exit_code == 1
    assert b"\0" not in (Path("p") / "summary.csv").read_bytes()
    messages = [row["message"] for row in rows(Path("p"))]
    assert messages and all(m.endswith("(for find -print0, use -0)") for m in messages)


def test_a_path_listed_twice_is_labeled_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    mask_png(Path("a.png"), 1)
    result = label("a.png", "-", "--out", "o", stdin="./a.png\na.png\n")
    assert result.exit_code == 0, result.output
    assert [(row["path"], row["status"], row["message"]) for row in rows(Path("o"))] == [
        ("a.png", "ok", ""),
        ("a.png", "skipped", "listed again (labeled once, as a.png)"),  # ./a.png
        ("a.png", "skipped", "listed again (labeled once, as a.png)"),
    ]


# --- quiet runs, error lines ---------------------------------------------------------


def test_quiet_prints_nothing_but_errors(tmp_path: Path) -> None:
    mask_png(tmp_path / "in" / "a.png", 1)
    result = label(str(tmp_path / "in"), "--out", str(tmp_path / "out"))
    assert result.exit_code == 0 and result.stdout == "" and result.stderr == ""
    (tmp_path / "in" / "b.png").write_bytes(b"not an image")
    result = label(str(tmp_path / "in"), "--out", str(tmp_path / "out2"))
    assert result.exit_code == 1
    reason = "not a PNG, TIFF, JPEG, BMP, WebP or NPY image"
    assert result.stderr == f"gccl: {tmp_path / 'in' / 'b.png'}: {reason}\n"


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--min-area", "1.5", "'min-area' must be a whole number, got '1.5'"),
        ("--connectivity", "abc", "'connectivity' must be 4 or 8 (images), or 6, 18 or 26"),
        ("--erode", "100000", "'erode' must be at most 1000 (each step is a pass over"),
        ("--close", "1001", "'close' must be at most 1000"),
    ],
)
def test_bad_values_are_one_error_line(tmp_path: Path, option, value, message) -> None:
    mask_png(tmp_path / "a.png", 1)
    result = label(str(tmp_path / "a.png"), "--out", str(tmp_path / "o"), option, value)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gccl: error: command line: {message}")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("connectivity", "in_images"), [("6", 4), ("18", 8), ("26", 8)])
def test_a_volume_connectivity_is_taken_in_an_images_rank(
    tmp_path: Path, connectivity, in_images
) -> None:
    """A connectivity names a neighbourhood each input takes in its own rank (faces: 6 -> 4;
    18 and 26 -> 8): a run, a dry run and `config show` accept it; the bench, whose suite is
    of 2-D images, refuses it."""
    values = mask_png(tmp_path / "a.png", 1)
    common = ["--connectivity", connectivity, "--device", "cpu", "--quiet"]
    for extra in (["--dry-run"], []):
        result = CliRunner().invoke(
            app, ["label", str(tmp_path / "a.png"), "--out", str(tmp_path / "o"), *common, *extra]
        )
        assert result.exit_code == 0, result.output
    expected, _ = ndi.label(values != 0, ndi.generate_binary_structure(2, {4: 1, 8: 2}[in_images]))
    assert np.array_equal(np.asarray(Image.open(tmp_path / "o" / "a.labels.png")), expected)
    result = CliRunner().invoke(app, ["config", "show", "--connectivity", connectivity])
    assert result.exit_code == 0 and f"connectivity: {connectivity}" in result.stdout
    result = CliRunner().invoke(app, ["bench", "--connectivity", connectivity])
    assert result.exit_code == 2
    assert f"'connectivity' {connectivity} labels 3-D volumes" in result.stderr


def test_background_no_pixel_can_hold_fails_that_image_with_the_reason(tmp_path: Path) -> None:
    Image.fromarray(np.full((8, 9), 1000, np.uint16)).save(tmp_path / "d16.png")
    Image.fromarray(np.full((8, 9), 200, np.uint8)).save(tmp_path / "d8.png")
    out = tmp_path / "out"
    result = label(str(tmp_path), "--background", "70000", "--out", str(out))
    assert result.exit_code == 1
    assert [row["message"] for row in rows(out)] == [
        "--background 70000 is not a uint16 value (0..65535): every pixel would be foreground",
        "--background 70000 is not a uint8 value (0..255): every pixel would be foreground",
    ]
    assert not list(out.glob("*.labels.png"))
    assert (
        label(str(tmp_path), "--background", "1000", "--out", str(tmp_path / "ok")).exit_code == 1
    )
    assert [row["status"] for row in rows(tmp_path / "ok")] == ["ok", "failed"]


# --- stale outputs, the run record ----------------------------------------------------


def test_run_record_names_version_backend_and_options(tmp_path: Path) -> None:
    from ccl_cli import __version__

    mask_png(tmp_path / "in" / "a.png", 1)
    assert (
        label(str(tmp_path / "in"), "--min-area", "3", "--out", str(tmp_path / "o")).exit_code == 0
    )
    record = json.loads((tmp_path / "o" / RUN_RECORD_NAME).read_text())
    assert record["version"] == __version__ and record["backend"] == "cpu"
    assert record["options"]["min_area"] == 3 and record["options"]["tau"] is None
    assert record["finished"] is not None


def test_skip_existing_redoes_changed_inputs_and_other_options(tmp_path: Path) -> None:
    mask_png(tmp_path / "in" / "a.png", 1)
    mask_png(tmp_path / "in" / "b.png", 2)
    out, args = tmp_path / "o", (str(tmp_path / "in"), "--out", str(tmp_path / "o"))
    assert label(*args).exit_code == 0
    assert label(*args, "--skip-existing").exit_code == 0
    assert [row["status"] for row in rows(out)] == ["skipped", "skipped"]
    # b changes after its outputs were made: only b is labeled again, from its new pixels.
    new_b = mask_png(tmp_path / "in" / "b.png", 3)
    assert (tmp_path / "in" / "b.png").stat().st_mtime_ns > (out / "b.stats.csv").stat().st_mtime_ns
    assert label(*args, "--skip-existing").exit_code == 0
    assert [row["status"] for row in rows(out)] == ["skipped", "ok"]
    np.testing.assert_array_equal(
        read_label_image(out / "b.labels.png"), ndi.label(new_b, EIGHT)[0]
    )
    # Other options: every input again, and the run after that skips them again.
    assert label(*args, "--min-area", "2", "--skip-existing").exit_code == 0
    assert [row["status"] for row in rows(out)] == ["ok", "ok"]
    assert label(*args, "--min-area", "2", "--skip-existing").exit_code == 0
    assert [row["status"] for row in rows(out)] == ["skipped", "skipped"]
    assert label(*args, "--skip-existing").exit_code == 0  # back to the first options
    assert [row["status"] for row in rows(out)] == ["ok", "ok"]


def depth_steps_png(path: Path) -> np.ndarray:
    """A near surface whose depth steps by 8 and a far one whose depth steps by 40 (mm),
    as a depth camera quantizes them: --tau 20 splits the far one into stripes."""
    near = 1000 + 8 * (np.arange(12)[:, None] // 3 + np.zeros((12, 20), int))
    far = 4000 + 40 * (np.arange(12)[:, None] // 3 + np.zeros((12, 20), int))
    depth = np.vstack([near, np.zeros((2, 20), int), far]).astype(np.uint16)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(depth).save(path, format="PNG")
    return depth


def test_a_growing_tolerance_is_recorded_and_decides_what_skip_existing_skips(
    tmp_path: Path,
) -> None:
    depth = depth_steps_png(tmp_path / "in" / "d.png")
    out, args = tmp_path / "o", (str(tmp_path / "in"), "--out", str(tmp_path / "o"))
    assert label(*args, "--tau", "20").exit_code == 0
    assert [row["components"] for row in rows(out)] == ["5"]  # the near surface, 4 stripes
    growing = ("--tau", "5", "--tau-quadratic", "3.5e-6")
    assert label(*args, *growing, "--skip-existing").exit_code == 0
    assert [(row["status"], row["components"]) for row in rows(out)] == [("ok", "2")]
    params = LabelParams(tau=5, tau_quadratic=3.5e-6)
    np.testing.assert_array_equal(read_label_image(out / "d.labels.png"), bfs_labels(depth, params))
    options = json.loads((out / RUN_RECORD_NAME).read_text())["options"]
    assert (options["tau"], options["tau_relative"], options["tau_quadratic"]) == (5, 0, 3.5e-6)
    assert label(*args, *growing, "--skip-existing").exit_code == 0
    assert [row["status"] for row in rows(out)] == ["skipped"]
    assert label(*args, "--tau", "5", "--tau-quadratic", "4e-6", "--skip-existing").exit_code == 0
    assert [row["status"] for row in rows(out)] == ["ok"]
    # either coefficient alone turns tau mode on, with tau 0
    assert label(*args, "--tau-relative", "0.01", "--skip-existing").exit_code == 0
    options = json.loads((out / RUN_RECORD_NAME).read_text())["options"]
    assert (options["tau"], options["tau_relative"], options["tau_quadratic"]) == (0, 0.01, 0)
    params = LabelParams(tau=0, tau_relative=0.01)
    np.testing.assert_array_equal(read_label_image(out / "d.labels.png"), bfs_labels(depth, params))


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--tau-relative", "-0.5", "'tau-relative' must be a number >= 0"),
        ("--tau-quadratic", "inf", "'tau-quadratic' must be a finite number >= 0"),
        ("--tau-quadratic", "nan", "'tau-quadratic' must be a number, got nan"),
        ("--tau-relative", "much", "'tau-relative' must be a number"),
    ],
)
def test_a_bad_coefficient_is_a_usage_error(
    tmp_path: Path, flag: str, value: str, message: str
) -> None:
    depth_steps_png(tmp_path / "in" / "d.png")
    result = label(str(tmp_path / "in"), flag, value, "--out", str(tmp_path / "o"))
    assert result.exit_code == 2 and message in result.output
    assert not (tmp_path / "o").exists()


def test_a_failed_input_moves_its_earlier_outputs_aside_and_leaves_other_files(
    tmp_path: Path,
) -> None:
    mask_png(tmp_path / "in" / "a.png", 1)
    out, args = tmp_path / "o", (str(tmp_path / "in"), "--out", str(tmp_path / "o"), "--preview")
    assert label(*args).exit_code == 0
    earlier = {p.name: p.read_bytes() for p in out.glob("a.*")}
    assert set(earlier) == {"a.labels.png", "a.stats.csv", "a.preview.png"}
    (tmp_path / "in" / "a.png").write_bytes(b"broken now")
    (out / "mine.labels.png").write_bytes(b"a file of the user's")
    mask_png(tmp_path / "in" / "c.png", 4)
    (tmp_path / "in" / "c.png").write_bytes(b"broken")  # c never labeled: its names are free
    (out / "c.labels.png").write_bytes(b"the user's, not gccl's")
    assert label(*args).exit_code == 1
    assert [(row["path"].rsplit("/", 1)[1], row["status"]) for row in rows(out)] == [
        ("a.png", "failed"),
        ("c.png", "failed"),
    ]
    kept = {p.name.replace(".stale", ""): p.read_bytes() for p in out.glob("a.*")}
    assert kept == earlier  # every earlier output, under a name that says it is stale
    assert sorted(p.name for p in out.glob("a.*")) == [
        "a.labels.stale.png",
        "a.preview.stale.png",
        "a.stats.stale.csv",
    ]
    assert "earlier outputs kept as a.labels.stale.png" in rows(out)[0]["message"]
    assert (out / "mine.labels.png").read_bytes() == b"a file of the user's"
    assert (out / "c.labels.png").read_bytes() == b"the user's, not gccl's"
    mask_png(tmp_path / "in" / "a.png", 1)  # mended: new outputs, the stale copies go
    mask_png(tmp_path / "in" / "c.png", 4)
    (out / "c.labels.png").unlink()
    assert label(*args).exit_code == 0
    assert sorted(p.name for p in out.glob("a.*")) == [
        "a.labels.png",
        "a.preview.png",
        "a.stats.csv",
    ]


def test_no_fsync_writes_the_same_outputs_without_flushing_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(3):
        mask_png(tmp_path / "in" / f"{i}.png", i)
    calls: list[int] = []
    fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), fsync(fd))[1])
    assert label(str(tmp_path / "in"), "--out", str(tmp_path / "safe")).exit_code == 0
    safe = len(calls)
    calls.clear()
    assert label(str(tmp_path / "in"), "--out", str(tmp_path / "fast"), "--no-fsync").exit_code == 0
    assert safe >= 6 + 3 and len(calls) == 3  # the run record twice and summary.csv
    for path in [
        *(tmp_path / "safe").glob("*.labels.png"),
        *(tmp_path / "safe").glob("*.stats.csv"),
    ]:
        assert (tmp_path / "fast" / path.name).read_bytes() == path.read_bytes()
