"""OS errors on paths and options out of range: one line naming the path or the bound, never a
traceback. A path that fails is its input's row (the others are labeled); a run-wide one (--out,
an option) is exit 2. Each run is a subprocess (cli_helpers.gccl_process)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_helpers import gccl_process, mask, one_line_error, summary

from ccl_cli.io.inputs import expand

LONG = "x" * 300  # a path component over NAME_MAX (255 bytes)


def no_traceback(result) -> None:
    assert "Traceback" not in result.stderr, result.stderr


@pytest.mark.slow
def test_a_named_path_with_a_component_over_name_max_fails_alone(tmp_path: Path) -> None:
    mask(tmp_path / "a.png")
    result = gccl_process(f"{LONG}/a.png", "a.png", "--out", "out", cwd=tmp_path)
    no_traceback(result)
    assert result.returncode == 1
    rows = summary(tmp_path / "out")
    assert rows[f"{LONG}/a.png"]["status"] == "failed"
    assert "File name too long" in rows[f"{LONG}/a.png"]["message"]
    assert rows["a.png"]["status"] == "ok"


@pytest.mark.slow
def test_a_stdin_line_with_a_component_over_name_max_does_not_end_the_stream(
    tmp_path: Path,
) -> None:
    mask(tmp_path / "a.png")
    mask(tmp_path / "b.png", seed=1)
    result = gccl_process("-", "--out", "out", cwd=tmp_path, stdin=f"a.png\n{LONG}/c.png\nb.png\n")
    no_traceback(result)
    assert result.returncode == 1
    rows = summary(tmp_path / "out")
    assert [rows[name]["status"] for name in ("a.png", f"{LONG}/c.png", "b.png")] == [
        "ok",
        "failed",
        "ok",
    ]


def test_a_file_under_a_folder_it_may_not_read_is_one_failed_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (as root every folder reads, so the refusal a user would meet is played by os.stat)
    locked = tmp_path / "locked"
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        if str(path).startswith(str(locked)):
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    items = expand([str(locked / "in" / "a.png")], recursive=False)
    assert [(item.path, item.problem) for item in items] == [
        (locked / "in" / "a.png", "a folder on its path may not be entered (Permission denied)")
    ]


@pytest.mark.slow
@pytest.mark.parametrize("watch_like", [False, True])
def test_an_image_whose_output_names_are_too_long_fails_alone(
    tmp_path: Path, watch_like: bool
) -> None:
    name = "y" * 250 + ".png"  # fits NAME_MAX; its outputs do not
    mask(tmp_path / "in" / name)
    mask(tmp_path / "in" / "b.png", seed=1)
    options = ["--skip-existing"] if watch_like else []
    result = gccl_process("in", "--out", "out", *options, cwd=tmp_path)
    no_traceback(result)
    assert result.returncode == 1
    rows = summary(tmp_path / "out")
    assert rows[f"in/{name}"]["status"] == "failed"
    assert "File name too long" in rows[f"in/{name}"]["message"]
    assert rows["in/b.png"]["status"] == "ok"


@pytest.mark.slow
@pytest.mark.parametrize("out", ["long", "loop"])
def test_an_out_that_cannot_be_reached_is_one_line_exit_2(tmp_path: Path, out: str) -> None:
    mask(tmp_path / "a.png")
    if out == "loop":
        (tmp_path / "loop1").symlink_to("loop2")
        (tmp_path / "loop2").symlink_to("loop1")
        out_path, reason = "loop1", "Too many levels of symbolic links"
    else:
        out_path, reason = f"o/{LONG}", "File name too long"
    result = gccl_process("a.png", "--out", out_path, cwd=tmp_path)
    assert result.returncode == 2
    assert reason in one_line_error(result)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("option", "value", "bound"),
    [
        ("--workers", "100000", "<= 1024"),
        ("--processes", "100000", "<= 1024"),
        ("--batch-window", "1e308", "at most 60000"),
    ],
)
def test_options_out_of_range_are_usage_errors_naming_the_bound(
    tmp_path: Path, option: str, value: str, bound: str
) -> None:
    mask(tmp_path / "a.png")
    result = gccl_process("-", "--out", "out", option, value, cwd=tmp_path, stdin="a.png\n")
    assert result.returncode == 2
    assert bound in one_line_error(result)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_nul_in_a_config_path_is_a_usage_error(tmp_path: Path) -> None:
    mask(tmp_path / "a.png")
    (tmp_path / "c.yaml").write_text('out: "a\\0b"\n')
    result = gccl_process("a.png", "--config", "c.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert "without NUL bytes" in one_line_error(result)


def test_a_poll_interval_out_of_range_is_a_usage_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "w").mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "ccl_cli", "watch", "w", "--out", "o", "--poll-interval", "1e308"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "0.01<=x<=3600" in one_line_error(result)
