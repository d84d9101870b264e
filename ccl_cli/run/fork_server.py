"""The fork server of `--processes`' workers: a fork of this process where it can be.

multiprocessing's fork server is a fresh interpreter that imports the workers'
modules (numpy, the codecs, the pipeline) before it forks the first worker: on
a host where numpy alone takes 0.35 s to import, that put the first worker
about a second into a run. This process has imported nearly all of them by
the time it knows it wants workers, so where it is single-threaded (nothing
forked with it can hold a lock) the server is made by forking it: it imports
only what is left (the CPU engine) and serves at once. Every fd but the
server's own is closed in it, so no worker holds this process's files. The
server speaks multiprocessing's own protocol, so workers, their start-up and
their deaths are what they were; a server that dies is started again the
usual way. That sets the standard library's server object's private state
(its lock, address, alive pipe and pid), known for Python 3.10-3.13 (3.14
added an authentication key): on other versions, or where this process runs
other threads, the server is started the usual way, in a thread.
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
import threading
from contextlib import suppress
from multiprocessing import connection, forkserver, get_context, resource_tracker, util
from typing import Any, NoReturn

#: What the fork server imports once for every worker (worker_start.py).
PRELOADED = ("ccl_cli.run.worker_start",)
#: The server object's state that _fork_server sets as ensure_running would.
_SERVER_STATE = ("_lock", "_forkserver_address", "_forkserver_alive_fd", "_forkserver_pid")


def start_fork_server(also: tuple[str, ...] = ()) -> Any:
    """The fork-server context of the workers, its server started (or starting) now.

    also: modules this run's workers need beyond PRELOADED (the labeling service
    where a GPU may serve them), imported here first, as this process needs them too.
    """
    for name in also:
        importlib.import_module(name)
    context = get_context("forkserver")
    context.set_forkserver_preload([*PRELOADED, *also])
    if not _fork_server():
        threading.Thread(target=forkserver.ensure_running, daemon=True).start()
    return context


def let_go_of_the_fork_server() -> None:
    """Close this worker's copy of the pipe that keeps the fork server running.

    multiprocessing hands every process of the fork server the write end of
    the server's "alive" pipe (so that it could start processes of its own);
    the server exits when that pipe ends, so a worker holding it keeps the
    server, and through it itself, alive after the client died. The pipe is
    reachable only through the module's private state.
    """
    server: Any = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if isinstance(fd, int):
        os.close(fd)
        server._forkserver_alive_fd = None


def _fork_server() -> bool:
    """Start the fork server as a fork of this process (module docstring); False where
    that cannot be done here, and nothing was started."""
    server: Any = getattr(forkserver, "_forkserver", None)
    if (
        sys.version_info >= (3, 14)
        or threading.active_count() > 1
        or not all(hasattr(server, name) for name in _SERVER_STATE)
    ):
        return False
    with server._lock:
        if server._forkserver_pid is not None:
            return True
        resource_tracker.ensure_running()  # its fd goes to each worker, as ensure_running does
        with socket.socket(socket.AF_UNIX) as listener:
            address = connection.arbitrary_address("AF_UNIX")  # type: ignore[attr-defined]
            listener.bind(address)
            if not util.is_abstract_socket_namespace(address):
                os.chmod(address, 0o600)
            listener.listen()
            alive_r, alive_w = os.pipe()  # the server exits when every writer is gone
            pid = os.fork()
            if pid == 0:
                _serve(listener.fileno(), alive_r)
            os.close(alive_r)
        server._forkserver_address = address
        server._forkserver_alive_fd = alive_w
        server._forkserver_pid = pid
    return True


def _serve(listener: int, alive_r: int) -> NoReturn:
    """The forked server: close every fd but its own and the standard streams, serve."""
    try:
        for name in os.listdir("/proc/self/fd"):
            if int(name) not in (0, 1, 2, listener, alive_r):
                with suppress(OSError):  # the listing's own fd, closed already
                    os.close(int(name))
        forkserver.main(listener, alive_r, list(PRELOADED))
    finally:
        os._exit(1)
