"""`gccl label --processes N`: local worker processes (CPU backend here).

A run on worker processes must write the same files, summary.csv (but for the
seconds column) and --json lines as a run in one process, and stop cleanly.
"""

from __future__ import annotations

import csv
import fcntl
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import forkserver
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import (
    WAIT_SECONDS,
    assert_interrupted_summary,
    files,
    gccl,
    gccl_process,
    json_lines,
    make_fax,
    make_inputs,
    on_first_outputs,
    stopped_by_sigterm,
)
from typer.testing import CliRunner

from ccl_cli.cli import app
from ccl_cli.config import Settings, apply
from ccl_cli.errors import EXIT_TERMINATED, UsageError
from ccl_cli.run import processes, tasks


@pytest.mark.slow
def test_same_outputs_summary_and_json_as_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    make_inputs(Path("in"), 11, 24)
    Path("in/corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    args = ["in", "in/missing.png", "-r", "--min-area", "2", "--preview", "--json"]
    code, one_stdout, _ = gccl(*args, "--out", "one", "--processes", "1")
    assert code == 1
    code, many_stdout, stderr = gccl(
        *args, "--out", "many", "--processes", "3", "--batch-size", "2"
    )
    assert code == 1, stderr
    assert files(Path("many")) == files(Path("one"))
    assert json_lines(many_stdout) == json_lines(one_stdout, moved=("one", "many"))
    with open("many/summary.csv", newline="") as handle:
        statuses = [row["status"] for row in csv.DictReader(handle)]
    assert statuses.count("ok") == 11 and statuses.count("failed") == 2


@pytest.mark.slow
def test_the_pages_of_a_multi_page_tiff_keep_their_page_in_worker_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    make_fax(Path("fax16.tif"), 16)
    code, _, stderr = gccl("fax16.tif", "--out", "one", "--processes", "1")
    assert code == 0, stderr
    code, _, stderr = gccl("fax16.tif", "--out", "many", "--processes", "2")
    assert code == 0, stderr
    assert files(Path("many")) == files(Path("one"))
    assert len([name for name in files(Path("one")) if name.startswith("fax16.p")]) == 32


@pytest.mark.slow
def test_sigterm_stops_the_workers_and_writes_the_summary(tmp_path: Path):
    make_inputs(tmp_path / "in", 40, 320)
    options = ["-r", "--batch-size", "1", "--workers", "1", "--processes", "2"]
    code, stderr = stopped_by_sigterm(tmp_path / "in", tmp_path / "out", *options)
    assert code == EXIT_TERMINATED, stderr
    assert_interrupted_summary(tmp_path / "in", tmp_path / "out", 40)
    # The workers were stopped, not abandoned: none is left writing.
    assert not [path for path in (tmp_path / "out").rglob("*") if ".gccl-tmp-" in path.name]


@pytest.mark.parametrize(
    ("setting", "inputs", "cores", "expected"),
    [
        (3, 1, 2, 3),  # a number is taken as given
        ("auto", 1000, 16, 16),  # one per core
        ("auto", 1000, 2, 2),
        ("auto", 1000, 1, 1),  # one core: this process
        ("auto", 15, 16, 1),  # under two processes' worth of inputs: this process
        ("auto", 40, 16, 5),  # one process per 8 inputs
    ],
)
def test_process_count(setting: int | str, inputs: int, cores: int, expected: int):
    assert processes.process_count(setting, inputs, cores) == expected


def test_a_gpu_run_labels_in_this_process():
    """--device cuda or --devices: auto is this process, and more than one is a usage error."""
    assert processes.process_count("auto", 1000, 16, gpu=True) == 1
    assert processes.process_count(1, 1000, 16, gpu=True) == 1
    with pytest.raises(UsageError, match="--processes 4 labels on the CPU"):
        processes.process_count(4, 1000, 16, gpu=True)


@pytest.mark.parametrize(
    "device", [["--device", "cuda"], ["--device", "cuda:1"], ["--devices", "0,1"]]
)
def test_worker_processes_with_a_gpu_are_exit_2_with_nothing_written(
    tmp_path: Path, device: list[str]
):
    make_inputs(tmp_path / "in", 4, 24)
    arguments = ["label", str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--processes", "2"]
    result = CliRunner().invoke(app, [*arguments, *device])
    assert result.exit_code == 2
    assert "labels on the CPU of each worker process" in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("inputs", "workers"), [(1000, 16), (200, 16), (200, 8), (3, 4), (1, 1)])
def test_guided_tasks_shrink_to_single_inputs_as_the_run_ends(inputs: int, workers: int):
    sizes = tasks.guided_task_sizes(inputs, workers)
    chunks = list(tasks._chunks(range(inputs), sizes))  # type: ignore[arg-type]
    assert [entry for chunk in chunks for entry in chunk] == list(range(inputs))
    lengths = [len(chunk) for chunk in chunks]
    assert lengths == sorted(lengths, reverse=True)
    assert max(lengths) == min(tasks.AUTO_TASK_SIZE, -(-inputs // (2 * workers)))
    # the last tasks, one for each worker at least, hold one input each
    assert lengths[-min(inputs, workers) :] == [1] * min(inputs, workers)


def test_a_pause_ends_a_task_early_and_sizes_follow_what_was_sent():
    entries = [*range(5), None, *range(5, 40)]
    chunks = list(tasks._chunks(entries, tasks.guided_task_sizes(40, 2)))  # type: ignore[arg-type]
    assert [len(chunk) for chunk in chunks] == [5, 9, 7, 5, 4, 3, 2, 2, 1, 1, 1]
    assert list(tasks._chunks(range(5), lambda sent: 2)) == [[0, 1], [2, 3], [4]]  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, -2, "many", 1.5])
def test_bad_processes_values_name_the_key(value: object):
    with pytest.raises(UsageError, match="'processes' must be"):
        apply(Settings(), {"processes": value}, "f.yaml")


@pytest.mark.slow
def test_a_run_on_worker_processes_leaves_nothing_behind(tmp_path: Path):
    """In a process of its own: nothing on stderr (no resource tracker warning of leaked
    semaphores, no thread's traceback), and no process left (subprocess.run waits for the
    pipes, which every worker and the fork server hold)."""
    make_inputs(tmp_path / "in", 6, 24)
    result = gccl_process("in", "-r", "--out", "out", "--processes", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert len(list((tmp_path / "out").rglob("*.stats.csv"))) == 6


@pytest.mark.slow
def test_a_worker_killed_mid_job_is_replaced_and_the_output_set_is_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """One new worker takes the killed one's place; the other goes on with its tasks."""
    before = set(multiprocessing.active_children())
    started: list[BaseProcess] = []
    real_start = BaseProcess.start

    def start(self: BaseProcess) -> None:
        started.append(self)
        real_start(self)

    def kill_a_worker() -> None:
        victim = next(c for c in multiprocessing.active_children() if c not in before)
        os.kill(victim.pid, signal.SIGKILL)

    monkeypatch.setattr(BaseProcess, "start", start)
    make_inputs(tmp_path / "in", 40, 320)
    out = tmp_path / "many"
    killer, seen = on_first_outputs(out, kill_a_worker)
    options = ["-r", "--batch-size", "1", "--workers", "1", "--processes", "2"]
    code, _, stderr = gccl(str(tmp_path / "in"), "--out", str(out), *options)
    killer.join(WAIT_SECONDS)
    assert seen and seen[0] < 40  # the kill came before the job was done
    assert code == 0, stderr
    assert len(started) == 3
    assert gccl(str(tmp_path / "in"), "-r", "--out", str(tmp_path / "one"))[0] == 0
    assert files(out) == files(tmp_path / "one")
    assert not [path for path in out.rglob("*") if ".gccl-tmp-" in path.name]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_the_fork_server_and_a_worker_killed_mid_job_neither_hang_nor_lose_images(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Both killed at once; the first worker start after it fails as when the dying server
    never answers (EOFError), before the client sees the server is gone and starts another."""
    before = set(multiprocessing.active_children())
    killed: list[int] = []
    failed_starts: list[int] = []
    real_connect = forkserver.connect_to_new_process

    def connect(fds: Any) -> Any:
        if killed and not failed_starts:
            failed_starts.append(1)
            raise EOFError("unexpected EOF")
        return real_connect(fds)

    monkeypatch.setattr(forkserver, "connect_to_new_process", connect)
    workers: set[int] = set()

    def kill_the_server_and_a_worker() -> None:
        workers.update(c.pid for c in multiprocessing.active_children() if c not in before)
        worker = next(iter(workers))
        killed.extend([_parent(worker), worker])  # the fork server and one of its workers
        for pid in killed:
            os.kill(pid, signal.SIGKILL)

    make_inputs(tmp_path / "in", 40, 320)
    out = tmp_path / "many"
    killer, seen = on_first_outputs(out, kill_the_server_and_a_worker)
    options = ["-r", "--batch-size", "1", "--workers", "1", "--processes", "2"]
    ended: list[tuple[int, str, str]] = []
    run = threading.Thread(
        target=lambda: ended.append(gccl(str(tmp_path / "in"), "--out", str(out), *options)),
        daemon=True,
    )
    run.start()
    run.join(WAIT_SECONDS * 2)
    killer.join(WAIT_SECONDS)
    assert not run.is_alive(), "the run hung"
    assert seen and seen[0] < 40 and failed_starts  # the kills came before the job was done
    code, _, stderr = ended[0]
    assert code == 0, stderr  # every lost task was sent again
    assert gccl(str(tmp_path / "in"), "-r", "--out", str(tmp_path / "one"))[0] == 0
    assert files(out) == files(tmp_path / "one")
    assert not [path for path in out.rglob("*") if ".gccl-tmp-" in path.name]
    # The workers have ended with their pools; the fork servers (this process's) have none left.
    assert not [pid for pid in workers if _running(pid)]
    servers = [pid for pid in _children(os.getpid()) if b"forkserver" in _command_line(pid)]
    assert servers and not [child for pid in servers for child in _children(pid)]


_IMPORT_PRELOADED = """
import importlib, importlib.abc, sys
asked = []
class NoCuda(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("cupy", "cupyx", "cuda"):
            asked.append(name)
            raise ImportError(name)
sys.meta_path.insert(0, NoCuda())
for name in sys.argv[1:]:
    importlib.import_module(name)
loaded = [name for name in WORKER_MODULES if name in sys.modules]
print(asked, loaded)
"""


def test_the_workers_exit_as_the_last_task_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Worker processes: the workers are told to exit once the last task is done, so they end
    while the run writes its summary, not only once it closes them."""
    make_inputs(tmp_path / "in", 6, 20)
    before = set(multiprocessing.active_children())
    left: list[list[Any]] = []
    real_close = processes.LocalProcesses.close

    def close(self: Any) -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        workers = [child for child in multiprocessing.active_children() if child not in before]
        while workers and time.monotonic() < deadline:
            time.sleep(0.01)
            workers = [child for child in multiprocessing.active_children() if child not in before]
        left.append(workers)
        real_close(self)

    monkeypatch.setattr(processes.LocalProcesses, "close", close)
    code, _, stderr = gccl(
        str(tmp_path / "in"), "-r", "--out", str(tmp_path / "out"), "--processes", "2"
    )
    assert code == 0, stderr
    assert left == [[]]


def test_a_temporary_a_killed_worker_left_is_gone_when_the_run_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Worker processes: a temporary whose writer died (no flock on it) is removed at the end;
    one a live writer holds stays."""
    make_inputs(tmp_path / "in", 6, 20)
    out = tmp_path / "out"
    live = out / ".gccl-tmp-1-00c0ffee"
    real_label = processes.LocalProcesses.label

    def label(self: Any, *args: Any) -> None:
        real_label(self, *args)
        (out / "sub").mkdir(exist_ok=True)
        (out / "sub" / ".gccl-tmp-999999-0badcafe").write_bytes(b"half")  # its writer is gone
        fd = os.open(live, os.O_WRONLY | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)
        held.append(fd)

    held: list[int] = []
    monkeypatch.setattr(processes.LocalProcesses, "label", label)
    code, _, stderr = gccl(str(tmp_path / "in"), "-r", "--out", str(out), "--processes", "2")
    assert code == 0, stderr
    assert not (out / "sub" / ".gccl-tmp-999999-0badcafe").exists()
    assert live.exists()  # a writer holds it
    os.close(held[0])


#: What a worker runs: its set-up and tasks and the CPU engine.
_WORKER_MODULES = ("ccl_cli.run.processes", "ccl_cli.run.tasks", "ccl_cli.backends.cpu.labels")


@pytest.mark.slow
def test_the_fork_server_loads_the_workers_modules_without_cuda():
    """The fork server drops a preloaded name that fails to import without a word: each
    imports here, loads what a worker runs and no CUDA package."""
    expected = list(_WORKER_MODULES)
    script = f"WORKER_MODULES = {expected!r}\n{_IMPORT_PRELOADED}"
    result = subprocess.run(
        [sys.executable, "-c", script, *processes.WORKER_MODULES],
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"[] {expected}"


def _running(pid: int) -> bool:
    """Whether `pid` is a live process (not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[1])


def _command_line(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def _children(parent: int) -> list[int]:
    """The live child processes of `parent`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == str(parent) and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _worker_pids() -> tuple[int, int, int]:
    return processes._IMPORTED_BY, os.getppid(), os.getpid()


@pytest.mark.slow
def test_a_worker_knows_its_fork_server_as_the_parent_it_must_die_with():
    """The fork server preloads processes.py, so a worker knows its server's pid even if
    the server died before the worker asked the kernel to kill it with its parent."""
    with ProcessPoolExecutor(1, mp_context=processes.fork_server()) as pool:
        imported_by, parent, worker = pool.submit(_worker_pids).result(timeout=WAIT_SECONDS)
    assert imported_by == parent != worker
