"""What the record of made files knows: the input (and options) each output was made by, the
content of every file gccl rewrites, and a record of any size read in bounded memory; SIGHUP
stops a run as SIGTERM does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
from cli_helpers import TIMEOUT, gccl, mask, summary
from label_files import read_label_image
from PIL import Image
from scipy import ndimage
from typer.testing import CliRunner

from ccl_cli.cli import app
from ccl_cli.io.made import MadeFiles
from ccl_cli.io.out_dir import OutDir
from ccl_cli.io.output_paths import GCCL_DIR, RECORD_NAME


def gccl_stdin(stdin: str, *args: str) -> tuple[int, str]:
    """`gccl label - ARGS --quiet` reading `stdin`: exit code, stderr."""
    result = CliRunner().invoke(
        app, ["label", "-", *args, "--quiet", "--device", "cpu"], input=stdin
    )
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stderr


def scipy_labels(path: Path) -> np.ndarray:
    labels, _ = ndimage.label(np.asarray(Image.open(path)) != 0, structure=np.ones((3, 3)))
    return labels


def status(out: Path, path: Path) -> str:
    return summary(out)[str(path)]["status"]


def test_an_input_of_the_same_name_from_another_folder_is_never_skipped(tmp_path: Path) -> None:
    first = mask(tmp_path / "a" / "x.png", seed=1)
    second = mask(tmp_path / "b" / "x.png", seed=2)
    old = time.time() - 3600  # older than any output: its time says nothing
    os.utime(second, (old, old))
    out = tmp_path / "out"
    assert gccl(str(first), "-o", str(out))[0] == 0
    code, _, stderr = gccl(str(second), "-o", str(out), "--skip-existing")
    assert code == 0, stderr
    assert status(out, second) == "ok"
    assert np.array_equal(read_label_image(out / "x.labels.png"), scipy_labels(second))
    # both in one list (stdin): the second is the documented collision, never a skip
    code, stderr = gccl_stdin(f"{first}\n{second}\n", "-o", str(out), "--skip-existing")
    rows = summary(out)
    assert rows[str(second)]["status"] == "failed", stderr
    assert "would overwrite those of" in rows[str(second)]["message"]


def test_an_input_replaced_by_an_older_file_is_labeled_again(tmp_path: Path) -> None:
    image = mask(tmp_path / "in" / "x.png", seed=1)
    out = tmp_path / "out"
    assert gccl(str(tmp_path / "in"), "-o", str(out))[0] == 0
    other = mask(tmp_path / "elsewhere.png", seed=5)
    old = time.time() - 3600
    os.utime(other, (old, old))
    os.replace(other, image)  # a file from elsewhere, older than the outputs
    code, _, stderr = gccl(str(tmp_path / "in"), "-o", str(out), "--skip-existing")
    assert code == 0, stderr
    assert status(out, image) == "ok"
    assert np.array_equal(read_label_image(out / "x.labels.png"), scipy_labels(image))
    # unchanged, with the same options: skipped; with other options: labeled
    assert gccl(str(tmp_path / "in"), "-o", str(out), "--skip-existing")[0] == 0
    assert status(out, image) == "skipped"
    assert (
        gccl(str(tmp_path / "in"), "-o", str(out), "--skip-existing", "--connectivity", "4")[0] == 0
    )
    assert status(out, image) == "ok"


def edit_in_place(path: Path, data: bytes) -> None:
    """Overwrite `path` in place (same inode), keeping its size and modification time."""
    before = path.stat()
    data = data[: before.st_size].ljust(before.st_size, b"#")
    with open(path, "r+b") as handle:
        handle.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )


def test_a_summary_edited_in_place_is_never_overwritten(tmp_path: Path) -> None:
    mask(tmp_path / "in" / "x.png")
    out = tmp_path / "out"
    assert gccl(str(tmp_path / "in"), "-o", str(out))[0] == 0
    edit_in_place(out / "summary.csv", b"my notes")
    mine = (out / "summary.csv").read_bytes()
    code, _, stderr = gccl(str(tmp_path / "in"), "-o", str(out))
    assert code == 2
    assert "summary.csv was not made by gccl" in stderr
    assert (out / "summary.csv").read_bytes() == mine


def test_a_streams_summary_edited_in_place_is_never_overwritten(tmp_path: Path) -> None:
    image = mask(tmp_path / "x.png")
    out = tmp_path / "out"
    assert gccl_stdin(f"{image}\n", "-o", str(out))[0] == 0
    with open(out / "summary.csv", "r+b") as handle:  # `>`: the same inode, other bytes
        handle.truncate(0)
        handle.write(b"kept by hand\n")
    code, stderr = gccl_stdin(f"{image}\n", "-o", str(out))
    assert code == 2, stderr
    assert (out / "summary.csv").read_bytes() == b"kept by hand\n"


def test_an_output_edited_in_place_is_never_replaced(tmp_path: Path) -> None:
    image = mask(tmp_path / "in" / "x.png")
    out = tmp_path / "out"
    assert gccl(str(tmp_path / "in"), "-o", str(out))[0] == 0
    edit_in_place(out / "x.stats.csv", b"label,area\n1,999999\n")
    mine = (out / "x.stats.csv").read_bytes()
    code, _, _ = gccl(str(tmp_path / "in"), "-o", str(out))
    assert code == 1
    assert "x.stats.csv was not made by gccl" in summary(out)[str(image)]["message"]
    assert (out / "x.stats.csv").read_bytes() == mine


def write_record(out: Path, lines: list[bytes]) -> None:
    (out / GCCL_DIR).mkdir(parents=True)
    with open(out / GCCL_DIR / RECORD_NAME, "wb") as record:
        record.writelines(lines)


def test_a_record_of_one_huge_line_is_read_in_bounded_memory(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_bytes(b"a")
    info = (tmp_path / "a.csv").stat()
    good = json.dumps(["a.csv", info.st_ino, info.st_size, info.st_mtime_ns]).encode()
    write_record(tmp_path, [good + b"\n", b'["' + b"x" * (24 << 20), b'"]\n', good + b"\n"])
    tracemalloc.start()
    try:
        with OutDir.open(tmp_path) as out:
            made = MadeFiles(out)
            _, peak = tracemalloc.get_traced_memory()
            assert made.ours("a.csv", (info.st_ino, info.st_size, info.st_mtime_ns))
            made.close()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20  # the line is 24 MiB: never held whole


def test_a_record_of_many_entries_is_read_in_bounded_memory(tmp_path: Path) -> None:
    count = 30_000
    lines = [
        json.dumps([f"d{n % 97}/f{n}.stats.csv", n + 1, 10, 1_700_000_000_000_000_000 + n]).encode()
        + b"\n"
        for n in range(count)
    ]
    write_record(tmp_path, lines)
    tracemalloc.start()
    try:
        with OutDir.open(tmp_path) as out:
            made = MadeFiles(out)
            _, peak = tracemalloc.get_traced_memory()
            for n in (0, count // 2, count - 1):
                key = f"d{n % 97}/f{n}.stats.csv"
                assert made.ours(key, (n + 1, 10, 1_700_000_000_000_000_000 + n))
            made.close()
    finally:
        tracemalloc.stop()
    # held in memory, these entries take several hundred bytes each (about 16 MB)
    assert peak < 12 << 20
    assert len((tmp_path / GCCL_DIR / RECORD_NAME).read_bytes().splitlines()) == count


def test_sighup_stops_a_run_like_sigterm(tmp_path: Path) -> None:
    for n in range(6):
        Image.fromarray(
            (np.random.default_rng(n).random((600, 600)) < 0.5).astype(np.uint8) * 255
        ).save(tmp_path / f"m{n}.png")
    names = " ".join(f"m{n}.png" for n in range(6))
    run = subprocess.Popen(
        [sys.executable, "-m", "ccl_cli", "label", "-", "-o", "out", "--device", "cpu", "-q"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert run.stdin is not None
    run.stdin.write(names.replace(" ", "\n") + "\n")
    run.stdin.flush()  # (left open: a stream that goes on)
    deadline = time.monotonic() + TIMEOUT
    while not list((tmp_path / "out").glob("*.stats.csv")):
        assert time.monotonic() < deadline and run.poll() is None, run.communicate()
        time.sleep(0.01)
    run.send_signal(signal.SIGHUP)
    try:
        _, stderr = run.communicate(timeout=TIMEOUT)
    finally:
        run.kill()
    assert run.returncode == -signal.SIGHUP, stderr
    rows = summary(tmp_path / "out")
    assert rows, stderr
    assert "ok" in {row["status"] for row in rows.values()}
    left = [p.name for p in (tmp_path / "out").rglob(".gccl-tmp-*")]
    assert left == []
