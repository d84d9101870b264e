"""One `gccl label` run: inputs -> admission -> an executor that labels -> summary.csv.

Each input ends as one record (a summary.csv row): ok, skipped, failed, or
not-run when the run stopped early (--fail-fast, Ctrl-C, SIGTERM, --out moved
away). The executor is this process (local.py), local worker processes
(processes.py) or a Dask cluster (cluster.py); this process opens --out once,
keeps the lock, the record of made files, admission (admission.py decides),
progress, stopping (stops.py) and the summary.
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
from typing import Any, Protocol

from ..backends import make_backend
from ..backends.base import Backend, usable_cores
from ..config import Settings
from ..errors import GcclError, InputError, UsageError
from ..io.decode import IMAGE_SUFFIXES
from ..io.inputs import InputItem, OutPlace, expand, passed_over_notice
from ..io.lock import OutputLock
from ..io.made import MadeFiles, move_aside
from ..io.out_dir import OutDir, kind_of, not_made_here
from ..io.output_paths import (
    GCCL_DIR,
    LABEL_ENDINGS,
    LOCK_NAME,
    RECORD_NAME,
    RUN_RECORD_NAME,
    SUMMARY_NAME,
    OutputPaths,
)
from ..io.owner import content_at, file_identity
from ..io.seen import Seen
from .admission import admission, lost_page_outputs, made_here, outputs_current
from .chunked import run_chunked, zarr_specs
from .context import RunContext
from .freshness import RunRecord
from .local import LocalRun
from .records import Admitted, FailFast, Moved, Outcomes, Record, Reporter, RunReport, Stop
from .sources import Arrival, ListSource, Source
from .stops import StopRequests
from .stream import StdinSource
from .summary import Summary

NO_IMAGES = f"no images found in the inputs ({', '.join(IMAGE_SUFFIXES)})"


class Executor(Protocol):
    """Where admitted records are labeled: this process, worker processes (processes.py) or a
    Dask cluster (cluster.py)."""

    def label(self, admitted: Iterable[Admitted | None], run: RunContext) -> None:
        """Label, write and finish every admitted record into `run.out` (whose record of made
        files is `run.made`); `run.check_stop` raises to end early.

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

    def label(self, admitted: Iterable[Admitted | None], run: RunContext) -> None:
        LocalRun(
            run.settings,
            self.backend,
            run.outcomes,
            self.workers,
            run.check_stop,
            self.wake,
            run.out,
            run.made,
            True,
        ).work(admitted)

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
            settings.volume,
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
    with OutputLock(out) as lock, StopRequests(out) as stop:
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
                        RunContext(settings, outcomes, stop.check, out, made),
                    )
            except FailFast:
                report.failed_fast = True
            except Moved as moved:
                report.stopped_by = str(moved)
            except (KeyboardInterrupt, Stop):
                report.interrupted = True
                report.signal = stop.signal or signal.SIGINT
            stop.honour(report)
            _finish(report, summary, run_record, source, executor, settings, outcomes, out, made)
            stop.honour(report)
        finally:
            try:
                made.close(settings.fsync)
            except OSError as error:  # a full disk: the record's path named, as every output's
                if not report.stopped_by:
                    record = out.root / GCCL_DIR / RECORD_NAME
                    raise UsageError(f"cannot write {record} ({error.strerror or error})") from None


def _finish(
    report: RunReport,
    summary: Summary,
    run_record: RunRecord,
    source: Source,
    executor: Executor,
    settings: Settings,
    outcomes: Outcomes,
    out: OutDir,
    made: MadeFiles,
) -> None:
    """The end of a run, however it stopped: summary.csv, the run record."""
    reporter = outcomes.reporter
    if not isinstance(executor, _Local):  # a worker killed mid-write left its temporary
        removed = out.remove_temporaries()  # (a live writer's stays: its flock)
        if removed:
            reporter.notice(f"removed {removed} partial file(s) left by a worker that died")
        made.refresh()  # the files the workers made, for the failed inputs' outputs
    stopped = report.stopped_by or ("interrupted" if report.interrupted else "")
    stopped = stopped or (FailFast.MESSAGE if report.failed_fast else "")
    if stopped:
        _finished_as_it_stopped(summary, settings, outcomes, run_record, out, made)
    try:
        report.records = summary.close(source.untaken(summary.taken_count), stopped)
        report.counts = summary.counts
        run_record.write(_backend_name(executor, settings), finished=True)
    except GcclError:
        if not report.stopped_by:  # (an --out deleted takes its summary with it)
            raise
    report.summary = summary.path


def _finished_as_it_stopped(
    summary: Summary,
    settings: Settings,
    outcomes: Outcomes,
    run_record: RunRecord,
    out: OutDir,
    made: MadeFiles,
) -> None:
    """After a stop, finish as ok each record not finished whose outputs this run made whole
    for its input as it is (a worker ended its task as the run stopped, or its answer never
    came): the summary and --json tell every input whose outputs are complete."""
    finishing = Outcomes(outcomes.reporter, False, outcomes.summary)
    for record, paths in summary.pending():
        try:
            source = os.stat(record.item.path)
        except (OSError, ValueError):
            continue
        stats = made_here(out, made, paths.stats)
        if stats is None or stats.st_mtime_ns < run_record.now:
            continue  # (none, or an earlier run's: this one did not finish it)
        if not outputs_current(paths, settings, out, made, run_record, record.item, source):
            continue
        labels = next(
            paths.labels(kind) for kind in LABEL_ENDINGS if made_here(out, made, paths.labels(kind))
        )
        record.outputs = {"labels": str(labels)}
        record.outputs.update({"preview": str(paths.preview)} if settings.preview else {})
        record.outputs.update({"polygons": str(paths.polygons)} if settings.polygons else {})
        record.outputs["stats"] = str(paths.stats)
        if record.kept is None:
            summary.carry_numbers(record, paths)
        record.status = "ok"
        finishing.finished(record)


def _check_own_files(out: OutDir, made: MadeFiles) -> None:
    """Refuse a run whose summary.csv or run record would replace what gccl did not make
    (a file gccl made that was edited since, even in place, included)."""
    for name in (SUMMARY_NAME, RUN_RECORD_NAME):
        info = out.lstat(out.root / name)
        if info is None:
            continue
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{out.root / name} is {kind_of(info.st_mode)}; move it")
        if not made.ours(name, file_identity(info), content_at(name, out.fd)):
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
    params = settings.params.at_rank(2)  # auto labels images on the CPU while CUDA starts
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
    the others are finished here (admission.py). A source's pauses (None)
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
