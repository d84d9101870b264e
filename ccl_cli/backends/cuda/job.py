"""One (sub-)batch labeled on one device (Job): its three steps, issued so that the host
waits for the device only for the label count and for the statistics."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...contract.outlines import Outlines
from ...contract.params import LabelParams
from ...contract.stats import empty_table
from ..base import NARROW_LIMIT, BatchResult
from .arrays import contiguous, narrowed
from .labels import check_batch, dense_labels, filtered_table, label_offsets, table_view
from .loader import import_cupy
from .pinned import pinned_empty


def released() -> None:
    """A job's release once it holds nothing (its stream given back, or none taken)."""


def record_event(cupy: Any, stream: Any) -> Any:
    """An event recorded on `stream` now. A host thread that waits for it sleeps
    (blocking synchronization) rather than spinning on a core that the
    decoding threads and processes need."""
    event = cupy.cuda.Event(block=True, disable_timing=True)
    event.record(stream)
    return event


@dataclass
class HostLabels:
    """Where a Job's labels go on the host: `array` (uint16 when `narrow`, see
    backends.base), and the page-locked staging copy of its input, if any,
    kept alive until the upload from it is done."""

    array: np.ndarray
    narrow: bool
    staging: np.ndarray | None = None


class Job:
    """One (sub-)batch labeled on one device, on the stream current at its creation.

    Three steps, so that the host waits as little as possible: label()
    issues the stages, the labeling and the label count's copy back;
    statistics() waits for that count (it sizes the aggregates), then issues
    the statistics kernels, min-area filtering, the table's copy back and,
    for a batch from the host, the labels' copy into `host.array`; collect()
    waits for the table, whose columns the StatsTables then view as they
    are, traces outlines, copies back the images too wide to narrow and
    waits for the stream. Morphology and smoothing (ccl_cli.contract.stages) decide
    the labels; statistics read the values label_input gives.
    """

    def __init__(
        self, values: Any, params: LabelParams, out: Any, host: HostLabels | None = None
    ) -> None:
        cupy = import_cupy()
        self.stream = cupy.cuda.get_current_stream()
        self.device = values.device
        self.values, self.params, self.out, self.host = values, params, out, host
        self.integer = np.dtype(values.dtype).kind != "f"
        self.shape = values.shape
        #: Set by the owner: the event after this job's upload, and the undo of its stream.
        self.uploaded: Any = None
        self.release: Callable[[], None] = released
        #: Events: the label count is on the host (statistics() waits for it), and
        #: all that statistics() copies back is (collect() waits for it, at last).
        self.counted: Any = None
        self.copied: Any = None

    def label(self, after: Any = None) -> None:
        """Issue the stages, the labeling and the label count's copy back, on the
        device after the event `after` where given."""
        from ...contract.stages import label_input
        from .stages import CudaStages

        n, height, width = self.shape
        if n * height * width == 0:
            return
        cupy = import_cupy()
        with self.device, self.stream:
            if after is not None:
                self.stream.wait_event(after)
            check_batch(self.values)
            self.values = contiguous(self.values)
            image, label_params, self.values = label_input(
                self.values, self.params, cupy, CudaStages()
            )
            self.label_base = label_offsets(dense_labels(image, label_params, self.out))
            self.offsets = pinned_empty((n + 1,), np.dtype(np.uint32))
            self.label_base.get(stream=self.stream, out=self.offsets, blocking=False)
            self.counted = record_event(cupy, self.stream)

    def statistics(self) -> None:
        """Wait for the label count; issue the statistics and the copies back."""
        if 0 in self.shape:
            return
        cupy = import_cupy()
        with self.device, self.stream:
            self.counted.synchronize()
            total = int(self.offsets[-1])
            table, kept = filtered_table(self.values, self.out, self.label_base, total, self.params)
            self.table = pinned_empty(table.shape, np.dtype(np.uint64))
            if total:
                table.get(stream=self.stream, out=self.table, blocking=False)
            self.kept_base = self.offsets
            if kept is not None:
                self.kept_base = pinned_empty(self.offsets.shape, np.dtype(np.uint32))
                kept.base.get(stream=self.stream, out=self.kept_base, blocking=False)
            self.tabled = self.copied = record_event(cupy, self.stream)
            if self.host is not None:
                labels = narrowed(self.out) if self.host.narrow else self.out
                labels.get(stream=self.stream, out=self.host.array, blocking=False)
                self.copied = record_event(cupy, self.stream)

    def collect(self) -> BatchResult:
        """Wait for the statistics; the result of this job's batch (base.BatchResult)."""
        n, height, width = self.shape
        labels = self.out if self.host is None else self.host.array
        if n == 0:
            return BatchResult(labels, [], [], [] if self.params.polygons else None)
        if height * width == 0:
            empty = [Outlines.empty() for _ in range(n)] if self.params.polygons else None
            return BatchResult(
                labels, [empty_table(self.integer) for _ in range(n)], [0] * n, empty
            )
        with self.device, self.stream:
            self.tabled.synchronize()
            starts = self.kept_base.astype(np.int64)  # each image's first kept row, and the end
            table = table_view(self.table, int(starts[-1]), self.integer)
            tables = [table.take(slice(starts[i], starts[i + 1])) for i in range(n)]
            kept_counts = np.diff(starts).tolist()
            outlines: list[Outlines] | None = None
            if self.params.polygons:
                from .outlines import device_outlines

                outlines = device_outlines(self.out, kept_counts)
            wide = self._wide_images(kept_counts)
            if self.host is not None:
                self.stream.synchronize()
                self.host.staging = None
        components = np.diff(self.offsets.astype(np.int64)).tolist()
        return BatchResult(labels, tables, components, outlines, wide)

    def _wide_images(self, kept_counts: list[int]) -> dict[int, np.ndarray]:
        """Copies back (asynchronously) of the images whose kept labels exceed
        NARROW_LIMIT, into page-locked arrays of their own, by index (BatchResult.wide)."""
        if self.host is None or not self.host.narrow:
            return {}
        wide = {}
        for i, count in enumerate(kept_counts):
            if count > NARROW_LIMIT:
                wide[i] = pinned_empty(self.out[i].shape, np.dtype(np.uint32))
                self.out[i].get(stream=self.stream, out=wide[i], blocking=False)
        return wide
