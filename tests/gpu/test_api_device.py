"""The Python API on device arrays: kinds in and out, labels only and device statistics
equal to the CPU backend's, the caller's stream, out=, threads, pooled memory, no JIT."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from cuda_helpers import gpu, skip_unless_free_gib, spin

import ccl_cli
from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.backends.cuda import device as device_module
from ccl_cli.backends.cuda import frameworks
from ccl_cli.contract.params import LabelParams
from ccl_cli.errors import UsageError

pytestmark = gpu


def sample(shape=(3, 83, 121), dtype=np.uint8, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 4, shape) * (rng.random(shape) < 0.55)
    return values.astype(dtype)


def torch_or_skip():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


def cpu_reference(batch: np.ndarray, **options):
    labels, tables = ccl_cli.label(np.ascontiguousarray(batch), device="cpu", **options)
    return labels, tables


OPTIONS = [
    {},
    {"connectivity": 4},
    {"tau": 1, "connectivity": 4},
    {"min_area": 3},
    {"tau": 0, "min_area": 2},
    {"open": 1, "dilate": 1, "tau": 2, "smooth": "box:1"},
    {"threshold": 1, "invert": True, "close": 2},
    {"max_area": 20, "largest": 2},
    {"fill_holes": True, "min_area": 2},
    {"tau": 1, "fill_holes": True, "connectivity": 4},
]


@pytest.mark.parametrize("options", OPTIONS, ids=str)
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32])
def test_cupy_labels_only_and_device_tables_equal_the_cpus(options, dtype):
    import cupy

    batch = sample(dtype=dtype, seed=len(options))
    if dtype == np.float32:
        batch[0, ::7, ::5] = np.nan
    want_labels, want_tables = cpu_reference(batch, **options)
    values = cupy.asarray(batch)
    labels, counts = ccl_cli.label(values, stats=False, **options)
    assert isinstance(labels, cupy.ndarray) and isinstance(counts, cupy.ndarray)
    assert labels.dtype == np.uint32 and counts.dtype == np.uint32 and counts.shape == (3,)
    np.testing.assert_array_equal(labels.get(), want_labels)
    assert counts.get().tolist() == [len(t) for t in want_tables]
    labels, table = ccl_cli.label(values, **options)
    np.testing.assert_array_equal(labels.get(), want_labels)
    assert isinstance(table, ccl_cli.DeviceTable) and isinstance(table.area, cupy.ndarray)
    assert table.offsets.get().tolist() == np.cumsum([0] + [len(t) for t in want_tables]).tolist()
    got = table.to_numpy()
    assert len(got) == 3 and all(a.equals(b) for a, b in zip(got, want_tables, strict=True))
    for i, want in enumerate(want_tables):  # the device columns themselves
        np.testing.assert_array_equal(table.area[table.rows(i)].get(), want.area)
        np.testing.assert_array_equal(table.mean[table.rows(i)].get(), want.mean)


VIEWS = {
    "steps": lambda a: a[::2, 1::2, ::3],
    "transposed": lambda a: a.transpose(0, 2, 1),
    "reversed": lambda a: a[:, ::-1, 5:-7],
}


@pytest.mark.parametrize("view", VIEWS.values(), ids=VIEWS.keys())
@pytest.mark.parametrize("stats", [False, True])
def test_strided_cupy_views(view, stats):
    import cupy

    big = sample((4, 150, 260), np.int16, seed=3)
    want_labels, want_tables = cpu_reference(view(big), tau=1)
    labels, result = ccl_cli.label(view(cupy.asarray(big)), tau=1, stats=stats)
    np.testing.assert_array_equal(labels.get(), want_labels)
    if stats:
        assert all(a.equals(b) for a, b in zip(result.to_numpy(), want_tables, strict=True))
    else:
        assert result.get().tolist() == [len(t) for t in want_tables]


def test_bools_stored_as_255_label_like_ones():
    import cupy

    raw = (sample((2, 60, 70), seed=4) > 0).astype(np.uint8) * 255
    values = cupy.asarray(raw).view(cupy.bool_)
    want_labels, want_tables = cpu_reference(raw > 0, tau=0)
    labels, table = ccl_cli.label(values, tau=0)
    np.testing.assert_array_equal(labels.get(), want_labels)
    assert all(a.equals(b) for a, b in zip(table.to_numpy(), want_tables, strict=True))


@pytest.mark.parametrize("stats", [False, True])
def test_torch_in_torch_out_including_strided(stats):
    torch = torch_or_skip()
    batch = sample((3, 90, 140), np.int16, seed=9)
    tensor = torch.as_tensor(batch, device="cuda")
    for view in (tensor, tensor[:, ::2, 1::3], tensor.transpose(1, 2)):
        host = view.cpu().numpy()
        want_labels, want_tables = cpu_reference(host, tau=1, min_area=2)
        labels, result = ccl_cli.label(view, tau=1, min_area=2, stats=stats)
        assert isinstance(labels, torch.Tensor) and labels.device == tensor.device
        assert labels.dtype == torch.int32 and tuple(labels.shape) == host.shape
        np.testing.assert_array_equal(labels.cpu().numpy(), want_labels.view(np.int32))
        if stats:
            assert isinstance(result.area, torch.Tensor) and result.mean.dtype == torch.float64
            assert all(a.equals(b) for a, b in zip(result.to_numpy(), want_tables, strict=True))
            np.testing.assert_array_equal(result.x.cpu().numpy()[result.rows(1)], want_tables[1].x)
        else:
            assert isinstance(result, torch.Tensor)
            assert result.cpu().tolist() == [len(t) for t in want_tables]


def test_single_images_give_images_and_zero_dimensional_counts():
    import cupy

    image = sample((1, 64, 99), seed=2)[0]
    want, want_tables = cpu_reference(image, min_area=2)
    labels, count = ccl_cli.label(cupy.asarray(image), min_area=2, stats=False)
    assert labels.shape == image.shape and count.shape == ()
    np.testing.assert_array_equal(labels.get(), want)
    assert int(count) == len(want_tables[0])
    labels, table = ccl_cli.label(cupy.asarray(image), min_area=2)
    assert table.images == 1 and table.to_numpy()[0].equals(want_tables[0])


def test_out_is_written_and_bad_out_refused():
    import cupy

    batch = sample(seed=5)
    want, _ = cpu_reference(batch)
    values = cupy.asarray(batch)
    out = cupy.full(batch.shape, 7, cupy.uint32)
    labels, _ = ccl_cli.label(values, out=out, stats=False)
    assert labels is out
    np.testing.assert_array_equal(out.get(), want)
    for bad in (
        cupy.empty(batch.shape, cupy.int64),
        cupy.empty((3, 83, 120), cupy.uint32),
        cupy.empty((3, 121, 83), cupy.uint32).transpose(0, 2, 1),
        np.empty(batch.shape, np.uint32),
    ):
        with pytest.raises(UsageError, match="out"):
            ccl_cli.label(values, out=bad)
    with pytest.raises(UsageError):
        ccl_cli.label(values, device="cpu")


def test_torch_out_tensor():
    torch = torch_or_skip()
    batch = sample(seed=6)
    want, _ = cpu_reference(batch)
    tensor = torch.as_tensor(batch, device="cuda")
    for dtype in (torch.int32, torch.uint32):
        out = torch.zeros(batch.shape, dtype=dtype, device="cuda")
        labels, _ = ccl_cli.label(tensor, out=out, stats=False)
        assert labels is out
        np.testing.assert_array_equal(out.view(torch.int32).cpu().numpy(), want.view(np.int32))
    with pytest.raises(UsageError, match="out"):
        ccl_cli.label(tensor, out=torch.zeros(batch.shape, dtype=torch.int64, device="cuda"))


def test_labels_only_queues_on_the_callers_stream_without_waiting():
    """The call returns while the stream is still busy with earlier work, and a
    reader on another stream that waits for an event after it sees the labels."""
    import cupy

    batch = sample((2, 300, 400), seed=7)
    want, want_tables = cpu_reference(batch)
    source = cupy.asarray(batch)
    values = cupy.zeros_like(source)
    side = cupy.cuda.Stream(non_blocking=True)
    reader = cupy.cuda.Stream(non_blocking=True)
    for _ in range(2):  # the second time with every pool and kernel warm
        spin(side)
        with side:
            values[...] = source  # queued behind the spin: labeling elsewhere would see zeros
            labels, counts = ccl_cli.label(values, stats=False)
            assert not side.done  # nothing waited for the spin
            done = side.record()
        reader.wait_event(done)
        with reader:
            got, got_counts = labels.get(stream=reader), counts.get(stream=reader)
        np.testing.assert_array_equal(got, want)
        assert got_counts.tolist() == [len(t) for t in want_tables]
    with side:
        _, table = ccl_cli.label(values, min_area=2)  # waits for the label counts
    assert len(table) == sum(int((t.area >= 2).sum()) for t in want_tables)


def test_torch_work_goes_on_torchs_current_stream():
    torch = torch_or_skip()

    batch = sample((2, 300, 400), seed=8)
    want, want_tables = cpu_reference(batch)
    source = torch.as_tensor(batch, device="cuda")
    values = torch.zeros_like(source)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        spin(frameworks.external_stream(0, side.cuda_stream))
        values.copy_(source)
        labels, counts = ccl_cli.label(values, stats=False)
        assert not side.query()
    torch.cuda.current_stream().wait_stream(side)
    np.testing.assert_array_equal(labels.cpu().numpy(), want.view(np.int32))
    assert counts.cpu().tolist() == [len(t) for t in want_tables]


def test_two_threads_on_two_streams():
    import cupy

    batches = [sample((4, 200, 300), np.uint16, seed=s) for s in (10, 11)]
    wants = [cpu_reference(b, tau=1, min_area=2) for b in batches]
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            labeler = ccl_cli.Labeler(tau=1, min_area=2)
            stream = cupy.cuda.Stream(non_blocking=True)
            with stream:
                values = cupy.asarray(batches[index])
                for _ in range(20):
                    labels, table = labeler(values)
                    np.testing.assert_array_equal(labels.get(), wants[index][0])
                    tables = table.to_numpy()
                    assert all(a.equals(b) for a, b in zip(tables, wants[index][1], strict=True))
                    _, counts = ccl_cli.label(values, stats=False, tau=1, min_area=2)
                    assert counts.get().tolist() == [len(t) for t in wants[index][1]]
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def test_warm_calls_allocate_nothing_new_and_make_no_streams():
    torch = torch_or_skip()
    import cupy

    tensor = torch.as_tensor(sample((4, 500, 600), seed=12), device="cuda")
    labeler = ccl_cli.Labeler(connectivity=4)
    pool = cupy.get_default_memory_pool()
    for _ in range(3):
        labeler(tensor)
        labeler(tensor, out=torch.empty(tensor.shape, dtype=torch.int32, device="cuda"))
    torch.cuda.synchronize()
    held, torch_held, streams = (
        pool.total_bytes(),
        torch.cuda.memory_reserved(),
        len(frameworks._streams),
    )
    for _ in range(10):
        labeler(tensor)
        labeler(tensor, out=torch.empty(tensor.shape, dtype=torch.int32, device="cuda"))
    torch.cuda.synchronize()
    assert pool.total_bytes() == held and torch.cuda.memory_reserved() == torch_held
    assert len(frameworks._streams) == streams


def test_tables_of_batches_in_parts_join(monkeypatch):
    """Batches over MAX_PART_PIXELS are labeled in parts whose tables are joined."""
    import cupy

    batch = sample((7, 50, 60), np.uint8, seed=13)
    monkeypatch.setattr(device_module, "MAX_PART_PIXELS", 2 * 50 * 60)
    want_labels, want_tables = cpu_reference(batch, min_area=2)
    labels, table = ccl_cli.label(cupy.asarray(batch), min_area=2)
    np.testing.assert_array_equal(labels.get(), want_labels)
    assert all(a.equals(b) for a, b in zip(table.to_numpy(), want_tables, strict=True))
    _, counts = ccl_cli.label(cupy.asarray(batch), min_area=2, stats=False)
    assert counts.get().tolist() == [len(t) for t in want_tables]


def test_nothing_is_compiled_at_run_time(tmp_path):
    """With an empty CuPy kernel cache, labeling device and host arrays (strided,
    bools, min-area, stages, statistics, narrowed labels) leaves the cache empty."""
    code = """
import numpy as np, cupy, ccl_cli
from ccl_cli.backends.cuda.backend import CudaBackend
from ccl_cli.contract.params import LabelParams
rng = np.random.default_rng(0)
mask = (rng.random((3, 70, 90)) < 0.5).astype(np.uint16)
host = mask * rng.integers(1, 9, (3, 70, 90)).astype(np.uint16)
values = cupy.asarray(host)
for view in (values, values[:, ::2, 1::3], values.transpose(0, 2, 1)):
    ccl_cli.label(view, stats=False)
    ccl_cli.label(view, min_area=3, stats=False)
    ccl_cli.label(view, tau=1, connectivity=4, min_area=2)[1].to_numpy()
    ccl_cli.label(view, open=1, tau=2, smooth="binomial:1")
    ccl_cli.label(view, threshold=3, close=1, invert=True)
    ccl_cli.label(view, largest=2, max_area=100, fill_holes=True)[1].to_numpy()
    ccl_cli.label(view, tau=1, fill_holes=True, stats=False)
ccl_cli.label(cupy.asarray(host.astype(np.float32)), tau=1, dilate=1, background=None)
ccl_cli.label(cupy.asarray(host > 0), tau=0)
backend = CudaBackend()
for params in (
    LabelParams(min_area=2),
    LabelParams(tau=1, morphology=(("open", 1),)),
    LabelParams(max_area=9, largest=3, fill_holes=True),
):
    backend.label(host, params, narrow=True)
    backend.label(host > 0, params)
cupy.cuda.Device().synchronize()
"""
    cache = tmp_path / "cupy-cache"
    cache.mkdir()
    env = {**os.environ, "CUPY_CACHE_DIR": str(cache)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    assert sorted(p.name for p in cache.rglob("*")) == []


def test_labels_only_is_fine_past_2_31_pixels():
    import cupy

    skip_unless_free_gib(40)
    side, images = 4096, 130  # 130 * 4096**2 = 2.18e9 pixels > 2**31
    rng = np.random.default_rng(31)
    distinct = [(rng.random((side, side)) < d).astype(np.uint8) for d in (0.3, 0.5, 0.7)]
    batch = cupy.empty((images, side, side), cupy.uint8)
    for i in range(images):
        batch[i] = cupy.asarray(distinct[i % 3])
    assert batch.size > 2**31
    cpu = CpuBackend()
    params = LabelParams(connectivity=4, min_area=2)
    want = [cpu.label(image[None], params) for image in distinct]
    labels, counts = ccl_cli.label(batch, connectivity=4, min_area=2, stats=False)
    assert counts.get().tolist() == [len(want[i % 3].tables[0]) for i in range(images)]
    expected = [cupy.asarray(w.labels[0]) for w in want]
    for i in range(images):
        assert bool((labels[i] == expected[i % 3]).all()), f"image {i}"
    del labels, counts
    labels, table = ccl_cli.label(batch, connectivity=4, min_area=2)
    tables = table.to_numpy()
    for i in (0, 1, 2, images - 3, images - 2, images - 1):
        assert tables[i].equals(want[i % 3].tables[0]), f"statistics of image {i}"
        assert bool((labels[i] == expected[i % 3]).all()), f"image {i}"


def test_device_volumes_label_on_their_device_and_host_volumes_on_the_cpu_by_default():
    import cupy

    volume = sample((5, 6, 7))
    want = CpuBackend().label(volume[None], LabelParams(connectivity=26))
    labels, table = ccl_cli.label(cupy.asarray(volume), connectivity=26)
    assert isinstance(labels, cupy.ndarray) and isinstance(table, ccl_cli.DeviceTable)
    np.testing.assert_array_equal(labels.get(), want.labels[0])
    assert table.to_numpy()[0].equals(want.tables[0])
    labels, tables = ccl_cli.label(volume, connectivity=26)  # auto: the CPU engine
    np.testing.assert_array_equal(labels, want.labels[0])
    assert isinstance(labels, np.ndarray) and tables[0].equals(want.tables[0])
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        labels, counts = ccl_cli.label(
            torch.from_numpy(volume).cuda(), connectivity=26, stats=False
        )
        assert labels.is_cuda
        np.testing.assert_array_equal(labels.cpu().numpy().view(np.uint32), want.labels[0])
        assert int(counts) == len(want.tables[0])
