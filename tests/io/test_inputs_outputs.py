"""Finding inputs, naming outputs, atomic writes and the --out lock."""

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
from ccl_cli.io.inputs import OutPlace, RunInputs, expand
from ccl_cli.io.lock import OutputLock
from ccl_cli.io.out_dir import OutDir, atomic_write
from ccl_cli.io.output_paths import LOCK_NAME, output_paths


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
    assert expand([str(tree / "*.jpg")], recursive=False)[0].problem == (
        "the pattern matches no file"
    )


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
    assert not paths.complete(preview=False)
    touch(paths.labels_tif)
    touch(paths.stats)
    assert paths.complete(preview=False)
    assert not paths.complete(preview=True)


@pytest.mark.parametrize("fixed", [True, False])
def test_outputs_that_are_inputs_are_found_under_any_name(tmp_path: Path, fixed: bool) -> None:
    first = touch(tmp_path / "in" / "a.png")
    out = tmp_path / "out"
    touch(out / "sub" / "a.stats.csv")  # the user's file, not an input
    os.link(first, out / "sub" / "b.labels.tif")  # the input a.png under an output's name
    os.symlink(first, out / "b.preview.png")  # a link to it is not the input itself
    inputs = RunInputs([first] if fixed else [], fixed)
    if not fixed:
        inputs.add(first)
    assert inputs.first_among(output_paths(out, Path("sub/b.png"))) == out / "sub/b.labels.tif"
    assert inputs.first_among(output_paths(out, Path("sub/a.png"))) is None
    assert inputs.first_among(output_paths(out, Path("b.png"))) is None
    assert inputs.first_among(output_paths(out, Path("new/b.png"))) is None


def test_atomic_write_replaces_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "x" / "out.bin"
    atomic_write(target, b"first")
    atomic_write(target, b"second")
    assert target.read_bytes() == b"second"
    assert sorted(p.name for p in target.parent.iterdir()) == ["out.bin"]


def _removed(out: Path) -> int:
    with OutDir(out) as folder:
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
    with OutputLock(tmp_path), pytest.raises(UsageError, match="in use by a running gccl"):
        OutputLock(tmp_path).__enter__()
    with OutputLock(tmp_path):  # released on exit
        pass


def test_lock_of_a_killed_run_is_taken_over(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path\n"
            "from ccl_cli.io.lock import OutputLock\n"
            "with OutputLock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(UsageError, match=f"pid {holder.pid}"):
            OutputLock(tmp_path).__enter__()
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    time.sleep(0.05)
    assert (tmp_path / LOCK_NAME).exists()
    with OutputLock(tmp_path):
        assert f"pid {os.getpid()}" in (tmp_path / LOCK_NAME).read_text()


def test_a_file_written_in_its_inputs_clock_tick_is_stamped_later_than_the_input(
    tmp_path: Path,
) -> None:
    """The file system's clock is coarse: an output written in the tick its input was
    gets a later time, so --skip-existing does not take it for older than its input."""
    future = time.time_ns() + 10**10  # an input stamped after the write's clock reading
    with OutDir(tmp_path) as folder:
        folder.write(tmp_path / "late.csv", b"a", after_ns=future)
        folder.write(tmp_path / "plain.csv", b"b", after_ns=0)  # already later: unchanged
    assert (tmp_path / "late.csv").stat().st_mtime_ns == future + 1
    assert (tmp_path / "late.csv").read_bytes() == b"a"
    assert 0 < (tmp_path / "plain.csv").stat().st_mtime_ns < future
