"""The record of made files (io/made.py) and the writes that ask it (io/out_dir.py)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from ccl_cli.errors import InputError, UsageError
from ccl_cli.io.made import GROWS, MadeFiles, TaskRecord, in_the_way, lost_pages, move_aside
from ccl_cli.io.out_dir import OutDir
from ccl_cli.io.output_paths import GCCL_DIR, RECORD_NAME, output_paths
from ccl_cli.io.owner import Facts, content_at


def entries(out: Path) -> dict[str, list[list[int]]]:
    """The merged record: identities (inode, size, mtime) by path."""
    found: dict[str, list[list[int]]] = {}
    for line in (out / GCCL_DIR / RECORD_NAME).read_text().splitlines():
        key, *identity = json.loads(line)
        found.setdefault(key, []).append(identity[:3])
    return found


@pytest.mark.parametrize("on_disk", [False, True])
def test_what_a_run_makes_is_listed_and_replaceable_by_the_next(
    tmp_path: Path, on_disk: bool
) -> None:
    with OutDir.open(tmp_path) as out:
        made = MadeFiles(out, on_disk)
        out.write(tmp_path / "sub" / "a.stats.csv", b"first", made)
        made.close()
    first = (tmp_path / "sub" / "a.stats.csv").stat()
    assert entries(tmp_path) == {"sub/a.stats.csv": [[first.st_ino, 5, first.st_mtime_ns]]}
    with OutDir.open(tmp_path) as out:
        made = MadeFiles(out, on_disk)
        out.write(tmp_path / "sub" / "a.stats.csv", b"second!", made)
        made.close()
    second = (tmp_path / "sub" / "a.stats.csv").stat()
    assert (tmp_path / "sub" / "a.stats.csv").read_bytes() == b"second!"
    assert entries(tmp_path) == {"sub/a.stats.csv": [[second.st_ino, 7, second.st_mtime_ns]]}


def test_a_file_of_the_users_stays_and_the_write_says_why(tmp_path: Path) -> None:
    (tmp_path / "a.stats.csv").write_text("mine")
    os.symlink("/etc/hostname", tmp_path / "a.labels.png")
    with OutDir.open(tmp_path) as out:
        made = MadeFiles(out)
        with pytest.raises(InputError, match="was not made by gccl in this --out"):
            out.write(tmp_path / "a.stats.csv", b"new", made)
        with pytest.raises(InputError, match="is a link; not replaced"):
            out.write(tmp_path / "a.labels.png", b"new", made)
        assert not out.remove(tmp_path / "a.stats.csv", made)
        paths = output_paths(tmp_path, Path("a.png"))
        assert "not made by gccl" in str(in_the_way(out, made, [paths.stats]))
        assert move_aside(out, made, paths.all()) == []
        made.close()
    assert (tmp_path / "a.stats.csv").read_text() == "mine"
    assert sorted(os.listdir(tmp_path)) == [GCCL_DIR, "a.labels.png", "a.stats.csv"]


def test_a_failure_moves_outputs_aside_without_replacing_a_file_of_the_users(
    tmp_path: Path,
) -> None:
    paths = output_paths(tmp_path, Path("a.png"))
    with OutDir.open(tmp_path) as out:
        made = MadeFiles(out)
        out.write(paths.stats, b"stats", made)
        out.write(paths.labels_png, b"labels", made)
        (tmp_path / "a.labels.stale.png").write_bytes(b"the user's")  # in the way of one move
        assert move_aside(out, made, paths.all()) == ["a.stats.stale.csv"]
        made.close()
    assert (tmp_path / "a.stats.stale.csv").read_bytes() == b"stats"
    assert (tmp_path / "a.labels.png").read_bytes() == b"labels"  # kept where it was
    assert (tmp_path / "a.labels.stale.png").read_bytes() == b"the user's"
    assert set(entries(tmp_path)) == {"a.labels.png", "a.stats.stale.csv"}


def test_a_killed_writers_segment_is_merged_and_an_unfinished_line_ignored(tmp_path: Path) -> None:
    with OutDir.open(tmp_path) as out:
        made = MadeFiles(out)
        out.write(tmp_path / "a.csv", b"a", made)
        made.segment.close()  # killed here: no merge
        with open(tmp_path / GCCL_DIR / made.segment.name, "ab") as segment:
            segment.write(b'["b.csv", 12')  # a line cut short
        os.close(made.folder)
    with OutDir.open(tmp_path) as out:
        made = MadeFiles(out)  # merges what it finds
        info = (tmp_path / "a.csv").stat()
        assert made.ours("a.csv", (info.st_ino, info.st_size, info.st_mtime_ns))
        assert sorted(os.listdir(tmp_path / GCCL_DIR)) == [RECORD_NAME]
        made.close()


def test_a_file_that_grows_is_known_by_its_inode_size_and_content(tmp_path: Path) -> None:
    with OutDir.open(tmp_path) as out:
        made = MadeFiles(out)
        inode = out.write(tmp_path / "log.csv", b"header\n", made)[0]
        grown = hashlib.sha256(b"header\na row\n").hexdigest()[:32]
        made.made("log.csv", (inode, 13, GROWS), Facts(digest=grown))
        with open(tmp_path / "log.csv", "ab") as log:
            log.write(b"a row\n")
        made.settled("log.csv", (inode, 13, GROWS))
        info = (tmp_path / "log.csv").stat()
        identity = (info.st_ino, info.st_size, info.st_mtime_ns)
        content = content_at("log.csv", out.fd)
        assert made.ours("log.csv", identity, content)
        with open(tmp_path / "log.csv", "r+b") as log:  # edited in place: same inode and size
            log.write(b"HEADER")
        info = (tmp_path / "log.csv").stat()
        identity = (info.st_ino, info.st_size, info.st_mtime_ns)
        assert not made.ours("log.csv", identity, content_at("log.csv", out.fd))
        made.close()
    assert entries(tmp_path) == {}  # (the file there now is no longer gccl's)


def test_a_task_sent_again_knows_what_its_earlier_try_made(tmp_path: Path) -> None:
    with OutDir.open(tmp_path) as out:
        made = MadeFiles(out)
        first = TaskRecord(out, {}, "task1")
        out.write(tmp_path / "a.csv", b"first try", first)
        first.segment.close()  # the worker died here
        os.close(first.folder)
        again = TaskRecord(out, {}, "task1")
        out.write(tmp_path / "a.csv", b"second try", again)  # replaces the first try's file
        again.close()
        other = TaskRecord(out, {}, "task2")
        with pytest.raises(InputError, match="not made by gccl"):
            out.write(tmp_path / "a.csv", b"another task", other)  # not told of it
        other.close()
        made.close()
    assert (tmp_path / "a.csv").read_bytes() == b"second try"
    assert sorted(os.listdir(tmp_path / GCCL_DIR)) == [RECORD_NAME]


@pytest.mark.parametrize("on_disk", [False, True])
def test_what_each_output_was_made_for_outlives_the_merge_and_finds_the_lost_pages(
    tmp_path: Path, on_disk: bool
) -> None:
    with OutDir.open(tmp_path) as out:
        made = MadeFiles(out, on_disk)
        for page in range(3):
            out.write(
                tmp_path / f"f.p000{page + 1}.stats.csv", b"page", made, source=("f.tif", page)
            )
        task = TaskRecord(out, {}, "task1")  # a worker's outputs say it too
        out.write(tmp_path / "g.stats.csv", b"g", task, source=("sub/g.tif", None))
        task.close()
        out.write(tmp_path / "summary.csv", b"rows", made)  # no input's
        made.close()
    with OutDir.open(tmp_path) as out:
        made = MadeFiles(out, on_disk)
        assert sorted((key, facts[:2]) for key, _, facts in made.made_for("f.tif")) == [
            (f"f.p000{page + 1}.stats.csv", ("f.tif", page)) for page in range(3)
        ]
        assert [facts[:2] for _, _, facts in made.made_for("sub/g.tif")] == [("sub/g.tif", None)]
        assert made.made_for("summary.csv") == []
        third = tmp_path / "f.p0003.stats.csv"
        assert lost_pages(out, made, "f.tif", 2) == [third]
        assert sorted(lost_pages(out, made, "f.tif", 1)) == [
            tmp_path / f"f.p000{n}.stats.csv" for n in (1, 2, 3)
        ]
        third.write_bytes(b"edited")  # no longer the file gccl made: not a lost page's
        assert lost_pages(out, made, "f.tif", 2) == []
        made.close()


def test_a_record_without_what_files_were_made_for_is_still_read(tmp_path: Path) -> None:
    (tmp_path / "a.stats.csv").write_bytes(b"old")
    info = (tmp_path / "a.stats.csv").stat()
    (tmp_path / GCCL_DIR).mkdir()
    line = json.dumps(["a.stats.csv", info.st_ino, info.st_size, info.st_mtime_ns])
    (tmp_path / GCCL_DIR / RECORD_NAME).write_text(line + "\n")
    with OutDir.open(tmp_path) as out:
        made = MadeFiles(out)
        assert made.ours("a.stats.csv", (info.st_ino, info.st_size, info.st_mtime_ns))
        assert made.made_for("a.png") == []
        made.close()


def test_a_record_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / GCCL_DIR).mkdir()
    os.mkfifo(tmp_path / GCCL_DIR / RECORD_NAME)
    with OutDir.open(tmp_path) as out, pytest.raises(UsageError, match="a FIFO"):
        MadeFiles(out)


def test_an_out_that_was_moved_or_deleted_is_noticed(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    with OutDir.open(tmp_path / "out") as out:
        assert out.moved() is None
        os.rename(tmp_path / "out", tmp_path / "elsewhere")
        assert "moved or deleted" in str(out.moved())
        (tmp_path / "out").symlink_to("elsewhere")  # the same folder again, through a link
        assert out.moved() is None
        os.unlink(tmp_path / "out")
        (tmp_path / "out").mkdir()
        assert "moved or replaced" in str(out.moved())
        os.rmdir(tmp_path / "elsewhere")
        assert "deleted" in str(out.moved())
