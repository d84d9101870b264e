"""Device arrays, strided views, the Python API, module loading and OOM splitting."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import backends, gpu, to_host

from ccl_cli import api
from ccl_cli.backends.cuda import backend as cuda_module
from ccl_cli.backends.cuda import loader, pinned
from ccl_cli.contract.params import LabelParams
from ccl_cli.errors import BackendUnavailable, UsageError

pytestmark = gpu


def sample(shape=(3, 83, 121), dtype=np.uint8, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 3, shape) * (rng.random(shape) < 0.55)).astype(dtype)


def assert_results_equal(got, want) -> None:
    np.testing.assert_array_equal(to_host(got.labels), to_host(want.labels))
    assert got.components == want.components
    assert all(a.equals(b) for a, b in zip(got.tables, want.tables, strict=True))


def test_fatbin_is_what_loads():
    status = loader.cuda_status()
    assert status.usable, status.reason
    assert status.kernel_source.startswith("fatbin"), status.kernel_source
    assert status.devices and status.cupy_version


@pytest.mark.parametrize(
    "params",
    [LabelParams(min_area=2), LabelParams(tau=1.5, connectivity=4), LabelParams(tau=0)],
    ids=repr,
)
def test_nvrtc_fallback_gives_the_same_result(monkeypatch, params):
    batch = sample(dtype=np.float32)
    with_fatbin = backends()[0].label(batch, params)
    monkeypatch.setenv(loader.FORCE_NVRTC_ENV, "1")
    monkeypatch.setattr(loader, "_loaded", {})
    assert loader.cuda_status().kernel_source.startswith("NVRTC")
    assert_results_equal(cuda_module.CudaBackend().label(batch, params), with_fatbin)


def test_cupy_batch_stays_on_device():
    import cupy

    batch = sample()
    got = backends()[0].label(cupy.asarray(batch), LabelParams())
    assert isinstance(got.labels, cupy.ndarray)
    assert_results_equal(got, backends()[1].label(batch, LabelParams()))


VIEWS = {
    "steps": lambda a: a[::2, 1::2, ::3],
    "transposed": lambda a: a.transpose(0, 2, 1),
    "reversed": lambda a: a[:, ::-1, 5:-7],
}


@pytest.mark.parametrize("view", VIEWS.values(), ids=VIEWS.keys())
@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("tau", [None, 1])
def test_strided_views(view, connectivity, tau):
    import cupy

    big = sample((4, 150, 260), np.int16, seed=3)
    params = LabelParams(connectivity=connectivity, tau=tau)
    want = backends()[1].label(np.ascontiguousarray(view(big)), params)
    assert_results_equal(backends()[0].label(view(big), params), want)
    assert_results_equal(backends()[0].label(view(cupy.asarray(big)), params), want)


def test_cuda_array_interface_and_dlpack_objects():
    import cupy

    batch = sample(seed=5)
    device = cupy.asarray(batch)
    want = backends()[1].label(batch, LabelParams())

    class Cai:
        __cuda_array_interface__ = device.__cuda_array_interface__

    class DLPackOnly:
        def __dlpack__(self, **kwargs):
            return device.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return device.__dlpack_device__()

    for obj in (Cai(), DLPackOnly()):
        got = backends()[0].label(obj, LabelParams())
        assert isinstance(got.labels, cupy.ndarray)
        assert_results_equal(got, want)


def test_api_single_images_and_devices():
    import cupy

    image = sample((1, 64, 99), seed=2)[0]
    want, want_tables = api.label(image, min_area=2, device="cpu")
    assert want.shape == image.shape and len(want_tables) == 1
    for device in ("auto", "cuda", "cuda:0"):
        labels, tables = api.label(image, min_area=2, device=device)
        assert isinstance(labels, np.ndarray) and labels.shape == image.shape
        np.testing.assert_array_equal(labels, want)
        assert tables[0].equals(want_tables[0])
        for array in (labels, tables[0].area, tables[0].mean):  # ordinary memory, not pinned
            kind = cupy.cuda.runtime.pointerGetAttributes(array.ctypes.data).type
            assert kind != cupy.cuda.runtime.memoryTypeHost
    labels, _ = api.label(cupy.asarray(image), min_area=2)
    assert isinstance(labels, cupy.ndarray) and labels.shape == image.shape
    np.testing.assert_array_equal(labels.get(), want)
    with pytest.raises(UsageError):
        api.label(cupy.asarray(image), device="cpu")
    with pytest.raises(BackendUnavailable):
        api.label(image, device="cuda:99")


@pytest.mark.parametrize("on_device", [False, True])
def test_out_of_memory_splits_the_batch(monkeypatch, on_device):
    import cupy

    sizes = []

    class TightMemory(cuda_module.Job):
        def __init__(self, values, *args):
            sizes.append(len(values))
            if len(values) > 2:
                raise cupy.cuda.memory.OutOfMemoryError(1 << 40, 0, 0)
            super().__init__(values, *args)

    monkeypatch.setattr(cuda_module, "Job", TightMemory)
    batch = np.stack([sample((1, 70, 90), seed=s)[0] for s in range(7)])
    params = LabelParams(min_area=3)
    got = backends()[0].label(cupy.asarray(batch) if on_device else batch, params)
    assert max(s for s in sizes if s <= 2) <= 2 and 7 in sizes
    assert_results_equal(got, backends()[1].label(batch, params))


def test_batch_budget_is_positive_and_below_free_memory():
    import cupy

    budget = backends()[0].batch_budget_bytes()
    free, _ = cupy.cuda.runtime.memGetInfo()
    assert 0 < budget < free + cupy.get_default_memory_pool().free_bytes()


@pytest.mark.parametrize("count", [2, 3, 5])
def test_large_host_batches_run_in_chunks_into_out(count, monkeypatch):
    """Batches over the chunk size go through pinned buffers in chunks, one stream each."""
    monkeypatch.setattr(cuda_module, "_CHUNK_BYTES", 4 << 20)
    shape = (count, 1100, 1001)
    batch = sample(shape, np.uint16, seed=count)
    bounds = cuda_module._chunks(batch, LabelParams())  # 2.2 MB images: one or two a chunk
    assert len(bounds) >= 2 and bounds[0][0] == 0 and bounds[-1][1] == count
    cuda, cpu = backends()
    params = LabelParams(tau=1, min_area=3)
    out = np.zeros(shape, np.uint32)
    got = cuda.label(batch, params, out=out)
    assert got.labels is out
    assert_results_equal(got, cpu.label(batch, params))


def test_host_batch_labels_come_back_in_pinned_memory():
    import cupy

    batch = sample((3, 700, 900), np.uint8, seed=4)
    cuda, cpu = backends()
    got = cuda.label(batch, LabelParams(connectivity=4))
    attributes = cupy.cuda.runtime.pointerGetAttributes(got.labels.ctypes.data)
    assert attributes.type == cupy.cuda.runtime.memoryTypeHost  # page-locked, not pageable
    assert_results_equal(got, cpu.label(batch, LabelParams(connectivity=4)))


def test_pinned_buffers_are_pooled_in_power_of_two_sizes():
    import cupy

    pool = cupy.get_default_pinned_memory_pool()
    first = pinned.pinned_empty((3, 1000, 999), np.dtype(np.uint16))
    assert first.shape == (3, 1000, 999) and first.dtype == np.uint16
    del first
    free_before = pool.n_free_blocks()
    second = pinned.pinned_empty((2, 1000, 1234), np.dtype(np.uint16))  # same size class
    assert pool.n_free_blocks() == free_before - 1  # the first one's block, reused
    second[:] = 7  # the whole view is writable memory
    assert int(second.sum()) == 7 * second.size


def test_a_batch_in_empty_batch_memory_is_page_locked_and_labels_the_same():
    import cupy

    cuda, cpu = backends()
    values = sample((4, 300, 500), np.uint16, seed=5)
    batch = cuda.empty_batch(values.shape, values.dtype)
    batch[...] = values
    attributes = cupy.cuda.runtime.pointerGetAttributes(batch.ctypes.data)
    assert attributes.type == cupy.cuda.runtime.memoryTypeHost
    assert pinned.page_locked(cupy, batch[1:3])  # a part copies without staging
    assert not pinned.page_locked(cupy, values)
    assert not pinned.page_locked(cupy, batch[:, :, ::2])  # not contiguous: staged
    params = LabelParams(tau=1, min_area=3)
    assert_results_equal(cuda.label(batch, params), cpu.label(values, params))


def test_a_batchs_chunks_run_on_streams_of_their_own_kept_for_the_next(monkeypatch):
    """Each chunk a non-blocking stream of its own (CudaBackend._take_stream); the
    next batch takes the same streams again instead of making new ones."""
    monkeypatch.setattr(cuda_module, "_CHUNK_BYTES", 1 << 20)
    batch = sample((4, 1000, 1000), np.uint8, seed=7)  # 1 MB images: four chunks
    backend, cpu = cuda_module.CudaBackend(0), backends()[1]
    for _ in range(2):
        got = backend.label(batch, LabelParams())
        assert_results_equal(got, cpu.label(batch, LabelParams()))
        assert len(backend._streams) == 4 and not backend._busy_streams


def test_a_chunks_labeling_waits_for_the_chunk_two_before_it(monkeypatch):
    """At most _CHUNKS_LABELING chunks label at once: chunk k's labeling is issued
    after chunk k - 2's label count event, so the chunks do not all run at once."""
    monkeypatch.setattr(cuda_module, "_CHUNK_BYTES", 1 << 20)
    batch = sample((5, 1000, 1000), np.uint8, seed=8)  # 1 MB images: five chunks
    jobs, waits = [], []
    label = cuda_module.Job.label

    def recorded(job, after=None):
        jobs.append(job)
        waits.append(after)
        label(job, after)

    monkeypatch.setattr(cuda_module.Job, "label", recorded)
    backend, cpu = cuda_module.CudaBackend(0), backends()[1]
    assert_results_equal(backend.label(batch, LabelParams()), cpu.label(batch, LabelParams()))
    assert len(jobs) == 5 and waits[:2] == [None, None]
    assert all(waits[k] is jobs[k - 2].counted for k in range(2, 5))


def test_repeated_host_batches_reuse_device_memory():
    """Streams are kept, so CuPy's pool (which keeps freed memory per stream) reuses it."""
    import cupy

    cuda, _ = backends()
    batch = sample((4, 3000, 3000), np.uint8, seed=6)  # 36 MB: two chunks, two streams
    assert len(cuda_module._chunks(batch, LabelParams())) == 2
    for _ in range(2):
        cuda.label(batch, LabelParams())
    pool = cupy.get_default_memory_pool()
    held = pool.total_bytes()
    for _ in range(5):
        cuda.label(batch, LabelParams())
    assert pool.total_bytes() == held


def dots_and_noise(count: int, side: int) -> np.ndarray:
    """uint8 images alternating isolated dots (side**2 / 4 components with
    4-connectivity: too many for 16 bits from side 512) and random noise."""
    batch = sample((count, side, side), np.uint8, seed=count)
    batch[::2] = 0
    batch[::2, ::2, ::2] = 1
    return batch


@pytest.mark.parametrize(("count", "side"), [(1, 64), (2, 512), (5, 1024)])
def test_narrowed_labels_equal_the_cpus_image_for_image(count, side, monkeypatch):
    """uint16 exactly where the kept labels fit, also across chunks (1 MiB)."""
    monkeypatch.setattr(cuda_module, "_CHUNK_BYTES", 1 << 20)
    batch = dots_and_noise(count, side)
    params = LabelParams(connectivity=4)
    cuda, cpu = backends()
    want = cpu.label(batch, params, narrow=True)
    assert sorted(want.wide) == [i for i, table in enumerate(want.tables) if len(table) > 65535]
    for out in (None, np.zeros(batch.shape, np.uint16)):  # page-locked, then pageable
        got = cuda.label(batch, params, out, narrow=True)
        assert got.labels.dtype == np.uint16 and sorted(got.wide) == sorted(want.wide)
        for i in range(count):
            assert got.image(i).dtype == want.image(i).dtype
            np.testing.assert_array_equal(got.image(i), want.image(i))
        assert got.components == want.components
