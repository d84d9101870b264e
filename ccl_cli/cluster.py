"""`gccl label --scheduler ADDRESS`: the same run on the workers of a Dask distributed cluster.

The client (this process) admits the inputs, sends them in tasks of about
--batch-size inputs, and finishes each record as its task's result arrives; the
lock, progress, stopping and summary.csv stay with the pipeline. A task runs the
pipeline's own decode-label-write code on its worker, with that worker's backend
(`dask cuda worker` gives each worker one GPU, so --device auto or cuda takes it).
Workers read inputs and write outputs on shared storage, by absolute paths.

A worker that dies has its task rerun on another by Dask. Outputs are written
atomically and are the same whichever worker writes them, so a rerun that
overwrites finished files is harmless; temporaries of a worker killed mid-write
are removed when every task has ended.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from itertools import islice
from pathlib import Path
from typing import Any

from .backends import make_backend
from .config import Settings
from .errors import UsageError
from .inputs import InputItem
from .outputs import output_paths, remove_stale_temporaries
from .pipeline import Admitted, Outcomes, Record, label_admitted

#: Inputs per task when --batch-size is auto.
AUTO_TASK_SIZE = 16
#: Seconds to wait for the scheduler to answer.
CONNECT_TIMEOUT = 10.0
#: Reruns of a task that raised (a worker that dies has its task rerun anyway).
RETRIES = 2
#: How often the client looks for Ctrl-C while it waits for results.
_POLL_SECONDS = 0.2


class Cluster:
    """A connection to a Dask scheduler, and the labeling of admitted records on its workers."""

    def __init__(self, address: str) -> None:
        try:
            from distributed import Client
        except ImportError:
            raise UsageError(
                "--scheduler needs Dask distributed: pip install 'gccl[cluster]'"
            ) from None
        try:
            self.client = Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
        except OSError:  # includes the timeout; config checked the address's form
            raise UsageError(
                f"--scheduler {address}: no Dask scheduler answered within {CONNECT_TIMEOUT:g} s"
            ) from None

    def close(self) -> None:
        """Disconnect from the scheduler."""
        self.client.close()

    def label(
        self,
        admitted: Iterable[Admitted],
        settings: Settings,
        outcomes: Outcomes,
        check_stop: Callable[[], None],
    ) -> None:
        """Submit a task per chunk and finish records as results come; a stop cancels the rest."""
        assert settings.out is not None
        absolute_out = settings.out.absolute()
        task_settings = replace(settings, out=absolute_out, fail_fast=False)
        size = settings.batch_size if isinstance(settings.batch_size, int) else AUTO_TASK_SIZE
        done: queue.SimpleQueue[Any] = queue.SimpleQueue()
        chunks: dict[Any, list[Record]] = {}
        try:
            for chunk in _chunks(admitted, size):  # admission checks for a stop
                task = [_absolute(record, task_settings) for record, _ in chunk]
                # pure=False: a fresh key, so a second run never gets an earlier run's result.
                future = self.client.submit(
                    _label_task, task, task_settings, pure=False, retries=RETRIES
                )
                chunks[future] = [record for record, _ in chunk]
                future.add_done_callback(done.put)
            results = _Results(outcomes, settings.out, absolute_out)
            for _ in range(len(chunks)):
                future = _next_done(done, check_stop)
                results.take(future, chunks[future])
        finally:
            self.client.cancel([future for future in chunks if not future.done()])
        removed = remove_stale_temporaries(settings.out)
        if removed:
            outcomes.reporter.notice(
                f"removed {removed} partial file(s) left by a worker that died"
            )


class _Results:
    """Finishes the client's records from the results of their tasks."""

    def __init__(self, outcomes: Outcomes, out: Path, absolute_out: Path) -> None:
        self.outcomes = outcomes
        self.out = out
        self.absolute_out = absolute_out
        self.notices: set[str] = set()

    def take(self, future: Any, records: list[Record]) -> None:
        """Finish `records` from their task: its results, or its error for each of them."""
        try:
            results, notices = future.result()
        except Exception as error:
            reason = str(error).strip().splitlines()[:1]
            message = f"the cluster task failed ({': '.join([type(error).__name__, *reason])})"
            for record in records:
                self.outcomes.fail(record, message)
            return
        for notice in notices:
            if notice not in self.notices:
                self.notices.add(notice)
                self.outcomes.reporter.notice(f"a worker: {notice}")
        for record, result in zip(records, results, strict=True):
            outputs = {
                kind: str(self.out / Path(path).relative_to(self.absolute_out))
                for kind, path in result.outputs.items()
            }
            vars(record).update(vars(result), item=record.item, outputs=outputs)
            self.outcomes.finished(record)


def _chunks(admitted: Iterable[Admitted], size: int) -> Iterator[list[Admitted]]:
    """`admitted` in lists of `size` (the last may be shorter)."""
    iterator = iter(admitted)
    while chunk := list(islice(iterator, size)):
        yield chunk


def _absolute(record: Record, task_settings: Settings) -> Admitted:
    """A worker's copy of a record: input and outputs by absolute path (workers have their cwd)."""
    assert task_settings.out is not None
    item = InputItem(record.item.path.absolute(), record.item.relative)
    return Record(item), output_paths(task_settings.out, item.relative)


def _next_done(done: queue.SimpleQueue[Any], check_stop: Callable[[], None]) -> Any:
    """The next task to end, checking for Ctrl-C and SIGTERM while waiting."""
    while True:
        check_stop()
        try:
            return done.get(timeout=_POLL_SECONDS)
        except queue.Empty:
            continue


def _label_task(admitted: list[Admitted], settings: Settings) -> tuple[list[Record], list[str]]:
    """One task, on a worker: label `admitted` with this worker's backend.

    Returns the finished records and the notices the worker had (e.g. no usable GPU).
    """
    reporter = _TaskReporter()
    backend = make_backend(settings.device, settings.workers, reporter.notice, settings.devices)
    label_admitted(admitted, settings, backend, reporter)
    return [record for record, _ in admitted], reporter.notices


class _TaskReporter:
    """A task's reporter: records travel back as its result, notices are kept for the client."""

    def __init__(self) -> None:
        self.notices: list[str] = []

    def start(self, total: int) -> None:
        pass

    def finished(self, record: Record) -> None:
        pass

    def notice(self, message: str) -> None:
        self.notices.append(message)
