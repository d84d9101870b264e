"""Labeling as tasks of a few inputs each, on the workers of an executor.

Two executors hand work out this way: a Dask cluster (cluster.py, --scheduler)
and a pool of local processes (processes.py, --processes). The client (this
process) admits the inputs, sends them in tasks of about --batch-size inputs,
and finishes each record as its task's result arrives; the lock, progress,
stopping and summary.csv stay with the pipeline. A task runs the pipeline's
own decode-label-write code on its worker, with that worker's backend, by
absolute paths.

Outputs are written atomically and are the same whichever worker writes them,
so a task that is rerun (Dask reruns those of a worker that died) overwrites
finished files harmlessly; temporaries of a worker killed mid-write are
removed when every task has ended (command.py). A task carries what its
worker must know of --out: the inode of the folder the run opened (the
worker opens --out by its path and refuses another folder there) and what
the record of made files lists at its inputs' output paths (io/made.py); the
worker records the files it makes in a segment of its own.
"""

from __future__ import annotations

import queue
import secrets
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..backends import make_backend
from ..backends.base import Backend
from ..config import Settings
from ..io.made import Known, TaskRecord
from ..io.out_dir import OutDir
from ..io.output_paths import OutputPaths, output_paths, stale_name
from .context import RunContext
from .local import label_admitted
from .records import Admitted, Outcomes, Record, Stop

#: Inputs per task when --batch-size is auto (at most, for local processes).
AUTO_TASK_SIZE = 16
#: How often the client looks for Ctrl-C while it waits for results.
_POLL_SECONDS = 0.2


@dataclass
class Task:
    """What a worker labels: inputs by absolute path, the inode of --out as the run opened
    it, and the record's entries at the inputs' output paths."""

    inputs: list[Admitted]
    out_inode: int
    known: Known
    #: The task's name, the same for each try (io/made.TaskRecord reads what earlier tries made).
    name: str = field(default_factory=lambda: secrets.token_hex(8))


#: Sends label_task(task, settings) to a worker; returns a future
#: (concurrent.futures or distributed: result(), done(), add_done_callback()).
Submit = Callable[[Task, Settings], Any]
#: The size of the next task, given how many inputs the earlier tasks hold.
TaskSizes = Callable[[int], int]


def fixed_task_size(sent: int) -> int:
    """AUTO_TASK_SIZE inputs per task, however many were sent."""
    return AUTO_TASK_SIZE


@dataclass
class TaskRunner:
    """Sends admitted records to workers in tasks and finishes them from the results.

    submit: sends one task. cancel: withdraws the futures of unfinished tasks.
    failure: how a failed task is named in its records' messages.
    auto_sizes: the tasks' sizes when --batch-size is auto.
    fence: after a stop, waits (bounded) until no worker runs a task any more, ending
    those that do not finish in time; the results of the tasks that ended then count.
    """

    submit: Submit
    cancel: Callable[[list[Any]], None]
    failure: str
    auto_sizes: TaskSizes = fixed_task_size
    fence: Callable[[], None] | None = None

    def label(self, admitted: Iterable[Admitted | None], run: RunContext) -> None:
        """Submit a task per chunk and finish records as results come; a stop cancels the rest."""
        settings, outcomes, check_stop, out, made = (
            run.settings,
            run.outcomes,
            run.check_stop,
            run.out,
            run.made,
        )
        assert settings.out is not None
        absolute_out = settings.out.absolute()
        task_settings = replace(settings, out=absolute_out, fail_fast=False)
        chosen = settings.batch_size
        sizes = self.auto_sizes if not isinstance(chosen, int) else (lambda sent: chosen)
        done: queue.SimpleQueue[Any] = queue.SimpleQueue()
        chunks: dict[Any, list[Record]] = {}
        try:
            for chunk in _chunks(admitted, sizes):  # admission checks for a stop
                inputs = [_absolute(record, task_settings) for record, _ in chunk]
                keys = (out.key(path) for _, paths in chunk for path in _touches(paths))
                task = Task(inputs, out.identity[1], made.known(keys))
                future = self.submit(task, task_settings)
                chunks[future] = [record for record, _ in chunk]
                future.add_done_callback(done.put)
            results = _Results(outcomes, settings.out, absolute_out, self.failure)
            for _ in range(len(chunks)):
                future = _next_done(done, check_stop)
                results.take(future, chunks[future])
        except Stop:  # (Ctrl-C twice, KeyboardInterrupt, stops at once)
            self.cancel([future for future in chunks if not future.done()])
            if self.fence is not None:
                self.fence()
            # what the tasks that ended finished is finished: the stop ends no more runs
            ending = Outcomes(outcomes.reporter, False, outcomes.summary)
            last = _Results(ending, settings.out, absolute_out, self.failure)
            for future, records in chunks.items():
                if future.done() and not future.cancelled():
                    last.take(future, records)
            raise
        finally:
            self.cancel([future for future in chunks if not future.done()])


class _Results:
    """Finishes the client's records from the results of their tasks."""

    def __init__(self, outcomes: Outcomes, out: Path, absolute_out: Path, failure: str) -> None:
        self.outcomes = outcomes
        self.out = out
        self.absolute_out = absolute_out
        self.failure = failure
        self.notices: set[str] = set()

    def take(self, future: Any, records: list[Record]) -> None:
        """Finish those of `records` not finished yet from their task: its results, or its
        error for each of them."""
        try:
            results, notices = future.result()
        except Exception as error:
            reason = str(error).strip().splitlines()[:1]
            message = f"{self.failure} ({': '.join([type(error).__name__, *reason])})"
            for record in records:
                if record.status == "pending":
                    self.outcomes.fail(record, message)
            return
        for notice in notices:
            if notice not in self.notices:
                self.notices.add(notice)
                self.outcomes.reporter.notice(f"a worker: {notice}")
        for record, result in zip(records, results, strict=True):
            if record.status != "pending":
                continue
            outputs = {
                kind: str(self.out / Path(path).relative_to(self.absolute_out))
                for kind, path in result.outputs.items()
            }
            vars(record).update(vars(result), item=record.item, outputs=outputs)
            self.outcomes.finished(record)


def guided_task_sizes(inputs: int, workers: int) -> TaskSizes:
    """Task sizes for `inputs` inputs on `workers` workers: what is left over twice the
    workers, 1 to AUTO_TASK_SIZE ("guided" scheduling, as OpenMP names it).

    A worker returns a task's records all at once, when its last input is
    done, and tasks of one size end unevenly: 200 scans in 50 tasks of 4 on
    16 processes left 14 of them idle while the last two ran. Tasks that
    shrink as the run nears its end make the workers finish together.
    """

    def size(sent: int) -> int:
        return max(1, min(AUTO_TASK_SIZE, -(-(inputs - sent) // (2 * workers))))

    return size


def _chunks(admitted: Iterable[Admitted | None], sizes: TaskSizes) -> Iterator[list[Admitted]]:
    """`admitted` in lists of the `sizes` given; a pause (None) ends a list early, as does
    the end."""
    chunk: list[Admitted] = []
    sent = 0
    for entry in admitted:
        if entry is not None:
            chunk.append(entry)
        if chunk and (entry is None or len(chunk) >= sizes(sent)):
            yield chunk
            sent += len(chunk)
            chunk = []
    if chunk:
        yield chunk


def _touches(paths: OutputPaths) -> Iterator[Path]:
    """The paths a task may replace or remove for an input: its outputs, and the copies an
    earlier failure moved aside."""
    for path in paths.all():
        yield path
        yield path.with_name(stale_name(path))


def _absolute(record: Record, task_settings: Settings) -> Admitted:
    """A worker's copy of a record: input and outputs by absolute path (workers have their cwd),
    the page of a multi-page TIFF kept."""
    assert task_settings.out is not None
    item = replace(record.item, path=record.item.path.absolute())
    return Record(item), output_paths(
        task_settings.out, item.relative, task_settings.keep_extension
    )


def _next_done(done: queue.SimpleQueue[Any], check_stop: Callable[[], None]) -> Any:
    """The next task to end, checking for Ctrl-C and SIGTERM while waiting."""
    while True:
        check_stop()
        try:
            return done.get(timeout=_POLL_SECONDS)
        except queue.Empty:
            continue


#: The backend of this worker process, made by its first task and kept for the next ones.
_worker_backends: dict[tuple[str, str | None, int | None], tuple[Backend, list[str]]] = {}


def label_task(task: Task, settings: Settings) -> tuple[list[Record], list[str]]:
    """One task, on a worker: label its inputs with this worker's backend, into --out.

    Returns the finished records and the notices the worker had (e.g. no usable GPU).
    InputError when --out is not the folder the run opened.
    """
    assert settings.out is not None
    backend, backend_notices = _own_backend(settings)
    reporter = _TaskReporter(list(backend_notices))
    with OutDir.reopen(settings.out, task.out_inode) as out:
        record = TaskRecord(out, task.known, task.name)
        try:
            label_admitted(task.inputs, settings, backend, reporter, out, record)
        finally:
            record.close(settings.fsync)
    return [record for record, _ in task.inputs], reporter.notices


def _own_backend(settings: Settings) -> tuple[Backend, list[str]]:
    """This worker's backend for `settings` and the notices making it gave, made once."""
    key = (settings.device, settings.devices, settings.workers)
    if key not in _worker_backends:
        notices: list[str] = []
        backend = make_backend(settings.device, settings.workers, notices.append, settings.devices)
        _worker_backends[key] = backend, notices
    return _worker_backends[key]


@dataclass
class _TaskReporter:
    """A task's reporter: records travel back as its result, notices are kept for the client."""

    notices: list[str]

    def start(self, total: int | None) -> None:
        pass

    def finished(self, record: Record) -> None:
        pass

    def notice(self, message: str) -> None:
        self.notices.append(message)
