"""The worker pool of `--processes` (run/worker_pool.py): a task whose worker dies is sent again
alone, a bounded number of times; every task ends; closing ends in bounded time.

The tasks (pool_tasks.py) run in worker processes of the run's fork server: each notes its
tries in a file (one line per start, with its pid), so the tests count what ran where.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import Future
from multiprocessing import forkserver
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import WAIT_SECONDS
from pool_tasks import fail, note, tries, unpicklable

from ccl_cli.run import processes, worker_pool
from ccl_cli.run.worker_pool import WorkerLost, WorkerPool


def _started(notes: Path, *names: str) -> list[list[int]]:
    """The tries of each of `names`, once each has one (WAIT_SECONDS at most)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not all(tries(notes, name) for name in names) and time.monotonic() < deadline:
        time.sleep(0.01)
    return [tries(notes, name) for name in names]


def _results(futures: list[Future[Any]]) -> list[Any]:
    return [future.result(timeout=WAIT_SECONDS) for future in futures]


@pytest.fixture
def pool():
    made: list[WorkerPool] = []

    def make(size: int) -> WorkerPool:
        made.append(WorkerPool(size, processes.fork_server()))
        return made[-1]

    yield make
    for each in made:
        each.close(0)


def test_a_task_whose_worker_dies_is_sent_again_alone(tmp_path: Path, pool: Any):
    """The others, running beside it or waiting, each run once: their workers keep going."""
    workers = pool(2)
    others = [workers.submit(note, tmp_path, f"t{n}", 0, 0.05) for n in range(8)]
    victim = workers.submit(note, tmp_path, "victim", 1, 0.05)
    assert victim.result(timeout=WAIT_SECONDS)[0] == "victim"
    assert [name for name, _ in _results(others)] == [f"t{n}" for n in range(8)]
    first, second = tries(tmp_path, "victim")
    assert first != second  # a new worker took it
    assert all(len(tries(tmp_path, f"t{n}")) == 1 for n in range(8))
    # two workers started, one more for the one that died
    assert len({pid for n in range(8) for pid in tries(tmp_path, f"t{n}")} | {first, second}) <= 3


def test_a_task_that_kills_every_worker_fails_after_its_tries_and_the_pool_goes_on(
    tmp_path: Path, pool: Any
):
    workers = pool(2)
    doomed = workers.submit(note, tmp_path, "doomed", 99)
    others = [workers.submit(note, tmp_path, f"t{n}") for n in range(4)]
    with pytest.raises(WorkerLost, match="killed by SIGKILL"):
        doomed.result(timeout=WAIT_SECONDS)
    assert len(tries(tmp_path, "doomed")) == worker_pool.RETRIES + 1
    assert len(set(tries(tmp_path, "doomed"))) == worker_pool.RETRIES + 1
    assert [name for name, _ in _results(others)] == [f"t{n}" for n in range(4)]
    assert workers.submit(note, tmp_path, "after").result(timeout=WAIT_SECONDS)[0] == "after"


def test_tasks_sent_while_workers_die_all_end_each_run_once_or_again_once(
    tmp_path: Path, pool: Any
):
    """Every fifth task kills its worker on its first try, while more are being sent."""
    workers = pool(2)
    futures: list[Future[Any]] = []

    def send() -> None:
        for n in range(60):
            futures.append(workers.submit(note, tmp_path, f"t{n}", int(n % 5 == 0)))
            time.sleep(0.002)

    sender = threading.Thread(target=send)
    sender.start()
    sender.join(WAIT_SECONDS)
    assert [name for name, _ in _results(futures)] == [f"t{n}" for n in range(60)]
    counts = {n: len(tries(tmp_path, f"t{n}")) for n in range(60)}
    assert counts == {n: 2 if n % 5 == 0 else 1 for n in range(60)}


def test_a_worker_that_cannot_be_started_is_a_lost_try(
    tmp_path: Path, pool: Any, monkeypatch: pytest.MonkeyPatch
):
    """As when the fork server was killed while asked for a worker: the start fails."""
    failures = [worker_pool.RETRIES]
    real_connect = forkserver.connect_to_new_process

    def connect(fds: Any) -> Any:
        if failures[0]:
            failures[0] -= 1
            raise EOFError("unexpected EOF")
        return real_connect(fds)

    monkeypatch.setattr(forkserver, "connect_to_new_process", connect)
    workers = pool(1)
    assert workers.submit(note, tmp_path, "late").result(timeout=WAIT_SECONDS)[0] == "late"
    assert len(tries(tmp_path, "late")) == 1


def test_a_task_no_worker_can_be_started_for_fails_and_nothing_waits(
    tmp_path: Path, pool: Any, monkeypatch: pytest.MonkeyPatch
):
    def connect(fds: Any) -> Any:
        raise ConnectionRefusedError("no fork server")

    monkeypatch.setattr(forkserver, "connect_to_new_process", connect)
    workers = pool(2)
    futures = [workers.submit(note, tmp_path, f"t{n}") for n in range(3)]
    for future in futures:
        with pytest.raises(ConnectionRefusedError):
            future.result(timeout=WAIT_SECONDS)
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_the_fork_server_killed_with_its_workers_loses_no_task(tmp_path: Path, pool: Any):
    """The two running hold on until their workers are killed. Workers without a set-up
    (no PR_SET_PDEATHSIG) outlive their server: the pool kills them, its sentinels told."""
    workers = pool(2)
    futures = [workers.submit(note, tmp_path, f"t{n}", 0, 10 * WAIT_SECONDS) for n in range(2)]
    futures += [workers.submit(note, tmp_path, f"t{n}") for n in range(2, 6)]
    running = {pids[0] for pids in _started(tmp_path, "t0", "t1")}
    server = _parent(next(iter(running)))
    os.kill(server, signal.SIGKILL)
    assert [name for name, _ in _results(futures)] == [f"t{n}" for n in range(6)]
    assert [len(tries(tmp_path, f"t{n}")) for n in range(6)] == [2, 2, 1, 1, 1, 1]
    later = {pid for n in range(6) for pid in tries(tmp_path, f"t{n}")[-1:]}
    assert not later & running  # the tasks ended on new workers
    assert not [pid for pid in running if _alive(pid)]


def test_an_error_is_the_tasks_result_and_costs_no_try(tmp_path: Path, pool: Any):
    workers = pool(1)
    with pytest.raises(ValueError, match="bad input"):
        workers.submit(fail, "bad input").result(timeout=WAIT_SECONDS)
    with pytest.raises(RuntimeError, match="answer could not be sent back"):
        workers.submit(unpicklable).result(timeout=WAIT_SECONDS)
    with pytest.raises(TypeError):  # a task that cannot be sent fails alone
        workers.submit(note, threading.Lock(), "x").result(timeout=WAIT_SECONDS)
    first = workers.submit(note, tmp_path, "a").result(timeout=WAIT_SECONDS)[1]
    assert workers.submit(note, tmp_path, "b").result(timeout=WAIT_SECONDS)[1] == first


def test_letting_go_cancels_the_waiting_tasks_and_the_workers_exit(tmp_path: Path, pool: Any):
    before = set(multiprocessing.active_children())
    workers = pool(1)
    running = workers.submit(note, tmp_path, "running", 0, WAIT_SECONDS)
    withdrawn = workers.submit(note, tmp_path, "withdrawn")
    waiting = workers.submit(note, tmp_path, "waiting")
    assert withdrawn.cancel()
    _started(tmp_path, "running")
    workers.let_go()
    assert waiting.cancelled() and not running.done()
    with pytest.raises(RuntimeError, match="closed"):
        workers.submit(note, tmp_path, "late")
    (tmp_path / "release").touch()
    assert running.result(timeout=WAIT_SECONDS)[0] == "running"
    assert not tries(tmp_path, "withdrawn") and not tries(tmp_path, "waiting")
    deadline = time.monotonic() + WAIT_SECONDS
    while set(multiprocessing.active_children()) - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not set(multiprocessing.active_children()) - before


def test_closing_kills_a_task_still_running_at_its_deadline(tmp_path: Path):
    workers = WorkerPool(2, processes.fork_server())
    hung = workers.submit(note, tmp_path, "hung", 0, 10 * WAIT_SECONDS)
    waiting = workers.submit(note, tmp_path, "waiting", 0, 10 * WAIT_SECONDS)
    queued = workers.submit(note, tmp_path, "queued")
    pids = [pids[0] for pids in _started(tmp_path, "hung", "waiting")]
    closing = threading.Thread(target=workers.close, args=(0.2,))
    closing.start()
    closing.join(WAIT_SECONDS)
    assert not closing.is_alive()
    assert queued.cancelled()
    for future in (hung, waiting):
        with pytest.raises(WorkerLost, match="killed by SIGKILL"):
            future.result(timeout=0)
    assert not [pid for pid in pids if _alive(pid)]
    assert not [slot for slot in workers.slots if slot.is_alive()]
    assert not tries(tmp_path, "queued")
    assert [len(tries(tmp_path, name)) for name in ("hung", "waiting")] == [1, 1]


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[1])


def _alive(pid: int) -> bool:
    """Whether `pid` is a live process (not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
