"""Finding inputs, naming outputs, temporaries and the --out lock."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ccl_cli.errors import UsageError
from ccl_cli.io.inputs import OutPlace, expand
from ccl_cli.io.lock import OutputLock
from ccl_cli.io.made import MadeFiles
from ccl_cli.io.out_dir import OutDir
from ccl_cli.io.output_paths import GCCL_DIR, LOCK_NAME, output_paths, stale_name


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "in"
    for name in ["b.png", "a.TIF", "notes.txt", "sub/c.npy", "sub/deep/d.tiff", ".hidden/e.png"]:
        touch(root / name)
    return root


def test_folder_scan_is_sorted_and_top_level(tree: Path) -> None:
    items = expand([str(tree)], recursive=False)
    assert [item.relative for item in items] == [Path("a.TIF"), Path("b.png")]
    assert all(item.problem is None for item in items)


def test_recursive_scan_mirrors_relative_paths(tree: Path) -> None:
    relatives = [item.relative for item in expand([str(tree)], recursive=True)]
    assert relatives == [Path("a.TIF"), Path("b.png"), Path("sub/c.npy"), Path("sub/deep/d.tiff")]


def test_files_globs_and_missing(tree: Path) -> None:
    items = expand(
        [str(tree / "b.png"), str(tree / "sub" / "**" / "*.tiff"), str(tree / "zz.png")],
        recursive=False,
    )
    assert [(item.relative, item.problem) for item in items] == [
        (Path("b.png"), None),
        (Path("deep/d.tiff"), None),
        (Path("zz.png"), "no such file or directory"),
    ]
    (unmatched,) = expand([str(tree / "*.jpg")], recursive=False)
    assert unmatched.problem is None and unmatched.empty == "the pattern matches no file"


def test_stdin_lists_paths(tree: Path) -> None:
    stdin = io.StringIO(f"{tree / 'b.png'}\n\n{tree / 'sub'}\n")
    items = expand(["-"], recursive=False, stdin=stdin)
    assert [item.path for item in items] == [tree / "b.png", tree / "sub" / "c.npy"]


def test_out_may_not_be_an_input_folder(tree: Path) -> None:
    with pytest.raises(UsageError, match="is the input folder"):
        expand([str(tree)], recursive=False, out=OutPlace(tree))
    with pytest.raises(UsageError, match="inside the input folder"):
        expand([str(tree)], recursive=True, out=OutPlace(tree / "labels"))
    expand([str(tree)], recursive=False, out=OutPlace(tree / "labels"))
    expand([str(tree)], recursive=True, out=OutPlace(tree.parent / "out"))


@pytest.mark.parametrize("spelling", ["glob", "link", "dotdot"])
def test_out_inside_an_input_is_found_whatever_the_spelling(tree: Path, spelling: str) -> None:
    (tree / "labels" / "deeper").mkdir(parents=True)
    (tree.parent / "alias").symlink_to(tree)
    named = {
        "glob": str(tree.parent / "i[n]"),
        "link": str(tree.parent / "alias"),
        "dotdot": str(tree / "sub" / ".." / "sub" / ".."),
    }[spelling]
    for out in (tree / "labels", tree / "labels" / "deeper", tree / "labels" / "new" / "x"):
        with pytest.raises(UsageError, match="inside the input folder"):
            expand([named], recursive=True, out=OutPlace(out))
    with pytest.raises(UsageError, match="is the input folder"):
        expand([named], recursive=False, out=OutPlace(tree.parent / "alias"))


def test_a_stdin_path_that_would_scan_out_fails_alone(tree: Path) -> None:
    stdin = io.StringIO(f"{tree}\n{tree / 'b.png'}\n")
    items = expand(["-"], recursive=True, stdin=stdin, out=OutPlace(tree / "labels"))
    assert [(item.path, bool(item.problem)) for item in items] == [
        (tree, True),
        (tree / "b.png", False),
    ]
    assert "inside the input folder" in str(items[0].problem)


def test_only_the_last_suffix_is_replaced(tmp_path: Path) -> None:
    paths = output_paths(tmp_path, Path("a/b/frame.depth.png"))
    assert paths.labels_png == tmp_path / "a/b/frame.depth.labels.png"
    assert paths.labels_tif == tmp_path / "a/b/frame.depth.labels.tif"
    assert paths.stats == tmp_path / "a/b/frame.depth.stats.csv"
    assert paths.preview == tmp_path / "a/b/frame.depth.preview.png"
    assert stale_name(paths.labels_png) == "frame.depth.labels.stale.png"
    assert stale_name(paths.polygons) == "frame.depth.polygons.stale.geojson"


def _removed(out: Path) -> int:
    with OutDir.open(out) as folder:
        return folder.remove_temporaries()


def test_stale_temporaries_are_removed(tmp_path: Path) -> None:
    writer = subprocess.Popen([sys.executable, "-c", "pass"])
    writer.wait()  # its pid is now that of no process
    stale = touch(tmp_path / "a" / f".gccl-tmp-{writer.pid}-0123abcd")
    keep = [
        touch(tmp_path / "a" / "img.labels.png"),
        touch(tmp_path / "a" / ".gccl-tmp-notes"),  # not a name gccl makes
        touch(tmp_path / "a" / f".gccl-tmp-{os.getpid()}-0123abcd"),  # a live writer's
    ]
    assert _removed(tmp_path) == 1
    assert not stale.exists()
    assert all(path.exists() for path in keep)


def test_a_temporary_of_a_killed_unreaped_writer_is_stale(tmp_path: Path) -> None:
    writer = subprocess.Popen(["sleep", "60"])
    writer.kill()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{writer.pid}/stat").read_bytes().split(b")")[-1].split()[0] != b"Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    stale = touch(tmp_path / f".gccl-tmp-{writer.pid}-0123abcd")  # a zombie's, just made
    try:
        assert _removed(tmp_path) == 1
        assert not stale.exists()
    finally:
        writer.wait()


def test_second_lock_is_refused(tmp_path: Path) -> None:
    with OutDir.open(tmp_path) as out, OutDir.open(tmp_path) as again:
        with OutputLock(out), pytest.raises(UsageError, match="in use by a running gccl"):
            OutputLock(again).__enter__()
        with OutputLock(again):  # released on exit
            pass


def test_lock_of_a_killed_run_is_taken_over(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path\n"
            "from ccl_cli.io.lock import OutputLock\n"
            "from ccl_cli.io.out_dir import OutDir\n"
            "with OutputLock(OutDir.open(Path(sys.argv[1]))):\n"
            "    print('held', flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(UsageError, match=f"pid {holder.pid}"):
            OutputLock(OutDir.open(tmp_path)).__enter__()
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    time.sleep(0.05)
    lock = tmp_path / GCCL_DIR / LOCK_NAME
    assert lock.exists()
    with OutputLock(OutDir.open(tmp_path)):
        assert f"pid {os.getpid()}" in lock.read_text()


def test_a_file_written_in_its_inputs_clock_tick_is_stamped_later_than_the_input(
    tmp_path: Path,
) -> None:
    """The file system's clock is coarse: an output written in the tick its input was
    gets a later time, so --skip-existing does not take it for older than its input."""
    future = time.time_ns() + 10**10  # an input stamped after the write's clock reading
    with OutDir.open(tmp_path) as folder:
        made = MadeFiles(folder)
        folder.write(tmp_path / "late.csv", b"a", made, after_ns=future)
        folder.write(tmp_path / "plain.csv", b"b", made, after_ns=0)  # already later: unchanged
        made.close()
    assert (tmp_path / "late.csv").stat().st_mtime_ns == future + 1
    assert (tmp_path / "late.csv").read_bytes() == b"a"
    assert 0 < (tmp_path / "plain.csv").stat().st_mtime_ns < future
