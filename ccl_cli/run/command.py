"""One `gccl label` run: inputs -> admission -> an executor that labels -> summary.csv.

Each input ends as one record (a summary.csv row): ok, skipped, failed, or
not-run when the run stopped early (--fail-fast, Ctrl-C, SIGTERM, --out moved
away). The executor is this process (local.py), local worker processes
(processes.py) or a Dask cluster (cluster.py); this process opens --out once,
keeps the lock, the record of made files, admission, progress, stopping and
the summary.

Admission asks, before an input is decoded, what its outputs would replace:
an input that is itself a file gccl made in --out is skipped (outputs are
never inputs), and one whose outputs' paths hold a link, a folder or a file
gccl did not make there fails with that reason (the write checks again, at
the moment it replaces: io/out_dir.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from ..backends import make_backend
from ..backends.base import Backend, usable_cores
from ..config import Settings
from ..errors import GcclError, InputError, UsageError
from ..io.decode import IMAGE_SUFFIXES, unreadable
from ..io.inputs import InputItem, OutPlace, expand, passed_over_notice
from ..io.lock import OutputLock
from ..io.made import MadeFiles, in_the_way, lost_pages, move_aside
from ..io.out_dir import OutDir, file_identity, kind_of, not_made_here
from ..io.output_paths import (
    GCCL_DIR,
    LABEL_ENDINGS,
    LOCK_NAME,
    RECORD_NAME,
    RUN_RECORD_NAME,
    SUMMARY_NAME,
    OutputPaths,
    output_paths,
)
from ..io.seen import Seen
from .chunked import run_chunked, zarr_specs
from .freshness import RunRecord
from .interrupts import cut_short_here
from .local import LocalRun, label_file_format
from .records import Admitted, FailFast, Moved, Outcomes, Record, Reporter, RunReport, Stop
from .sources import Arrival, ListSource, Source
from .stream import StdinSource
from .summary import Summary

#: How often a run makes sure --out is still where it found it, in seconds.
OUT_CHECK_SECONDS = 0.25
NO_IMAGES = f"no images found in the inputs ({', '.join(IMAGE_SUFFIXES)})"


class Executor(Protocol):
    """Where admitted records are labeled: this process, worker processes (processes.py) or a
    Dask cluster (cluster.py)."""

    def label(
        self,
        admitted: Iterable[Admitted | None],
        settings: Settings,
        outcomes: Outcomes,
        check_stop: Callable[[], None],
        out: OutDir,
        made: MadeFiles,
    ) -> None:
        """Label, write and finish every admitted record into `out` (whose record of made
        files is `made`); `check_stop` raises to end early.

        A None says the input paused: finish what came before it (sources.py).
        """

    def close(self) -> None:
        """Release what the executor holds."""


@dataclass
class _Local:
    """Labels in this process with one backend and a pool of `workers` threads."""

    backend: Backend
    workers: int
    #: The source's wake (sources.Source.wake), for inputs that arrive over time.
    wake: Callable[[], None]

    def label(
        self,
        admitted: Iterable[Admitted | None],
        settings: Settings,
        outcomes: Outcomes,
        check_stop: Callable[[], None],
        out: OutDir,
        made: MadeFiles,
    ) -> None:
        run = LocalRun(
            settings, self.backend, outcomes, self.workers, check_stop, self.wake, out, made, True
        )
        run.work(admitted)

    def close(self) -> None:
        pass


def run_label(
    specs: Sequence[str],
    settings: Settings,
    reporter: Reporter,
    stdin: Any = None,
) -> RunReport:
    """Label every input of `specs` as `settings` say; see the module docstring.

    `-` streams stdin's paths (stream.py) when the run labels in this process;
    for worker processes or a cluster stdin is read to its end first.
    """
    if zarr_specs(specs):  # chunked volumes: labeled in chunks on Dask (chunked.py)
        return run_chunked(specs, settings, reporter)
    place = OutPlace(checked_out(settings))
    source: Source
    if "-" in specs and streams(settings):
        source = StdinSource(specs, settings, settings.batch_window / 1000, place, stdin)
    else:
        passed_over: list[Path] = []
        items = expand(
            specs,
            settings.recursive,
            stdin,
            settings.null_separated,
            settings.relative_to,
            place,
            passed_over,
        )
        if passed_over:
            reporter.notice(passed_over_notice(passed_over))
        if all(item.empty for item in items):
            reporter.notice(NO_IMAGES)
        source = ListSource(items)
    return run_source(source, settings, reporter)


def checked_out(settings: Settings) -> Path:
    """The --out folder, or why there is none."""
    if settings.out is None:
        raise UsageError("--out is required: the folder that receives the outputs")
    return settings.out


def streams(settings: Settings) -> bool:
    """Whether inputs that arrive over time are labeled as they come: in this process only."""
    return settings.scheduler is None and settings.processes in ("auto", 1)


def run_source(source: Source, settings: Settings, reporter: Reporter) -> RunReport:
    """Label the inputs of `source` into --out: the lock, the executor, summary.csv."""
    out_path = checked_out(settings)
    executor = _executor(settings, reporter, source.total, source.wake)
    started = time.perf_counter()
    report = RunReport()
    made_out = not os.path.lexists(out_path)
    with closing(executor):
        out = OutDir.open(out_path)  # the run's one resolution of --out
        try:
            _run(executor, source, report, settings, reporter, out)
        except GcclError:  # e.g. a device found unusable once the workers had started
            if made_out:
                _remove_unused(out)
            raise
        finally:
            out.close()
    if report.stopped_by:
        raise FolderMoved(f"{report.stopped_by}; stopped")
    if source.total is None and report.count("no-images") == report.total:
        reporter.notice(NO_IMAGES)
    report.seconds = time.perf_counter() - started
    return report


class FolderMoved(UsageError):
    """A folder the run works in (--out, a watched folder) was moved, replaced or deleted
    while the run went on: it stopped."""


def _run(
    executor: Executor,
    source: Source,
    report: RunReport,
    settings: Settings,
    reporter: Reporter,
    out: OutDir,
) -> None:
    """The locked part of run_label: label the records, write summary.csv."""
    with OutputLock(out) as lock, _StopRequests(out) as stop:
        made = MadeFiles(out, on_disk=source.total is None)
        try:
            _check_own_files(out, made)
            removed = out.remove_temporaries()
            if removed:
                reporter.notice(f"removed {removed} partial file(s) left by an interrupted run")
            run_record = RunRecord(out, settings, made, lock.taken_ns)
            run_record.write(_backend_name(executor, settings), finished=False)
            summary = Summary(
                out, made, source.total is None, reporter, carry=settings.skip_existing
            )
            reporter.start(source.total)
            outcomes = Outcomes(reporter, settings.fail_fast, summary.finished)
            try:
                with closing(source.items(stop.check)) as items:
                    executor.label(
                        _admitted(items, summary, settings, outcomes, stop.check, run_record, out),
                        settings,
                        outcomes,
                        stop.check,
                        out,
                        made,
                    )
            except FailFast:
                report.failed_fast = True
            except Moved as moved:
                report.stopped_by = str(moved)
            except (KeyboardInterrupt, Stop):
                report.interrupted = True
                report.signal = stop.signal or signal.SIGINT
            stop.honour(report)
            _finish(report, summary, run_record, source, executor, settings, reporter, out, made)
            stop.honour(report)
        finally:
            try:
                made.close(settings.fsync)
            except OSError:
                if not report.stopped_by:
                    raise


def _finish(
    report: RunReport,
    summary: Summary,
    run_record: RunRecord,
    source: Source,
    executor: Executor,
    settings: Settings,
    reporter: Reporter,
    out: OutDir,
    made: MadeFiles,
) -> None:
    """The end of a run, however it stopped: summary.csv, the run record."""
    if not isinstance(executor, _Local):  # a worker killed mid-write left its temporary
        removed = out.remove_temporaries()  # (a live writer's stays: its flock)
        if removed:
            reporter.notice(f"removed {removed} partial file(s) left by a worker that died")
        made.refresh()  # the files the workers made, for the failed inputs' outputs
    stopped = report.stopped_by or ("interrupted" if report.interrupted else "")
    stopped = stopped or ("stopped after a failure (--fail-fast)" if report.failed_fast else "")
    try:
        report.records = summary.close(source.untaken(summary.taken_count), stopped)
        report.counts = summary.counts
        run_record.write(_backend_name(executor, settings), finished=True)
    except GcclError:
        if not report.stopped_by:  # (an --out deleted takes its summary with it)
            raise
    report.summary = summary.path


def _check_own_files(out: OutDir, made: MadeFiles) -> None:
    """Refuse a run whose summary.csv or run record would replace what gccl did not make."""
    for name in (SUMMARY_NAME, RUN_RECORD_NAME):
        info = out.lstat(out.root / name)
        if info is None:
            continue
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{out.root / name} is {kind_of(info.st_mode)}; move it")
        if not made.ours(name, file_identity(info)):
            raise UsageError(not_made_here(out.root / name))


def _backend_name(executor: Executor, settings: Settings) -> str:
    """What labels, for the run record: cpu or cuda, else the executor that picks per worker."""
    if isinstance(executor, _Local):
        return executor.backend.name
    kind = "dask cluster" if settings.scheduler else "worker processes"
    return f"{kind}, --device {settings.device}"


def _remove_unused(out: OutDir) -> None:
    """Remove an --out folder this run made, if it holds nothing but what gccl keeps there
    (its own folder, the run record)."""
    with contextlib.suppress(OSError):
        if not set(os.listdir(out.fd)) <= {GCCL_DIR, RUN_RECORD_NAME}:
            return
        folder = out.gccl_folder()
        try:
            for name in os.listdir(folder):
                if name == LOCK_NAME or name.startswith(RECORD_NAME):
                    os.unlink(name, dir_fd=folder)
        finally:
            os.close(folder)
        os.rmdir(GCCL_DIR, dir_fd=out.fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(RUN_RECORD_NAME, dir_fd=out.fd)
        if os.stat(out.root).st_ino == out.identity[1]:
            os.rmdir(out.root)


def _executor(
    settings: Settings, reporter: Reporter, inputs: int | None, wake: Callable[[], None]
) -> Executor:
    """The cluster at --scheduler, else worker processes (--processes) on the CPU, else
    this process (`wake`: the source's, which a run in this process calls when a step
    finishes).

    Made before the lock, so that an unusable device or scheduler is exit 2
    with nothing written.
    """
    if settings.scheduler:
        from .cluster import Cluster

        return Cluster(settings.scheduler)
    from .processes import LocalProcesses, fork_server, process_count

    cores = usable_cores()
    workers = settings.workers or cores
    gpu = settings.device.startswith("cuda") or settings.devices is not None
    count = process_count(settings.processes, 1 if inputs is None else inputs, cores, gpu)
    if count > 1 and inputs is not None:
        return LocalProcesses(count, settings, fork_server(), inputs)
    params = settings.label_params()  # auto labels on the CPU while CUDA starts
    backend = make_backend(settings.device, workers, reporter.notice, settings.devices, params)
    return _Local(backend, workers, wake)


def _admitted(
    items: Iterable[Arrival],
    summary: Summary,
    settings: Settings,
    outcomes: Outcomes,
    check_stop: Callable[[], None],
    run_record: RunRecord,
    out: OutDir,
) -> Iterator[Admitted | None]:
    """The records of `items` (taken by `summary`) that need work, with their outputs;
    the others are finished here (see the module docstring). A source's pauses (None)
    pass through.

    Lazy, so that a local run starts decoding before the last input is admitted.
    """
    claimed = Seen(on_disk=summary.appends)  # label image -> the input that writes it
    for item in items:
        if item is None:
            yield None
            continue
        check_stop()
        record = Record(item)
        summary.taken(record)
        try:
            paths = _admit(record, summary, settings, outcomes, run_record, out, claimed)
        except (OSError, InputError) as error:  # a name too long, a link on the way
            if record.status == "pending":
                reason = error.strerror if isinstance(error, OSError) else str(error)
                outcomes.fail(record, reason or str(error))
            continue
        if paths is not None:
            yield record, paths


@dataclass(frozen=True)
class Admission:
    """What becomes of one input before it is read (admission).

    status: "label", or its record's final status: no-images, skipped, failed.
    paths: its outputs (where it writes, or may have written before).
    clears: whether a failure of the input moves its earlier outputs aside.
    current: skipped because its outputs are current (--skip-existing).
    """

    status: str
    message: str = ""
    paths: OutputPaths | None = None
    clears: bool = False
    current: bool = False


def admission(
    item: InputItem,
    settings: Settings,
    out: OutDir | None,
    made: MadeFiles | None,
    run_record: RunRecord | None,
    claimed: Seen,
) -> Admission:
    """Whether `item` is labeled, and where its outputs go; else what becomes of it and why
    (the module docstring). `claimed`: the label images the inputs before it claimed. `out`,
    `made`, `run_record`: --out as it is (None where it does not exist yet: nothing there is
    in the way, nothing is current). Decides only: gccl label --dry-run asks it too."""
    assert settings.out is not None
    if item.empty or item.duplicate:
        message = item.empty or f"listed again (labeled once, as {item.duplicate})"
        return Admission("no-images" if item.empty else "skipped", message)
    paths = output_paths(settings.out, item.relative)
    reserved = _reserved(item.relative)
    if reserved:
        return Admission("failed", reserved)
    if item.problem:
        # an unreadable folder has no outputs, nor has a line that names no file
        named = bool(item.relative.name) and not os.path.isdir(item.path)
        clears = named and paths.labels_png not in claimed
        return Admission("failed", item.problem, paths, clears)
    try:
        source = os.stat(item.path)
    except OSError:
        source = None  # (reading it says why)
    if source is not None and made is not None and made.is_made(source):
        return Admission(
            "skipped", f"a file gccl made in --out {settings.out}: outputs are never inputs"
        )
    first = claimed.first(paths.labels_png, _claim(item))
    if first is not None and first != _claim(item):
        return Admission("failed", _collision(item, first))
    if out is not None and made is not None:
        problem = in_the_way(out, made, _written(paths, settings))
        if problem:
            return Admission("failed", problem, paths, clears=True)
        if (
            (settings.skip_existing or item.resume)
            and source is not None
            and run_record is not None
            and _current(paths, settings, out, made, run_record, source)
        ):
            message = "outputs are current (--skip-existing)"
            return Admission("skipped", message, paths, clears=True, current=True)
    return Admission("label", "", paths, clears=True)


def _admit(
    record: Record,
    summary: Summary,
    settings: Settings,
    outcomes: Outcomes,
    run_record: RunRecord,
    out: OutDir,
    claimed: Seen,
) -> OutputPaths | None:
    """The outputs of `record` when it needs work; else None, the record finished here."""
    _retire_lost_pages(record.item, out, summary.made, outcomes.reporter)
    decided = admission(record.item, settings, out, summary.made, run_record, claimed)
    if decided.clears and decided.paths is not None:
        summary.may_write(record, decided.paths)
    if decided.status == "label":
        return decided.paths
    if decided.status == "failed":
        outcomes.fail(record, decided.message)
        return None
    record.status, record.message = decided.status, decided.message
    if decided.current and decided.paths is not None:
        summary.carry_numbers(record, decided.paths)
    outcomes.finished(record)
    return None


def lost_page_outputs(item: InputItem, out: OutDir, made: MadeFiles) -> list[Path]:
    """The outputs gccl made for pages `item`'s file no longer has (io/made.lost_pages), asked
    at its first input (its first page, or the file of one image). Decides only: gccl label
    --dry-run asks it too."""
    if item.page not in (None, 0) or item.empty or item.duplicate or not item.relative.name:
        return []
    return lost_pages(out, made, item.source[0], item.pages)


def _retire_lost_pages(item: InputItem, out: OutDir, made: MadeFiles, reporter: Reporter) -> None:
    """Move aside (as a failure does) what gccl made for pages `item`'s file no longer has,
    and say on stderr where it went and what had to stay."""
    lost = lost_page_outputs(item, out, made)
    if not lost:
        return
    moved, stayed = [], []
    for path in lost:
        try:
            renamed = move_aside(out, made, [path])
        except (OSError, InputError):  # (a folder on the way gone)
            renamed = []
        if renamed:
            moved.append(out.key(path.with_name(renamed[0])))
        else:
            stayed.append(out.key(path))
    said = f"{item.path} changed its pages: the outputs made for those it no longer has"
    if moved:
        said += f" were kept as {', '.join(moved)}"
    if stayed:
        said += f"{'; ' if moved else ' '}stay as they are where a file gccl did not make "
        said += f"holds their stale name: {', '.join(stayed)}"
    reporter.notice(said)


def _claim(item: InputItem) -> str:
    """What a run keeps of the input that claims an output: its folder and how it is shown."""
    return f"{os.path.dirname(os.path.abspath(item.path))}\0{item.display}"


def _collision(item: InputItem, claim: str) -> str:
    """Why `item` is not labeled, its outputs being those of the input of `claim` (_claim):
    what is wrong with the file itself where something is (a format gccl does not read hides
    behind no collision), else the collision and the hint that applies."""
    problem = unreadable(item.path)
    if problem:
        return problem
    folder, _, first = claim.partition("\0")
    if folder == os.path.dirname(os.path.abspath(item.path)):
        hint = (
            "outputs are named after the file without its last suffix: rename one, or label "
            "it into another --out"
        )
    else:  # named files from two folders, each at the top of --out
        hint = "--relative-to keeps their folders apart"
    return f"its outputs would overwrite those of {first} ({hint})"


def _current(
    paths: OutputPaths,
    settings: Settings,
    out: OutDir,
    made: MadeFiles,
    run_record: RunRecord,
    source: os.stat_result,
) -> bool:
    """Whether gccl made every output of the input at `paths` (a label image of any format)
    after the input (`source`) last changed, with these options (--skip-existing)."""
    stats = _made_here(out, made, paths.stats)
    if stats is None or not run_record.current(stats.st_mtime_ns, source.st_mtime_ns):
        return False
    if not any(_made_here(out, made, paths.labels(kind)) for kind in LABEL_ENDINGS):
        return False
    extras = [*([paths.preview] if settings.preview else [])]
    extras += [paths.polygons] if settings.polygons else []
    return all(_made_here(out, made, path) for path in extras)


def _written(paths: OutputPaths, settings: Settings) -> list[Path]:
    """The files an input writes, as admission checks them: its label image (a 16-bit PNG
    unless --label-format says otherwise: auto's TIFF for more labels is checked as it is
    written), its statistics, and with the options its preview and outlines."""
    labels = paths.labels(label_file_format(settings.label_format, 0))
    return [
        labels,
        paths.stats,
        *([paths.preview] if settings.preview else []),
        *([paths.polygons] if settings.polygons else []),
    ]


def _made_here(out: OutDir, made: MadeFiles, path: Path) -> os.stat_result | None:
    """What is at `path` when it is a file gccl made there, else None."""
    info = out.lstat(path)
    if info is None or not stat.S_ISREG(info.st_mode):
        return None
    return info if made.ours(out.key(path), file_identity(info)) else None


def _reserved(relative: Path) -> str:
    """Why outputs mirrored at `relative` may not be written: their folder would take the
    name of a file or folder gccl keeps in --out ("" when it would not)."""
    if len(relative.parts) > 1 and relative.parts[0] in (SUMMARY_NAME, RUN_RECORD_NAME, GCCL_DIR):
        return f"its outputs would go into a folder named {relative.parts[0]} in --out"
    return ""


class _StopRequests:
    """Ctrl-C and SIGTERM (cron's timeout, kill) ask the run to stop at its next safe point,
    and so does an --out that is no longer where the run found it.

    The handlers only set a flag, which the run checks between steps, so no
    exception lands inside a half-done step (a lock, a queue, a file write);
    only a step marked interruptible (interrupts.py) ends at once. A second
    Ctrl-C stops at once. --out is looked at every OUT_CHECK_SECONDS.
    """

    _SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, out: OutDir) -> None:
        self.out = out
        self.requested = False
        #: The signal that asked for the stop (0 before one did).
        self.signal = 0
        self._previous: dict[int, Any] = {}
        self._next_look = 0.0

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        self.signal = self.signal or signum
        if cut_short_here():  # a read or write in this thread (interrupts.py)
            raise Stop()

    def honour(self, report: RunReport) -> None:
        """Mark `report` interrupted by a stop requested that no check raised: one that
        came as the inputs ended (a stream's writer stopped with gccl closes stdin) or while
        the summary was written. The run then ends by that signal, not as a finished run."""
        if self.requested and not (report.interrupted or report.stopped_by):
            report.interrupted = True
            report.signal = self.signal

    def check(self) -> None:
        """Raise Stop if a stop was requested, Moved if --out is gone."""
        if self.requested:
            raise Stop()
        now = time.monotonic()
        if now >= self._next_look:
            self._next_look = now + OUT_CHECK_SECONDS
            moved = self.out.moved()
            if moved:
                raise Moved(moved)

    def __enter__(self) -> _StopRequests:
        try:
            for signum in self._SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        except ValueError:  # not the main thread (an embedding program): leave signals alone
            pass
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
