"""What gccl must never do, whatever the inputs, the --out tree or the config look like.

Nothing is written outside --out, no input is replaced or removed, no input or
peer hangs or exhausts a run. Each test builds its attack in tmp_path and
drives the command line in a subprocess (`python -m ccl_cli`), under a
timeout, so that a run that would hang fails the test instead
(cli_helpers.gccl_process).
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import TIMEOUT, gccl_process, mask, one_line_error, summary, tree

# --- nothing written outside --out -------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("from_stdin", [True, False])
def test_dotdot_after_a_wildcard_stays_inside_out(tmp_path: Path, from_stdin: bool) -> None:
    mask(tmp_path / "in3" / "a" / "x.png")
    mask(tmp_path / "victim2" / "v.png", seed=1)
    (tmp_path / "victim2" / "v.stats.csv").write_text("precious\n")
    before = tree(tmp_path / "victim2")
    pattern = "in3/*/../../victim2/*.png"
    if from_stdin:
        result = gccl_process("-", "--out", "o16", cwd=tmp_path, stdin=pattern + "\n")
    else:
        result = gccl_process(pattern, "--out", "o16", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert tree(tmp_path / "victim2") == before
    assert (tmp_path / "o16" / "v.labels.png").is_file()
    assert (tmp_path / "o16" / "v.stats.csv").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("linked", [".gccl", ".gccl/lock"])
def test_a_linked_gccl_folder_or_lock_is_refused_and_its_target_kept(
    tmp_path: Path, linked: str
) -> None:
    mask(tmp_path / "in1" / "a.png")
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("precious\n")
    (tmp_path / "lockout" / ".gccl").mkdir(parents=True)
    if linked == ".gccl":
        (tmp_path / "lockout" / ".gccl").rmdir()
        (tmp_path / "lockout" / ".gccl").symlink_to(victim)
    else:
        (tmp_path / "lockout" / ".gccl" / "lock").symlink_to(victim / "precious.txt")
    result = gccl_process("in1", "--out", "lockout", cwd=tmp_path)
    assert result.returncode == 2
    assert "is a link" in one_line_error(result)
    assert tree(victim) == {"precious.txt": b"precious\n"}
    assert not (tmp_path / "lockout" / "summary.csv").exists()


@pytest.mark.slow
def test_a_gccl_name_that_is_a_file_of_the_users_is_left_alone(tmp_path: Path) -> None:
    mask(tmp_path / "in1" / "a.png")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / ".gccl").write_text("my notes\n")
    result = gccl_process("in1", "--out", "out", cwd=tmp_path)
    assert result.returncode == 2
    assert "is not a regular file" in one_line_error(result) or "not a folder" in result.stderr
    assert (tmp_path / "out" / ".gccl").read_text() == "my notes\n"


# --- inputs that hang or exhaust a run ---------------------------------------------


def tiff_chain(path: Path, next_offsets: list[int | None]) -> Path:
    """A classic little-endian TIFF of 1x1 uint8 pages whose page directories link as
    `next_offsets` says: an index into the pages, or None for the end."""
    tags = [(256, 1), (257, 1), (258, 8), (259, 1), (262, 1), (273, 8), (277, 1), (278, 1)]
    size = 2 + 12 * (len(tags) + 1) + 4
    first = 10  # header (8), the one pixel (at 8), a pad byte
    entries = b""
    for target in next_offsets:
        entry = struct.pack("<H", len(tags) + 1)
        for tag, value in tags:
            entry += struct.pack("<HHII", tag, 4, 1, value)
        entry += struct.pack("<HHII", 279, 4, 1, 1)
        entry += struct.pack("<I", 0 if target is None else first + target * size)
        entries += entry
    path.write_bytes(b"II*\x00" + struct.pack("<I", first) + b"\x00\x00" + entries)
    return path


@pytest.mark.slow
@pytest.mark.parametrize(
    "links", [[0], [1, 0], [1, 1], [1, 2, 1]], ids=["self", "pair", "second-self", "back"]
)
def test_tiff_page_loops_fail_quickly(tmp_path: Path, links: list[int | None]) -> None:
    (tmp_path / "in").mkdir()
    tiff_chain(tmp_path / "in" / "loop.tif", links)
    mask(tmp_path / "in" / "good.png")
    result = gccl_process("in", "--out", "out", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    rows = summary(tmp_path / "out")
    assert rows["in/loop.tif"]["status"] == "failed"
    assert "loop" in rows["in/loop.tif"]["message"]
    assert rows["in/good.png"]["status"] == "ok"


@pytest.mark.slow
def test_a_tiff_of_thousands_of_pages_is_refused_without_walking_them(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    pages = 5000
    tiff_chain(tmp_path / "in" / "pages.tif", [*range(1, pages), None])
    result = gccl_process("in", "--out", "out", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    message = summary(tmp_path / "out")["in/pages.tif"]["message"]
    assert "more than 1024 pages" in message


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A FIFO named like an image, that nothing ever writes to."""
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "pipe.png"
    os.mkfifo(path)
    yield path


@pytest.mark.parametrize("given", ["glob", "stdin", "path"])
def test_a_fifo_is_refused_without_blocking(tmp_path: Path, fifo: Path, given: str) -> None:
    mask(tmp_path / "in" / "good.png")
    if given == "glob":
        result = gccl_process("in/*.png", "--out", "out", cwd=tmp_path)
    elif given == "stdin":
        result = gccl_process("-", "--out", "out", cwd=tmp_path, stdin="in/pipe.png\nin/good.png\n")
    else:
        result = gccl_process("in/pipe.png", "in/good.png", "--out", "out", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    rows = summary(tmp_path / "out")
    assert rows["in/pipe.png"]["status"] == "failed"
    assert "not a regular file (a FIFO)" in rows["in/pipe.png"]["message"]
    assert rows["in/good.png"]["status"] == "ok"


@pytest.mark.slow
def test_double_star_does_not_follow_link_loops(tmp_path: Path) -> None:
    mask(tmp_path / "d" / "a.png")
    mask(tmp_path / "d" / "sub" / "b.png", seed=1)
    (tmp_path / "d" / "sub" / "up").symlink_to("..")  # d/sub/up -> d
    (tmp_path / "d" / "back").symlink_to("sub")  # a second loop: d/back/up -> d
    result = gccl_process("d/**/*.png", "--out", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert set(summary(tmp_path / "out")) == {"d/a.png", "d/sub/b.png"}


@pytest.mark.slow
def test_a_recursive_scan_never_enters_linked_folders(tmp_path: Path) -> None:
    mask(tmp_path / "d" / "a.png")
    mask(tmp_path / "d" / "sub" / "b.png", seed=1)
    mask(tmp_path / "elsewhere" / "c.png", seed=2)
    (tmp_path / "d" / "l1").symlink_to(".")  # each a way back into d, without end
    (tmp_path / "d" / "l2").symlink_to(".")
    (tmp_path / "d" / "sub" / "away").symlink_to("../../elsewhere")
    result = gccl_process("d", "-r", "--out", "out", cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    assert set(summary(tmp_path / "out")) == {"d/a.png", "d/sub/b.png"}
    made = sorted(p.relative_to(tmp_path / "out") for p in (tmp_path / "out").rglob("*.png"))
    assert made == [Path("a.labels.png"), Path("sub/b.labels.png")]


# --- configuration -----------------------------------------------------------------


def config_error(tmp_path: Path, content: bytes) -> str:
    """The one error line `gccl label` gives for a config file of `content` (exit 2)."""
    mask(tmp_path / "in" / "a.png")
    (tmp_path / "c.yaml").write_bytes(content)
    result = gccl_process("in", "--out", "out", "--config", "c.yaml", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert not (tmp_path / "out").exists()
    return one_line_error(result)


@pytest.mark.slow
def test_config_aliases_are_refused(tmp_path: Path) -> None:
    levels = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for a, b in zip("abcde", "bcdef", strict=True):
        levels.append(f"{b}: &{b} [{', '.join(['*' + a] * 9)}]")
    content = "\n".join(levels) + "\nmin-area: *f\n"
    assert "aliases (*name) are not allowed" in config_error(tmp_path, content.encode())


@pytest.mark.slow
def test_an_oversized_config_is_refused(tmp_path: Path) -> None:
    content = b"# " + b"x" * (1 << 20) + b"\nmin-area: 2\n"
    assert "at most 1048576 bytes" in config_error(tmp_path, content)


@pytest.mark.slow
def test_a_config_that_is_not_utf8_is_exit_2(tmp_path: Path) -> None:
    assert "not UTF-8" in config_error(tmp_path, b"min-area: 2\n# caf\xe9\n")


@pytest.mark.slow
@pytest.mark.parametrize("second", ["min-area", "min_area"])
def test_a_key_given_twice_is_exit_2(tmp_path: Path, second: str) -> None:
    content = f"min-area: 1\ntau: 3\n{second}: 2\n".encode()
    assert "given twice" in config_error(tmp_path, content)


# --- --scheduler -------------------------------------------------------------------


@pytest.fixture
def peer() -> Iterator[tuple[socket.socket, list[bytes]]]:
    """A listening socket on localhost; what it sends on accepting goes in the list."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    greeting: list[bytes] = []
    accepted: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(conn)
            if greeting:
                conn.sendall(greeting[0])

    threading.Thread(target=serve, daemon=True).start()
    yield server, greeting
    server.close()
    for conn in accepted:
        conn.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    "greeting, reason",
    [
        (b"", "no Dask scheduler answered within 10 s"),
        (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", "not a Dask scheduler"),
    ],
    ids=["silent", "http"],
)
def test_a_peer_that_is_not_a_scheduler_is_one_line_exit_2(
    tmp_path: Path, peer: tuple[socket.socket, list[bytes]], greeting: bytes, reason: str
) -> None:
    pytest.importorskip("distributed")
    server, said = peer
    if greeting:
        said.append(greeting)
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    mask(tmp_path / "in" / "a.png")
    result = gccl_process("in", "--out", "out", "--scheduler", address, cwd=tmp_path, timeout=60)
    assert result.returncode == 2
    assert f"--scheduler {address}: {reason}" in one_line_error(result)


# --- smaller -----------------------------------------------------------------------


@pytest.mark.slow
def test_names_up_to_name_max_are_labeled(tmp_path: Path) -> None:
    name = "n" * (255 - len(".polygons.geojson")) + ".png"  # its longest output fits exactly
    mask(tmp_path / "in" / name)
    result = gccl_process("in", "--out", "out", "--preview", "--polygons", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert summary(tmp_path / "out")[f"in/{name}"]["status"] == "ok"


def png_header_only(path: Path, width: int, height: int, color_type: int, depth: int) -> Path:
    """A PNG that declares width x height pixels and holds one empty deflate stream."""
    path.parent.mkdir(parents=True, exist_ok=True)

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(data, zlib.crc32(kind))
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, depth, color_type, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + body)
    return path


@pytest.mark.slow
def test_links_inside_out_are_refused(tmp_path: Path) -> None:
    mask(tmp_path / "in" / "sub" / "a.png")
    mask(tmp_path / "in" / "b.png", seed=1)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("precious\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "sub").symlink_to(victim)  # a linked folder
    (tmp_path / "out" / "b.labels.png").symlink_to(victim / "precious.txt")  # a linked file
    result = gccl_process("in", "-r", "--out", "out", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    rows = summary(tmp_path / "out")
    assert "out/sub is a link inside --out" in rows["in/sub/a.png"]["message"]
    assert "out/b.labels.png is a link; not replaced" in rows["in/b.png"]["message"]
    assert tree(victim) == {"precious.txt": b"precious\n"}
    assert (tmp_path / "out" / "b.labels.png").is_symlink()


@pytest.mark.slow
def test_out_among_the_inputs_never_replaces_or_removes_one(tmp_path: Path) -> None:
    folder = tmp_path / "in4"
    mask(folder / "x.png")
    mask(folder / "x.labels.tif", seed=1)  # a PNG named like a label TIFF: an input
    (folder / "x.stats.csv").write_text("the user's own\n")
    before = tree(folder)
    listing = "".join(f"{path}\n" for path in sorted(folder.iterdir()))  # find in4 -type f
    result = gccl_process("-", "--out", "in4", cwd=tmp_path, stdin=listing)
    assert result.returncode == 1, result.stderr
    after = tree(folder)
    assert {name: after[name] for name in before} == before
    rows = summary(folder)
    message = rows[str(folder / "x.png")]["message"]
    assert "x.stats.csv was not made by gccl in this --out; not replaced" in message


@pytest.mark.slow
def test_a_glob_into_its_own_folder_never_replaces_an_input(tmp_path: Path) -> None:
    mask(tmp_path / "in2" / "a.png")
    mask(tmp_path / "in2" / "a.labels.png", seed=1)  # listed by the glob: an input
    before = (tmp_path / "in2" / "a.labels.png").read_bytes()
    result = gccl_process("in2/*.png", "--out", "in2", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert (tmp_path / "in2" / "a.labels.png").read_bytes() == before
    rows = summary(tmp_path / "in2")
    assert "in2/a.labels.png was not made by gccl in this --out" in rows["in2/a.png"]["message"]
    assert rows["in2/a.labels.png"]["status"] == "ok"


@pytest.mark.slow
@pytest.mark.parametrize("spelling", ["dat[a]", "dat?", "./data/../data", "alias"])
def test_out_inside_an_input_is_refused_whatever_the_spelling(tmp_path: Path, spelling: str):
    mask(tmp_path / "data" / "a.png")
    (tmp_path / "alias").symlink_to("data")
    result = gccl_process(spelling, "-r", "--out", "data/out", cwd=tmp_path)
    assert result.returncode == 2
    assert "inside the input folder" in one_line_error(result)
    assert sorted(os.listdir(tmp_path / "data")) == ["a.png"]


@pytest.mark.slow
def test_a_stale_label_image_is_removed_only_if_gccl_wrote_it(tmp_path: Path) -> None:
    mask(tmp_path / "in" / "x.png")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x.labels.tif").write_bytes(b"the user's own file")
    assert gccl_process("in", "--out", "out", cwd=tmp_path).returncode == 0
    assert (tmp_path / "out" / "x.labels.tif").read_bytes() == b"the user's own file"
    assert (tmp_path / "out" / "x.labels.png").is_file()
    (tmp_path / "out" / "x.labels.tif").unlink()
    assert (
        gccl_process("in", "--out", "out", "--label-format", "tiff", cwd=tmp_path).returncode == 0
    )
    assert not (tmp_path / "out" / "x.labels.png").exists()  # gccl's own: replaced
    assert gccl_process("in", "--out", "out", cwd=tmp_path).returncode == 0
    assert not (tmp_path / "out" / "x.labels.tif").exists()


#: Runs gccl with os.fsync held until a file appears: argv = ready, go, gccl's arguments.
HELD_WRITE = """
import os, sys, time
real = os.fsync
ready, go = sys.argv[1], sys.argv[2]
def held(fd):
    open(ready, "w").close()
    while not os.path.exists(go):
        time.sleep(0.02)
    real(fd)
os.fsync = held
sys.argv = ["gccl", *sys.argv[3:]]
from ccl_cli.cli import main
main()
"""


def wait_for(path: Path, process: subprocess.Popen[str]) -> None:
    for _ in range(TIMEOUT * 50):
        if path.exists() or process.poll() is not None:
            break
        threading.Event().wait(0.02)
    assert path.exists(), process.communicate(timeout=TIMEOUT)


@pytest.mark.slow
def test_a_run_into_a_parent_folder_leaves_a_live_runs_temporaries(tmp_path: Path) -> None:
    mask(tmp_path / "in_a" / "a.png")
    mask(tmp_path / "in_b" / "b.png", seed=1)
    ready, go = tmp_path / "ready", tmp_path / "go"
    args = ["label", "in_a", "--out", "out/sub", "--quiet", "--device", "cpu"]
    live = subprocess.Popen(
        [sys.executable, "-c", HELD_WRITE, str(ready), str(go), *args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(ready, live)
        temporaries = [p for p in (tmp_path / "out" / "sub").iterdir() if "gccl-tmp" in p.name]
        assert temporaries
        assert gccl_process("in_b", "--out", "out", cwd=tmp_path).returncode == 0
        assert all(path.exists() for path in temporaries)
    finally:
        go.touch()
        _, stderr = live.communicate(timeout=TIMEOUT)
    assert live.returncode == 0, stderr
    assert summary(tmp_path / "out" / "sub")["in_a/a.png"]["status"] == "ok"
    assert not [p for p in (tmp_path / "out").rglob("*") if "gccl-tmp" in p.name]


#: Runs gccl with PIL's Image.open never returning for files named *hang*: argv = ready,
#: gccl's arguments.
HUNG_DECODE = """
import os, sys, threading
from ccl_cli.io import decode
real = decode.read_image
ready = sys.argv[1]
def hung(path, *args, **kwargs):
    if "hang" in os.path.basename(str(path)):
        open(ready, "w").close()
        threading.Event().wait()
    return real(path, *args, **kwargs)
decode.read_image = hung
sys.argv = ["gccl", *sys.argv[2:]]
from ccl_cli.cli import main
main()
"""


#: Image sides decoded in the run's own thread (12) and in its pool (300: 90,000 bytes).
SIDES = [12, 300]


def terminated_when_stuck(script: str, folder: Path, args: list[str]) -> tuple[int, str]:
    """Run `script` (argv: a ready file, gccl's arguments) in `folder`, SIGTERM it once it
    is stuck (its ready file exists): its exit code and stderr."""
    ready = folder / "ready"
    run = subprocess.Popen(
        [sys.executable, "-c", script, str(ready), *args],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(ready, run)
        run.terminate()
        _, stderr = run.communicate(timeout=60)
    finally:
        run.kill()
    return run.returncode, stderr


@pytest.mark.slow
@pytest.mark.parametrize("side", SIDES)
def test_sigterm_stops_a_run_whose_decode_never_returns(tmp_path: Path, side: int) -> None:
    for i in range(3):
        mask(tmp_path / "in" / f"a{i}.png", side, seed=i)
    mask(tmp_path / "in" / "b_hang.png", side)
    args = ["label", "in", "--out", "out", "--quiet", "--device", "cpu", "--workers", "2"]
    code, stderr = terminated_when_stuck(HUNG_DECODE, tmp_path, args)
    assert code == -signal.SIGTERM, stderr
    rows = summary(tmp_path / "out")
    assert rows["in/b_hang.png"]["status"] == "not-run"
    assert not [p for p in (tmp_path / "out").iterdir() if "gccl-tmp" in p.name]


#: Runs gccl with os.rename never returning for the outputs of b.png: argv = ready,
#: gccl's arguments.
HUNG_WRITE = """
import os, sys, threading
ready = sys.argv[1]
def hung(real):
    def step(source, target, **kwargs):
        if str(target).startswith("b."):
            open(ready, "w").close()
            threading.Event().wait()
        real(source, target, **kwargs)
    return step
os.rename = hung(os.rename)
os.link = hung(os.link)
sys.argv = ["gccl", *sys.argv[2:]]
from ccl_cli.cli import main
main()
"""


@pytest.mark.slow
@pytest.mark.parametrize("side", SIDES)
def test_sigterm_stops_a_run_whose_write_never_returns(tmp_path: Path, side: int) -> None:
    mask(tmp_path / "in" / "a.png", side)
    mask(tmp_path / "in" / "b.png", side, seed=1)
    args = ["label", "in", "--out", "out", "--quiet", "--device", "cpu", "--batch-size", "1"]
    code, stderr = terminated_when_stuck(HUNG_WRITE, tmp_path, args)
    assert code == -signal.SIGTERM, stderr
    rows = summary(tmp_path / "out")
    assert rows["in/a.png"]["status"] == "ok"
    assert rows["in/b.png"]["status"] == "not-run"
    assert not (tmp_path / "out" / "b.labels.png").exists()


#: Runs gccl with numpy.stack raising MemoryError for batches of more than one image.
NO_MEMORY_FOR_BATCHES = """
import sys
import numpy as np
real = np.stack
def short(arrays, *args, **kwargs):
    if "out" in kwargs and len(arrays) > 1:
        raise MemoryError("no room for a batch")
    return real(arrays, *args, **kwargs)
np.stack = short
sys.argv = ["gccl", *sys.argv[1:]]
from ccl_cli.cli import main
main()
"""


@pytest.mark.slow
def test_a_batch_without_memory_is_labeled_one_image_at_a_time(tmp_path: Path) -> None:
    for i in range(4):
        mask(tmp_path / "in" / f"a{i}.png", seed=i)
    args = ["label", "in", "--out", "out", "--quiet", "--device", "cpu", "--batch-size", "4"]
    result = subprocess.run(
        [sys.executable, "-c", NO_MEMORY_FOR_BATCHES, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stderr
    assert {row["status"] for row in summary(tmp_path / "out").values()} == {"ok"}


@pytest.mark.slow
def test_an_input_folder_named_summary_csv_fails_alone(tmp_path: Path) -> None:
    mask(tmp_path / "in" / "summary.csv" / "a.png")
    mask(tmp_path / "in" / "b.png", seed=1)
    result = gccl_process("in", "-r", "--out", "out", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    rows = summary(tmp_path / "out")
    assert "folder named summary.csv" in rows["in/summary.csv/a.png"]["message"]
    assert rows["in/b.png"]["status"] == "ok"


@pytest.mark.slow
def test_a_summary_path_that_is_a_folder_is_refused_before_writing(tmp_path: Path) -> None:
    mask(tmp_path / "in" / "b.png")
    (tmp_path / "out" / "summary.csv").mkdir(parents=True)
    result = gccl_process("in", "--out", "out", cwd=tmp_path)
    assert result.returncode == 2
    assert "summary.csv is a folder" in one_line_error(result)
    assert not (tmp_path / "out" / "b.labels.png").exists()


def big_tiff_header(path: Path, side: int) -> Path:
    """A float64 TIFF that declares side x side pixels and holds eight bytes of them."""
    tags = [(256, side), (257, side), (258, 64), (259, 1), (262, 1), (273, 8)]
    tags += [(277, 1), (278, side), (279, 8), (339, 3)]
    entries = struct.pack("<H", len(tags))
    entries += b"".join(struct.pack("<HHII", tag, 4, 1, value) for tag, value in tags)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"II*\x00" + struct.pack("<I", 16) + b"\0" * 8 + entries + b"\0" * 4)
    return path


def npy_header(path: Path, shape: tuple[int, int], dtype: str) -> Path:
    with open(path, "wb") as handle:
        header = {"descr": np.dtype(dtype).str, "fortran_order": False, "shape": shape}
        np.lib.format.write_array_header_1_0(handle, header)
        handle.write(b"\0" * 64)
    return path


@pytest.mark.slow
def test_decompression_bombs_are_refused_from_their_header(tmp_path: Path) -> None:
    png_header_only(tmp_path / "in" / "rgb.png", 30000, 30000, 2, 8)  # 2.7 GB decoded
    big_tiff_header(tmp_path / "in" / "float.tif", 16384)  # 2.1 GB decoded
    npy_header(tmp_path / "in" / "wide.npy", (20000, 20000), "<f8")  # 3.2 GB decoded
    mask(tmp_path / "in" / "small.png")
    result = gccl_process("in", "--out", "out", "--max-image-bytes", "1G", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    rows = summary(tmp_path / "out")
    for name in ("rgb.png", "float.tif", "wide.npy"):
        assert "--max-image-bytes is 1073741824" in rows[f"in/{name}"]["message"], name
    assert rows["in/small.png"]["status"] == "ok"


@pytest.mark.slow
def test_the_default_byte_limit_refuses_a_bomb_below_the_pixel_limit(tmp_path: Path) -> None:
    png_header_only(tmp_path / "in" / "rgba.png", 46340, 46340, 6, 8)  # 8.6 GB decoded
    result = gccl_process("in", "--out", "out", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "--max-image-bytes is 4294967296" in summary(tmp_path / "out")["in/rgba.png"]["message"]


def descendants(pid: int) -> set[int]:
    """The live processes below `pid` (zombies count as gone)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: set[int] = set()
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.add(child)
            stack.append(child)
    return found


def alive(pids: set[int]) -> set[int]:
    """Those of `pids` that are still running (not gone, not zombies)."""
    running = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            running.add(pid)
    return running


def until_gone(pids: set[int]) -> set[int]:
    """Wait (up to TIMEOUT) for `pids` to end; those still running."""
    for _ in range(TIMEOUT * 10):
        if not alive(pids):
            break
        threading.Event().wait(0.1)
    return alive(pids)


def finished_outputs(out: Path) -> dict[str, bytes]:
    """The files in `out` but for temporaries (names and contents)."""
    return {name: data for name, data in tree(out).items() if ".gccl-tmp-" not in name}


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_workers_die_with_a_killed_client_and_write_nothing_after(tmp_path: Path) -> None:
    for i in range(80):
        mask(tmp_path / "in" / f"img{i:02}.png", size=400, seed=i)
    args = ["in", "--out", "out", "--processes", "2", "--workers", "1", "--batch-size", "1"]
    client = subprocess.Popen(
        [sys.executable, "-m", "ccl_cli", "label", *args, "--quiet", "--device", "cpu"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    out = tmp_path / "out"
    workers: set[int] = set()
    try:
        for _ in range(TIMEOUT * 50):
            workers |= descendants(client.pid)
            if (out.exists() and len(list(out.glob("*.stats.csv"))) >= 4) or client.poll():
                break
            threading.Event().wait(0.02)
        workers |= descendants(client.pid)
        client.kill()
        client.wait()
        at_kill = finished_outputs(out)
        assert len(workers) >= 3  # the fork server and two workers
        assert until_gone(workers) == set()
    finally:
        for pid in alive(workers):
            os.kill(pid, 9)
    stats = [name for name in at_kill if name.endswith(".stats.csv")]
    assert 0 < len(stats) < 80
    # Not one file renamed into place or replaced after the client died.
    assert finished_outputs(out) == at_kill


def parent_of(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_killing_the_fork_server_and_a_worker_neither_hangs_nor_leaves_processes(
    tmp_path: Path,
) -> None:
    for i in range(80):
        mask(tmp_path / "in" / f"img{i:02}.png", size=400, seed=i)
    args = ["in", "--out", "out", "--processes", "2", "--workers", "1", "--batch-size", "1"]
    client = subprocess.Popen(
        [sys.executable, "-m", "ccl_cli", "label", *args, "--device", "cpu"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    out = tmp_path / "out"
    seen: set[int] = set()
    killed: list[int] = []
    try:
        for _ in range(TIMEOUT * 50):
            seen |= descendants(client.pid)
            server = [  # the client's child whose children are the workers
                pid
                for pid in seen
                if parent_of(pid) == client.pid and any(parent_of(w) == pid for w in seen)
            ]
            workers = [pid for pid in seen if server and parent_of(pid) == server[0]]
            if workers and out.exists() and len(list(out.glob("*.stats.csv"))) >= 4:
                killed = [server[0], workers[0]]
                break
            if client.poll() is not None:
                break
            threading.Event().wait(0.02)
        for pid in killed:
            os.kill(pid, 9)
        while client.poll() is None:  # the processes started after the kill count too
            seen |= descendants(client.pid)
            threading.Event().wait(0.05)
        _, stderr = client.communicate(timeout=TIMEOUT)
        assert until_gone(seen) == set()
    finally:
        client.kill()
        for pid in alive(seen):
            os.kill(pid, 9)
    assert killed, stderr
    rows = summary(out)
    assert len(rows) == 80
    failed = [row for row in rows.values() if row["status"] != "ok"]
    assert client.returncode == (1 if failed else 0), stderr
    for row in failed:  # one line each, naming the image
        assert "worker process" in row["message"]
        assert sum(row["path"] in line for line in stderr.splitlines()) == 1, stderr
    for name, row in rows.items():
        if row["status"] == "ok":
            stem = out / Path(name).relative_to("in").stem
            assert Path(f"{stem}.stats.csv").exists() and Path(f"{stem}.labels.png").exists()
    assert not [path for path in out.rglob("*") if ".gccl-tmp-" in path.name]
