"""Seen: the same answers in memory and on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccl_cli.io.seen import Seen


@pytest.mark.parametrize("on_disk", [False, True])
def test_each_key_keeps_its_first_value(on_disk: bool):
    seen = Seen(on_disk)
    assert seen.first(Path("/in/a.png"), "a.png") is None
    assert seen.first(Path("/in/a.png"), "other") == "a.png"
    assert seen.first(("/in/a.png", 2), "page") is None
    assert seen.first(("/in/a.png", None), "") is None
    assert seen.first(("/in/a.png", None), "") == ""  # an empty first value is still a value
    assert seen.first((64769, 1234)) is None
    assert (64769, 1234) in seen and (64769, 1235) not in seen
    assert Path("/in/a.png") in seen and Path("/in/b.png") not in seen
    assert "/in/a.png" not in seen  # a path's text is another key than the path


@pytest.mark.parametrize("on_disk", [False, True])
def test_set_gives_a_key_its_latest_value(on_disk: bool):
    seen = Seen(on_disk)
    assert seen.get(Path("/in/a.png")) is None
    seen.set(Path("/in/a.png"), "1:10:5")
    assert seen.get(Path("/in/a.png")) == "1:10:5"
    seen.set(Path("/in/a.png"), "2:12:6")  # met before: replaced
    assert seen.get(Path("/in/a.png")) == "2:12:6"
    assert seen.first(Path("/in/a.png"), "other") == "2:12:6"
    assert seen.get("/in/a.png") is None  # a path's text is another key than the path


def test_on_disk_many_keys_stay_findable():
    seen = Seen(on_disk=True)
    for i in range(20_000):
        assert seen.first(f"/data/frame_{i:06}.png", str(i)) is None
    assert seen.first("/data/frame_012345.png", "again") == "12345"
    assert "/data/frame_019999.png" in seen and "/data/frame_020000.png" not in seen


class _FullDisk:
    """A database connection whose every statement fails, as on a full disk."""

    def execute(self, statement: str, values: tuple[str, ...]) -> None:
        import sqlite3

        raise sqlite3.OperationalError("database or disk is full")


def test_a_failed_database_leaves_the_run_going_in_memory():
    seen = Seen(on_disk=True)
    assert seen.first("/in/a.png", "a") is None
    seen._disk = _FullDisk()  # type: ignore[assignment]
    assert seen.first("/in/b.png", "b") is None
    assert seen.first("/in/b.png", "again") == "b"  # kept in memory from then on
    assert "/in/b.png" in seen and "/in/c.png" not in seen
    assert seen.first("/in/a.png", "a2") is None  # what was on disk is forgotten
    seen.set("/in/c.png", "c")
    assert seen.get("/in/c.png") == "c" and seen.get("/in/d.png") is None
