"""Labeling admitted inputs in this process: decode (thread pool) -> batches -> backend -> write.

Decoding and encoding run in a thread pool (the codecs release the GIL);
decoded images wait in groups of one shape and dtype until a group fills a
batch, which the backend labels in one call. Worker processes and Dask tasks
run this same code on their share of the inputs.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..backends.base import Backend
from ..config import Settings
from ..contract.outlines import Outlines, geojson
from ..contract.params import LabelParams, background_problem
from ..contract.stats import StatsTable
from ..errors import (
    GcclError,
    InputError,
)
from ..io import images
from ..io.csv_text import stats_csv
from ..io.inputs import InputItem
from ..io.outputs import (
    OutputPaths,
    atomic_write,
)
from .records import Admitted, Outcomes, Record, Reporter, Stop

PNG_LABEL_LIMIT = 65535
#: Cap on images per batch when --batch-size is auto.
AUTO_BATCH_LIMIT = 256


@dataclass
class _Decoded:
    record: Record
    paths: OutputPaths
    values: np.ndarray
    decode_seconds: float


def usable_cores() -> int:
    """The CPU cores this process may run on (taskset and cgroup cpusets included)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def label_admitted(
    admitted: Iterable[Admitted], settings: Settings, backend: Backend, reporter: Reporter
) -> None:
    """Decode, label and write admitted records, finishing each in place: a cluster task's work.

    Nothing here ends it early: the client decides about --fail-fast and Ctrl-C.
    """
    workers = settings.workers or usable_cores()
    LocalRun(settings, backend, Outcomes(reporter, fail_fast=False), workers, lambda: None).work(
        admitted
    )


class LocalRun:
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
        self.budget = (backend.name, backend.batch_budget_bytes())
        self.groups: dict[tuple[tuple[int, ...], str], list[_Decoded]] = {}
        self.pending_bytes = 0
        self.writes: deque[tuple[_Decoded, Future[tuple[dict[str, str], float]], float]] = deque()

    def work(self, admitted: Iterable[Admitted | None]) -> None:
        """Decode, label and write every admitted record.

        A None among them says that the input paused (a stream, a watched
        folder): what was admitted before it is labeled, written and reported
        before the next one is taken.
        """
        reads: deque[tuple[Record, OutputPaths, Future[tuple[np.ndarray, float]]]] = deque()
        with ThreadPoolExecutor(self.workers) as pool:
            self.pool = pool
            try:
                for entry in admitted:
                    if entry is None:
                        self._finish(reads)
                        continue
                    record, paths = entry
                    reads.append((record, paths, pool.submit(_read, record.item, self.settings)))
                    while len(reads) > 2 * self.workers:
                        self._take_read(*reads.popleft())
                self._finish(reads)
            finally:
                for _, _, read in reads:
                    read.cancel()
                for _, write, _ in self.writes:
                    write.cancel()

    def _finish(
        self, reads: deque[tuple[Record, OutputPaths, Future[tuple[np.ndarray, float]]]]
    ) -> None:
        """Label and write everything read or being read, and report it."""
        while reads:
            self._take_read(*reads.popleft())
        for key in list(self.groups):
            self._flush(key)
        self._drain_writes(0)

    def _take_read(
        self, record: Record, paths: OutputPaths, future: Future[tuple[np.ndarray, float]]
    ) -> None:
        self.check_stop()
        try:
            values, seconds = future.result()
        except GcclError as error:
            self.outcomes.fail(record, str(error))
            return
        except (KeyboardInterrupt, Stop):
            raise
        except Exception as error:
            self.outcomes.fail(record, f"cannot read ({type(error).__name__}: {error})")
            return
        height, width = values.shape
        record.width, record.height, record.dtype = width, height, str(values.dtype)
        problem = background_problem(values.dtype, self.params)
        if problem:
            self.outcomes.fail(record, problem)
            return
        key = (values.shape, str(values.dtype))
        group = self.groups.setdefault(key, [])
        group.append(_Decoded(record, paths, values, seconds))
        self.pending_bytes += values.nbytes
        if len(group) >= self._batch_size(values):
            self._flush(key)
        while self.pending_bytes > 2 * self._budget() and self.groups:
            self._flush(max(self.groups, key=lambda k: len(self.groups[k])))
        self._drain_writes(2 * self.workers)

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
        started = time.perf_counter()
        try:
            batch = self.backend.empty_batch((len(group), *key[0]), group[0].values.dtype)
            np.stack([d.values for d in group], out=batch)
            # uint16 labels, ready for the 16-bit PNG (an image with more
            # components than that holds comes back as uint32; backends.base).
            narrow = self.settings.label_format != "tiff"
            result = self.backend.label(batch, self.params, narrow=narrow)
        except (KeyboardInterrupt, Stop):
            raise
        except Exception as error:
            for decoded in group:
                self.outcomes.fail(
                    decoded.record, f"labeling failed ({type(error).__name__}: {error})"
                )
            return
        share = (time.perf_counter() - started) / len(group)
        for i, decoded in enumerate(group):
            decoded.record.backend = result.backend or self.backend.name
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
    values = images.read_image(item.path, settings.color_to_gray, page=item.page)
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
    atomic_write(label_path, encoded, settings.fsync)
    stale = paths.labels(not tiff)  # from an earlier run with the other format
    if stale.exists():  # a stat: unlink would lock the folder even when there is nothing
        stale.unlink(missing_ok=True)
    outputs = {"labels": str(label_path)}
    if settings.preview:
        atomic_write(
            paths.preview, images.encode_preview_png(decoded.values, labels), settings.fsync
        )
        outputs["preview"] = str(paths.preview)
    if outlines is not None:
        atomic_write(paths.polygons, geojson(outlines), settings.fsync)
        outputs["polygons"] = str(paths.polygons)
    atomic_write(paths.stats, stats_csv(table).encode("utf-8"), settings.fsync)
    outputs["stats"] = str(paths.stats)
    return outputs, time.perf_counter() - started
