"""Labeling for worker processes: `--processes` on a GPU labels in this process only.

The worker processes of --processes do what needs many cores (decoding,
encoding, the statistics CSVs, all partly under Python's GIL) and send each
batch to the labeling service of this process, which holds the run's CUDA
backend. So the workers start in a few milliseconds (no CUDA context each),
and the GPU memory and its set-up are paid once. Without a GPU the service
tells them to label on their own.

A worker stacks its batch in shared memory: blocks of an anonymous memory file
(memfd) that it creates and hands to this process once, as a file descriptor
over its connection (a Unix socket). A request names the block and offset of
the batch and of the labels; the service labels the batch into the labels in
place and answers with the rest of the result (statistics tables, counts,
outlines, and the rare image whose labels were too wide to narrow). The
memory lives while either process maps it, so nothing is left behind when
either dies. Linux only, as is CUDA with Python's fork server.
"""

from __future__ import annotations

import mmap
import multiprocessing
import os
import secrets
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from itertools import count
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener
from multiprocessing.reduction import recv_handle, send_handle
from typing import Any

import numpy as np

from ..backends.base import (
    Backend,
    BatchResult,
    LabelSteps,
    in_one_step,
    label_dtype,
    nothing_to_undo,
)
from ..backends.cuda.backend import HOST_BATCH_BYTES
from ..backends.hybrid import CpuLoad
from ..backends.steps import StepRunner
from ..contract.params import LabelParams

#: Batches one device labels at once (each in chunks on streams of its own).
CONCURRENT_BATCHES = 2
#: Seconds LabelingService.close waits for each connection to end.
CLOSE_WAIT_SECONDS = 5
#: Whether this system has anonymous memory files (Linux); without them there is no
#: service, and worker processes label on their own (CUDA's platforms have them).
SHARED_MEMORY = hasattr(os, "memfd_create")


@dataclass(frozen=True)
class ServiceAddress:
    """Where a worker reaches the service: a Unix socket and its key."""

    path: str
    authkey: bytes
    #: Input bytes per batch for each worker (one batch's budget, shared out).
    batch_budget: int
    #: With --device auto, a multiprocessing Event set once the service answers requests
    #: (the GPU is ready, or failed): until then a worker labels on its own without asking.
    serving: Any = None


@dataclass(frozen=True)
class _Slot:
    """An array in a shared block: block, byte offset, shape, dtype."""

    block: int
    offset: int
    shape: tuple[int, ...]
    dtype: str


class LabelingService:
    """Labels the batches of worker processes with this process's backend.

    The backend is handed over with `serve` (or its failure with `fail`)
    once it is made, which may be after the workers started decoding. Until
    then a request waits, or, with `cpu_meanwhile` (--device auto), its worker
    labels that batch on its own CPU backend: a run never waits for CUDA to
    start. Workers see that from a flag the address carries, without a round
    trip to this process, whose GIL CUDA's start holds for long stretches;
    and a GPU that fails is dropped with one notice, its batch and the rest
    labeled by the workers. With `start`, the backend is made only once a
    worker asks for the GPU: one whose CPU labeling is what it waits for
    (hybrid.CpuLoad), so a short job never starts CUDA. A CPU backend is not served:
    the workers, which have the cores, are told to label on their own. With
    several GPUs (--devices), worker connections take them in turn.
    """

    def __init__(
        self,
        workers: int,
        cpu_meanwhile: bool = False,
        notice: Callable[[str], None] = lambda message: None,
        context: Any = multiprocessing,
        start: Callable[[], None] | None = None,
    ) -> None:
        """context: the multiprocessing context the workers start in (the flag's).
        start: begins making the backend, called once, when a worker first asks for the
        GPU (with cpu_meanwhile; None: it is being made already)."""
        authkey = secrets.token_bytes(32)
        self.listener = Listener(family="AF_UNIX", authkey=authkey)
        budget = max(1 << 20, HOST_BATCH_BYTES // max(1, workers))
        self.serving = context.Event() if cpu_meanwhile else None
        self.address = ServiceAddress(str(self.listener.address), authkey, budget, self.serving)
        self.ready = threading.Event()
        self.cpu_meanwhile = cpu_meanwhile
        self.start = start
        self.notice = notice
        self.lock = threading.Lock()
        self.backends: list[Backend] = []
        self.labeler: DeviceLabeler | None = None
        self.failure = ""
        self.turns = count()
        self.closed = False
        self.connections: list[threading.Thread] = []
        self.thread = threading.Thread(target=self._accept, name="gccl-service", daemon=True)
        self.thread.start()

    def serve(self, backends: Sequence[Backend]) -> None:
        """Answer with `backends` (one per GPU), or with "label on your own" when there are none;
        a service closed meanwhile (its run ended before the GPU was ready) serves nothing."""
        if self.closed:
            return
        self.backends = list(backends)
        if self.backends:
            self.labeler = DeviceLabeler(self.backends)
        self._answering()

    def _answering(self) -> None:
        self.ready.set()
        if self.serving is not None:
            self.serving.set()

    def fail(self, reason: str) -> None:
        """Answer every request with this error (the backend could not be made)."""
        self.failure = reason
        self._answering()

    def close(self) -> None:
        """Stop taking connections, and let the open ones end as their workers exit.

        Waits a few seconds at most for each, so that their blocks are unlocked
        and unmapped before this process (and its CUDA context) goes away.
        """
        self.closed = True
        with suppress(OSError):  # wakes the thread blocked in accept()
            Client(self.address.path, "AF_UNIX", self.address.authkey).close()
        self.thread.join()
        self.listener.close()
        for connection in self.connections:
            connection.join(CLOSE_WAIT_SECONDS)
        if self.labeler is not None:
            self.labeler.close()

    def _accept(self) -> None:
        while True:
            try:
                connection = self.listener.accept()
            except (OSError, EOFError, AuthenticationError):  # a client that went wrong
                if self.closed:
                    return
                continue
            if self.closed:
                connection.close()
                return
            serving = threading.Thread(
                target=self._serve,
                args=(connection, next(self.turns)),
                name="gccl-serve",
                daemon=True,
            )
            serving.start()
            self.connections.append(serving)

    def _serve(self, connection: Connection, turn: int) -> None:
        """Answer one worker's requests until it goes away.

        The worker's blocks are page-locked by the backend when they first
        carry a batch (pinning is paid once; the blocks are reused), and
        unlocked before they are unmapped.
        """
        blocks: dict[int, mmap.mmap] = {}
        unlocks: dict[int, Callable[[], None]] = {}
        try:
            while True:
                request = connection.recv()
                if request[0] == "block":
                    _, block, size = request
                    handle = recv_handle(connection)
                    try:
                        blocks[block] = mmap.mmap(handle, size)
                    finally:
                        os.close(handle)
                    continue
                if request[0] == "start":
                    self._start_once()
                    continue
                _, batch, out, params, narrow = request
                if self.cpu_meanwhile and not self.ready.is_set():
                    connection.send(("cpu", None))  # this batch only: ask again next time
                    continue
                self.ready.wait()
                if self.failure:
                    connection.send(("error", self.failure))
                elif not (backends := self.backends):  # (a list _drop replaces, never changes)
                    connection.send(("self", None))
                else:
                    index = turn % len(backends)
                    for block in {batch.block, out.block} - unlocks.keys():
                        memory = blocks[block]
                        address = np.frombuffer(memory, np.uint8).ctypes.data
                        unlocks[block] = backends[index].page_lock(address, len(memory))
                    views = _view(blocks, batch), _view(blocks, out)
                    status, answer = self._answer(index, *views, params, narrow)
                    if status == "error" and self.cpu_meanwhile:
                        self._drop(answer)
                        status, answer = "self", None  # the worker labels it, and the rest
                    connection.send((status, answer))
        except (EOFError, OSError):
            pass
        finally:
            connection.close()
            for unlock in unlocks.values():
                unlock()
            for block in blocks.values():
                with suppress(BufferError):  # a view still alive: the mapping ends with it
                    block.close()

    def _start_once(self) -> None:
        """Begin making the backend, the first time a worker asks for the GPU."""
        with self.lock:
            start, self.start = self.start, None
        if start is not None:
            start()

    def _drop(self, why: str) -> None:
        """Serve no GPU from now on (workers label on their own), saying so once."""
        with self.lock:
            if not self.backends:
                return
            self.backends = []
        self.notice(f"the GPU failed ({why}); labeling the rest on the CPU")

    def _answer(
        self, index: int, batch: np.ndarray, out: np.ndarray, params: LabelParams, narrow: bool
    ) -> tuple[str, Any]:
        """("ok", the result without its labels, which are in `out`), or ("error",
        why): labeled by backend `index`."""
        assert self.labeler is not None  # set with the backends
        try:
            return "ok", replace(self.labeler.label(index, batch, params, out, narrow), labels=None)
        except Exception as error:
            return "error", f"{type(error).__name__}: {error}"


class DeviceLabeler:
    """Labels batches that many threads hand over, each on the device they name,
    from one thread (steps.StepRunner), at most CONCURRENT_BATCHES per device at once.

    One thread steps every batch in flight, so a device's next batch uploads
    while the last one finishes, and the connection threads, which only wait,
    do not contend for the GIL (steps module).
    """

    def __init__(self, backends: Sequence[Backend]) -> None:
        self.backends = list(backends)
        self.gates = [threading.Semaphore(CONCURRENT_BATCHES) for _ in self.backends]
        self.runner = StepRunner()

    def label(
        self, index: int, batch: np.ndarray, params: LabelParams, out: np.ndarray, narrow: bool
    ) -> BatchResult:
        """Label `batch` into `out` with backend `index` (Backend.label); waits for it."""
        with self.gates[index]:
            steps = self.backends[index].label_steps(batch, params, out, narrow)
            return self.runner.submit(steps).result()

    def close(self) -> None:
        """End the runner's thread."""
        self.runner.close()


def _view(blocks: dict[int, mmap.mmap], slot: _Slot) -> np.ndarray:
    """The numpy array a slot names, over the shared block."""
    return np.ndarray(slot.shape, np.dtype(slot.dtype), blocks[slot.block], slot.offset)


#: A ServedBackend's name while the service labels its batches.
SERVED = "served"


class ServedBackend:
    """A worker's backend: its batches are labeled by the LabelingService of the parent,
    or by a CpuBackend of its own when the service says so.

    Its name is SERVED while the service labels its batches and the CPU
    backend's while this worker does (no GPU served yet with --device auto, or
    none at all): a run sizes its batches by the budget of the backend whose
    name it sees (batch_budget_bytes), and the CPU's small batches let a
    one-thread worker's decoding, labeling and writing take turns.
    """

    uses_gpu = False  # its batches go to a GPU, but it is not served again

    def __init__(self, address: ServiceAddress, threads: int) -> None:
        """threads: of the CpuBackend this worker labels with when it is not served."""
        self.address = address
        self.threads = threads
        self.lock = threading.Lock()
        self.connection: Connection | None = None
        self.blocks = _SharedBlocks()
        self.local: Backend | None = None  # set when the service serves no GPU
        self.cpu: Backend | None = None
        self.load = CpuLoad(behind_images=None)  # whether to ask for the GPU
        self.asked = False
        self.name = SERVED if self._served_now() else self._cpu().name

    def _served_now(self) -> bool:
        """Whether the next batch goes to the service."""
        serving = self.address.serving
        return self.local is None and (serving is None or serving.is_set())

    def per_device(self) -> list[Backend]:
        """This backend."""
        return [self]

    def label_steps(
        self, batch: np.ndarray, params: LabelParams, out: np.ndarray, narrow: bool
    ) -> LabelSteps:
        """label in one step (base.in_one_step): the service steps the device."""
        return in_one_step(self, batch, params, out, narrow)

    def batch_budget_bytes(self) -> int:
        """The service's share of its budget while it labels this worker's batches, else the
        CPU backend's."""
        if self.name == SERVED:
            return self.address.batch_budget
        return self._cpu().batch_budget_bytes()

    def empty_batch(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """An array in shared memory, which the service reads and writes in place."""
        return self.blocks.empty(shape, np.dtype(dtype))

    def page_lock(self, address: int, size: int) -> Callable[[], None]:
        """Nothing to do here: the service page-locks the shared blocks it labels in."""
        return nothing_to_undo

    def label(
        self,
        batch: Any,
        params: LabelParams,
        out: np.ndarray | None = None,
        narrow: bool = False,
    ) -> BatchResult:
        """Send the batch to the service and wait for its labels (in `out`) and tables."""
        if self.local is not None:
            return self._locally(self.local, batch, params, out, narrow)
        if not self._served_now():  # no GPU yet (--device auto)
            began = time.monotonic()
            result = self._locally(self._cpu(), batch, params, out, narrow)
            if not self.asked and self.load.count(began, time.monotonic(), len(result.tables)):
                self._ask_for_the_gpu()
            return result
        self.name = SERVED
        batch = np.asarray(batch)
        batch_slot = self.blocks.locate(batch)
        if batch_slot is None:  # not stacked in empty_batch's memory: copied there
            batch = _copied(batch, self.empty_batch(batch.shape, batch.dtype))
            batch_slot = self.blocks.locate(batch)
        labels = self.empty_batch(batch.shape, label_dtype(narrow))
        request_slots = (batch_slot, self.blocks.locate(labels))
        with self.lock:  # one request at a time on the connection
            connection = self._connection()
            for block, size, handle in self.blocks.unsent():
                connection.send(("block", block, size))
                send_handle(connection, handle, 0)  # (the process id matters on Windows only)
                os.close(handle)  # the service has its own now; the mapping stays
            connection.send(("label", *request_slots, params, narrow))
            status, answer = connection.recv()
        if status in ("self", "cpu"):  # from now on, or this batch only (LabelingService)
            cpu = self._cpu()
            if status == "self":
                self.local = cpu
                self.name = cpu.name
            return self._locally(cpu, batch, params, out, narrow)
        if status != "ok":
            raise RuntimeError(f"the labeling process failed ({answer})")
        if out is not None:
            np.copyto(out, labels)
            labels = out
        return replace(answer, labels=labels, backend="cuda")  # it serves GPUs only

    def _ask_for_the_gpu(self) -> None:
        """Have the service begin making the GPU backend (once; no answer comes). A service
        that cannot be reached is not asked: this worker labels on its own meanwhile, and a
        request for a batch says what went wrong."""
        self.asked = True
        with self.lock, suppress(OSError):
            self._connection().send(("start",))

    @staticmethod
    def _locally(
        local: Backend, batch: Any, params: LabelParams, out: np.ndarray | None, narrow: bool
    ) -> BatchResult:
        result = local.label(batch, params, out, narrow)
        result.backend = local.name
        return result

    def _cpu(self) -> Backend:
        """This worker's CPU backend, made once."""
        if self.cpu is None:
            from ..backends.cpu.backend import CpuBackend

            self.cpu = CpuBackend(self.threads)
        return self.cpu

    def _connection(self) -> Connection:
        if self.connection is None:
            self.connection = Client(self.address.path, "AF_UNIX", self.address.authkey)
        return self.connection


def _copied(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    np.copyto(target, source)
    return target


def block_size(nbytes: int) -> int:
    """The size class of a shared block that holds `nbytes`: whole pages, and above
    eight pages, the next multiple of an eighth of a power of two.

    Blocks are reused only within a class and page-locked whole, so classes
    waste at most an eighth (powers of two wasted up to half: a scan's 34 MB of
    labels took a 64 MB block).
    """
    pages = max(1, -(-nbytes // mmap.PAGESIZE))
    step = 1 << max(0, (pages - 1).bit_length() - 4)
    return -(-pages // step) * step * mmap.PAGESIZE


class _SharedBlocks:
    """A worker's shared-memory blocks: made on demand, reused once their arrays are gone.

    Block sizes are size classes (block_size), so a block serves every later
    array of its class. Pages are populated when a block is made, in the
    worker, so that the service's page-locking need not fault them in.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ids = count()
        self.free: dict[int, list[tuple[int, mmap.mmap]]] = {}
        self.spans: dict[int, tuple[int, int]] = {}  # block -> (address, size)
        self.handles: dict[int, int] = {}  # block -> memfd, until given to the service

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        size = block_size(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
        with self.lock:
            spare = self.free.get(size)
            block, memory = spare.pop() if spare else self._new(size)
        array = np.ndarray(shape, dtype, memory)
        weakref.finalize(array, self._release, size, block, memory)
        return array

    def _new(self, size: int) -> tuple[int, mmap.mmap]:
        block = next(self.ids)
        handle = os.memfd_create(f"gccl-{block}", os.MFD_CLOEXEC)
        os.ftruncate(handle, size)
        memory = mmap.mmap(handle, size, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
        self.handles[block] = handle
        self.spans[block] = (np.frombuffer(memory, np.uint8).ctypes.data, size)
        return block, memory

    def _release(self, size: int, block: int, memory: mmap.mmap) -> None:
        with self.lock:
            self.free.setdefault(size, []).append((block, memory))

    def unsent(self) -> list[tuple[int, int, int]]:
        """(block, size, memfd) of the blocks the service has not been given yet.

        The caller gives them and closes the memfds."""
        with self.lock:
            pending = [
                (block, self.spans[block][1], handle) for block, handle in self.handles.items()
            ]
            self.handles.clear()
        return pending

    def locate(self, array: np.ndarray) -> _Slot | None:
        """The slot of a C-contiguous array that lies in a block, else None."""
        if not array.flags.c_contiguous:
            return None
        start = array.ctypes.data
        with self.lock:
            for block, (address, size) in self.spans.items():
                if address <= start and start + array.nbytes <= address + size:
                    return _Slot(block, start - address, array.shape, array.dtype.str)
        return None
