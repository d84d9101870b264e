"""Only files gccl made are replaced, renamed or removed, and a failure destroys no earlier
result: the record of made files in --out (io/made.py), each file reached through the opened
--out (io/out_dir.py). Each test builds its attack in tmp_path and runs gccl in a subprocess
under a timeout (cli_helpers.gccl_process)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cli_helpers import TIMEOUT, gccl_process, make_fax, mask, one_line_error, summary, tree


def outputs(out: Path) -> dict[str, bytes]:
    """The files of `out` but gccl's own folder, summary.csv and the run record."""
    return {
        name: data
        for name, data in tree(out).items()
        if not name.startswith(".gccl") and name not in ("summary.csv", "gccl-run.json")
    }


@pytest.mark.slow
def test_a_multi_page_tiff_keeps_its_outputs_with_worker_processes(tmp_path: Path) -> None:
    make_fax(tmp_path / "fax16.tif", 16)
    first = gccl_process("fax16.tif", "-o", "o", "--processes", "1", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    before = outputs(tmp_path / "o")
    assert len(before) == 32
    again = gccl_process("fax16.tif", "-o", "o", "--processes", "2", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert outputs(tmp_path / "o") == before
    assert {row["status"] for row in summary(tmp_path / "o").values()} == {"ok"}


@pytest.mark.slow
def test_files_of_the_users_named_like_outputs_stay_when_an_input_fails(tmp_path: Path) -> None:
    mask(tmp_path / "in" / "photo.png")
    assert gccl_process("in", "-o", "o", cwd=tmp_path).returncode == 0
    (tmp_path / "o" / "photo.preview.png").write_bytes(b"\x89PNG the user's own preview")
    (tmp_path / "o" / "photo.polygons.geojson").write_text('{"type":"FeatureCollection"}')
    (tmp_path / "in" / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\nbroken now")
    result = gccl_process("in", "-o", "o", cwd=tmp_path)
    assert result.returncode == 1
    assert (tmp_path / "o" / "photo.preview.png").read_bytes() == b"\x89PNG the user's own preview"
    assert (tmp_path / "o" / "photo.polygons.geojson").read_text() == (
        '{"type":"FeatureCollection"}'
    )


@pytest.mark.slow
@pytest.mark.parametrize("named", ["glob", "files"])
def test_a_file_of_the_users_in_an_outputs_place_is_never_replaced(
    tmp_path: Path, named: str
) -> None:
    mask(tmp_path / "d" / "x.png")
    mask(tmp_path / "d" / "y.png", seed=1)
    (tmp_path / "d" / "x.stats.csv").write_text("user data")
    inputs = ["d/*.png"] if named == "glob" else ["d/x.png", "d/y.png"]
    result = gccl_process(*inputs, "--out", "d", cwd=tmp_path)
    assert result.returncode == 1
    assert (tmp_path / "d" / "x.stats.csv").read_text() == "user data"
    rows = summary(tmp_path / "d")
    assert rows["d/x.png"]["status"] == "failed"
    assert "d/x.stats.csv was not made by gccl in this --out" in rows["d/x.png"]["message"]
    assert rows["d/y.png"]["status"] == "ok"
    again = gccl_process(*inputs, "--out", "d", cwd=tmp_path)  # its own outputs: not inputs
    rows = summary(tmp_path / "d")
    assert rows.get("d/y.labels.png", {"status": "skipped"})["status"] == "skipped"
    assert again.returncode == 1 and (tmp_path / "d" / "x.stats.csv").read_text() == "user data"


def stream(cwd: Path, *args: str) -> subprocess.Popen[str]:
    """`gccl label - ARGS`, its stdin kept open for the caller."""
    return subprocess.Popen(
        [sys.executable, "-m", "ccl_cli", "label", "-", *args, "-q", "--device", "cpu"],
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until(condition, process: subprocess.Popen[str] | None = None) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline
        assert process is None or process.poll() is None, process.communicate()
        time.sleep(0.02)


@pytest.mark.slow
@pytest.mark.parametrize("while_a_runs", [True, False])
def test_a_run_never_touches_the_outputs_of_a_run_into_a_folder_below(
    tmp_path: Path, while_a_runs: bool
) -> None:
    mask(tmp_path / "dA" / "x.png")
    mask(tmp_path / "dB" / "y.png", seed=1)
    (tmp_path / "dB" / "sub").mkdir()
    (tmp_path / "dB" / "sub" / "x.png").write_bytes(b"\x89PNG\r\n\x1a\ncorrupt")
    run_a = stream(tmp_path, "-o", "P/sub")
    assert run_a.stdin is not None
    run_a.stdin.write("dA/x.png\n")
    run_a.stdin.flush()
    a_stats = tmp_path / "P" / "sub" / "x.stats.csv"
    wait_until(a_stats.exists, run_a)
    if not while_a_runs:
        run_a.stdin.close()
        assert run_a.wait(timeout=TIMEOUT) == 0
    before = outputs(tmp_path / "P" / "sub")
    result = gccl_process("dB", "-r", "-o", "P", cwd=tmp_path)
    if while_a_runs:
        run_a.stdin.close()
        assert run_a.wait(timeout=TIMEOUT) == 0, run_a.stderr and run_a.stderr.read()
    assert result.returncode == 1
    assert outputs(tmp_path / "P" / "sub") == before
    rows = summary(tmp_path / "P")
    assert "the --out of another gccl run" in rows["dB/sub/x.png"]["message"]
    assert rows["dB/y.png"]["status"] == "ok"
    assert summary(tmp_path / "P" / "sub")["dA/x.png"]["status"] == "ok"


@pytest.mark.slow
@pytest.mark.parametrize("output_first", [True, False])
def test_a_stream_never_takes_a_file_gccl_made_as_an_input_nor_deletes_it(
    tmp_path: Path, output_first: bool
) -> None:
    mask(tmp_path / "dC" / "a.png")
    assert gccl_process("dC/a.png", "-o", "S", cwd=tmp_path).returncode == 0
    earlier = (tmp_path / "S" / "a.labels.png").read_bytes()
    (tmp_path / "dC" / "a.png").write_bytes(b"\x89PNG\r\n\x1a\ncorrupt now")
    lines = ["S/a.labels.png", "dC/a.png"]
    stdin = "".join(f"{line}\n" for line in (lines if output_first else lines[::-1]))
    result = gccl_process("-", "-o", "S", cwd=tmp_path, stdin=stdin)
    assert result.returncode == 1
    rows = summary(tmp_path / "S")
    if output_first:
        assert rows["S/a.labels.png"]["status"] == "skipped"
        assert "outputs are never inputs" in rows["S/a.labels.png"]["message"]
    else:  # listed, or already moved aside by the failure before it
        assert rows["S/a.labels.png"]["status"] in ("skipped", "failed")
    assert rows["dC/a.png"]["status"] == "failed"
    assert (tmp_path / "S" / "a.labels.stale.png").read_bytes() == earlier  # moved, not lost
    assert not (tmp_path / "S" / "a.labels.labels.png").exists()


#: Runs gccl with its first fsync of an output held until a file appears: argv = ready, go,
#: gccl's arguments.
HELD_FIRST_WRITE = """
import os, sys, time
real = os.fsync
ready, go = sys.argv[1], sys.argv[2]
def held(fd):
    if not os.path.exists(ready):
        open(ready, "w").close()
        while not os.path.exists(go):
            time.sleep(0.02)
    real(fd)
os.fsync = held
sys.argv = ["gccl", *sys.argv[3:]]
from ccl_cli.cli import main
main()
"""


@pytest.mark.slow
def test_an_out_swapped_for_a_link_mid_run_is_noticed_and_nothing_lands_there(
    tmp_path: Path,
) -> None:
    for i in range(3):
        mask(tmp_path / "in" / f"a{i}.png", seed=i)
    victim = tmp_path / "victim2"
    victim.mkdir()
    (victim / "summary.csv").write_text("the user's summary\n")
    (tmp_path / "P3").mkdir()
    ready, go = tmp_path / "ready", tmp_path / "go"
    args = ["label", "in", "-o", "P3/out", "-q", "--device", "cpu", "--batch-size", "1"]
    run = subprocess.Popen(
        [sys.executable, "-c", HELD_FIRST_WRITE, str(ready), str(go), *args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(ready.exists, run)
    os.rename(tmp_path / "P3" / "out", tmp_path / "P3" / "out.real")
    (tmp_path / "P3" / "out").symlink_to("../victim2")
    go.touch()
    _, stderr = run.communicate(timeout=TIMEOUT)
    assert run.returncode == 2, stderr
    assert "was moved or replaced during the run" in stderr
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr
    assert tree(victim) == {"summary.csv": b"the user's summary\n"}
    rows = summary(tmp_path / "P3" / "out.real")
    assert rows["in/a0.png"]["status"] in ("ok", "not-run")
    assert any("moved or replaced" in row["message"] for row in rows.values())


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero", "user's file"])
def test_a_run_record_gccl_did_not_make_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    mask(tmp_path / "in" / "a.png")
    record = tmp_path / "o" / "gccl-run.json"
    record.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(record)
    elif kind == "user's file":
        record.write_text('{"mine": true}')
    else:
        record.symlink_to("/dev/zero")
    started = time.monotonic()
    result = gccl_process("in/a.png", "-o", "o", cwd=tmp_path, timeout=30)
    assert time.monotonic() - started < 20
    assert result.returncode == 2
    assert "gccl-run.json" in one_line_error(result)
    assert not (tmp_path / "o" / "a.labels.png").exists()
    if kind == "user's file":
        assert record.read_text() == '{"mine": true}'


@pytest.mark.slow
def test_the_record_lists_what_gccl_made_with_its_identity(tmp_path: Path) -> None:
    mask(tmp_path / "a.png")
    assert gccl_process("a.png", "-o", "o", "--preview", cwd=tmp_path).returncode == 0
    lines = (tmp_path / "o" / ".gccl" / "made").read_text().splitlines()
    listed = {entry[0]: entry[1:] for entry in map(json.loads, lines)}
    assert set(listed) == {
        "a.labels.png",
        "a.stats.csv",
        "a.preview.png",
        "summary.csv",
        "gccl-run.json",
    }
    for name, (inode, size, mtime, *made_for) in listed.items():
        info = (tmp_path / "o" / name).stat()
        assert (inode, size, mtime) == (info.st_ino, info.st_size, info.st_mtime_ns)
        # each output names the input (and page) it was made for, and what made it; the
        # run's own files none; each file its content's hash
        own = name in ("summary.csv", "gccl-run.json")
        file, page, made_by, digest = made_for
        assert [file, page] == ([None, None] if own else ["a.png", None])
        assert (made_by is None) == own
        assert digest == hashlib.sha256((tmp_path / "o" / name).read_bytes()).hexdigest()[:32]
    assert sorted(os.listdir(tmp_path / "o" / ".gccl")) == ["lock", "made"]


@pytest.mark.slow
def test_a_changed_output_is_no_longer_gccls(tmp_path: Path) -> None:
    mask(tmp_path / "in" / "a.png")
    assert gccl_process("in", "-o", "o", cwd=tmp_path).returncode == 0
    (tmp_path / "o" / "a.stats.csv").write_text("edited by hand\n")
    result = gccl_process("in", "-o", "o", cwd=tmp_path)
    assert result.returncode == 1
    assert (tmp_path / "o" / "a.stats.csv").read_text() == "edited by hand\n"
    assert "was not made by gccl" in summary(tmp_path / "o")["in/a.png"]["message"]


@pytest.mark.slow
def test_a_file_that_appears_at_an_outputs_name_during_the_run_is_not_replaced(
    tmp_path: Path,
) -> None:
    """After admission a file may appear at an output's name: the write asks the record again
    as it puts its file in place (and takes a free name by a hard link, which fails rather
    than replace), so that file stays and the input fails."""
    mask(tmp_path / "in" / "a.png", size=300)
    ready, go = tmp_path / "ready", tmp_path / "go"
    args = ["label", "in", "-o", "o", "-q", "--device", "cpu"]
    run = subprocess.Popen(
        [sys.executable, "-c", HELD_FIRST_WRITE, str(ready), str(go), *args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(ready.exists, run)
    (tmp_path / "o" / "a.labels.png").write_bytes(b"appeared meanwhile")
    go.touch()
    _, stderr = run.communicate(timeout=TIMEOUT)
    assert run.returncode == 1, stderr
    assert (tmp_path / "o" / "a.labels.png").read_bytes() == b"appeared meanwhile"
    message = summary(tmp_path / "o")["in/a.png"]["message"]
    assert "o/a.labels.png" in message and "not replaced" in message


@pytest.mark.slow
def test_a_killed_run_leaves_what_it_made_replaceable(tmp_path: Path) -> None:
    """A run killed (SIGKILL) after some outputs landed: its lines are in its segment, so the
    next run replaces those files and merges the segment into the record."""
    for i in range(30):
        mask(tmp_path / "in" / f"a{i:02}.png", size=64, seed=i)
    run = subprocess.Popen(
        [sys.executable, "-m", "ccl_cli", "label", "in", "-o", "o", "-q", "--device", "cpu"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    out = tmp_path / "o"
    wait_until(lambda: len(list(out.glob("*.stats.csv"))) >= 3)
    run.kill()
    run.wait(timeout=TIMEOUT)
    result = gccl_process("in", "-o", "o", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert {row["status"] for row in summary(out).values()} == {"ok"}
    assert [name for name in os.listdir(out / ".gccl") if name.startswith("made-")] == []


@pytest.mark.slow
def test_nothing_is_read_through_the_gccl_folder_of_a_concurrent_run(tmp_path: Path) -> None:
    """Two runs into one --out: the second is refused (exit 4) and changes nothing."""
    mask(tmp_path / "in" / "a.png", size=300)
    ready, go = tmp_path / "ready", tmp_path / "go"
    args = ["label", "in", "-o", "o", "-q", "--device", "cpu"]
    first = subprocess.Popen(
        [sys.executable, "-c", HELD_FIRST_WRITE, str(ready), str(go), *args],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(ready.exists, first)
        second = gccl_process("in", "-o", "o", cwd=tmp_path)
        assert second.returncode == 4
    finally:
        go.touch()
        threading.Thread(target=first.communicate, daemon=True).start()
    assert first.wait(timeout=TIMEOUT) == 0
    assert summary(tmp_path / "o")["in/a.png"]["status"] == "ok"
