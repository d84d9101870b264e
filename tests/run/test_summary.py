"""summary.csv: written whole for a list of inputs, appended row by row for inputs over time."""

from __future__ import annotations

import csv
import errno
import os
from pathlib import Path

import pytest

from ccl_cli.errors import UsageError
from ccl_cli.io.inputs import InputItem
from ccl_cli.io.made import MadeFiles
from ccl_cli.io.out_dir import OutDir
from ccl_cli.io.output_paths import output_paths
from ccl_cli.run import summary as summary_module
from ccl_cli.run.records import Record
from ccl_cli.run.summary import Summary


class _Notices:
    def __init__(self) -> None:
        self.said: list[str] = []

    def start(self, total: int | None) -> None:
        pass

    def finished(self, record: Record) -> None:
        pass

    def notice(self, message: str) -> None:
        self.said.append(message)


def _summary(out: Path, appends: bool) -> tuple[Summary, _Notices]:
    folder = OutDir.open(out)
    notices = _Notices()
    return Summary(folder, MadeFiles(folder, on_disk=appends), appends, notices), notices


def _record(name: str) -> Record:
    return Record(InputItem(Path(name), Path(name)))


def _rows(out: Path) -> list[dict[str, str]]:
    with open(out / "summary.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def test_appended_rows_are_in_the_file_as_records_finish_and_none_is_kept(tmp_path: Path):
    out = tmp_path / "out"
    summary, _ = _summary(out, appends=True)
    assert _rows(out) == []  # the header, at the start
    for i in range(50):
        record = _record(f"{i}.png")
        summary.taken(record)
        record.status = "ok" if i % 5 else "failed"
        summary.finished(record)
        assert [row["path"] for row in _rows(out)] == [f"{j}.png" for j in range(i + 1)]
        assert summary.records == {} and summary.outputs == {}
    in_flight = _record("late.png")
    summary.taken(in_flight)
    assert summary.close([], "interrupted") == []
    rows = _rows(out)
    assert len(rows) == 51 and rows[-1]["path"] == "late.png"
    assert (rows[-1]["status"], rows[-1]["message"]) == ("not-run", "interrupted")
    assert summary.counts == {"ok": 40, "failed": 10, "not-run": 1}


def test_a_list_summary_is_written_whole_at_the_end_in_input_order(tmp_path: Path):
    out = tmp_path / "out"
    summary, _ = _summary(out, appends=False)
    records = [_record(f"{i}.png") for i in range(3)]
    for record in records:
        summary.taken(record)
    records[2].status = "ok"
    summary.finished(records[2])
    assert not (out / "summary.csv").exists()
    closed = summary.close(
        [InputItem(Path("3.png"), Path("3.png"))], "stopped after a failure (--fail-fast)"
    )
    assert closed[:3] == records and len(closed) == 4
    assert [(row["path"], row["status"]) for row in _rows(out)] == [
        ("0.png", "not-run"),
        ("1.png", "not-run"),
        ("2.png", "ok"),
        ("3.png", "not-run"),
    ]
    assert _rows(out)[0]["message"] == "stopped after a failure (--fail-fast)"


def test_a_failed_append_is_said_once_and_its_rows_land_with_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    out = tmp_path / "out"
    summary, notices = _summary(out, appends=True)
    real_write = os.write
    calls = {"n": 0}

    def flaky_write(fd: int, data: bytes) -> int:
        calls["n"] += 1
        if calls["n"] <= 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, bytes(data[:7]))  # a short write: the rest follows

    monkeypatch.setattr(summary_module.os, "write", flaky_write)
    for name in ("a.png", "b.png", "c.png"):
        record = _record(name)
        summary.taken(record)
        record.status = "ok"
        summary.finished(record)
    assert len(notices.said) == 1 and "No space left" in notices.said[0]
    assert [row["path"] for row in _rows(out)] == ["a.png", "b.png", "c.png"]


def test_rows_that_never_landed_fail_the_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    out = tmp_path / "out"
    summary, _ = _summary(out, appends=True)

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(summary_module.os, "write", full)
    record = _record("a.png")
    summary.taken(record)
    record.status = "ok"
    summary.finished(record)
    with pytest.raises(UsageError, match=r"summary\.csv.*last rows are missing"):
        summary.close([], "")


def test_a_failed_input_moves_its_earlier_outputs_aside_as_it_fails(tmp_path: Path):
    """An appending run keeps no list to clean up at its end: the move is at once."""
    out = tmp_path / "out"
    summary, _ = _summary(out, appends=True)
    paths = output_paths(out, Path("a.png"))
    summary.out.write(paths.stats, b"earlier statistics", summary.made)
    summary.out.write(paths.labels_png, b"earlier labels", summary.made)
    paths.preview.write_bytes(b"the user's own preview")  # not gccl's: stays
    mine = out / "notes.txt"
    mine.write_text("the user's")
    record = _record("a.png")
    summary.taken(record)
    summary.may_write(record, paths)
    record.status = "failed"
    record.message = "cannot read"
    summary.finished(record)
    assert not paths.stats.exists() and not paths.labels_png.exists()
    assert (out / "a.stats.stale.csv").read_bytes() == b"earlier statistics"
    assert (out / "a.labels.stale.png").read_bytes() == b"earlier labels"
    assert paths.preview.read_bytes() == b"the user's own preview"
    assert mine.read_text() == "the user's"
    assert _rows(out)[0]["message"] == (
        "cannot read (earlier outputs kept as a.labels.stale.png, a.stats.stale.csv)"
    )
