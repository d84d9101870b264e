"""The CUDA backend's CPU-side contract: runs everywhere, CI included (no GPU needed)."""

from __future__ import annotations

import gc
import itertools
import json
import os
import subprocess
import sys
import weakref
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ccl_cli import api
from ccl_cli.backends import make_backend
from ccl_cli.backends.base import BatchResult
from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.backends.cuda import backend as cuda
from ccl_cli.backends.cuda import loader
from ccl_cli.contract.params import LabelParams
from ccl_cli.errors import BackendUnavailable, UsageError

ROOT = Path(__file__).resolve().parents[2]


def run_python(code: str) -> str:
    """Run `code` in a fresh interpreter from the repository root; its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout


def test_import_and_status_without_cupy():
    out = run_python(
        "import sys; sys.modules['cupy'] = None\n"
        "from ccl_cli.backends.cuda import backend as cuda, loader\n"
        "from ccl_cli.errors import BackendUnavailable\n"
        "s = loader.cuda_status()\n"
        "print(s.usable, s.cupy_version, s.reason)\n"
        "try:\n"
        "    cuda.CudaBackend()\n"
        "except BackendUnavailable as e:\n"
        "    print('unavailable:', e)\n"
    )
    first, second = out.splitlines()
    assert first.startswith("False None CuPy is not installed")
    assert second.startswith("unavailable: CuPy is not installed")


@pytest.mark.parametrize("devices", [None, "all"])
def test_backends_leave_the_work_queue_count_to_the_user(devices, monkeypatch):
    """No backend sets CUDA_DEVICE_MAX_CONNECTIONS: a CUDA context with 32 work
    queues starts later, which every run would pay."""
    monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS", raising=False)
    monkeypatch.setitem(sys.modules, "cupy", None)  # as where CuPy is missing
    with pytest.raises(BackendUnavailable):
        make_backend("cuda", None, print, devices)
    with pytest.raises(BackendUnavailable):
        cuda.CudaBackend()
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in os.environ


def test_cpu_path_never_imports_cupy():
    out = run_python(
        "import sys, numpy as np\n"
        "from ccl_cli import api\n"
        "labels, tables = api.label(np.eye(5, dtype=np.uint8), device='cpu')\n"
        "print(labels.max(), len(tables[0]), 'cupy' in sys.modules)\n"
    )
    assert out.split() == ["1", "1", "False"]


def test_fatbin_and_manifest_are_current():
    manifest = json.loads((loader.CUDA_DIR / "manifest.json").read_text())
    assert loader.FATBIN.is_file() and manifest["fatbin"] == loader.FATBIN.name
    assert manifest["sass"] == ["sm_75", "sm_80", "sm_90", "sm_100", "sm_120"]
    assert "-Xfatbin=-compress-all" in manifest["nvcc_flags"]
    assert loader.FATBIN.stat().st_size <= 5 << 20
    assert manifest["ptx"] == "compute_75"
    sources = sorted(p.name for p in loader.CUDA_DIR.iterdir() if p.suffix in (".cu", ".cuh"))
    assert manifest["sources"] == sources
    check = subprocess.run(
        [sys.executable, "scripts/build_cubins.py", "--check", "--nvcc", "no-such-nvcc"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "not found" in check.stdout


def test_is_device_array_on_host_objects():
    assert not cuda.is_device_array(np.zeros((2, 2)))
    assert not cuda.is_device_array([[1, 2]])


def test_api_single_image_on_cpu():
    image = np.zeros((6, 7), np.uint8)
    image[1:3, 1:3] = 1
    image[4:, 5:] = 2
    labels, tables = api.label(image, device="cpu", min_area=3)
    assert labels.shape == image.shape and labels.dtype == np.uint32
    assert labels.max() == 2 and [len(t) for t in tables] == [2]


@pytest.mark.parametrize(
    "kwargs", [{"device": "gpu"}, {"device": "cuda:x"}, {"connectivity": 6}], ids=str
)
def test_api_rejects_bad_options(kwargs):
    with pytest.raises(UsageError):
        api.label(np.zeros((3, 3), np.uint8), **kwargs)


def test_api_rejects_bad_shapes():
    with pytest.raises(UsageError):
        api.label(np.zeros((2, 3, 4, 5), np.uint8), device="cpu")


def test_api_stages_match_the_backend_with_the_same_params():
    rng = np.random.default_rng(5)
    image = (rng.random((40, 50)) < 0.6) * rng.integers(1, 60, (40, 50), np.uint16)
    labels, tables = api.label(
        image, device="cpu", tau=6, open=1, dilate=2, smooth="binomial:2", connectivity=4
    )
    params = LabelParams(
        tau=6, connectivity=4, morphology=(("open", 1), ("dilate", 2)), smooth=("binomial", 2)
    )
    want = CpuBackend().label(image[None], params)
    np.testing.assert_array_equal(labels, want.labels[0])
    assert tables[0].equals(want.tables[0])
    assert not np.array_equal(labels, api.label(image, device="cpu", tau=6, connectivity=4)[0])


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [({"smooth": "box:2"}, "'smooth' needs 'tau'"), ({"erode": -1}, "'erode' must be")],
    ids=str,
)
def test_api_checks_stage_options_like_the_cli(kwargs, needle):
    with pytest.raises(UsageError, match=needle):
        api.label(np.zeros((3, 3), np.uint8), device="cpu", **kwargs)


class _OutOfMemory(Exception):
    pass


class _FakeCupy:
    """What _split_on_oom uses of CuPy: the out-of-memory error and the pool to empty."""

    def __init__(self) -> None:
        self.cuda = SimpleNamespace(memory=SimpleNamespace(OutOfMemoryError=_OutOfMemory))
        self.emptied = 0
        self.get_default_memory_pool = lambda: SimpleNamespace(free_all_blocks=self._empty)

    def _empty(self) -> None:
        self.emptied += 1


def test_split_on_oom_halves_until_parts_fit_and_keeps_the_order():
    fake, calls = _FakeCupy(), []

    def run(lo: int, hi: int):
        calls.append((lo, hi))
        if hi - lo > 2:
            raise _OutOfMemory()
        return BatchResult(
            labels[lo:hi],
            [f"table{i}" for i in range(lo, hi)],  # type: ignore[misc]
            list(range(lo, hi)),
            [f"o{i}" for i in range(lo, hi)],  # type: ignore[misc]
            {i - lo: f"wide{i}" for i in range(lo, hi) if i % 3 == 0},  # indices in the part
        )

    labels = np.zeros((7, 4, 4), np.uint32)
    labeled = cuda._split_on_oom(fake, labels.shape, labels, LabelParams(polygons=True), run)
    assert labeled.labels is labels
    assert labeled.components == list(range(7))
    assert labeled.tables == [f"table{i}" for i in range(7)]
    assert labeled.polygons == [f"o{i}" for i in range(7)]
    assert labeled.wide == {i: f"wide{i}" for i in (0, 3, 6)}
    assert calls[0] == (0, 7) and max(hi - lo for lo, hi in calls if hi - lo <= 2) == 2
    assert fake.emptied == 3  # (0,7), (0,3) and (3,7) ran out of memory


def test_split_on_oom_lets_go_of_the_run_at_once():
    """No reference cycle: what `run` holds (a pinned label buffer) is freed on return,
    without waiting for Python's cycle collector, so the next batch can reuse it."""

    class Buffer:
        pass

    def label_once() -> weakref.ref:
        buffer = Buffer()

        def run(lo: int, hi: int):
            assert buffer is not None
            return BatchResult(None, [], [0] * (hi - lo))

        cuda._split_on_oom(_FakeCupy(), (3, 2, 2), None, LabelParams(), run)
        return weakref.ref(buffer)

    gc.disable()
    try:
        assert label_once()() is None
    finally:
        gc.enable()


def test_chunks_cover_the_batch_and_grow_with_morphology_steps(monkeypatch) -> None:
    """About _CHUNK_BYTES each without stages; morphology adds launches per chunk, so
    its chunks are larger in proportion; every image in exactly one chunk, in order,
    the chunks as even as whole images make them."""
    monkeypatch.setattr(cuda, "_CHUNK_BYTES", 1000)
    monkeypatch.setattr(cuda, "_CHUNK_STEPS", 32)
    host = np.zeros((64, 10, 10), np.uint8)  # 100 bytes an image
    for params, count in [
        (LabelParams(), 7),
        (LabelParams(morphology=(("open", 8),)), 5),  # 16 steps: chunks 1.5 times as large
        (LabelParams(morphology=(("open", 8), ("close", 8))), 4),  # 32 steps: twice
    ]:
        bounds = cuda._chunks(host, params)
        assert len(bounds) == count
        assert bounds[0][0] == 0 and bounds[-1][1] == 64
        assert all(hi == lo for (_, hi), (lo, _) in itertools.pairwise(bounds))
        sizes = [hi - lo for lo, hi in bounds]
        assert max(sizes) - min(sizes) <= 1
    assert cuda._chunks(host[:1], LabelParams()) == [(0, 1)]


def test_chunks_stay_under_the_pixel_bound_of_32_bit_label_offsets(monkeypatch) -> None:
    """More chunks than their bytes ask for where a chunk would hold 2**32 pixels."""
    monkeypatch.setattr(cuda, "_MAX_BATCH_PIXELS", 1000)
    host = np.zeros((64, 10, 10), np.uint8)  # 6400 pixels: 7 chunks of at most 1000
    bounds = cuda._chunks(host, LabelParams())
    assert len(bounds) == 7 and bounds[0][0] == 0 and bounds[-1][1] == 64
    assert all(hi == lo for (_, hi), (lo, _) in itertools.pairwise(bounds))
    assert max((hi - lo) * 100 for lo, hi in bounds) <= 1000
