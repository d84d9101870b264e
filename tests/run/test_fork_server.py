"""The workers' fork server: a fork of a single-threaded client, holding none of its files;
started the usual way (a fresh interpreter) where other threads run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/fd").exists() or sys.version_info >= (3, 14),
    reason="the forked server is for Linux and Python 3.10-3.13",
)

#: A client: opens a file, maybe starts a thread, starts the fork server and one process on
#: it; prints what the server and the process saw.
_CLIENT = """
import json, os, sys, threading, time
from multiprocessing import forkserver
from ccl_cli.run.fork_server import start_fork_server

held = open(sys.argv[1], "w")
if sys.argv[2] == "thread":
    threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
context = start_fork_server()
process = context.Process(target=json.dumps, args=([],))
process.start()
process.join()
server = forkserver._forkserver._forkserver_pid
fds = [os.readlink(f"/proc/{server}/fd/{fd}") for fd in os.listdir(f"/proc/{server}/fd")]
with open(f"/proc/{server}/stat") as stat:
    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
with open(f"/proc/{server}/cmdline", "rb") as line, open("/proc/self/cmdline", "rb") as own:
    forked = line.read() == own.read()  # not a fresh interpreter's command line
print(json.dumps({
    "exit": process.exitcode,
    "parent_is_client": parent == os.getpid(),
    "forked": forked,
    "holds_the_file": any(fd.endswith(sys.argv[1]) for fd in fds),
}))
"""


def run_client(tmp_path: Path, threads: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _CLIENT, str(tmp_path / "held.txt"), threads],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_a_single_threaded_client_forks_the_server_which_holds_none_of_its_files(
    tmp_path: Path,
) -> None:
    assert run_client(tmp_path, "alone") == {
        "exit": 0,
        "parent_is_client": True,
        "forked": True,
        "holds_the_file": False,
    }


def test_with_other_threads_running_the_server_is_a_fresh_interpreter(tmp_path: Path) -> None:
    seen = run_client(tmp_path, "thread")
    assert seen["exit"] == 0 and seen["forked"] is False and seen["holds_the_file"] is False
