"""One `gccl label` run: inputs -> admission -> an executor that labels -> summary.csv.

Each input ends as one record (a summary.csv row): ok, skipped, failed, or
not-run when the run stopped early (--fail-fast, Ctrl-C, SIGTERM). The executor
is this process (local.py), local worker processes (processes.py) or a Dask
cluster (cluster.py); this process keeps the lock, admission, progress,
stopping and the summary.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from ..backends import cpu_only, make_backend
from ..backends.base import Backend, usable_cores
from ..config import Settings
from ..errors import (
    GcclError,
    UsageError,
)
from ..io.decode import IMAGE_SUFFIXES
from ..io.inputs import OutPlace, RunInputs, expand, passed_over_notice
from ..io.lock import OutputLock
from ..io.out_dir import OutDir
from ..io.output_paths import (
    LOCK_NAME,
    RUN_RECORD_NAME,
    SUMMARY_NAME,
    OutputPaths,
    output_paths,
)
from ..io.seen import Seen
from .freshness import RunRecord
from .interrupts import cut_short_here
from .local import LocalRun
from .records import Admitted, FailFast, Outcomes, Record, Reporter, RunReport, Stop
from .sources import Arrival, ListSource, Source
from .stream import StdinSource
from .summary import Summary

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
    ) -> None:
        """Label, write and finish every admitted record; `check_stop` raises to end early.

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
    ) -> None:
        run = LocalRun(settings, self.backend, outcomes, self.workers, check_stop, self.wake)
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
    out = checked_out(settings)
    executor = _executor(settings, reporter, source.total, source.wake)
    started = time.perf_counter()
    report = RunReport()
    made_out = not out.exists()
    try:
        _run(executor, source, report, settings, reporter)
    except GcclError:  # e.g. a device found unusable once the workers had started
        if made_out:
            _remove_unused(out)
        raise
    if source.total is None and report.count("no-images") == report.total:
        reporter.notice(NO_IMAGES)
    report.seconds = time.perf_counter() - started
    return report


def _run(
    executor: Executor,
    source: Source,
    report: RunReport,
    settings: Settings,
    reporter: Reporter,
) -> None:
    """The locked part of run_label: label the records, write summary.csv."""
    assert settings.out is not None
    out = settings.out
    with closing(executor), OutputLock(out), _StopRequests() as stop:
        found = source.found if isinstance(source, ListSource) else None
        inputs = RunInputs((item.path for item in found or []), found is not None)
        with OutDir(out) as folder:
            folder.check_summary(inputs.identities)
            removed = folder.remove_temporaries()
        if removed:
            reporter.notice(f"removed {removed} partial file(s) left by an interrupted run")
        run_record = RunRecord(out, settings)
        run_record.write(_backend_name(executor, settings), finished=False)
        summary = Summary(out, run_record, source.total is None, reporter)
        reporter.start(source.total)
        outcomes = Outcomes(reporter, settings.fail_fast, summary.finished)
        try:
            with closing(source.items(stop.check)) as items:
                executor.label(
                    _admitted(items, summary, settings, outcomes, stop.check, run_record, inputs),
                    settings,
                    outcomes,
                    stop.check,
                )
        except FailFast:
            pass
        except (KeyboardInterrupt, Stop):
            report.interrupted = True
        if not isinstance(executor, _Local):  # a worker killed mid-write left its temporary
            with OutDir(out) as folder:
                removed = folder.remove_temporaries()  # (a live writer's stays: its flock)
            if removed:
                reporter.notice(f"removed {removed} partial file(s) left by a worker that died")
        report.records = summary.close(source.untaken(summary.taken_count), report.interrupted)
        report.counts = summary.counts
        run_record.write(_backend_name(executor, settings), finished=True)
        report.summary = summary.path


def _backend_name(executor: Executor, settings: Settings) -> str:
    """What labels, for the run record: cpu or cuda, else the executor that picks per worker."""
    if isinstance(executor, _Local):
        return executor.backend.name
    kind = "dask cluster" if settings.scheduler else "worker processes"
    return f"{kind}, --device {settings.device}"


def _remove_unused(out: Path) -> None:
    """Remove an --out folder this run made, if it holds nothing but the lock and run record."""
    if os.path.isdir(out) and set(os.listdir(out)) <= {LOCK_NAME, RUN_RECORD_NAME}:
        (out / LOCK_NAME).unlink(missing_ok=True)
        (out / RUN_RECORD_NAME).unlink(missing_ok=True)
        out.rmdir()


def _executor(
    settings: Settings, reporter: Reporter, inputs: int | None, wake: Callable[[], None]
) -> Executor:
    """The cluster at --scheduler, else worker processes (--processes), else this process
    (`wake`: the source's, which a run in this process calls when a step finishes).

    Made before the lock, so that an unusable device or scheduler is exit 2
    with nothing written. Worker processes make this process's backend while
    their workers start (LocalProcesses): an unusable device then ends the
    run with exit 2 before any input is labeled (run_label removes the
    --out folder it made).
    """
    if settings.scheduler:
        from .cluster import Cluster

        return Cluster(settings.scheduler)
    from .fork_server import start_fork_server
    from .processes import SERVICE_MODULE, LocalProcesses, process_count

    cores = usable_cores()
    workers = settings.workers or cores
    count = process_count(settings.processes, 1 if inputs is None else inputs, cores)
    if count > 1 and inputs is not None:
        served = () if cpu_only(settings.device, settings.devices) else (SERVICE_MODULE,)
        context = start_fork_server(served)
        return LocalProcesses(count, settings, context, inputs, reporter.notice)
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
    inputs: RunInputs,
) -> Iterator[Admitted | None]:
    """The records of `items` (taken by `summary`) that need work, with their outputs;
    the others are finished here. A source's pauses (None) pass through.

    An input whose outputs would replace one of the run's `inputs` (the files
    found at the start, and every input that arrived since) fails, and so
    does one whose outputs would take the summary's or the lock's name; their
    outputs are never cleared. Neither are outputs another input claimed.

    Lazy, so that a local run starts decoding before the last input is admitted.
    """
    assert settings.out is not None
    claimed = Seen(on_disk=summary.appends)  # label image -> the input that writes it
    for item in items:
        if item is None:
            yield None
            continue
        check_stop()
        record = Record(item)
        summary.taken(record)
        try:
            paths = _admit(record, summary, settings, outcomes, run_record, inputs, claimed)
        except OSError as error:  # a name too long for the file system, a folder unreadable
            if record.status == "pending":
                outcomes.fail(record, error.strerror or str(error))
            continue
        if paths is not None:
            yield record, paths


def _admit(
    record: Record,
    summary: Summary,
    settings: Settings,
    outcomes: Outcomes,
    run_record: RunRecord,
    inputs: RunInputs,
    claimed: Seen,
) -> OutputPaths | None:
    """The outputs of `record` when it needs work; else None, the record finished here."""
    assert settings.out is not None
    item = record.item
    if item.empty or item.duplicate:
        record.status = "no-images" if item.empty else "skipped"
        record.message = item.empty or f"listed again (labeled once, as {item.duplicate})"
        outcomes.finished(record)
        return None
    paths = output_paths(settings.out, item.relative)
    inputs.add(item.path)
    taken = _input_among(paths, inputs) or _reserved(item.relative)
    if taken:
        outcomes.fail(record, taken)
        return None
    if item.problem:
        # an unreadable folder has no outputs
        if not os.path.isdir(item.path) and paths.labels_png not in claimed:
            summary.may_write(record, paths)
        outcomes.fail(record, item.problem)
        return None
    first = claimed.first(paths.labels_png, item.display)
    if first is not None and first != item.display:
        hint = "" if settings.relative_to else " (--relative-to keeps their folders apart)"
        outcomes.fail(record, f"its outputs would overwrite those of {first}{hint}")
        return None
    summary.may_write(record, paths)
    if (
        settings.skip_existing
        and paths.complete(settings.preview, settings.polygons)
        and run_record.current(item, paths)
    ):
        record.status = "skipped"
        record.message = "outputs are current (--skip-existing)"
        outcomes.finished(record)
        return None
    return paths


def _input_among(paths: OutputPaths, inputs: RunInputs) -> str:
    """Why `paths` may not be written: one of them is an input ("" when none is)."""
    taken = inputs.first_among(paths)
    return f"its output {taken} is one of the inputs; not replaced" if taken else ""


def _reserved(relative: Path) -> str:
    """Why outputs mirrored at `relative` may not be written: their folder would take the
    name of the run's summary or lock ("" when it would not)."""
    if len(relative.parts) > 1 and relative.parts[0] in (SUMMARY_NAME, LOCK_NAME):
        return f"its outputs would go into a folder named {relative.parts[0]} in --out"
    return ""


class _StopRequests:
    """Ctrl-C and SIGTERM (cron's timeout, kill) ask the run to stop at its next safe point.

    The handlers only set a flag, which the run checks between steps, so no
    exception lands inside a half-done step (a lock, a queue, a file write);
    only a step marked interruptible (interrupts.py) ends at once. A second
    Ctrl-C stops at once.
    """

    _SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        if cut_short_here():  # a read or write in this thread (interrupts.py)
            raise Stop()

    def check(self) -> None:
        """Raise Stop if a stop was requested."""
        if self.requested:
            raise Stop()

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
