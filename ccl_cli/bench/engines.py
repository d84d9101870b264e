"""The labeling engines a benchmark compares, each behind the adapter of adapter.py.

Every engine runs at its best settings: all CPU threads where the library can
use them, CV_32S labels for OpenCV, the whole batch in one call where the
library takes batches.

Binary engines other than gccl get the foreground mask (value != 0) as uint8
0/1, since they label nonzero pixels and cc3d would otherwise split
components by value. Tau engines get the values: tau mode joins neighbours
whose values differ by at most tau, and value 0 is background.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from ..contract.params import LabelParams
from .adapter import (
    BOXES,
    FULL_HD_PIXELS,
    LABELS,
    OUTLINES,
    STATISTICS,
    VGA_PIXELS,
    BenchEngine,
    DeviceEngine,
    Output,
    cpu_threads,
)
from .floodfill import flood_fill_labels


class _Gccl(BenchEngine):
    """What both gccl backends share: raster-order labels, and `gccl label` end to end."""

    raster_order = True
    work: tuple[str, ...] = STATISTICS
    growing_tolerance = True
    modes: tuple[str, ...] = ("binary", "tau")
    end_to_end_modes: tuple[str, ...] = ("binary", "tau")
    end_to_end_batched = True
    ranks: tuple[int, ...] = (2, 3)
    #: The `gccl label --device` of this backend.
    device = ""

    def end_to_end(self, folder: Path, out: Path, params: LabelParams, batch: int) -> int:
        from .files import gccl_label_folder

        return gccl_label_folder(folder, out, params, self.device, batch)


class GcclCuda(_Gccl, DeviceEngine):
    """gccl's CUDA kernels on a batch already on the GPU: labels and statistics.

    Timed: the labeling kernels (dense raster-order labels) and the statistics
    kernels up to the finished table, what `gccl label` runs on the device;
    not the copies back to the host.
    """

    name = "gccl-cuda"
    device = "cuda"
    statistics = True

    def description(self) -> str:
        return (
            "dense_labels + filtered_table (ccl_cli.backends.cuda): labels and per-label "
            "statistics of the batch on device 0"
        )

    def unavailable(self) -> str | None:
        try:
            from ..backends.cuda.loader import cuda_status
        except ImportError as error:
            return f"the CUDA backend cannot be imported ({error})"
        status = cuda_status()
        return None if status.usable else status.reason

    def prepare(self, batch: np.ndarray, params: LabelParams) -> Any:
        import cupy

        return cupy.asarray(batch)

    def run(self, prepared: Any, params: LabelParams) -> Output:
        import cupy

        from ..backends.cuda.labels import dense_labels, filtered_table, label_offsets

        labels = cupy.empty(prepared.shape, cupy.uint32)
        if params.rank == 3:
            return self._volumes(prepared, params, labels)
        components = dense_labels(prepared, params, labels)
        if self.statistics:  # as a CUDA job: the label count sizes the statistics
            label_base = label_offsets(components)
            total = int(label_base[-1:].get()[0])
            filtered_table(prepared, labels, label_base, total, params)
        return Output(labels, components)

    def _volumes(self, prepared: Any, params: LabelParams, labels: Any) -> Output:
        """A batch of volumes, as gccl label runs it: labels and statistics (volume_table),
        or labels alone (volume_counts)."""
        import cupy

        from ..backends.cuda.device import volume_counts, volume_table

        if self.statistics:
            _, counts = volume_table(prepared, params, labels)
            return Output(labels, counts)
        counts = cupy.empty(len(prepared), cupy.uint32)
        volume_counts(prepared, params, labels, counts)
        return Output(labels, counts)


class GcclCudaLabels(GcclCuda):
    """gccl's CUDA labeling kernels alone (what cupyx and the GPU papers' numbers time)."""

    name = "gccl-cuda-labels"
    work: tuple[str, ...] = LABELS
    end_to_end_modes = ()
    no_end_to_end = "end to end it is gccl-cuda"
    statistics = False

    def description(self) -> str:
        return "dense_labels (ccl_cli.backends.cuda): dense raster-order labels only, device 0"


class GcclCudaPolygons(GcclCuda):
    """gccl's CUDA kernels with --polygons: labels, statistics and outlines on the host."""

    name = "gccl-cuda-polygons"
    work = STATISTICS + OUTLINES
    ranks = (2,)  # outlines are 2-D
    end_to_end_modes = ()
    no_end_to_end = "end to end it is gccl label --polygons (benchmarks/bench_polygons.py)"

    def description(self) -> str:
        return (
            "dense_labels + filtered_table + device_outlines (ccl_cli.backends): labels, "
            "statistics and the canonical polygon outlines copied to the host, device 0"
        )

    def run(self, prepared: Any, params: LabelParams) -> Output:
        from ..backends.cuda.outlines import device_outlines

        output = super().run(prepared, params)
        device_outlines(output.labels, [int(k) for k in output.components.get()])
        return output


class GcclCpu(_Gccl):
    """gccl's CPU reference backend, images of a batch in parallel threads."""

    name = "gccl-cpu"
    device = "cpu"

    def __init__(self) -> None:
        self._backend: Any = None

    def description(self) -> str:
        return (
            f"CpuBackend.label: labels + statistics, {cpu_threads()} threads over row strips, "
            "into a labels array made once per measurement"
        )

    def unavailable(self) -> str | None:
        return None  # the engine is built with the package

    def prepare(self, batch: np.ndarray, params: LabelParams) -> Any:
        """The batch and an array for its labels, made once for all the timed calls: the
        CUDA engine's labels come from CuPy's memory pool and OpenCV's from the heap it
        recycles, where a new array of a whole batch's labels at each call (hundreds of MB
        at the large batches) would time the kernel clearing fresh pages."""
        return batch, np.empty(batch.shape, np.uint32)

    def run(self, prepared: Any, params: LabelParams) -> Output:
        if self._backend is None:
            from ..backends.cpu.backend import CpuBackend

            self._backend = CpuBackend(cpu_threads())
        batch, out = prepared
        result = self._backend.label(batch, params, out=out)
        return Output(result.labels, sum(result.components))

    def host_labels(self, output: Output) -> np.ndarray:
        """A copy: the next call labels into the same array."""
        return np.array(output.labels)


class OpenCv(BenchEngine):
    """OpenCV: connectedComponentsWithStats for binary, floodFill region growing for tau."""

    name = "opencv"
    work: tuple[str, ...] = BOXES
    modes: tuple[str, ...] = ("binary", "tau")
    end_to_end_modes: tuple[str, ...] = ("binary",)
    max_pixels: ClassVar[dict[str, int]] = {"tau": VGA_PIXELS}

    def description(self) -> str:
        import cv2

        cv2.setNumThreads(cpu_threads())
        return (
            f"cv2.connectedComponentsWithStats (CV_32S, {cv2.getNumThreads()} threads), one image "
            "per call; tau mode: cv2.floodFill region growing (floating range = tau) from each "
            f"unlabeled pixel in raster order, images up to {VGA_PIXELS / 1e6:.1f} Mpixel; "
            "end to end: imread, label, imwrite and a CSV of area, box and centroid per file, on "
            f"{cpu_threads()} threads"
        )

    def unavailable(self) -> str | None:
        return _missing("cv2")

    def emulation(self, mode: str) -> str:
        return "cv2.floodFill region growing (OpenCV has no tau mode)" if mode == "tau" else ""

    def run(self, prepared: Any, params: LabelParams) -> Output:
        import cv2

        cv2.setNumThreads(cpu_threads())
        if params.mode == "tau":
            return _loop(prepared, lambda image: flood_fill_labels(image, params))
        return _loop(
            prepared,
            lambda image: _counted(
                cv2.connectedComponentsWithStats(
                    image, connectivity=params.connectivity, ltype=cv2.CV_32S
                )[:2]
            ),
        )

    def end_to_end(self, folder: Path, out: Path, params: LabelParams, batch: int) -> int:
        from .files import opencv_label_folder

        return opencv_label_folder(folder, out, params, cpu_threads())


class OpenCvContours(OpenCv):
    """OpenCV's labels plus cv2.findContours: the reference point of --polygons."""

    name = "opencv-contours"
    work = BOXES + OUTLINES
    modes = ("binary",)
    end_to_end_modes = ()
    no_end_to_end = "no file pipeline"

    def description(self) -> str:
        return (
            "cv2.connectedComponentsWithStats (CV_32S) plus cv2.findContours (RETR_CCOMP, "
            "CHAIN_APPROX_SIMPLE) of the foreground mask, one image per call"
        )

    def run(self, prepared: Any, params: LabelParams) -> Output:
        import cv2

        output = super().run(prepared, params)
        for image in prepared:
            cv2.findContours(image, cv2.RETR_CCOMP, cv2.CHAIN_APPROX_SIMPLE)
        return output


class Cupyx(DeviceEngine):
    """cupyx.scipy.ndimage.label on the whole batch, stacked, with no joins across images."""

    name = "cupyx"
    ranks = (2, 3)

    def description(self) -> str:
        return (
            "cupyx.scipy.ndimage.label on the stacked (N, H, W) batch, no joins between images; "
            "volumes one per call (generate_binary_structure(3, 1|2|3))"
        )

    def unavailable(self) -> str | None:
        missing = _missing("cupyx.scipy.ndimage")
        if missing:
            return missing
        import cupy

        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as error:  # no driver, no device: CuPy raises several kinds
            return f"no CUDA device ({error})"
        return None if count else "no CUDA device"

    def prepare(self, batch: np.ndarray, params: LabelParams) -> Any:
        import cupy

        return cupy.asarray(super().prepare(batch, params))

    def run(self, prepared: Any, params: LabelParams) -> Output:
        import cupy
        from cupyx.scipy import ndimage

        structure = _batch_structure(params.connectivity)
        if params.rank == 3:  # one volume per call, as cupyx's volume users call it
            results = [ndimage.label(volume, structure[1]) for volume in prepared]
            volumes = [labels[None] for labels, _ in results]  # views: no copy when N is 1
            return Output(
                volumes[0] if len(volumes) == 1 else cupy.concatenate(volumes),
                sum(int(count) for _, count in results),
            )
        labels, count = ndimage.label(prepared, structure)
        return Output(labels, int(count))


class Cc3d(BenchEngine):
    """connected-components-3d: binary labeling, and tau through its delta option."""

    name = "cc3d"
    modes = ("binary", "tau")
    ranks = (2, 3)

    def description(self) -> str:
        return (
            "cc3d.connected_components, one image per call, in sequence (single-threaded, as "
            "cc3d is); tau mode: delta=tau, 4c on (H, W), "
            "8c as 26-connectivity on (1, H, W) (cc3d's 2-D 8c delta differs); volumes: "
            "connectivity 6, 18 or 26, delta=tau"
        )

    def unavailable(self) -> str | None:
        return _missing("cc3d")

    def run(self, prepared: Any, params: LabelParams) -> Output:
        import cc3d

        planar: Literal[4, 8] = 8 if params.connectivity == 8 else 4
        stacked: Literal[6, 26] = 26 if params.connectivity == 8 else 6

        def one(image: np.ndarray) -> tuple[int, np.ndarray]:
            if params.rank == 3:
                delta = 0 if params.tau is None else params.tau
                volume: Literal[6, 18, 26] = _VOLUME_CONNECTIVITY[params.connectivity]
                labels, count = cc3d.connected_components(
                    image, connectivity=volume, delta=delta, return_N=True
                )
                return count, labels
            if params.tau is None:
                labels, count = cc3d.connected_components(image, connectivity=planar, return_N=True)
                return count, labels
            labels, count = cc3d.connected_components(
                image[None], connectivity=stacked, delta=params.tau, return_N=True
            )
            return count, labels[0]

        return _loop(prepared, one)


class Skimage(BenchEngine):
    """scikit-image's measure.label, images of a batch in parallel threads."""

    name = "skimage"
    max_pixels: ClassVar[dict[str, int]] = {"binary": FULL_HD_PIXELS}

    def description(self) -> str:
        return (
            f"skimage.measure.label, images of a batch on {cpu_threads()} threads, "
            f"images up to {FULL_HD_PIXELS / 1e6:.1f} Mpixel"
        )

    def unavailable(self) -> str | None:
        return _missing("skimage.measure")

    def run(self, prepared: Any, params: LabelParams) -> Output:
        from skimage.measure import label

        def one(image: np.ndarray) -> tuple[int, np.ndarray]:
            labels, count = label(image, connectivity=params.connectivity // 4, return_num=True)
            return count, labels

        return _loop(prepared, one, threads=cpu_threads())


class Scipy(BenchEngine):
    """scipy.ndimage.label on volumes, one per call: the reference of the volume tests."""

    name = "scipy"
    ranks = (3,)

    def description(self) -> str:
        return (
            "scipy.ndimage.label with generate_binary_structure(3, 1|2|3) for 6|18|26, one "
            "volume per call (single-threaded); volumes only"
        )

    def unavailable(self) -> str | None:
        return _missing("scipy.ndimage")

    def run(self, prepared: Any, params: LabelParams) -> Output:
        from scipy import ndimage

        structure = ndimage.generate_binary_structure(3, _SCIPY_RANKS[params.connectivity])

        def one(volume: np.ndarray) -> tuple[int, np.ndarray]:
            labels, count = ndimage.label(volume, structure)
            return int(count), labels

        return _loop(prepared, one)


#: Each volume connectivity, as the literal cc3d's signature names.
_VOLUME_CONNECTIVITY: dict[int, Literal[6, 18, 26]] = {6: 6, 18: 18, 26: 26}
#: scipy's generate_binary_structure rank of each volume connectivity.
_SCIPY_RANKS = {6: 1, 18: 2, 26: 3}

#: Every engine, in report order.
ENGINE_TYPES: tuple[type[BenchEngine], ...] = (
    GcclCuda,
    GcclCudaLabels,
    GcclCudaPolygons,
    GcclCpu,
    OpenCv,
    OpenCvContours,
    Cupyx,
    Cc3d,
    Skimage,
    Scipy,
)
ENGINE_NAMES = tuple(engine.name for engine in ENGINE_TYPES)


def make_engines(names: list[str]) -> list[BenchEngine]:
    """Adapters for `names` (each one of ENGINE_NAMES), in report order."""
    return [engine() for engine in ENGINE_TYPES if engine.name in names]


def _missing(module: str) -> str | None:
    """Why `module` cannot be imported, or None."""
    import importlib

    try:
        importlib.import_module(module)
    except ImportError as error:
        return f"{module} is not installed ({error})"
    return None


def _counted(result: tuple[int, np.ndarray]) -> tuple[int, np.ndarray]:
    """(components, labels) from a (count with background, labels) pair."""
    count, labels = result
    return int(count) - 1, labels


def _loop(
    batch: np.ndarray,
    label_one: Callable[[np.ndarray], tuple[int, np.ndarray]],
    threads: int = 1,
) -> Output:
    """Label the images of a batch one call each, on `threads` threads.

    label_one returns (components without the background, labels).
    """
    if threads > 1 and len(batch) > 1:
        results = list(_pool(threads).map(label_one, batch))
    else:
        results = [label_one(image) for image in batch]
    return Output([labels for _, labels in results], int(sum(count for count, _ in results)))


@cache
def _pool(threads: int) -> ThreadPoolExecutor:
    """A thread pool kept for the whole run (made once, not inside the timed calls)."""
    return ThreadPoolExecutor(threads)


def _batch_structure(connectivity: int) -> np.ndarray:
    """A structure joining neighbours within an image (4, 8: 3x3x3) or a volume (6, 18, 26:
    3x3x3x3) of a batch, none across them: scipy's generate_binary_structure(rank, r)
    inside, the offsets of at most r nonzero steps."""
    rank = 3 if connectivity in _SCIPY_RANKS else 2
    steps = _SCIPY_RANKS.get(connectivity, connectivity // 4)
    within = np.abs(np.indices((3,) * rank) - 1).sum(axis=0) <= steps
    structure = np.zeros((3,) * (rank + 1), bool)
    structure[1] = within
    return structure
