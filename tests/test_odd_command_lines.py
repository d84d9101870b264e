"""Odd input to the command line: one line naming the file or the bound, exit 2 (or the input's
failed row), never a traceback. Config files whose keys are lists or whose nesting is deep,
numbers past what the engines hold, bench sizes and reports, a full disk, a stdin name with a
trailing slash."""

from __future__ import annotations

import csv
import errno
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage as ndi
from PIL import Image
from typer.testing import CliRunner

import ccl_cli
from ccl_cli.cli import app
from ccl_cli.errors import BadValue
from ccl_cli.io.out_dir import OutDir

#: 2**63 - 1: the largest count the engines hold, and one past it.
MOST = 2**63 - 1
#: Digits past what int() reads (sys.get_int_max_str_digits: 4300).
TOO_MANY_DIGITS = "9" * 5000


def mask_png(path: Path, seed: int = 0) -> np.ndarray:
    mask = np.random.default_rng(seed).random((12, 15)) < 0.45
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(mask.astype(np.uint8) * 255).save(path)
    return mask


def invoke(*args: str, stdin: str | None = None):
    return CliRunner().invoke(app, list(args), input=stdin)


def one_error_line(result) -> str:
    """The run's one stderr line, a usage error (exit 2), no traceback."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gccl: error: ")
    return lines[0]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[1, 2]: 3\n", "a key is an option's name, not a list or a mapping"),
        ("? {tau: 1}\n: 3\n", "a key is an option's name, not a list or a mapping"),
        ("tau: 1\n{a: 1}: 2\n", "a key is an option's name, not a list or a mapping"),
        ("a: " + "[" * 100_000 + "]" * 100_000 + "\n", "nested deeper than"),
        ("a:\n" + "".join(" " * i + "b:\n" for i in range(1, 60)), "nested deeper than"),
    ],
    ids=["list-key", "map-key", "flow-map-key", "deep-flow", "deep-block"],
)
def test_config_files_the_loader_refuses_are_one_line(tmp_path: Path, text: str, reason) -> None:
    mask_png(tmp_path / "a.png")
    config = tmp_path / "c.yaml"
    config.write_text(text)
    for command in (
        ["label", str(tmp_path / "a.png"), "--out", str(tmp_path / "o")],
        ["config", "show"],
    ):
        line = one_error_line(invoke(*command, "--config", str(config)))
        assert str(config) in line and reason in line, line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("option", "value", "bound"),
    [
        ("--min-area", "1" + "0" * 30, "<= 2**63 - 1"),
        ("--min-area", str(MOST + 1), "<= 2**63 - 1"),
        ("--min-area", TOO_MANY_DIGITS, "<= 2**63 - 1"),
        ("--max-area", "-" + TOO_MANY_DIGITS, ">= 1"),
        ("--largest", str(10**40), "<= 2**63 - 1"),
        ("--batch-size", str(10**40), "<= 2**63 - 1"),
        ("--max-image-bytes", "99999999999999999999G", "at most 2**63 - 1 bytes"),
        ("--max-image-bytes", f"{2**33}G", "at most 2**63 - 1 bytes"),
        ("--tau", "1" + "0" * 400, "within a 64-bit float's range"),
        ("--tau", "1e400", "within a 64-bit float's range"),
        ("--tau-relative", "1" + "0" * 400, "within a 64-bit float's range"),
        ("--tau-quadratic", "1" + "0" * 400, "within a 64-bit float's range"),
        ("--background", "-1" + "0" * 400, "within a 64-bit float's range"),
        ("--threshold", "1" + "0" * 400, "within a 64-bit float's range"),
    ],
)
def test_numbers_past_what_the_engines_hold_are_usage_errors(
    tmp_path: Path, option: str, value: str, bound: str
) -> None:
    mask_png(tmp_path / "a.png")
    config = tmp_path / "c.yaml"
    config.write_text(f"{option[2:]}: {value}\n")
    for given in ([option, value], ["--config", str(config)]):
        result = invoke("label", str(tmp_path / "a.png"), "--out", str(tmp_path / "o"), *given)
        line = one_error_line(result)
        assert f"'{option[2:]}' must be" in line and bound in line, line
        assert len(line) < 300  # the value is quoted cut short
    assert not (tmp_path / "o").exists()


def test_the_largest_counts_the_engines_hold_are_taken(tmp_path: Path) -> None:
    mask = mask_png(tmp_path / "a.png")
    out = tmp_path / "o"
    result = invoke(
        "label", str(tmp_path / "a.png"), "--out", str(out), "--device", "cpu", "--quiet",
        "--max-area", str(MOST), "--largest", str(MOST), "--batch-size", str(MOST),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    with open(out / "summary.csv", newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    assert int(row["kept"]) == ndi.label(mask, np.ones((3, 3)))[1]
    result = invoke(
        "label", str(tmp_path / "a.png"), "--out", str(tmp_path / "p"), "--device", "cpu",
        "--quiet", "--min-area", str(MOST),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    with open(tmp_path / "p" / "summary.csv", newline="") as handle:
        assert next(csv.DictReader(handle))["kept"] == "0"


def test_the_api_refuses_numbers_past_what_the_engines_hold() -> None:
    image = np.ones((4, 5), np.uint8)
    with pytest.raises(BadValue, match=r"'min_area' must be a whole number <= 2\*\*63 - 1"):
        ccl_cli.label(image, min_area=10**30, device="cpu")
    with pytest.raises(BadValue, match="'tau' must be a number within a 64-bit float's range"):
        ccl_cli.label(image, tau=10**400, device="cpu")
    labels, _ = ccl_cli.label(image, tau=float("inf"), device="cpu")  # spelled infinite: taken
    assert labels.max() == 1


def test_bench_sizes_no_batch_holds_are_a_usage_error() -> None:
    for sizes in ("100000000x100000000", "640x480,20000x20000"):
        line = one_error_line(invoke("bench", "--sizes", sizes, "--engines", "gccl-cpu"))
        assert "--sizes" in line and "pixels a batch of the bench holds" in line, line


BENCH = ("bench", "--sizes", "64x48", "--cases", "random-0.5", "--engines", "gccl-cpu")
BENCH_QUICK = (*BENCH, "--level", "kernel", "--batch", "1", "--repeat", "1", "--quiet")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("option", ["--csv", "--json"])
def test_bench_reports_on_a_full_device_are_one_line_naming_it(option: str) -> None:
    line = one_error_line(invoke(*BENCH_QUICK, option, "/dev/full"))
    assert line == f"gccl: error: {option} /dev/full: cannot write (No space left on device)"


def test_a_bench_report_that_cannot_be_written_leaves_the_old_one_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = tmp_path / "r.csv"
    report.write_text("an earlier report\n")
    real_writerow = csv.DictWriter.writerow

    def writerow(self, row):  # the disk fills after the header
        if "engine" in row and row["engine"] != "engine":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_writerow(self, row)

    monkeypatch.setattr(csv.DictWriter, "writerow", writerow)
    line = one_error_line(invoke(*BENCH_QUICK, "--csv", str(report)))
    assert line == f"gccl: error: --csv {report}: cannot write (No space left on device)"
    assert report.read_text() == "an earlier report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv"]


def test_a_full_disk_while_writing_an_output_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mask_png(tmp_path / "a.png")
    mask_png(tmp_path / "b.png", seed=1)
    real_write = OutDir.write

    def write(self, path, *args, **kwargs):
        if Path(path).name == "b.labels.png":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(self, path, *args, **kwargs)

    monkeypatch.setattr(OutDir, "write", write)
    out = tmp_path / "o"
    result = invoke(
        "label", str(tmp_path / "a.png"), str(tmp_path / "b.png"), "--out", str(out),
        "--device", "cpu", "--quiet", "--processes", "1",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    reason = f"cannot write {out / 'b.labels.png'} (No space left on device)"
    assert result.stderr == f"gccl: {tmp_path / 'b.png'}: {reason}\n"
    with open(out / "summary.csv", newline="") as handle:
        rows = {Path(row["path"]).name: row for row in csv.DictReader(handle)}
    assert rows["b.png"]["status"] == "failed" and rows["b.png"]["message"] == reason
    assert rows["a.png"]["status"] == "ok"


def test_a_full_disk_while_merging_the_record_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ccl_cli.io import made

    mask_png(tmp_path / "a.png")

    def close(self, durable: bool = True) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(made.MadeFiles, "close", close)
    out = tmp_path / "o"
    result = invoke("label", str(tmp_path / "a.png"), "--out", str(out), "--device", "cpu", "-q")
    line = one_error_line(result)
    assert line.startswith(f"gccl: error: cannot write {out / '.gccl'}/")
    assert line.endswith(" (No space left on device)")


def test_a_stdin_name_with_a_trailing_slash_names_a_folder(tmp_path: Path) -> None:
    mask_png(tmp_path / "a.png")
    mask_png(tmp_path / "d" / "b.png", seed=1)
    out = tmp_path / "o"
    names = f"{tmp_path / 'a.png'}/\n{tmp_path / 'd'}/\n"
    for args, stdin in ((["-"], names), (names.split(), None)):
        result = invoke(
            "label", *args, "--out", str(out), "--device", "cpu", "--quiet", stdin=stdin
        )
        assert result.exit_code == 1, result.output
        with open(out / "summary.csv", newline="") as handle:
            rows = {Path(row["path"]).name: row for row in csv.DictReader(handle)}
        assert rows["a.png"]["status"] == "failed"
        assert rows["a.png"]["message"] == "a file, named as a folder (a trailing /)"
        assert rows["b.png"]["status"] == "ok"
        assert not (out / "a.labels.png").exists() and (out / "b.labels.png").exists()
