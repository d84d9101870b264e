"""Stops that always come and reads that always end: SIGTERM while the main thread would be
busy in C (the first input's decode, finding the inputs a stdin line names), a stop while a
stream waits for its next line, a stdin line without end, a stdout closed under --json. Each
run is a subprocess under a timeout."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import TIMEOUT, mask, summary
from PIL import Image

#: Runs gccl with one step made to spin for SPIN_SECONDS in C, where no signal handler
#: runs (a codec, a page walk): argv = ready file, the step ("decode" or "pages"), gccl's
#: arguments. The ready file appears as the spin starts.
SPINNING = """
import hashlib, sys, time
from ccl_cli.io import decode, inputs
ready, step = sys.argv[1], sys.argv[2]
SPIN_SECONDS = 8.0
def spin():
    open(ready, "w").close()
    started = time.perf_counter()
    hashlib.pbkdf2_hmac("sha256", b"x", b"salt", 1000)
    rate = 1000 / max(time.perf_counter() - started, 1e-6)
    hashlib.pbkdf2_hmac("sha256", b"x", b"salt", int(rate * SPIN_SECONDS))  # C, no signals
def spinning(real):
    def call(path, *args, **kwargs):
        if "spin" in str(path):
            spin()
        return real(path, *args, **kwargs)
    return call
if step == "decode":
    decode.read_image = spinning(decode.read_image)
else:
    inputs.image_pages = spinning(inputs.image_pages)
sys.argv = ["gccl", *sys.argv[3:]]
from ccl_cli.cli import main
main()
"""


def terminated_while_spinning(
    tmp_path: Path, step: str, args: list[str], stdin: str = ""
) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run SPINNING, SIGTERM it once the spin started: seconds from SIGTERM to its end."""
    ready = tmp_path / "ready"
    run = subprocess.Popen(
        [sys.executable, "-c", SPINNING, str(ready), step, *args],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert run.stdin is not None
    run.stdin.write(stdin)
    run.stdin.flush()  # (left open: a stream that goes on)
    deadline = time.monotonic() + TIMEOUT
    while not ready.exists():
        assert time.monotonic() < deadline and run.poll() is None, run.communicate()
        time.sleep(0.02)
    time.sleep(0.3)  # inside the spin
    sent = time.monotonic()
    run.terminate()
    try:
        stdout, stderr = run.communicate(timeout=TIMEOUT)
    finally:
        run.kill()
    return time.monotonic() - sent, subprocess.CompletedProcess(
        run.args, run.returncode, stdout, stderr
    )


def noise(path: Path, side: int = 300) -> Path:
    """A PNG of random 8-bit values: about side² bytes on disk (too large to decode in the
    run's own thread)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    values = np.random.default_rng(3).integers(0, 256, (side, side), dtype=np.uint8)
    Image.fromarray(values).save(path)
    return path


@pytest.mark.slow
def test_sigterm_during_the_first_inputs_decode_stops_at_once(tmp_path: Path) -> None:
    noise(tmp_path / "in" / "a_spin.png")
    noise(tmp_path / "in" / "b.png")
    args = ["label", "in", "--out", "out", "-q", "--device", "cpu", "--workers", "1"]
    seconds, result = terminated_while_spinning(tmp_path, "decode", args)
    assert seconds < 2.0, result.stderr  # the decode alone spins for 8 s
    assert result.returncode == -signal.SIGTERM, result.stderr
    rows = summary(tmp_path / "out")
    assert {row["status"] for row in rows.values()} == {"not-run"}


@pytest.mark.slow
def test_sigterm_while_a_stdin_line_is_being_found_stops_at_once(tmp_path: Path) -> None:
    mask(tmp_path / "a.png")
    (tmp_path / "spin.tif").write_bytes(b"II*\x00")
    args = ["label", "-", "--out", "out", "-q", "--device", "cpu"]
    seconds, result = terminated_while_spinning(tmp_path, "pages", args, "a.png\nspin.tif\n")
    assert seconds < 2.0, result.stderr  # counting the pages spins for 8 s
    assert result.returncode == -signal.SIGTERM, result.stderr
    assert summary(tmp_path / "out")["a.png"]["status"] == "ok"


@pytest.mark.slow
@pytest.mark.parametrize("stdin_ends", [False, True], ids=["stdin-open", "stdin-closed"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_stop_while_a_stream_waits_for_its_next_line_ends_the_run_by_it(
    tmp_path: Path, signum: int, stdin_ends: bool
) -> None:
    """A stream idle on stdin, stopped: alone, or with its writer (stopped with it, as a
    service manager or a shell's Ctrl-C does: stdin ends as the signal comes)."""
    mask(tmp_path / "a.png")
    run = subprocess.Popen(
        [sys.executable, "-m", "ccl_cli", "label", "-", "--out", "out", "--json", "-q"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert run.stdin is not None and run.stdout is not None and run.stderr is not None
    try:
        run.stdin.write("a.png\n")
        run.stdin.flush()
        assert json.loads(run.stdout.readline())["status"] == "ok"  # now waiting for a line
        time.sleep(0.3)
        run.send_signal(signum)
        if stdin_ends:
            run.stdin.close()
        run.wait(timeout=TIMEOUT)
    finally:
        run.kill()
        stderr = run.stderr.read()
        run.wait()
    assert run.returncode == (-signal.SIGTERM if signum == signal.SIGTERM else 130), stderr
    assert summary(tmp_path / "out")["a.png"]["status"] == "ok"


#: Runs `gccl label ARGS` as its only child, stdin passed on, and prints the child's peak
#: resident memory in bytes (Linux reports kilobytes).
PEAK_MEMORY = """
import resource, subprocess, sys
done = subprocess.run([sys.executable, "-m", "ccl_cli", "label", *sys.argv[1:]])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, done.returncode)
"""


@pytest.mark.slow
def test_a_stdin_line_without_end_is_one_row_read_in_linear_time(tmp_path: Path) -> None:
    mask(tmp_path / "a.png")
    mask(tmp_path / "b.png", seed=1)
    size = 64 << 20  # a stray binary file piped in by mistake
    args = ["-", "--out", "out", "-q", "--device", "cpu"]
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", PEAK_MEMORY, *args],
        cwd=tmp_path,
        input=b"a.png\n" + b"x" * size + b"\nb.png\n",
        capture_output=True,
        timeout=120,
    )
    took = time.monotonic() - started
    peak, code = map(int, result.stdout.split())
    assert code == 1, result.stderr
    assert b"Traceback" not in result.stderr
    rows = summary(tmp_path / "out")
    long = [row for name, row in rows.items() if name.startswith("xxxx")]
    assert len(long) == 1 and long[0]["status"] == "failed"
    assert f"a line of {size} bytes on stdin" in long[0]["message"]
    assert rows["a.png"]["status"] == "ok" and rows["b.png"]["status"] == "ok"
    assert took < 60
    assert peak < size  # the line is never held


@pytest.mark.slow
def test_a_closed_stdout_under_json_lets_the_run_finish_its_outputs_and_summary(
    tmp_path: Path,
) -> None:
    for i in range(12):
        mask(tmp_path / "in" / f"a{i:02}.png", seed=i)
    run = subprocess.Popen(
        [
            sys.executable,
            *("-m", "ccl_cli", "label", "in", "--out", "out", "--json", "--device", "cpu"),
            *("--batch-size", "1", "--workers", "1"),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert run.stdout is not None
    assert run.stdout.read(10)  # `| head -c10`
    run.stdout.close()
    _, stderr = run.communicate(timeout=TIMEOUT)
    assert run.returncode == 0, stderr  # every input was labeled
    assert "stdout was closed after" in stderr and "Traceback" not in stderr
    with open(tmp_path / "out" / "summary.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 12 and {row["status"] for row in rows} == {"ok"}
    assert len(list((tmp_path / "out").glob("*.stats.csv"))) == 12
