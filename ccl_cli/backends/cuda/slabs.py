"""Volumes labeled in slabs of planes along z: one volume too large for one piece
(volumes.fits_one_piece), or one whose labeling does not fit the device's memory, gives the
same bytes as one pass.

A volume is cut into slabs of whole planes (plan_slabs), each under 2**31 voxels and small
enough for the device budget. Two passes over the slabs (label_in_slabs):

1. Each slab is labeled on its own (volumes.dense_labels) into local labels 1..m in raster
   order; they are the slots first[s] .. first[s] + m - 1 of one forest for the volume,
   grown as the slabs come. The seam with the slab before joins its slots
   (gccl_volume_seam_*, from the last plane of the slab before, kept on the device). Where
   area filtering or float statistics need them, each slot's voxels and largest finite |v|
   are kept too.
2. The forest is numbered (relabel.cu's finalize, scan and resolve: roots in slot order are
   components in raster order of their first voxels, volume_slabs.cu says why), the slots'
   sizes are added into their components' and area filtering decides. Then each slab's local
   labels become component numbers (gccl_volume_remap; relabeled again first where the
   labels did not stay on the device), its statistics are added into the volume's, area
   filtering renumbers it, and it is delivered: a device volume's labels are already in
   place, a host volume's go back to host memory as each slab finishes.

Stages (morphology, smoothing) run on each slab with `halo` planes of the volume on either
side, enough that the slab's planes come out as from the whole volume. The host waits for
each slab's label count (it sizes the forest) and for the component count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ...contract.cleaning import selects
from ...contract.params import LabelParams
from ...contract.stages import has_stages, label_input, primitive_steps
from . import volumes
from .arrays import contiguous_volumes, copy_of, elementwise
from .kernel_names import kernel_name
from .labels import Kept, kept_ranks, label_offsets, tau_args
from .loader import KERNEL_SUFFIX, import_cupy
from .stages import CudaStages

#: How much the forest grows when the slabs' local labels outgrow it.
_FOREST_GROWTH = 2
#: Device bytes per voxel of a slab's labeling besides its values: the union-find's labels
#: and the slab's local labels (u32 each).
_LABEL_BYTES = 8
#: Device bytes per voxel of the stages: binary (mask, two morphology buffers, the uint8
#: image) and tau mode (also the float64 image and the smoothing's sums, two pairs of 8-byte
#: arrays, and the fill's copy of the values).
_BINARY_STAGE_BYTES = 4
_TAU_STAGE_BYTES = 4 + 8 + 32 + 8
#: The share of the device's free memory a labeling plans for.
_BUDGET_SHARE = 0.8


def device_budget(device: int) -> int:
    """Bytes of device memory a labeling on `device` plans for: a share of what is free
    (CuPy's pool's free blocks included), the rest left for what the plan does not count."""
    cupy = import_cupy()
    with cupy.cuda.Device(device):
        free, _ = cupy.cuda.runtime.memGetInfo()
        free += cupy.get_default_memory_pool().free_bytes()
    return int(free * _BUDGET_SHARE)


def halo_planes(params: LabelParams) -> int:
    """Planes on either side of a slab that its stages read: each morphology step moves what
    the volume's border decides one plane further, and smoothing reads `R` planes."""
    if not has_stages(params):
        return 0
    steps = sum(n for _, n in primitive_steps(params.morphology))
    radius = params.smooth[1] if params.smooth is not None and params.tau is not None else 0
    return steps + radius


def voxel_bytes(dtype: np.dtype, params: LabelParams, uploaded: bool) -> int:
    """Device bytes one voxel of a slab (or of a batch labeled in one piece) needs: its
    value where it is `uploaded` from the host, the labels, the stages' arrays."""
    stages = 0
    if has_stages(params):
        stages = _BINARY_STAGE_BYTES if params.tau is None else _TAU_STAGE_BYTES + dtype.itemsize
    return (dtype.itemsize if uploaded else 0) + _LABEL_BYTES + stages


def plan_slabs(
    depth: int, plane: int, bytes_per_voxel: int, budget: int, halo: int
) -> list[tuple[int, int]]:
    """[z0, z1) of the slabs of a volume of `depth` planes of `plane` voxels: as few as keep
    each slab under volumes.MAX_VOLUME_VOXELS voxels and its planes with `halo` more on
    either side under `budget` bytes at `bytes_per_voxel`, as even as whole planes make them
    (at least one plane each)."""
    if plane > volumes.MAX_VOLUME_VOXELS:
        raise ValueError(f"a volume's plane may hold at most 2**31 - 1 voxels, got {plane}")
    by_budget = budget // max(1, plane * bytes_per_voxel) - 2 * halo
    planes = max(1, min(depth, volumes.MAX_VOLUME_VOXELS // plane, by_budget))
    count = -(-depth // planes)
    cuts = [depth * i // count for i in range(count + 1)]
    return [(cuts[i], cuts[i + 1]) for i in range(count)]


class VolumeSource(Protocol):
    """Where a volume labeled in slabs comes from and where its labels go."""

    #: Whether labels(z0, z1) is the labels' final place, which keeps the local labels
    #: between the passes (a device volume's output).
    resident: bool

    @property
    def shape(self) -> tuple[int, int, int]:
        """(D, H, W)."""
        ...

    def values(self, z0: int, z1: int) -> Any:
        """Planes z0..z1-1 on the device: a contiguous CuPy (z1 - z0, H, W) array."""
        ...

    def labels(self, z0: int, z1: int) -> Any:
        """A contiguous CuPy u32 (z1 - z0, H, W) array to label planes z0..z1-1 into."""
        ...

    def deliver(self, z0: int, labels: Any) -> None:
        """The final labels of planes z0.. (what labels(z0, ..) gave, filled in)."""
        ...


@dataclass
class DeviceVolume:
    """A volume on the device (contiguous CuPy (D, H, W)) labeled into `out` (u32, same
    shape, contiguous)."""

    volume: Any
    out: Any
    resident: bool = True

    @property
    def shape(self) -> tuple[int, int, int]:
        depth, height, width = self.volume.shape
        return depth, height, width

    def values(self, z0: int, z1: int) -> Any:
        return self.volume[z0:z1]

    def labels(self, z0: int, z1: int) -> Any:
        return self.out[z0:z1]

    def deliver(self, z0: int, labels: Any) -> None:
        """Nothing to do: the labels are in `out`."""


@dataclass
class HostVolume:
    """A volume in host memory (C-contiguous numpy (D, H, W)) labeled into the host `out`
    (u32, same shape, C-contiguous): each slab's values go up, its labels come back."""

    volume: np.ndarray
    out: np.ndarray
    resident: bool = False
    _buffer: Any = field(default=None, repr=False)

    @property
    def shape(self) -> tuple[int, int, int]:
        depth, height, width = self.volume.shape
        return depth, height, width

    def values(self, z0: int, z1: int) -> Any:
        cupy = import_cupy()
        return contiguous_volumes(cupy.asarray(self.volume[z0:z1])[None])[0]

    def labels(self, z0: int, z1: int) -> Any:
        _, height, width = self.shape
        if self._buffer is None or self._buffer.shape[0] < z1 - z0:
            self._buffer = import_cupy().empty((z1 - z0, height, width), np.uint32)
        return self._buffer[: z1 - z0]

    def deliver(self, z0: int, labels: Any) -> None:
        labels.get(out=self.out[z0 : z0 + labels.shape[0]])


@dataclass
class SlabbedVolume:
    """What label_in_slabs gives: K and K' of the volume and, with statistics, its device
    table (volumes.stats_table's words, the first K' columns the kept components')."""

    components: int
    kept: int
    table: Any = None


@dataclass
class _Slab:
    """What pass 1 keeps of one slab: its planes, its slots and their sizes."""

    z0: int
    z1: int
    first: int
    count: int
    area: Any = None  # device u64 per slot (where sizes are kept)
    absmax: Any = None  # device u64 per slot (float volumes' largest finite |v|)


class _SlabLabeling:
    """The two passes of label_in_slabs over one volume."""

    def __init__(
        self,
        source: VolumeSource,
        params: LabelParams,
        statistics: bool,
        slabs: list[tuple[int, int]],
    ) -> None:
        self.cupy = import_cupy()
        self.source, self.params, self.statistics = source, params, statistics
        self.bounds = slabs
        self.halo = halo_planes(params)
        self.filtering = params.min_area > 0 or selects(params)
        self.slabs: list[_Slab] = []
        self.forest = self.cupy.empty(0, np.uint32)
        self.slots = 0
        # The last plane of the slab before: its local labels and the values it was labeled from.
        self.below: tuple[Any, Any] | None = None
        self.floats = False
        self.sizes_needed = False

    def staged(self, z0: int, z1: int) -> tuple[Any, LabelParams, Any]:
        """Planes z0..z1-1 as labeling takes them (contract.stages.label_input on the planes
        with the halo, then cut): the (1, z1 - z0, H, W) image, its parameters and the
        values the statistics read."""
        depth, height, width = self.source.shape
        a, b = max(0, z0 - self.halo), min(depth, z1 + self.halo)
        values = self.source.values(a, b).reshape((1, b - a, height, width))
        image, label_params, read = label_input(values, self.params, self.cupy, CudaStages())
        if (a, b) != (z0, z1):
            image, read = (self._planes(array, z0 - a, z1 - a) for array in (image, read))
        return image, label_params, read

    def _planes(self, array: Any, start: int, end: int) -> Any:
        """Planes start..end-1 of a contiguous (1, E, H, W) array, as a contiguous view."""
        _, _, height, width = array.shape
        return array[0, start:end].reshape((1, end - start, height, width))

    def first_pass(self) -> None:
        for z0, z1 in self.bounds:
            image, label_params, read = self.staged(z0, z1)
            self.floats = np.dtype(read.dtype).kind == "f"
            self.sizes_needed = self.filtering or (self.statistics and self.floats)
            _, height, width = self.source.shape
            local = self.source.labels(z0, z1).reshape((1, z1 - z0, height, width))
            count = int(volumes.dense_labels(image, label_params, local).get()[0])
            if self.slots + count > volumes.MAX_VOLUME_VOXELS:
                raise ValueError(
                    f"the slabs of a volume hold more than 2**31 - 1 pieces of components "
                    f"(the forest's slots are 31-bit): {self.slots + count} by plane {z1}"
                )
            slab = _Slab(z0, z1, self.slots, count)
            self._grow_forest(self.slots + count)
            if count:
                init = (self.forest, np.uint32(self.slots), np.uint64(count))
                elementwise(self.forest, kernel_name("gccl_volume_forest_init"), init, count)
            if self.below is not None and count:
                self._join_seam(slab, image, local, label_params)
            self.slots += count
            self.slabs.append(slab)
            self.below = (copy_of(local[0, -1]), copy_of(image[0, -1]))
            if self.sizes_needed and count:
                base = self.cupy.asarray(np.array([0, count], np.uint32))
                agg = volumes.aggregate(read, local, base, volumes.empty_aggregates(count), z0)
                slab.area = copy_of(agg[volumes.AREA])
                slab.absmax = copy_of(agg[volumes.ABSMAX]) if self.floats else None

    def _grow_forest(self, size: int) -> None:
        """Room for `size` slots in the forest, the slots so far kept."""
        if size <= len(self.forest):
            return
        grown = self.cupy.empty(max(size, _FOREST_GROWTH * len(self.forest)), np.uint32)
        if self.slots:
            stream = self.cupy.cuda.get_current_stream()
            grown.data.copy_from_device_async(self.forest.data, self.slots * 4, stream)
        self.forest = grown

    def _join_seam(self, slab: _Slab, image: Any, local: Any, label_params: LabelParams) -> None:
        """Join the slots across the seam between the slab before and `slab`."""
        assert self.below is not None
        below_labels, below_values = self.below
        previous = self.slabs[-1]
        if previous.count == 0:
            return
        _, height, width = self.source.shape
        dtype = np.dtype(image.dtype)
        above_values = image[0, 0]
        if dtype == np.bool_:
            below_values, above_values = (a.view(np.uint8) for a in (below_values, above_values))
        name = kernel_name(
            "gccl_volume_seam_{connectivity}_{dtype}",
            connectivity=label_params.connectivity,
            dtype=KERNEL_SUFFIX[dtype],
        )
        args = (
            below_values,
            above_values,
            below_labels,
            local[0, 0],
            np.uint32(height),
            np.uint32(width),
            self.forest,
            np.uint32(previous.first),
            np.uint32(slab.first),
            *tau_args(label_params),
        )
        elementwise(self.forest, name, args, height * width)

    def number(self) -> tuple[Any, int]:
        """The component number (1..K) of every slot, and K (the host waits for it)."""
        number = self.cupy.empty(max(self.slots, 1), np.uint32)
        if self.slots == 0:
            return number, 0
        forest = self.forest[: self.slots].reshape((1, self.slots))
        components = volumes.resolve(forest, number[: self.slots].reshape((1, self.slots)))
        return number, int(components.get()[0])

    def sizes(self, number: Any, components: int) -> Any:
        """The components' voxels and largest finite |v| (rows AREA and ABSMAX of a
        (FIELDS, K) array) from their slots'."""
        sizes = self.cupy.empty((volumes.FIELDS, max(components, 1)), np.uint64)
        stream = self.cupy.cuda.get_current_stream()
        sizes.data.memset_async(0, sizes.nbytes, stream)
        for slab in self.slabs:
            if not slab.count:
                continue
            null = np.uint64(0)
            args = (
                slab.area,
                null if slab.absmax is None else slab.absmax,
                np.uint64(slab.count),
                number[slab.first :],
                sizes,
                np.uint64(max(components, 1)),
            )
            elementwise(sizes, kernel_name("gccl_volume_merge_sizes"), args, slab.count)
        return sizes

    def second_pass(self, number: Any, components: int) -> SlabbedVolume:
        cupy = self.cupy
        base = cupy.asarray(np.array([0, components], np.uint32))
        sizes = self.sizes(number, components) if self.sizes_needed and components else None
        kept: Kept | None = None
        kept_table = None
        kept_count = components
        if self.filtering and components:
            assert sizes is not None
            keep, rank, counts = kept_ranks(self.params, base, sizes[volumes.AREA, :components])
            kept = Kept(keep, rank, label_offsets(counts), counts)
            kept_table = volumes.kept_labels(keep, rank)
            kept_count = int(counts.get()[0])
        agg = volumes.empty_aggregates(components) if self.statistics else None
        _, height, width = self.source.shape
        recompute_read = self.params.tau is not None and bool(self.params.morphology)
        for slab in self.slabs:
            z0, z1 = slab.z0, slab.z1
            local = self.source.labels(z0, z1).reshape((1, z1 - z0, height, width))
            read = None
            if not self.source.resident or (self.statistics and recompute_read):
                image, label_params, read = self.staged(z0, z1)
                volumes.dense_labels(image, label_params, local)
            elif self.statistics:  # no stage changes the values the statistics read
                read = self.source.values(z0, z1).reshape(local.shape)
            if slab.count:
                volumes.remap(local, number[slab.first : slab.first + slab.count])
            if agg is not None and components:
                volumes.aggregate(read, local, base, agg, z0, sizes)
            if kept_table is not None:
                volumes.remap(local, kept_table)
            self.source.deliver(z0, local[0])
        table = None
        if agg is not None:
            table = volumes.stats_table(agg, base, kept, self.floats)
        return SlabbedVolume(components, kept_count, table)


def label_in_slabs(
    source: VolumeSource,
    params: LabelParams,
    statistics: bool,
    slabs: list[tuple[int, int]],
) -> SlabbedVolume:
    """Label one volume in the slabs `slabs` (plan_slabs'), on the current stream (module
    docstring); the labels land where `source` puts them."""
    labeling = _SlabLabeling(source, params, statistics, slabs)
    labeling.first_pass()
    number, components = labeling.number()
    return labeling.second_pass(number, components)
