"""The CPU engine's threads (native/src/pool.c): every part run once, failures reported,
callers at once and forked processes labeling as one thread does.

pool.c is compiled here on its own, so that its jobs can be Python callbacks."""

from __future__ import annotations

import ctypes
import multiprocessing
import shutil
import subprocess
import sysconfig
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import ccl_cli
from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.contract.params import LabelParams

SOURCES = Path(ccl_cli.__file__).parent / "native" / "src"
#: What gccl_spread calls: entry(batch, lo, hi) -> 0, or nonzero for a failure.
ENTRY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
HELPERS = 16


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    """pool.c as a library of its own, with HELPERS helper threads waiting in gccl_help."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) to build pool.c alone")
    library = tmp_path_factory.mktemp("pool") / "pool.so"
    command = [compiler, "-std=c11", "-O2", "-fPIC", "-shared", "-o", str(library)]
    subprocess.run([*command, str(SOURCES / "pool.c")], check=True)
    loaded = ctypes.CDLL(str(library))
    loaded.gccl_spread.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    loaded.gccl_spread.restype = ctypes.c_int
    for _ in range(HELPERS):
        threading.Thread(target=loaded.gccl_help, daemon=True).start()
    return loaded


def _spread(pool: ctypes.CDLL, entry: Callable[..., int], items: int, parts: int) -> int:
    address = ctypes.cast(entry, ctypes.c_void_p).value
    return int(pool.gccl_spread(address, None, items, parts))


@pytest.mark.parametrize(("items", "parts"), [(1, 2), (10, 2), (10, 7), (1000, 16), (5, 64)])
def test_every_item_is_run_once_in_contiguous_parts(
    pool: ctypes.CDLL, items: int, parts: int
) -> None:
    ranges: list[tuple[int, int]] = []
    lock = threading.Lock()

    def record(batch: object, lo: int, hi: int) -> int:
        with lock:
            ranges.append((lo, hi))
        return 0

    entry = ENTRY(record)
    for _ in range(20):  # jobs back to back: a helper of the last one must not run in this one
        ranges.clear()
        assert _spread(pool, entry, items, parts) == 0
        assert sorted(ranges) == [
            (items * i // parts, items * (i + 1) // parts) for i in range(parts)
        ]


def test_a_failed_part_is_reported_and_the_next_job_runs(pool: ctypes.CDLL) -> None:
    def fail_in_the_middle(batch: object, lo: int, hi: int) -> int:
        return -1 if lo <= 50 < hi else 0

    failing = ENTRY(fail_in_the_middle)
    assert _spread(pool, failing, 100, 4) == -1
    ran: list[int] = []
    assert _spread(pool, ENTRY(lambda batch, lo, hi: ran.append(hi - lo) or 0), 100, 4) == 0
    assert sum(ran) == 100


def _images() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [
        (rng.random((257, 301)) < density).astype(np.uint8) * 255 for density in (0.3, 0.6, 0.9)
    ]


def test_callers_at_once_get_what_one_thread_gives() -> None:
    """Threads labeling at the same time: one has the helpers, the others run alone."""
    params = LabelParams(connectivity=8)
    images = _images()
    want = [CpuBackend(threads=1).label(image[None], params).labels for image in images]
    errors: list[str] = []

    def label_often(index: int) -> None:
        backend = CpuBackend(threads=8)
        for _ in range(30):
            got = backend.label(images[index][None], params).labels
            if not np.array_equal(got, want[index]):
                errors.append(f"image {index} differs")

    threads = [threading.Thread(target=label_often, args=(i % 3,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def _label_in_child(queue: multiprocessing.Queue) -> None:
    image = _images()[1]
    queue.put(CpuBackend(threads=8).label(image[None], LabelParams()).labels)


def test_a_forked_process_labels_with_threads_of_its_own() -> None:
    """The parent's helpers are not in a fork: the child starts its own (or its parts run
    on its own thread), and labels as one thread does."""
    image = _images()[1]
    CpuBackend(threads=8).label(image[None], LabelParams())  # the parent's helpers started
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_label_in_child, args=(queue,))
    child.start()
    got = queue.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0
    np.testing.assert_array_equal(
        got, CpuBackend(threads=1).label(image[None], LabelParams()).labels
    )
