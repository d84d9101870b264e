"""Labeling admitted inputs in this process: decode (thread pool) -> batches -> backend -> write.

Decoding and encoding run in a thread pool (the codecs release the GIL);
decoded images wait in groups of one shape and dtype until a group fills a
batch, which the backend labels in one call. Images of at most INLINE_BYTES
are decoded and written in this thread instead: for them, handing each step
to a pool thread and back costs more than running it beside the others
gains (the threads take turns at the GIL). So is every image of a run with
one worker thread (--workers 1, and each worker process of --processes
auto): there a pool thread could only take turns with this one. Worker
processes and Dask tasks run this same code on their share of the inputs.

The threads are daemons and every wait on them also watches for a stop
request: Ctrl-C or SIGTERM ends the run within POLL_SECONDS (daemon_threads.py)
even when a decode never returns (a stalled network file system); what is in flight is
abandoned (writes get STOP_GRACE_SECONDS to finish). A decode or write in
this thread is interruptible (interrupts.py): a stop request ends it at once
wherever it is in Python, but not inside a codec or the labeling engine, so
a run that answers stop requests (the main process's: `answers_stops`)
keeps longer steps out of this thread, one worker thread or not: decoding a
file of more than INLINE_BYTES on disk, writing an image of more than
INLINE_BYTES, labeling a batch of more than LONG_LABELING_BYTES on the CPU.
The first input too: it is read here only when its file is small. A batch the backend
cannot fit in memory (MemoryError) is labeled again one image at a time
before its images fail. Every file goes through the run's opened --out
(io/out_dir.py): nothing is written outside --out or through a link there,
and a file in the way is replaced only when the record of made files (the
owner, io/made.py) says gccl made it.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..backends.base import Backend, BatchResult, usable_cores
from ..backends.cpu.backend import CpuBackend
from ..config import Settings
from ..contract.outlines import Outlines
from ..contract.params import foreground_problem, threshold_side
from ..contract.stats import StatsTable
from ..errors import (
    GcclError,
    InputError,
)
from ..io import decode
from ..io.csv_text import stats_csv
from ..io.geojson import geojson_pieces
from ..io.inputs import InputItem
from ..io.label_images import encode_label_image
from ..io.made import remove_stale
from ..io.out_dir import OutDir, Owner, Source
from ..io.output_paths import LABEL_ENDINGS, PNG_LABEL_LIMIT, OutputPaths, label_file_format
from ..io.previews import encode_preview_png
from ..io.volumes import VolumeFile
from .daemon_threads import DaemonThreads, result_or_stop
from .freshness import made_by, options_key, output_options
from .interrupts import interruptible
from .records import Admitted, Outcomes, Record, Reporter, Stop
from .volume_files import input_stat, read_volume_input, volume_outputs

#: Images of at most this many bytes (decoded) are read and written in this thread; the
#: first input is read here, the next ones as the size of the one before says.
INLINE_BYTES = 1 << 16
#: Cap on images per batch when --batch-size is auto.
AUTO_BATCH_LIMIT = 256
#: How long a stopping run lets the writes in flight finish, in seconds.
STOP_GRACE_SECONDS = 2.0
#: A CPU batch of more bytes is labeled in a pool thread by a run that answers stop requests.
LONG_LABELING_BYTES = 16 << 20


#: A decoded input: the image (a volume's values), the seconds decoding took, the input's
#: identity before it was read (None: unknown), and for a volume the file as read (its
#: geometry and format).
_Read = tuple[np.ndarray, float, os.stat_result | None, VolumeFile | None]


@dataclass
class _Decoded:
    record: Record
    paths: OutputPaths
    values: np.ndarray
    decode_seconds: float
    #: The input's modification time before it was read (None: unknown).
    modified_ns: int | None
    #: A volume input's file as read (volume_files.py); None for an image.
    volume: VolumeFile | None = None
    #: What the record keeps of the input and options that made the outputs (freshness.made_by).
    made_by: str | None = None


def label_admitted(
    admitted: Iterable[Admitted],
    settings: Settings,
    backend: Backend,
    reporter: Reporter,
    out: OutDir,
    owner: Owner,
) -> None:
    """Decode, label and write admitted records into `out`, finishing each in place: a task's
    work on a worker.

    Nothing here ends it early: the client decides about --fail-fast and Ctrl-C.
    """
    workers = settings.workers or usable_cores()
    outcomes = Outcomes(reporter, fail_fast=False)
    LocalRun(settings, backend, outcomes, workers, lambda: None, None, out, owner).work(admitted)


class LocalRun:
    """The moving parts of one run: the pool, the pending groups, the in-flight writes."""

    def __init__(
        self,
        settings: Settings,
        backend: Backend,
        outcomes: Outcomes,
        workers: int,
        check_stop: Callable[[], None],
        wake: Callable[[], None] | None,
        out: OutDir,
        owner: Owner,
        answers_stops: bool = False,
    ):
        """wake: called from the threads when a decode or a write ends, for a source that
        pauses when woken (sources.py); without one, a pause waits for every step.
        out: the opened --out; owner: what gccl made there (io/made.py).
        answers_stops: this thread answers Ctrl-C and SIGTERM (module docstring)."""
        self.settings = settings
        self.out = out
        self.owner = owner
        self.check_stop = check_stop
        self.wake = wake
        self.options = options_key(output_options(settings))
        self.backend = backend
        self.outcomes = outcomes
        self.workers = workers
        #: Every step in this thread, no pool (module docstring).
        self.one_thread = workers <= 1
        self.answers_stops = answers_stops
        self.budget = (backend.name, backend.batch_budget_bytes())
        self.groups: dict[tuple[tuple[int, ...], str], list[_Decoded]] = {}
        self.pending_bytes = 0
        self.writes: deque[tuple[_Decoded, Future[tuple[dict[str, str], float]], float]] = deque()
        #: Whether the next input is read in this thread (_in_this_thread, from the last
        #: image decoded: the first input is read here).
        self.small = True

    def work(self, admitted: Iterable[Admitted | None]) -> None:
        """Decode, label and write every admitted record.

        A None among them says that the input paused (a stream, a watched
        folder): what has been read is labeled and what has been written is
        reported, before the next input is taken (_catch_up).
        """
        reads: deque[tuple[Record, OutputPaths, Future[_Read]]] = deque()
        threads = 0 if self.one_thread else self.workers
        self.pool = pool = DaemonThreads(max(threads, 1) if self.answers_stops else threads)
        try:
            for entry in admitted:
                if entry is None:
                    self._catch_up(reads) if self.wake else self._finish(reads)
                    continue
                record, paths = entry
                here = self.small and self._short_read(record.item)
                read = self._step(here, _read, record.item, self.settings, self.check_stop)
                reads.append((record, paths, read))
                while len(reads) > 2 * self.workers:
                    self._take_read(*reads.popleft())
            self._finish(reads)
        finally:
            for _, _, read in reads:
                read.cancel()
            for _, write, _ in self.writes:
                write.cancel()
            wait([write for _, write, _ in self.writes], timeout=STOP_GRACE_SECONDS)
            pool.close()

    def _finish(self, reads: deque[tuple[Record, OutputPaths, Future[_Read]]]) -> None:
        """Label and write everything read or being read, and report it."""
        while reads:
            self._take_read(*reads.popleft())
        for key in list(self.groups):
            self._flush(key)
        self._drain_writes(0)

    def _catch_up(self, reads: deque[tuple[Record, OutputPaths, Future[_Read]]]) -> None:
        """Label the inputs read so far (in arrival order, up to the first still being
        read) and report the writes that ended, without waiting: the steps still
        running wake the source when they end, which pauses again."""
        while reads and reads[0][2].done():
            self._take_read(*reads.popleft())
        for key in list(self.groups):
            self._flush(key)
        while self.writes and self.writes[0][1].done():
            self._drain_writes(len(self.writes) - 1)

    def _take_read(self, record: Record, paths: OutputPaths, future: Future[_Read]) -> None:
        try:
            values, seconds, info, volume = result_or_stop(future, self.check_stop)
        except GcclError as error:
            self.outcomes.fail(record, str(error))
            return
        except (KeyboardInterrupt, Stop):
            raise
        except Exception as error:
            self.outcomes.fail(record, f"cannot read ({type(error).__name__}: {error})")
            return
        self.small = self._in_this_thread(values)
        record.width, record.height = values.shape[-1], values.shape[-2]
        record.depth, record.dtype = values.shape[0] if volume else None, str(values.dtype)
        problem = foreground_problem(values.dtype, self.settings.params)
        if problem:
            self.outcomes.fail(record, problem)
            return
        record.message = threshold_side(values, self.settings.params)  # said, labeled all the same
        key = (values.shape, str(values.dtype))
        modified_ns = None if info is None else info.st_mtime_ns
        by = (
            None
            if info is None
            else made_by(self.options, record.item.path, info, record.item.page)
        )
        decoded = _Decoded(record, paths, values, seconds, modified_ns, volume, by)
        if volume is not None:  # a volume is a batch of its own (its values are not copied)
            self._label([decoded], key)
            self._drain_writes(2 * self.workers)
            return
        group = self.groups.setdefault(key, [])
        group.append(decoded)
        self.pending_bytes += values.nbytes
        if len(group) >= self._batch_size(values):
            self._flush(key)
        while self.pending_bytes > 2 * self._budget() and self.groups:
            self._flush(max(self.groups, key=lambda k: len(self.groups[k])))
        self._drain_writes(2 * self.workers)

    def _in_this_thread(self, values: np.ndarray) -> bool:
        """Whether the steps of an image like `values` run in this thread (module docstring)."""
        return values.nbytes <= INLINE_BYTES or (self.one_thread and not self.answers_stops)

    def _short_read(self, item: InputItem) -> bool:
        """Whether reading `item` may run in this thread as far as stopping goes: always,
        unless this thread answers stop requests and its file is large."""
        if not self.answers_stops:
            return True
        try:
            return os.stat(item.path).st_size <= INLINE_BYTES
        except (OSError, ValueError):
            return True  # (reading it says why it cannot be read)

    def _step(self, here: bool, function: Callable[..., Any], *args: Any) -> Future[Any]:
        """function(*args) queued for the pool, or run in this thread now (`here`, after
        checking for a stop request, and interruptible); its result as a Future either way."""
        if not here:
            submitted = self.pool.submit(function, *args)
            if self.wake is not None:
                wake = self.wake
                submitted.add_done_callback(lambda _: wake())
            return submitted
        self.check_stop()
        future: Future[Any] = Future()
        try:
            with interruptible():
                result = function(*args)
        except (KeyboardInterrupt, Stop):
            raise
        except Exception as error:
            future.set_exception(error)
        else:
            future.set_result(result)
        return future

    def _batch_size(self, values: np.ndarray) -> int:
        if isinstance(self.settings.batch_size, int):
            return self.settings.batch_size
        return int(min(AUTO_BATCH_LIMIT, max(1, self._budget() // max(1, values.nbytes))))

    def _budget(self) -> int:
        """The backend's batch budget, asked again when the backend changes (hybrid.py)."""
        if self.budget[0] != self.backend.name:
            self.budget = (self.backend.name, self.backend.batch_budget_bytes())
        return self.budget[1]

    def _flush(self, key: tuple[tuple[int, ...], str]) -> None:
        """Label one group as a batch and queue its outputs for writing."""
        group = self.groups.pop(key)
        self.pending_bytes -= sum(decoded.values.nbytes for decoded in group)
        self._label(group, key)

    def _label(self, group: list[_Decoded], key: tuple[tuple[int, ...], str]) -> None:
        """Label `group` in one batch; one image at a time if the batch does not fit memory."""
        started = time.perf_counter()
        long = sum(decoded.values.nbytes for decoded in group) > LONG_LABELING_BYTES
        # (the CPU backend alone: a GPU's calls stay in the thread that started its device)
        here = not (long and self.answers_stops and isinstance(self.backend, CpuBackend))
        try:
            result = result_or_stop(
                self._step(here, self._batch_result, group, key), self.check_stop
            )
        except (KeyboardInterrupt, Stop):
            raise
        except MemoryError:  # the batch is freed with its frame once this block ends
            result = None
        except Exception as error:
            for decoded in group:
                self.outcomes.fail(
                    decoded.record, f"labeling failed ({type(error).__name__}: {error})"
                )
            return
        if result is None:
            if len(group) == 1:
                self.outcomes.fail(group[0].record, "labeling failed (out of memory)")
            for decoded in group if len(group) > 1 else []:
                self._label([decoded], key)
            return
        share = (time.perf_counter() - started) / len(group)
        kept = result.kept  # a list made on each access
        for i, decoded in enumerate(group):
            decoded.record.backend = result.backend or self.backend.name
            decoded.record.components = result.components[i]
            decoded.record.kept = kept[i]
            labels = np.asarray(result.image(i))
            table = result.tables[i]
            outlines = result.polygons[i] if result.polygons is not None else None
            small = self._in_this_thread(decoded.values)
            future = self._step(
                small, _write, decoded, labels, table, outlines, self.settings, self.out, self.owner
            )
            self.writes.append((decoded, future, decoded.decode_seconds + share))
            if small:  # reported before the next write here, which a stop may cut short
                self._drain_writes(0)

    def _batch_result(self, group: list[_Decoded], key: tuple[tuple[int, ...], str]) -> BatchResult:
        """The backend's result for `group` stacked into one batch (a volume alone, at rank 3)."""
        if group[0].volume is not None:
            return self.backend.label(group[0].values[None], self.settings.params.at_rank(3))
        batch = self.backend.empty_batch((len(group), *key[0]), group[0].values.dtype)
        np.stack([d.values for d in group], out=batch)
        # uint16 labels, ready for the 16-bit PNG (an image with more
        # components than that holds comes back as uint32; backends.base).
        narrow = self.settings.label_format != "tiff"  # (npy: uint16 too, as the PNG)
        return self.backend.label(batch, self.settings.params.at_rank(2), narrow=narrow)

    def _drain_writes(self, keep: int) -> None:
        """Finish queued writes until at most `keep` remain in flight."""
        while len(self.writes) > keep:
            decoded, future, seconds = self.writes[0]
            record = decoded.record
            try:
                record.outputs, write_seconds = result_or_stop(future, self.check_stop)
            except (KeyboardInterrupt, Stop):
                raise
            except GcclError as error:
                self.writes.popleft()
                self.outcomes.fail(record, str(error))
                continue
            except OSError as error:
                self.writes.popleft()
                self.outcomes.fail(record, f"cannot write outputs ({error.strerror or error})")
                continue
            except Exception as error:
                self.writes.popleft()
                self.outcomes.fail(
                    record, f"cannot write outputs ({type(error).__name__}: {error})"
                )
                continue
            self.writes.popleft()
            record.status = "ok"
            record.seconds = seconds + write_seconds
            self.outcomes.finished(record)


def _read(item: InputItem, settings: Settings, check_stop: Callable[[], None]) -> _Read:
    """Decode one input (in a worker thread); its modification time is taken first, so
    that it is that of the version read or an earlier one (the statistics CSV is
    stamped later than it: out_dir.OutDir.write). A long decode calls check_stop between
    its steps, so that a stop request ends it."""
    started = time.perf_counter()
    try:
        info: os.stat_result | None = input_stat(item)
    except (OSError, ValueError):
        info = None  # reading it fails too, with the reason
    if item.volume is not None:
        volume = read_volume_input(item, settings.spacing, settings.max_image_bytes)
        return volume.values, time.perf_counter() - started, info, volume
    values = decode.read_image(
        item.path,
        settings.color_to_gray,
        settings.max_image_bytes,
        page=item.page,
        check_stop=check_stop,
    )
    return values, time.perf_counter() - started, info, None


def _put(
    out: OutDir,
    path: Path,
    data: bytes | Iterable[bytes],
    owner: Owner,
    settings: Settings,
    after_ns: int | None = None,
    source: Source | None = None,
    made_by: str | None = None,
) -> None:
    """One output written (OutDir.write); an OS error (a full disk, a quota) names the file."""
    try:
        out.write(path, data, owner, settings.fsync, after_ns, source, made_by)
    except OSError as error:
        raise InputError(f"cannot write {path} ({error.strerror or error})") from None


def _write(
    decoded: _Decoded,
    labels: np.ndarray,
    table: StatsTable,
    outlines: Outlines | None,
    settings: Settings,
    out: OutDir,
    owner: Owner,
) -> tuple[dict[str, str], float]:
    """Encode and write one input's outputs (in a worker thread) into `out`, statistics last.

    The statistics CSV is written last, so its presence marks a finished input
    for --skip-existing. A label image of the other format from an earlier
    run, and the copies an earlier failure moved aside, are removed once the
    new outputs are in place, if gccl made them (the owner says so).
    """
    started = time.perf_counter()
    kept = len(table)
    paths = decoded.paths
    preview: bytes | None = None
    encoded: Any
    if (volume := decoded.volume) is not None:  # (volume_files.py: in the input's kind)
        file_format, encoded, stats, preview = volume_outputs(volume, labels, table, settings)
    else:
        file_format = label_file_format(settings.label_format, kept)
        wide = kept > PNG_LABEL_LIMIT
        encoded = encode_label_image(labels, file_format, wide, settings.tiff_compression)
        stats = stats_csv(table)
    label_path = paths.labels(file_format)
    source, by = decoded.record.item.source, decoded.made_by
    _put(out, label_path, encoded, owner, settings, source=source, made_by=by)
    written = [label_path]
    outputs = {"labels": str(label_path)}
    if settings.preview:
        if preview is None:
            preview = encode_preview_png(decoded.values, labels)
        _put(out, paths.preview, preview, owner, settings, source=source, made_by=by)
        outputs["preview"] = str(paths.preview)
        written.append(paths.preview)
    if outlines is not None:
        _put(
            out,
            paths.polygons,
            geojson_pieces(outlines),
            owner,
            settings,
            source=source,
            made_by=by,
        )
        outputs["polygons"] = str(paths.polygons)
        written.append(paths.polygons)
    _put(out, paths.stats, stats, owner, settings, decoded.modified_ns, source, by)
    outputs["stats"] = str(paths.stats)
    written.append(paths.stats)
    for other in LABEL_ENDINGS:  # an earlier run's label image of another format
        if other != file_format and owner.listed(out.key(paths.labels(other))):
            out.remove(paths.labels(other), owner)
    remove_stale(out, owner, written)
    return outputs, time.perf_counter() - started
