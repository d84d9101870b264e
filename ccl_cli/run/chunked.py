"""`gccl label volume.zarr --out DIR [--scheduler ADDRESS]`: a Zarr volume labeled chunk by
chunk (ccl_cli.chunked) on a Dask cluster, or in this process's threads without one.

Per volume `v.zarr` it writes `DIR/v.labels.zarr` (uint16 up to 65535 labels, else uint32;
the source's chunks, Zarr format and attributes), `DIR/v.stats.csv` and a row of
`DIR/summary.csv`, under the --out lock and the record of made files. The label store is
written under a temporary name and renamed into place once whole; a store gccl did not make is
never replaced; an interrupted or failed run leaves no label store behind (its temporary is
removed, and a later run removes one a killed run left).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import signal
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from ..config import Settings
from ..contract.params import LabelParams
from ..errors import GcclError, InputError, UsageError
from ..io.inputs import InputItem
from ..io.lock import OutputLock
from ..io.made import MadeFiles
from ..io.out_dir import OutDir, not_made_here
from ..io.output_paths import SUMMARY_NAME
from ..io.owner import file_identity
from ..options import BY_NAME
from .records import FailFast, Record, Reporter, RunReport
from .summary import summary_csv

#: Temporary label stores start so (a run removes those a killed run left, under the lock).
TEMP_STORE_PREFIX = ".gccl-tmp-zarr-"
#: What distributed raises when the scheduler goes away mid-run (its tasks cancelled).
_SCHEDULER_GONE = ("FuturesCancelledError", "CancelledError", "CommClosedError")


def zarr_specs(specs: Sequence[str]) -> bool:
    """Whether the inputs are Zarr volumes (UsageError when only some are)."""
    from ..chunked.zarr_store import is_zarr

    found = [is_zarr(Path(spec)) for spec in specs if spec != "-"]
    if any(found) and not all(found):
        raise UsageError("Zarr volumes are labeled in a run of their own: give them alone")
    return bool(found) and all(found)


#: Options of `gccl label` a Zarr run does not take, given other than their defaults: the
#: run is refused with their names rather than going on without them. (It writes a label
#: store in the source's chunks, a statistics CSV and the summary, with the Dask scheduler
#: or this process's threads.)
NOT_FOR_ZARR = (
    "relative_to",
    "keep_extension",
    "color_to_gray",
    "label_format",
    "tiff_compression",
    "spacing",
    "preview",
    "skip_existing",
    "batch_size",
    "batch_window",
    "devices",
    "processes",
    "max_image_bytes",
)


def label_options(params: LabelParams, settings: Settings) -> dict[str, Any]:
    """ccl_cli.label's keywords for `params` (the run's --options)."""
    if params.morphology or params.smooth or params.fill_holes or params.polygons:
        raise UsageError(
            "--erode/--dilate/--open/--close/--smooth/--fill-holes/--polygons are not "
            "available for Zarr volumes"
        )
    given = [name for name in NOT_FOR_ZARR if getattr(settings, name) != BY_NAME[name].default]
    if given:
        names = ", ".join("--" + name.replace("_", "-") for name in given)
        raise UsageError(
            f"{names}: not available for Zarr volumes (a Zarr run writes a label store, a "
            "statistics CSV and the summary)"
        )
    if settings.workers is not None and settings.scheduler is not None:
        raise UsageError(
            "--workers: with --scheduler the Dask cluster's workers run their own threads"
        )
    return {
        "background": params.background,
        "invert": params.invert,
        "threshold": params.threshold,
        "tau": params.tau,
        "tau_relative": params.tau_relative if params.tau is not None else None,
        "tau_quadratic": params.tau_quadratic if params.tau is not None else None,
        "connectivity": params.connectivity,
        "min_area": params.min_area,
        "max_area": params.max_area,
        "largest": params.largest,
        "device": settings.device,
    }


def run_chunked(specs: Sequence[str], settings: Settings, reporter: Reporter) -> RunReport:
    """Label the Zarr volumes `specs` into --out (module docstring)."""
    if settings.out is None:
        raise UsageError("--out is required: the folder that receives the outputs")
    params = settings.params.at_rank(3)  # (--connectivity in a volume's rank: 8 is 26)
    options = label_options(params, settings)
    params = _api_params(options)
    started = time.perf_counter()
    report = RunReport()
    with ExitStack() as stack:
        stack.enter_context(_scheduler(settings.scheduler, settings.workers))
        out = OutDir.open(settings.out)
        stack.callback(out.close)
        stack.enter_context(OutputLock(out))
        made = MadeFiles(out)
        stack.callback(made.close, settings.fsync)
        _remove_left_stores(out)
        reporter.start(len(specs))
        records = [Record(InputItem(path=Path(s), relative=Path(Path(s).name))) for s in specs]
        stopped = ""
        try:
            with _terminate_as_interrupt():
                for record in records:
                    _label_one(record, options, params, out, made, settings)
                    reporter.finished(record)
                    if settings.fail_fast and record.status == "failed":
                        report.failed_fast = True
                        stopped = FailFast.MESSAGE
                        break
        except KeyboardInterrupt as stop:
            report.interrupted = True
            report.signal = signal.SIGTERM if "SIGTERM" in str(stop) else signal.SIGINT
            stopped = "interrupted"
            current = next(record for record in records if record.status == "pending")
            current.status, current.message = "failed", "interrupted; nothing written"
        for record in records:
            if record.status == "pending":  # (not started: the run stopped before it)
                record.status, record.message = "not-run", stopped
            report.counts[record.status] += 1
        report.records = records
        summary = out.root / SUMMARY_NAME
        out.write(summary, summary_csv(r.row() for r in records), made, settings.fsync)
        report.summary = summary
    report.seconds = time.perf_counter() - started
    return report


def _label_one(
    record: Record,
    options: dict[str, Any],
    params: LabelParams,
    out: OutDir,
    made: MadeFiles,
    settings: Settings,
) -> None:
    """Label one Zarr volume into its outputs; the record says how it went."""
    from .. import api
    from ..chunked.entry import solve_array
    from ..chunked.pieces import ChunkLabeler
    from ..chunked.zarr_store import open_source

    began = time.perf_counter()
    path = record.item.path
    stem = path.name.removesuffix(".zarr")
    store, stats = out.root / f"{stem}.labels.zarr", out.root / f"{stem}.stats.csv"
    try:
        source = open_source(path)
        record.width, record.height, record.dtype = (
            source.shape[2],
            source.shape[1],
            source.dtype.name,
        )
        _check_place(out, made, store)
        labeler = ChunkLabeler(api.label, options)
        solved = solve_array(source.dask_array(), labeler, params, source=str(path))
        record.kept = solved.count
        record.components = solved.components
        _write_store(solved, source, out, made, store, options, settings)
        out.write(stats, _csv(solved), made, settings.fsync)
        record.outputs = {"labels": str(store), "stats": str(stats)}
        record.status = "ok"
    except (GcclError, ValueError, TypeError, OSError) as error:
        record.status, record.message = "failed", _one_line(error)
    except Exception as error:  # a worker's exception, a scheduler gone: one line, the rest goes on
        record.status, record.message = "failed", _one_line(error)
    record.seconds = time.perf_counter() - began


def _api_params(options: dict[str, Any]) -> LabelParams:
    """The parameters the API resolves `options` to (as each chunk is labeled with them)."""
    from ..api import Labeler

    return Labeler(**options).params


def _one_line(error: BaseException) -> str:
    if type(error).__name__ in _SCHEDULER_GONE:
        return (
            f"the Dask scheduler went away during the run ({type(error).__name__}); nothing written"
        )
    text = str(error).strip().splitlines()
    line = text[0] if text else type(error).__name__
    if isinstance(error, GcclError | ValueError | TypeError):
        return line
    return f"{type(error).__name__}: {line}"


def _check_place(out: OutDir, made: MadeFiles, store: Path) -> None:
    """InputError when `store` holds something gccl did not make (it is never replaced)."""
    info = out.lstat(store)
    if info is not None and not made.ours(out.key(store), file_identity(info)):
        raise InputError(not_made_here(store))


def _write_store(
    solved: Any,
    source: Any,
    out: OutDir,
    made: MadeFiles,
    store: Path,
    options: dict[str, Any],
    settings: Settings,
) -> None:
    """Store the labels under a temporary name in --out, then give it its name (replacing
    the store an earlier run made there, which goes once the new one is in place)."""
    import dask.array as da

    from ..chunked.zarr_store import create_labels
    from ..io.volumes.encode import label_dtype

    temp = f"{TEMP_STORE_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    temp_path = out.root / temp
    try:
        dtype = label_dtype(solved.count)
        target = create_labels(
            source, temp_path, {k: v for k, v in options.items() if v is not None}, dtype
        )
        da.store(solved.labels(dtype), target, lock=False)
        _check_place(out, made, store)  # (again: a store may have appeared meanwhile)
        # (a folder renamed within its own folder keeps its inode, size and modification time)
        identity = file_identity(os.stat(temp, dir_fd=out.fd, follow_symlinks=False))
        made.made(out.key(store), identity)
        try:
            old = None
            if out.lstat(store) is not None:
                old = f"{TEMP_STORE_PREFIX}old-{secrets.token_hex(4)}"
                os.rename(store.name, old, src_dir_fd=out.fd, dst_dir_fd=out.fd)
            os.rename(temp, store.name, src_dir_fd=out.fd, dst_dir_fd=out.fd)
        finally:
            made.settled(out.key(store), identity)
        if old is not None:
            shutil.rmtree(out.root / old)
    finally:
        if os.path.lexists(temp_path):
            shutil.rmtree(temp_path, ignore_errors=True)


def _csv(solved: Any) -> Iterator[bytes]:
    """The statistics CSV, a slab of chunks at a time (the rows of one slab in memory)."""
    from ..chunked.table import csv_rows_of

    first = True
    label = 1
    for table in solved.slab_tables():
        yield from csv_rows_of(table, label, header=first)
        first = False
        label += len(table)


def _remove_left_stores(out: OutDir) -> None:
    """Remove temporary label stores a killed run left (this run holds the lock)."""
    for name in os.listdir(out.fd):
        if name.startswith(TEMP_STORE_PREFIX):
            shutil.rmtree(out.root / name, ignore_errors=True)


@contextmanager
def _scheduler(address: str | None, threads: int | None) -> Iterator[None]:
    """The Dask scheduler the run's tasks go to: the cluster at `address`, else this
    process's threads (`threads` of them, or dask's default: one per core)."""
    import dask

    if address is None:
        with dask.config.set(scheduler="threads", num_workers=threads):
            yield
        return
    from .cluster import Cluster

    cluster = Cluster(address)  # probes the address: one line when nothing answers
    quiet = logging.getLogger("distributed.client")  # its reconnect errors: the run says one line
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        with cluster.client.as_current(), dask.config.set(scheduler=cluster.client):
            yield
    finally:
        with contextlib.suppress(Exception):  # (a scheduler gone: the run has said so)
            cluster.close()
        quiet.setLevel(level)


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the run as Ctrl-C does (the temporaries removed on the way out)."""

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt("SIGTERM")

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
