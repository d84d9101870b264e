"""`gccl watch DIR... --out OUT`: label what the folders hold, then each file that arrives.

A file is taken once it is complete: on Linux when its writer closes it
(inotify's close-write, through watchdog) or when it is renamed or linked in
(moved-to, or created without being opened); elsewhere, and with --poll (on
network shares, whose writes raise no local events), once its size and
modification time have not changed for the poll interval. So a file still
being written is never read. Each path is labeled once per run; what earlier
runs finished is skipped (as --skip-existing), so a restarted watch redoes
nothing. The watcher starts before the folders are scanned, so nothing that
arrives meanwhile is missed. The run ends at Ctrl-C or SIGTERM (exit 130,
summary.csv complete); summary.csv gets each row as its input finishes.
"""

from __future__ import annotations

import os
import queue
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from ..config import Settings
from ..errors import UsageError
from ..io.decode import is_image_path
from ..io.inputs import InputItem, OutPlace
from ..io.seen import Seen
from .command import checked_out, run_source
from .records import Reporter, RunReport
from .sources import Arrival, windowed

#: --poll-interval's default, in seconds.
DEFAULT_POLL_SECONDS = 1.0
#: How long a file that appeared without being opened (renamed or linked in), or that
#: the first scan found freshly changed, must keep its size and mtime, in seconds.
SETTLE_SECONDS = 0.1


def run_watch(
    folders: Sequence[str],
    settings: Settings,
    reporter: Reporter,
    poll: bool = False,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
) -> RunReport:
    """Watch `folders` into --out until stopped; see the module docstring."""
    out = checked_out(settings)
    if settings.scheduler is not None:
        raise UsageError("gccl watch labels in this process; --scheduler does not apply")
    if not folders:
        raise UsageError("gccl watch needs at least one folder")
    place = OutPlace(out)
    for folder in folders:
        if not os.path.isdir(folder):
            raise UsageError(f"{folder} is not a folder")
        place.check_root(Path(folder), settings.recursive)
    source = WatchSource(
        [Path(folder) for folder in folders],
        settings.recursive,
        settings.batch_window / 1000,
        poll,
        poll_seconds,
        reporter.notice,
    )
    return run_source(source, replace(settings, skip_existing=True), reporter)


class WatchSource:
    """The files of `folders` now and as they arrive, each once it is complete."""

    total: int | None = None

    def __init__(
        self,
        folders: list[Path],
        recursive: bool,
        window_seconds: float,
        poll: bool,
        poll_seconds: float,
        notice: Callable[[str], None],
    ) -> None:
        self.folders = folders
        self.recursive = recursive
        self.window_seconds = window_seconds
        self.poll = poll
        self.poll_seconds = poll_seconds
        self.notice = notice
        self.events: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
        self.seen = Seen(on_disk=True)  # every path taken (a watch has no end)
        #: Files waiting to be complete: path -> (size, mtime_ns, unchanged since, how long).
        self.settling: dict[Path, tuple[int, int, float, float]] = {}
        self.next_scan = 0.0

    def untaken(self, taken: int) -> list[InputItem]:
        """Nothing: a watch takes files as they come."""
        return []

    def wake(self) -> None:
        """End a wait for file events (sources.Source.wake)."""
        self.events.put(("wake", ""))

    def items(self, tick: Callable[[], None]) -> Generator[Arrival, None, None]:
        """The files there now, then each new one once complete; ends only by tick's Stop."""
        observer = None if self.poll else self._observe()
        try:
            now = time.time()
            first = self.poll_seconds if observer is None else SETTLE_SECONDS
            for path in self._scan_all():
                item = self._item(path)
                if item is None:
                    continue
                try:
                    changed = path.stat().st_mtime
                except OSError:
                    continue
                if now - changed >= first:
                    self.seen.first(path)
                    yield item
                else:
                    self._settle(path, first)
            yield None
            self.next_scan = time.monotonic() + self.poll_seconds
            yield from windowed(self._take, self.window_seconds, tick)
        finally:
            if observer is not None:
                observer.stop()

    def _observe(self) -> Any:
        """A started watchdog observer of the folders, or None (then the folders are polled)."""
        observer = Observer()
        handler = _Handler(self.events)
        try:
            for folder in self.folders:
                observer.schedule(handler, str(folder), recursive=self.recursive)
            observer.start()
        except OSError as error:  # e.g. inotify's watch limit
            self.notice(f"no file events ({error.strerror or error}); polling the folders instead")
            return None
        return observer

    def _take(self, timeout: float) -> list[InputItem]:
        """The files that became complete, waiting up to `timeout` for events."""
        ready: list[Path] = []
        if self.poll or not self.events.empty() or not self.settling:
            wait = max(0.0, timeout)
        else:
            wait = min(max(0.0, timeout), SETTLE_SECONDS / 2)
        if self.poll:
            wait = min(wait, max(0.0, self.next_scan - time.monotonic()))
        try:
            event: tuple[str, str] | None = self.events.get(timeout=wait)
        except queue.Empty:
            event = None
        while event is not None:
            self._event(*event, ready)
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                event = None
        if self.poll and time.monotonic() >= self.next_scan:
            for path in self._scan_all():
                if path not in self.seen and path not in self.settling:
                    self._settle(path, self.poll_seconds)
            self.next_scan = time.monotonic() + self.poll_seconds
        ready.extend(self._settled())
        items = []
        for path in ready:
            item = self._item(path)
            if item is not None and self.seen.first(path) is None:  # not taken before
                items.append(item)
        return items

    def _event(self, kind: str, where: str, ready: list[Path]) -> None:
        """One file event: complete, created (settles), being written, deleted, or a folder
        (a wake is none of them)."""
        path = Path(where)
        if kind == "complete":
            self.settling.pop(path, None)
            ready.append(path)
        elif kind == "created":
            self._settle(path, SETTLE_SECONDS)
        elif kind in ("writing", "deleted"):  # a file being written: its close says when
            self.settling.pop(path, None)
        elif kind == "folder":  # a folder moved in: its files raise no events of their own
            for found in _files(path, True):
                if found not in self.seen:
                    self._settle(found, SETTLE_SECONDS)

    def _settle(self, path: Path, seconds: float) -> None:
        """Wait for `path` to keep its size and mtime for `seconds`."""
        try:
            stat = path.stat()
        except OSError:
            self.settling.pop(path, None)
            return
        self.settling[path] = (stat.st_size, stat.st_mtime_ns, time.monotonic(), seconds)

    def _settled(self) -> Iterator[Path]:
        """The settling files that kept their size and mtime long enough (forgotten when gone)."""
        now = time.monotonic()
        for path, (size, mtime, since, seconds) in list(self.settling.items()):
            try:
                stat = path.stat()
            except OSError:
                del self.settling[path]
                continue
            if (stat.st_size, stat.st_mtime_ns) != (size, mtime):
                self.settling[path] = (stat.st_size, stat.st_mtime_ns, now, seconds)
            elif now - since >= seconds:
                del self.settling[path]
                yield path

    def _scan_all(self) -> Iterator[Path]:
        for folder in self.folders:
            yield from _files(folder, self.recursive)

    def _item(self, path: Path) -> InputItem | None:
        """The input of a file in a watched folder, or None for a file a watch ignores
        (hidden, not an image, in a sub-folder without --recursive, outside the folders)."""
        for folder in self.folders:
            try:
                relative = path.relative_to(folder)
            except ValueError:
                continue
            if not self.recursive and len(relative.parts) != 1:
                continue
            if any(part.startswith(".") for part in relative.parts) or not is_image_path(path):
                return None
            return InputItem(path, relative)
        return None


def _files(folder: Path, recursive: bool) -> Iterator[Path]:
    """The files of `folder` (and its sub-folders), sorted; hidden ones left out."""
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            if entry.is_file():
                yield Path(entry.path)
            elif recursive and entry.is_dir():
                yield from _files(Path(entry.path), True)
        except OSError:
            continue


class _Handler(FileSystemEventHandler):
    """watchdog's events, as (kind, path) on the watch's queue (called on watchdog's thread)."""

    _KINDS: ClassVar[dict[str, str]] = {
        "closed": "complete",
        "created": "created",
        "opened": "writing",
        "modified": "writing",
        "deleted": "deleted",
    }

    def __init__(self, events: queue.SimpleQueue[tuple[str, str]]) -> None:
        super().__init__()
        self.events = events

    def dispatch(self, event: FileSystemEvent) -> None:
        """Queue the events that say something about a file's completeness."""
        kind = event.event_type
        if event.is_directory:
            if kind in ("created", "moved"):
                self.events.put(("folder", _text(event.dest_path or event.src_path)))
            return
        if kind == "moved":
            self.events.put(("deleted", _text(event.src_path)))
            self.events.put(("complete", _text(event.dest_path)))
        elif kind in self._KINDS:
            self.events.put((self._KINDS[kind], _text(event.src_path)))


def _text(path: str | bytes) -> str:
    return os.fsdecode(path)
