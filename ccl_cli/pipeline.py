"""One `gccl label` run: inputs -> decode (worker pool) -> batches -> backend -> outputs.

Decoding and encoding run in a thread pool (the codecs release the GIL);
decoded images wait in groups of one shape and dtype until a group fills a
batch, which the backend labels in one call. Each input ends as one record
(a summary.csv row): ok, skipped, failed, or not-run when the run stopped
early (--fail-fast, Ctrl-C, SIGTERM). With --scheduler the admitted inputs
are labeled by the same code on Dask workers (cluster.py), and with
--processes on local worker processes (processes.py); this process keeps the
lock, admission, progress, stopping and the summary.
"""

from __future__ import annotations

import os
import signal
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

import numpy as np

from . import images
from .backends import make_backend
from .backends.base import Backend
from .config import Settings
from .errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SOME_FAILED,
    GcclError,
    InputError,
    UsageError,
)
from .inputs import InputItem, check_out_location, expand
from .outputs import (
    LOCK_NAME,
    SUMMARY_NAME,
    OutputLock,
    OutputPaths,
    atomic_write,
    output_paths,
    remove_stale_temporaries,
    summary_csv,
)
from .params import LabelParams
from .polygons import Outlines, geojson
from .stats import StatsTable, stats_csv

PNG_LABEL_LIMIT = 65535
#: Cap on images per batch when --batch-size is auto.
AUTO_BATCH_LIMIT = 256


@dataclass
class Record:
    """What became of one input: a summary.csv row and a --json line."""

    item: InputItem
    status: str = "pending"
    message: str = ""
    width: int | None = None
    height: int | None = None
    dtype: str = ""
    components: int | None = None
    kept: int | None = None
    seconds: float = 0.0
    outputs: dict[str, str] = field(default_factory=dict)

    def row(self) -> list[object]:
        """The summary.csv row."""
        return [
            self.item.display,
            "" if self.width is None else self.width,
            "" if self.height is None else self.height,
            self.dtype,
            "" if self.components is None else self.components,
            "" if self.kept is None else self.kept,
            self.status,
            self.message,
            f"{self.seconds:.4f}",
        ]

    def as_json(self) -> dict[str, Any]:
        """The --json object."""
        return {
            "path": self.item.display,
            "status": self.status,
            "message": self.message,
            "width": self.width,
            "height": self.height,
            "dtype": self.dtype,
            "components": self.components,
            "kept": self.kept,
            "seconds": round(self.seconds, 6),
            "outputs": self.outputs,
        }


class Reporter(Protocol):
    """Where a run tells the user what happens (progress, errors, --json lines)."""

    def start(self, total: int) -> None:
        """The run is about to process `total` inputs."""

    def finished(self, record: Record) -> None:
        """One input is done, whatever its status."""

    def notice(self, message: str) -> None:
        """A one-line message for the user."""


@dataclass
class RunReport:
    """The outcome of a run."""

    records: list[Record]
    interrupted: bool = False
    summary: Path | None = None
    seconds: float = 0.0

    def count(self, status: str) -> int:
        """How many inputs ended with `status`."""
        return sum(record.status == status for record in self.records)


class _Stop(Exception):
    """Ends the run early (Ctrl-C, SIGTERM); the summary is still written."""


class _FailFast(_Stop):
    """--fail-fast: the first failure ends the run (not an interruption)."""


#: An input that needs labeling, with the files it will produce.
Admitted = tuple[Record, OutputPaths]


class Outcomes:
    """Where each finished record goes: the reporter, then --fail-fast's stop at a failure."""

    def __init__(self, reporter: Reporter, fail_fast: bool) -> None:
        self.reporter = reporter
        self.fail_fast = fail_fast

    def finished(self, record: Record) -> None:
        """Report a record whose status is final; under --fail-fast a failure ends the run."""
        self.reporter.finished(record)
        if self.fail_fast and record.status == "failed":
            raise _FailFast()

    def fail(self, record: Record, message: str) -> None:
        """Finish a record as failed, with the reason."""
        record.status = "failed"
        record.message = message
        self.finished(record)


class Engine(Protocol):
    """Where admitted records are labeled: this process, worker processes (processes.py) or a
    Dask cluster (cluster.py)."""

    def label(
        self,
        admitted: Iterable[Admitted],
        settings: Settings,
        outcomes: Outcomes,
        check_stop: Callable[[], None],
    ) -> None:
        """Label, write and finish every admitted record; `check_stop` raises to end early."""

    def close(self) -> None:
        """Release what the engine holds."""


@dataclass
class _Local:
    """Labels in this process with one backend and a pool of `workers` threads."""

    backend: Backend
    workers: int

    def label(
        self,
        admitted: Iterable[Admitted],
        settings: Settings,
        outcomes: Outcomes,
        check_stop: Callable[[], None],
    ) -> None:
        _Run(settings, self.backend, outcomes, self.workers, check_stop).work(admitted)

    def close(self) -> None:
        pass


@dataclass
class _Decoded:
    record: Record
    paths: OutputPaths
    values: np.ndarray
    decode_seconds: float


def run_label(
    specs: Sequence[str],
    settings: Settings,
    reporter: Reporter,
    stdin: Any = None,
) -> RunReport:
    """Label every input of `specs` as `settings` say; see the module docstring."""
    if settings.out is None:
        raise UsageError("--out is required: the folder that receives the outputs")
    out = settings.out
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a folder")
    items = expand(specs, settings.recursive, stdin)
    if not items:
        reporter.notice("no images found in the inputs (.png, .tif, .tiff, .npy)")
    check_out_location(out, specs, settings.recursive)
    engine = _engine(settings, reporter, len(items))
    started = time.perf_counter()
    records = [Record(item) for item in items]
    report = RunReport(records)
    made_out = not out.exists()
    try:
        _run(engine, records, report, settings, reporter)
    except GcclError:  # e.g. a device found unusable once the workers had started
        if made_out:
            _remove_unused(out)
        raise
    report.seconds = time.perf_counter() - started
    return report


def _run(
    engine: Engine,
    records: list[Record],
    report: RunReport,
    settings: Settings,
    reporter: Reporter,
) -> None:
    """The locked part of run_label: label the records, write summary.csv."""
    assert settings.out is not None
    out = settings.out
    with closing(engine), OutputLock(out), _StopRequests() as stop:
        removed = remove_stale_temporaries(out)
        if removed:
            reporter.notice(f"removed {removed} partial file(s) left by an interrupted run")
        reporter.start(len(records))
        outcomes = Outcomes(reporter, settings.fail_fast)
        try:
            engine.label(
                _admitted(records, settings, outcomes, stop.check), settings, outcomes, stop.check
            )
        except _FailFast:
            pass
        except (KeyboardInterrupt, _Stop):
            report.interrupted = True
        for record in records:
            if record.status == "pending":
                record.status = "not-run"
                record.message = (
                    "interrupted" if report.interrupted else "stopped after a failure (--fail-fast)"
                )
        report.summary = out / SUMMARY_NAME
        try:
            atomic_write(report.summary, summary_csv(record.row() for record in records))
        except OSError as error:
            raise UsageError(f"cannot write {report.summary} ({error.strerror or error})") from None


def _remove_unused(out: Path) -> None:
    """Remove an --out folder this run made, if it holds nothing but the lock file."""
    if out.is_dir() and {path.name for path in out.iterdir()} <= {LOCK_NAME}:
        (out / LOCK_NAME).unlink(missing_ok=True)
        out.rmdir()


def _engine(settings: Settings, reporter: Reporter, inputs: int) -> Engine:
    """The cluster at --scheduler, else worker processes (--processes), else this process.

    Made before the lock, so that an unusable device or scheduler is exit 2
    with nothing written. Worker processes make this process's backend while
    their workers start (LocalProcesses): an unusable device then ends the
    run with exit 2 before any input is labeled (run_label removes the
    --out folder it made).
    """
    if settings.scheduler:
        from .cluster import Cluster

        return Cluster(settings.scheduler)
    from .processes import LocalProcesses, process_count, start_fork_server

    cores = usable_cores()
    workers = settings.workers or cores
    count = process_count(settings.processes, inputs, cores)
    if count > 1:
        return LocalProcesses(count, settings, start_fork_server(), inputs, reporter.notice)
    backend = make_backend(settings.device, workers, reporter.notice, settings.devices)
    return _Local(backend, workers)


def usable_cores() -> int:
    """The CPU cores this process may run on (taskset and cgroup cpusets included)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _admitted(
    records: Iterable[Record],
    settings: Settings,
    outcomes: Outcomes,
    check_stop: Callable[[], None],
) -> Iterator[Admitted]:
    """The records that need work, with their outputs; the others are finished here.

    Lazy, so that a local run starts decoding before the last input is admitted.
    """
    assert settings.out is not None
    claimed: dict[Path, str] = {}
    for record in records:
        check_stop()
        paths = output_paths(settings.out, record.item.relative)
        if record.item.problem:
            outcomes.fail(record, record.item.problem)
            continue
        first = claimed.setdefault(paths.labels_png, record.item.display)
        if first != record.item.display:
            outcomes.fail(record, f"its outputs would overwrite those of {first}")
            continue
        if settings.skip_existing and paths.complete(settings.preview, settings.polygons):
            record.status = "skipped"
            record.message = "outputs exist (--skip-existing)"
            outcomes.finished(record)
            continue
        yield record, paths


def label_admitted(
    admitted: Iterable[Admitted], settings: Settings, backend: Backend, reporter: Reporter
) -> None:
    """Decode, label and write admitted records, finishing each in place: a cluster task's work.

    Nothing here ends it early: the client decides about --fail-fast and Ctrl-C.
    """
    workers = settings.workers or usable_cores()
    _Run(settings, backend, Outcomes(reporter, fail_fast=False), workers, lambda: None).work(
        admitted
    )


class _StopRequests:
    """Ctrl-C and SIGTERM (cron's timeout, kill) ask the run to stop at its next safe point.

    The handlers only set a flag, which the run checks between steps, so no
    exception lands inside a half-done step (a lock, a queue, a file write).
    A second Ctrl-C stops at once.
    """

    _SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True

    def check(self) -> None:
        """Raise _Stop if a stop was requested."""
        if self.requested:
            raise _Stop()

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


class _Run:
    """The moving parts of one run: the pool, the pending groups, the in-flight writes."""

    def __init__(
        self,
        settings: Settings,
        backend: Backend,
        outcomes: Outcomes,
        workers: int,
        check_stop: Callable[[], None],
    ):
        self.settings = settings
        self.check_stop = check_stop
        self.params: LabelParams = settings.label_params()
        self.backend = backend
        self.outcomes = outcomes
        self.workers = workers
        self.budget = backend.batch_budget_bytes()
        self.groups: dict[tuple[tuple[int, ...], str], list[_Decoded]] = {}
        self.pending_bytes = 0
        self.writes: deque[tuple[_Decoded, Future[tuple[dict[str, str], float]], float]] = deque()

    def work(self, admitted: Iterable[Admitted]) -> None:
        """Decode, label and write every admitted record."""
        reads: deque[tuple[Record, OutputPaths, Future[tuple[np.ndarray, float]]]] = deque()
        with ThreadPoolExecutor(self.workers) as pool:
            self.pool = pool
            try:
                for record, paths in admitted:
                    reads.append((record, paths, pool.submit(_read, record.item, self.settings)))
                    while len(reads) > 2 * self.workers:
                        self._take_read(*reads.popleft())
                while reads:
                    self._take_read(*reads.popleft())
                for key in list(self.groups):
                    self._flush(key)
                self._drain_writes(0)
            finally:
                for _, _, read in reads:
                    read.cancel()
                for _, write, _ in self.writes:
                    write.cancel()

    def _take_read(
        self, record: Record, paths: OutputPaths, future: Future[tuple[np.ndarray, float]]
    ) -> None:
        self.check_stop()
        try:
            values, seconds = future.result()
        except GcclError as error:
            self.outcomes.fail(record, str(error))
            return
        except (KeyboardInterrupt, _Stop):
            raise
        except Exception as error:
            self.outcomes.fail(record, f"cannot read ({type(error).__name__}: {error})")
            return
        height, width = values.shape
        record.width, record.height, record.dtype = width, height, str(values.dtype)
        key = (values.shape, str(values.dtype))
        group = self.groups.setdefault(key, [])
        group.append(_Decoded(record, paths, values, seconds))
        self.pending_bytes += values.nbytes
        if len(group) >= self._batch_size(values):
            self._flush(key)
        while self.pending_bytes > 2 * self.budget and self.groups:
            self._flush(max(self.groups, key=lambda k: len(self.groups[k])))
        self._drain_writes(2 * self.workers)

    def _batch_size(self, values: np.ndarray) -> int:
        if isinstance(self.settings.batch_size, int):
            return self.settings.batch_size
        return int(min(AUTO_BATCH_LIMIT, max(1, self.budget // max(1, values.nbytes))))

    def _flush(self, key: tuple[tuple[int, ...], str]) -> None:
        """Label one group as a batch and queue its outputs for writing."""
        group = self.groups.pop(key)
        self.pending_bytes -= sum(decoded.values.nbytes for decoded in group)
        started = time.perf_counter()
        try:
            batch = self.backend.empty_batch((len(group), *key[0]), group[0].values.dtype)
            np.stack([d.values for d in group], out=batch)
            # uint16 labels, ready for the 16-bit PNG (an image with more
            # components than that holds comes back as uint32; backends.base).
            narrow = self.settings.label_format != "tiff"
            result = self.backend.label(batch, self.params, narrow=narrow)
        except (KeyboardInterrupt, _Stop):
            raise
        except Exception as error:
            for decoded in group:
                self.outcomes.fail(
                    decoded.record, f"labeling failed ({type(error).__name__}: {error})"
                )
            return
        share = (time.perf_counter() - started) / len(group)
        for i, decoded in enumerate(group):
            decoded.record.components = result.components[i]
            decoded.record.kept = result.kept[i]
            labels = np.asarray(result.image(i))
            table = result.tables[i]
            outlines = result.polygons[i] if result.polygons is not None else None
            future = self.pool.submit(_write, decoded, labels, table, outlines, self.settings)
            self.writes.append((decoded, future, decoded.decode_seconds + share))

    def _drain_writes(self, keep: int) -> None:
        """Finish queued writes until at most `keep` remain in flight."""
        while len(self.writes) > keep:
            self.check_stop()
            decoded, future, seconds = self.writes.popleft()
            record = decoded.record
            try:
                record.outputs, write_seconds = future.result()
            except GcclError as error:
                self.outcomes.fail(record, str(error))
                continue
            except OSError as error:
                self.outcomes.fail(record, f"cannot write outputs ({error.strerror or error})")
                continue
            except Exception as error:
                self.outcomes.fail(
                    record, f"cannot write outputs ({type(error).__name__}: {error})"
                )
                continue
            record.status = "ok"
            record.seconds = seconds + write_seconds
            self.outcomes.finished(record)


def _read(item: InputItem, settings: Settings) -> tuple[np.ndarray, float]:
    """Decode one input (in a worker thread); returns the image and the seconds it took."""
    started = time.perf_counter()
    values = images.read_image(item.path, settings.color_to_gray)
    return values, time.perf_counter() - started


def _write(
    decoded: _Decoded,
    labels: np.ndarray,
    table: StatsTable,
    outlines: Outlines | None,
    settings: Settings,
) -> tuple[dict[str, str], float]:
    """Encode and write one input's outputs (in a worker thread), statistics last.

    The statistics CSV is written last, so its presence marks a finished input
    for --skip-existing.
    """
    started = time.perf_counter()
    kept = len(table)
    if settings.label_format == "png" and kept > PNG_LABEL_LIMIT:
        raise InputError(
            f"{kept} components do not fit a 16-bit PNG; use --label-format auto or tiff"
        )
    tiff = settings.label_format == "tiff" or kept > PNG_LABEL_LIMIT
    paths = decoded.paths
    label_path = paths.labels(tiff)
    encoded = (
        images.encode_label_tiff(labels, settings.tiff_compression)
        if tiff
        else images.encode_label_png(labels)
    )
    atomic_write(label_path, encoded)
    stale = paths.labels(not tiff)  # from an earlier run with the other format
    if stale.exists():  # a stat: unlink would lock the folder even when there is nothing
        stale.unlink(missing_ok=True)
    outputs = {"labels": str(label_path)}
    if settings.preview:
        atomic_write(paths.preview, images.encode_preview_png(decoded.values, labels))
        outputs["preview"] = str(paths.preview)
    if outlines is not None:
        atomic_write(paths.polygons, geojson(outlines))
        outputs["polygons"] = str(paths.polygons)
    atomic_write(paths.stats, stats_csv(table).encode("utf-8"))
    outputs["stats"] = str(paths.stats)
    return outputs, time.perf_counter() - started


def exit_code(report: RunReport) -> int:
    """0 all done, 1 some failed, 130 interrupted (GUIDE §2)."""
    if report.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_SOME_FAILED if report.count("failed") else EXIT_OK
