"""`gccl watch DIR... --out OUT`: label what the folders hold, then each file that arrives or
changes, until stopped.

A file is taken once it is complete: on Linux when its writer closes it
(inotify's close-write, through watchdog) or when it is renamed or linked in
(moved-to, or created without being opened); elsewhere, and with --poll (on
network shares, whose writes raise no local events), once two looks a poll
interval apart found the same size, modification time and inode. It is taken
again whenever it changes after that (a new size, mtime or inode) and is
complete again: a file overwritten is labeled again and its outputs replaced
whole (those of pages it no longer has moved aside, as in any run), and one
that failed because it was caught while still being written is tried again
once its writer goes on. What the first look finds is skipped where its
outputs are current (as --skip-existing), so a restarted watch redoes nothing.
The watcher starts before the folders are scanned, so nothing that arrives
meanwhile is missed.

The folders are resolved once: a scan never enters a linked folder (nor a
folder twice: a bind mount of its own parent) and makes a folder it may not
read one failed input (once in a watch), and a watched folder that is
moved, replaced or deleted stops the watch with one line (exit 2), as --out
does. The watch runs in this process and holds the --out lock; it says once
on stderr what it watches, and ends at Ctrl-C (exit 130) or SIGTERM (by the
signal itself), summary.csv complete; summary.csv gets each row as its input
finishes.
"""

from __future__ import annotations

import os
import queue
import stat
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from ..config import Settings
from ..errors import UsageError
from ..io.inputs import InputItem, OutPlace, is_input_name, unreadable_folder, with_pages
from ..io.seen import Seen
from ..options import BY_NAME, NOT_FOR_A_WATCH
from .command import checked_out, run_source
from .interrupts import interruptible
from .records import Moved, Reporter, RunReport
from .sources import Arrival, windowed

#: --poll-interval's default, in seconds.
DEFAULT_POLL_SECONDS = 1.0
#: How long a file that appeared without being opened (renamed or linked in), or that
#: the first scan found freshly changed, must keep its size and mtime, in seconds.
SETTLE_SECONDS = 0.1
#: How often the watch makes sure its folders are still the ones it found, in seconds.
FOLDER_CHECK_SECONDS = 0.25
#: A file's version: (inode, size, mtime in ns); a file is taken again when it changes.
Version = tuple[int, int, int]


def run_watch(
    folders: Sequence[str],
    settings: Settings,
    reporter: Reporter,
    poll: bool = False,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
) -> RunReport:
    """Watch `folders` into --out until stopped; see the module docstring."""
    out = checked_out(settings)
    asked = {  # (a config file may set them; skip_existing is what a watch does anyway)
        "null_separated": settings.null_separated,
        "relative_to": settings.relative_to is not None,
        "processes": settings.processes not in ("auto", 1),
        "scheduler": settings.scheduler is not None,
    }
    for name, given in asked.items():
        if given:
            why = NOT_FOR_A_WATCH[name]
            raise UsageError(f"{BY_NAME[name].flag} means nothing to gccl watch ({why})")
    if not folders:
        raise UsageError("gccl watch needs at least one folder")
    place = OutPlace(out)
    roots = []
    for folder in folders:
        try:
            info = os.stat(folder)
        except OSError as error:
            raise UsageError(f"{folder} is not a folder ({error.strerror})") from None
        if not stat.S_ISDIR(info.st_mode):
            raise UsageError(f"{folder} is not a folder")
        place.check_root(Path(folder), settings.recursive)
        roots.append(_Root(Path(folder), (info.st_dev, info.st_ino)))
    source = WatchSource(
        roots,
        settings.recursive,
        settings.batch_window / 1000,
        poll,
        poll_seconds,
        reporter.notice,
        out,
        settings.volume,
    )
    return run_source(source, settings, reporter)


@dataclass(frozen=True)
class _Root:
    """A watched folder as the watch found it: its path and identity (device, inode)."""

    path: Path
    identity: tuple[int, int]


class WatchSource:
    """The files of the watched folders now, and each one that arrives or changes, once it
    is complete."""

    total: int | None = None

    def __init__(
        self,
        roots: list[_Root],
        recursive: bool,
        window_seconds: float,
        poll: bool,
        poll_seconds: float,
        notice: Callable[[str], None],
        out: Path,
        volume: bool = False,
    ) -> None:
        """volume: --volume (a multi-page TIFF is one z-stack: inputs.with_pages)."""
        self.volume = volume
        self.roots = roots
        self.recursive = recursive
        self.window_seconds = window_seconds
        self.poll = poll
        self.poll_seconds = poll_seconds
        self.notice = notice
        self.out = out
        self.events: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
        #: The version of each path taken, the last time it was (a watch has no end: on disk).
        self.taken = Seen(on_disk=True)
        #: Files waiting to be complete: path -> (version, unchanged since, how long).
        self.settling: dict[Path, tuple[Version, float, float]] = {}
        #: The files the first look found that are waiting to be complete (taken as resume).
        self.first_found: set[Path] = set()
        #: Folders the scans could not read, and why (each becomes one failed input)...
        self.refused: list[tuple[Path, OSError]] = []
        #: ... once in a watch.
        self.refused_said: set[Path] = set()
        self.next_scan = 0.0
        self.next_check = 0.0

    def untaken(self, taken: int) -> list[InputItem]:
        """Nothing: a watch takes files as they come."""
        return []

    def wake(self) -> None:
        """End a wait for file events (sources.Source.wake)."""
        self.events.put(("wake", ""))

    def items(self, tick: Callable[[], None]) -> Generator[Arrival, None, None]:
        """The files there now, then each one that arrives or changes, once complete; ends
        only by tick's Stop (or Moved when a watched folder is gone)."""
        observer = None if self.poll else self._observe()
        try:
            what = ", ".join(str(root.path) for root in self.roots)
            below = " and their sub-folders" if self.recursive else ""
            self.notice(f"watching {what}{below} into {self.out} (Ctrl-C to stop)")
            now = time.time()
            with interruptible():  # (a stop request ends a long first scan)
                found = list(self._scan_all())
            for path, version in found:
                if observer is not None and now - version[2] / 1e9 >= SETTLE_SECONDS:
                    yield from self._take_path(path, version, resume=True)
                else:  # polled, or freshly changed: taken once it holds
                    self.first_found.add(path)
                    self._settle(path, version, self.poll_seconds if self.poll else SETTLE_SECONDS)
            yield from self._refused_folders()
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
            for root in self.roots:
                observer.schedule(handler, str(root.path), recursive=self.recursive)
            observer.start()
        except OSError as error:  # e.g. inotify's watch limit
            self.notice(f"no file events ({error.strerror or error}); polling the folders instead")
            self.poll = True
            return None
        return observer

    def _take(self, timeout: float) -> list[InputItem]:
        """The files that became complete (new, or changed since taken), waiting up to
        `timeout` for events."""
        self._check_roots()
        if self.poll or not self.events.empty() or not self.settling:
            wait = max(0.0, timeout)
        else:
            wait = min(max(0.0, timeout), SETTLE_SECONDS / 2)
        if self.poll:
            wait = min(wait, max(0.0, self.next_scan - time.monotonic()))
        wait = min(wait, FOLDER_CHECK_SECONDS)
        try:
            event: tuple[str, str] | None = self.events.get(timeout=wait)
        except queue.Empty:
            event = None
        ready: list[Path] = []
        while event is not None:
            self._event(*event, ready)
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                event = None
        with interruptible():  # (a stop request ends a long scan)
            if self.poll and time.monotonic() >= self.next_scan:
                for path, version in self._scan_all():
                    held = self.settling.get(path)
                    if self._changed(path, version) and (held is None or held[0] != version):
                        self._settle(path, version, self.poll_seconds)
                self.next_scan = time.monotonic() + self.poll_seconds
            ready.extend(self._settled())
            items: list[InputItem] = []
            for path in ready:
                now = _version(path)
                if now is not None:
                    items.extend(self._take_path(path, now))
        return items + self._refused_folders()

    def _take_path(self, path: Path, version: Version, resume: bool = False) -> list[InputItem]:
        """The inputs of `path` (its pages, for a multi-page TIFF) when it is one the watch
        takes and it changed since it was last taken (recorded as taken now). `resume`: the
        first look found it (so does one that waited to be complete since then)."""
        if path in self.first_found:
            self.first_found.discard(path)
            resume = True
        item = self._item(path, resume)
        if item is None or not self._changed(path, version):
            return []
        self.taken.set(path, _text_of(version))
        return with_pages(item, self.volume)

    def _changed(self, path: Path, version: Version) -> bool:
        """Whether `path` has another version than the one last taken (or none was)."""
        return self.taken.get(path) != _text_of(version)

    def _check_roots(self) -> None:
        """Raise Moved when a watched folder is no longer the one the watch found."""
        now = time.monotonic()
        if now < self.next_check:
            return
        self.next_check = now + FOLDER_CHECK_SECONDS
        for root in self.roots:
            try:
                info = os.stat(root.path)
            except OSError:
                raise Moved(f"the watched folder {root.path} was moved or deleted") from None
            if (info.st_dev, info.st_ino) != root.identity:
                raise Moved(f"the watched folder {root.path} was moved or replaced")

    def _event(self, kind: str, where: str, ready: list[Path]) -> None:
        """One file event: complete, created (settles), being written, deleted, or a folder
        (a wake is none of them)."""
        path = Path(where)
        if kind == "complete":
            self.settling.pop(path, None)
            ready.append(path)
        elif kind == "created":
            version = _version(path)
            if version is not None:
                self._settle(path, version, SETTLE_SECONDS)
        elif kind in ("writing", "deleted"):  # a file being written: its close says when
            self.settling.pop(path, None)
            if kind == "deleted":
                self.first_found.discard(path)
        elif kind == "folder" and _a_real_folder(path):  # moved in: no events of its own
            with interruptible():
                for found, version in _files(path, True, set(), self.refused):
                    if self._changed(found, version):
                        self._settle(found, version, SETTLE_SECONDS)

    def _settle(self, path: Path, version: Version, seconds: float) -> None:
        """Wait for `path` to keep its version for `seconds`."""
        self.settling[path] = (version, time.monotonic(), seconds)

    def _settled(self) -> Iterator[Path]:
        """The settling files whose version held long enough (forgotten when gone)."""
        now = time.monotonic()
        for path, (version, since, seconds) in list(self.settling.items()):
            current = _version(path)
            if current is None:
                del self.settling[path]
                self.first_found.discard(path)
            elif current != version:
                self.settling[path] = (current, now, seconds)
            elif now - since >= seconds:
                del self.settling[path]
                yield path

    def _scan_all(self) -> Iterator[tuple[Path, Version]]:
        seen: set[tuple[int, int]] = set()
        for root in self.roots:
            yield from _files(root.path, self.recursive, seen, self.refused)

    def _refused_folders(self) -> list[InputItem]:
        """A failed input for each folder the scans could not read (a folder the user may
        not read: one line, as gccl label gives it), once in a watch."""
        items = []
        for folder, error in self.refused:
            roots = [root.path for root in self.roots if folder.is_relative_to(root.path)]
            if roots and folder not in self.refused_said:
                self.refused_said.add(folder)
                items.append(unreadable_folder(roots[0], folder, error))
        self.refused.clear()
        return items

    def _item(self, path: Path, resume: bool) -> InputItem | None:
        """The input of a file in a watched folder, or None for a file a watch ignores
        (hidden, not an image, in a sub-folder without --recursive, outside the folders)."""
        for root in self.roots:
            try:
                relative = path.relative_to(root.path)
            except ValueError:
                continue
            if not self.recursive and len(relative.parts) != 1:
                continue
            if any(part.startswith(".") for part in relative.parts) or not is_input_name(path):
                return None
            return InputItem(path, relative, resume=resume)
        return None


def _version(path: Path) -> Version | None:
    """The version of the regular file `path` now (a link to one counts), or None."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def _text_of(version: Version) -> str:
    inode, size, mtime = version
    return f"{inode}:{size}:{mtime}"


def _a_real_folder(path: Path) -> bool:
    """Whether `path` is a folder and not a link to one (a scan enters none)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _files(
    folder: Path,
    recursive: bool,
    seen: set[tuple[int, int]],
    refused: list[tuple[Path, OSError]],
) -> Iterator[tuple[Path, Version]]:
    """The files of `folder` (and its sub-folders) and their versions, sorted; hidden ones
    left out, linked folders not entered, no folder entered twice (`seen`: their identities),
    a folder that exists but cannot be read added to `refused` with the reason."""
    try:
        info = os.stat(folder)
    except OSError:  # (gone meanwhile)
        return
    if (info.st_dev, info.st_ino) in seen:
        return
    seen.add((info.st_dev, info.st_ino))
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except FileNotFoundError:
        return
    except OSError as error:
        refused.append((folder, error))
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            if recursive and entry.is_dir(follow_symlinks=False):
                yield from _files(Path(entry.path), True, seen, refused)
            elif entry.is_file():
                version = _version(Path(entry.path))
                if version is not None:
                    yield Path(entry.path), version
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
