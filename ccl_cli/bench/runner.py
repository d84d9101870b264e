"""Running the engines over the cases at the two levels, and checking their answers.

kernel: the batch is already in memory (on the GPU for GPU engines, copied
there before timing); only the labeling call is timed. A batch of N holds N
copies of the case's image. Each engine's first call at batch 1 is a warm-up
whose labels are cross-checked against the reference engine's; at larger
batches the component count over the batch is checked.

end-to-end: the case's image as N files (PNG for generated images, the
user's own file otherwise) goes through `gccl label` itself
(`run.command.run_label`: decode, label, write label images and CSVs into a
temporary folder); the wall clock of the whole run is timed.

Limits keep a full run short: a batch holds at most MAX_BATCH_PIXELS; a call
whose time, estimated from batch 1, exceeds MAX_CALL_S is not made; timed
calls stop after `repeat` or after BUDGET_S of them. Every limit that bites
leaves a record saying so.

A volume case runs at batch 1 alone, whatever its size (one volume is the batch; its
voxels count as pixels); end to end it is one file: the user's own, read in place, or a 3-D .npy.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from .adapter import BenchEngine
from .crosscheck import compare
from .eta import Planned
from .records import Record
from .suite import Case
from .timing import measure, timed

#: Largest batch, in pixels: 64 full-HD images (8 images of 12 Mpixel).
MAX_BATCH_PIXELS = 64 * 1920 * 1080
#: Calls estimated to take longer than this are not made.
MAX_CALL_S = 1.0
#: A measurement's timed calls stop once they add up to this.
BUDGET_S = 0.5
#: Engines whose labels are the reference of the cross-check, by preference.
REFERENCE_ORDER = ("gccl-cpu", "cc3d")


class Progress(Protocol):
    """What the runner tells about each measurement (command.py prints it, eta.py learns)."""

    def started(self, planned: Planned) -> None:
        """A measurement starts."""

    def finished(self, call_ms: float | None) -> None:
        """The measurement started last is done: its median call, or None when it failed."""

    def skipped(self, planned: Planned) -> None:
        """A planned measurement is not made (its call would take too long)."""


@dataclass
class Limits:
    """How long a run may take (the module docstring says how each is used)."""

    repeat: int = 10
    budget_s: float = BUDGET_S
    max_call_s: float = MAX_CALL_S
    max_batch_pixels: int = MAX_BATCH_PIXELS


def kernel_plan(
    cases: Sequence[Case], engines: Sequence[BenchEngine], batches: Sequence[int], limits: Limits
) -> list[Planned]:
    """The kernel-level measurements run_kernel makes, in order (some may be skipped when
    their call would pass the cap)."""
    return [
        Planned(
            level="kernel",
            case=case.name,
            engine=engine.name,
            batch=batch,
            mode=case.params.mode,
            family=case.family,
            connectivity=case.params.connectivity,
            pixels=case.pixels,
            images=batch,
            warm_ups=1,  # the checked first call
            can_skip=batch > 1,
        )
        for case in cases
        for batch in _batches_of(case, batches)
        if _within_cap(case, batch, limits)
        for engine in engines
        if not engine.unsupported(case)
    ]


def end_to_end_plan(
    cases: Sequence[Case], engines: Sequence[BenchEngine], batches: Sequence[int], limits: Limits
) -> list[Planned]:
    """The end-to-end measurements run_end_to_end makes, in order."""
    planned = []
    for case in cases:
        files = _files_of(case, batches, limits)
        for engine in engines:
            if end_to_end_problem(engine, case):
                continue
            for batch in _end_to_end_batches(engine, batches, files):
                planned.append(
                    Planned(
                        level="end-to-end",
                        case=case.name,
                        engine=engine.name,
                        batch=batch,
                        mode=case.params.mode,
                        family=case.family,
                        connectivity=case.params.connectivity,
                        pixels=case.pixels,
                        images=files,
                        warm_ups=int(engine.on_device),  # GPU engines start CUDA first
                        can_skip=False,
                    )
                )
    return planned


def run_kernel(
    cases: Sequence[Case],
    engines: Sequence[BenchEngine],
    batches: Sequence[int],
    limits: Limits,
    progress: Progress,
) -> list[Record]:
    """Kernel-level records of every engine on every case and batch size."""
    return [
        record
        for case in cases
        for record in _KernelCase(case, engines, limits, progress).run(_batches_of(case, batches))
    ]


def _batches_of(case: Case, batches: Sequence[int]) -> list[int]:
    """The batch sizes a case runs at: all of them, or 1 alone for a volume."""
    return [1] if case.is_volume else sorted(batches)


class _KernelCase:
    """The kernel-level measurements of one case."""

    def __init__(
        self, case: Case, engines: Sequence[BenchEngine], limits: Limits, progress: Progress
    ):
        self.case = case
        self.limits = limits
        self.progress = progress
        self.records: list[Record] = []
        self.engines: list[BenchEngine] = []
        for engine in engines:
            why = engine.unsupported(case)
            if why:
                self._skip(engine, None, why)
            else:
                self.engines.append(engine)
        self.single_ms: dict[str, float] = {}
        self.per_image: int | None = None

    def run(self, batches: list[int]) -> list[Record]:
        for batch in batches:
            if not _within_cap(self.case, batch, self.limits):
                for engine in self.engines:
                    self._skip(
                        engine,
                        batch,
                        f"batch over the {self.limits.max_batch_pixels / 1e6:.0f} Mpixel cap "
                        f"({batch} x {self.case.size})",
                    )
                continue
            host = np.repeat(self.case.image[None], batch, axis=0)
            labels: dict[str, tuple[np.ndarray, int, BenchEngine]] = {}
            for engine in self.engines:
                self._measure(engine, host, labels)
            if batch == 1:
                self._cross_check(labels)
        return self.records

    def _measure(
        self,
        engine: BenchEngine,
        host: np.ndarray,
        labels: dict[str, tuple[np.ndarray, int, BenchEngine]],
    ) -> None:
        batch = len(host)
        planned = kernel_plan([self.case], [engine], [batch], self.limits)[0]
        if batch > 1:
            why = self._too_slow(engine, batch)
            if why:
                self._skip(engine, batch, why)
                self.progress.skipped(planned)
                return
        emulation = engine.emulation(self.case.params.mode)
        record = Record.for_case(engine.name, self.case, "kernel", batch, emulation)
        self.records.append(record)
        self.progress.started(planned)
        params = self.case.params
        try:
            prepared = engine.prepare(host, params)
            # The first call warms up and is checked: GPU modules and memory pools, and a CPU
            # engine's working memory for this batch size (whose first touch a steady call
            # does not pay).
            _, output = timed(lambda: engine.run(prepared, params))
            total = output.total()
            if batch == 1:
                labels[engine.name] = (engine.host_labels(output), total, engine)
            elif self.per_image is not None and total != batch * self.per_image:
                _mismatch(
                    record,
                    f"{total} components in a batch of {batch} copies, expected "
                    f"{batch} x {self.per_image}",
                )
            record.components = total // batch
            del output
            times = measure(
                lambda: engine.run(prepared, params),
                engine.on_device,
                self.limits.repeat,
                self.limits.budget_s,
            )
            record.set_times(times, batch, self.case.pixels)
            if batch == 1:
                self.single_ms[engine.name] = statistics.median(times)
        except Exception as error:
            record.status = "failed"
            record.note = f"{type(error).__name__}: {error}"
        finally:
            prepared = None
            engine.release()
            self.progress.finished(record.median_ms)

    def _too_slow(self, engine: BenchEngine, batch: int) -> str | None:
        single = self.single_ms.get(engine.name)
        if single is None:
            return "not measured at batch 1"
        estimate = single * batch / 1000
        if estimate > self.limits.max_call_s:
            return (
                f"one call over the {self.limits.max_call_s:g} s cap "
                f"(about {estimate:.1f} s, from batch 1)"
            )
        return None

    def _cross_check(self, labels: dict[str, tuple[np.ndarray, int, BenchEngine]]) -> None:
        """Compare each engine's batch-1 labels with the reference engine's."""
        if not labels:
            return
        reference = next((name for name in REFERENCE_ORDER if name in labels), next(iter(labels)))
        ref_labels, ref_count, ref_engine = labels[reference]
        self.per_image = ref_count
        for record in self.records:
            if record.batch != 1 or record.engine not in labels:
                continue
            if record.engine == reference:
                record.note = record.note or "reference"
                continue
            engine_labels, count, engine = labels[record.engine]
            problem = compare(
                reference,
                ref_labels,
                ref_count,
                ref_engine.raster_order,
                engine_labels,
                count,
                engine.raster_order,
            )
            if problem:
                _mismatch(record, problem)

    def _skip(self, engine: BenchEngine, batch: int | None, why: str) -> None:
        record = Record.for_case(engine.name, self.case, "kernel", batch)
        record.status, record.note = "skipped", why
        self.records.append(record)


def run_end_to_end(
    cases: Sequence[Case],
    engines: Sequence[BenchEngine],
    batches: Sequence[int],
    limits: Limits,
    progress: Progress,
) -> list[Record]:
    """End-to-end records: `gccl label` on the files of each case, for each batch size."""
    records: list[Record] = []
    with tempfile.TemporaryDirectory(prefix="gccl-bench-") as temp:
        folders: dict[int, Path] = {}
        for case in cases:
            files = _files_of(case, batches, limits)
            key = id(case.image)
            if key not in folders:
                folders[key] = _write_files(case, files, Path(temp) / f"in-{len(folders)}")
            records.extend(
                _EndToEndCase(case, folders[key], files, Path(temp), limits, progress).run(
                    engines, batches
                )
            )
    return records


def _files_of(case: Case, batches: Sequence[int], limits: Limits) -> int:
    """How many files a case's end-to-end runs label: its largest batch within the cap."""
    fitting = [b for b in _batches_of(case, batches) if _within_cap(case, b, limits)]
    return max(fitting, default=1)


def _within_cap(case: Case, batch: int, limits: Limits) -> bool:
    """Whether a batch of `batch` copies of the case runs: within MAX_BATCH_PIXELS, or a
    single volume (a 512^3 one is over it, and a volume runs at batch 1 alone)."""
    return batch * case.pixels <= limits.max_batch_pixels or (case.is_volume and batch == 1)


def _end_to_end_batches(engine: BenchEngine, batches: Sequence[int], files: int) -> list[int]:
    """The batch sizes an engine's end-to-end runs take (1 alone where it has no batches)."""
    return sorted(b for b in batches if b <= files) if engine.end_to_end_batched else [1]


def end_to_end_problem(engine: BenchEngine, case: Case) -> str | None:
    """Why `engine` has no end-to-end run of `case`, or None."""
    mode = case.params.mode
    if not engine.end_to_end_modes:
        return engine.no_end_to_end
    if mode not in engine.end_to_end_modes:
        return f"no {mode} mode end to end"
    return engine.unsupported(case)


class _EndToEndCase:
    """The end-to-end measurements of one case: one run over all its files per call."""

    def __init__(
        self,
        case: Case,
        folder: Path,
        files: int,
        temp: Path,
        limits: Limits,
        progress: Progress,
    ):
        self.case, self.folder, self.files = case, folder, files
        self.temp, self.limits, self.progress = temp, limits, progress
        self.runs = 0

    def run(self, engines: Sequence[BenchEngine], batches: Sequence[int]) -> list[Record]:
        records: list[Record] = []
        reference: tuple[str, int] | None = None
        for engine in engines:
            why = end_to_end_problem(engine, self.case)
            if why:
                record = Record.for_case(engine.name, self.case, "end-to-end", None)
                record.status, record.note = "skipped", why
                records.append(record)
                continue
            plan = end_to_end_plan([self.case], [engine], batches, self.limits)
            for planned in plan:
                batch = planned.batch
                emulation = engine.emulation(self.case.params.mode)
                record = Record.for_case(engine.name, self.case, "end-to-end", batch, emulation)
                records.append(record)
                self.progress.started(planned)
                try:
                    self._measure(record, engine, batch)
                except Exception as error:
                    record.status = "failed"
                    record.note = f"{type(error).__name__}: {error}"
                    continue
                finally:
                    self.progress.finished(record.median_ms)
                assert record.components is not None
                if reference is None:
                    reference = (f"{engine.name} at batch {batch}", record.components)
                elif record.components != reference[1]:
                    _mismatch(
                        record,
                        f"{record.components} components in all files, "
                        f"{reference[0]} finds {reference[1]}",
                    )
        return records

    def _measure(self, record: Record, engine: BenchEngine, batch: int) -> None:
        if engine.on_device:  # CUDA initialization and module loading are not per-run costs
            self._label(engine, batch)
        first_ms, components = timed(lambda: self._label(engine, batch))
        record.components = components
        times = measure(
            lambda: self._label(engine, batch),
            False,
            self.limits.repeat,
            self.limits.budget_s,
            [first_ms],
        )
        record.set_times(times, self.files, self.case.pixels)

    def _label(self, engine: BenchEngine, batch: int) -> int:
        """One run over the case's files into a fresh folder; the components in all of them."""
        self.runs += 1
        out = self.temp / f"out-{self.runs}"
        try:
            return engine.end_to_end(self.folder, out, self.case.params, batch)
        finally:
            shutil.rmtree(out, ignore_errors=True)


def _write_files(case: Case, count: int, folder: Path) -> Path:
    """`count` copies of the case's file in `folder`: the user's own, or a PNG; a volume's
    own file itself (gccl label never changes an input), or a 3-D .npy in `folder`."""
    import imageio.v3 as iio

    if case.is_volume and case.source is not None:
        return Path(case.source)
    folder.mkdir(parents=True)
    if case.is_volume:
        np.save(folder / "volume-0000.npy", case.image)
        return folder
    first = folder / "image-0000.png"
    if case.source is not None:
        first = folder / f"image-0000{Path(case.source).suffix}"
        shutil.copyfile(case.source, first)
    else:
        iio.imwrite(first, case.image)
    for i in range(1, count):
        shutil.copyfile(first, folder / f"image-{i:04d}{first.suffix}")
    return folder


def _mismatch(record: Record, message: str) -> None:
    record.status = "mismatch"
    record.note = message
