// Volumes in slabs: what joins the slabs of planes a large volume is labeled in
// (backends/cuda/volumes.py), and the relabeling of a labeled volume through a table.
//
// Each slab is labeled on its own into dense local labels 1..m in raster order. Slab s's
// labels are slots first[s] + 0..m-1 of one forest per volume (u32, each slot its own
// parent at first), so every slot of an earlier slab is smaller than every slot of a later
// one. gccl_volume_seam_* joins, across the seam between the last plane of one slab and
// the first plane of the next, the slots of every pair of neighbouring voxels that join
// (atomicMin union-find, common.cuh: a root is the smallest slot of its set). A set's
// smallest slot then belongs to the first slab that holds the component and, within it, to
// the local label of the component's first voxel there, so numbering the roots in slot
// order (relabel.cu's finalize, scan and resolve over the forest) numbers the components
// 1..K in raster order of their first voxels, as one pass over the whole volume would.
// gccl_volume_remap then turns each slab's local labels into those numbers.
#include "common.cuh"
#include "dtypes.cuh"
#include "foreground.cuh"
#include "volume.cuh"

// forest[s] = s for the slots s = first .. first + count - 1 (a new slab's): every slot
// its own set. A parent is a slot number of the whole forest, so `forest` is the forest's
// start, never a view at `first`.
extern "C" __global__ void gccl_volume_forest_init(u32* forest, u32 first, u64 count) {
  GCCL_GRID_STRIDE(i, count) forest[first + i] = first + (u32)i;
}

// The seam between two consecutive planes of a volume: `below` (the last plane of a slab,
// its local labels and the values it was labeled from) and `above` (the first plane of the
// next slab). Every voxel of `above` with a label joins the labeled voxels of `below` at
// the offsets (-1, dy, dx) of the connectivity, in tau mode where their values join; the
// slots are slot_below + label - 1 and slot_above + label - 1.
template <typename T, int CONN>
__device__ __forceinline__ void volume_seam(const T* values_below, const T* values_above,
                                            const u32* labels_below, const u32* labels_above,
                                            u32 height, u32 width, u32* forest, u32 slot_below,
                                            u32 slot_above, int use_tau,
                                            const Tolerance& tolerance) {
  const u64 plane = (u64)height * width;
  GCCL_GRID_STRIDE(i, plane) {
    const u32 above = labels_above[i];
    if (!above) continue;
    const u32 p = (u32)i, y = p / width, x = p - y * width;
    const T v = use_tau ? values_above[p] : T(0);
#pragma unroll
    for (int dy = -1; dy <= 1; ++dy) {
#pragma unroll
      for (int dx = -1; dx <= 1; ++dx) {
        if (!volume_neighbour<CONN>(-1, dy, dx)) continue;
        if ((dy < 0 && y == 0) || (dy > 0 && y + 1 >= height) || (dx < 0 && x == 0) ||
            (dx > 0 && x + 1 >= width))
          continue;
        const u32 q = (u32)((int)y + dy) * width + (u32)((int)x + dx);
        const u32 below = labels_below[q];
        if (!below) continue;
        if (use_tau && !tau_joins(v, values_below[q], tolerance)) continue;
        unite(forest, slot_above + above - 1, slot_below + below - 1);
      }
    }
  }
}

#define GCCL_VOLUME_SEAM_KERNEL(conn, suffix, T)                                               \
  extern "C" __global__ void gccl_volume_seam_##conn##_##suffix(                               \
      const T* values_below, const T* values_above, const u32* labels_below,                   \
      const u32* labels_above, u32 height, u32 width, u32* forest, u32 slot_below,             \
      u32 slot_above, GCCL_TAU_PARAMS) {                                                       \
    const Tolerance tolerance = GCCL_TAU_MAKE;                                                 \
    volume_seam<T, conn>(values_below, values_above, labels_below, labels_above, height,       \
                         width, forest, slot_below, slot_above, use_tau, tolerance);           \
  }
#define GCCL_VOLUME_SEAM_KERNEL_6(suffix, T) GCCL_VOLUME_SEAM_KERNEL(6, suffix, T)
#define GCCL_VOLUME_SEAM_KERNEL_18(suffix, T) GCCL_VOLUME_SEAM_KERNEL(18, suffix, T)
#define GCCL_VOLUME_SEAM_KERNEL_26(suffix, T) GCCL_VOLUME_SEAM_KERNEL(26, suffix, T)
GCCL_FOR_EACH_DTYPE(GCCL_VOLUME_SEAM_KERNEL_6)
GCCL_FOR_EACH_DTYPE(GCCL_VOLUME_SEAM_KERNEL_18)
GCCL_FOR_EACH_DTYPE(GCCL_VOLUME_SEAM_KERNEL_26)

// Labels of a batch of volumes (or one slab) replaced through a table: label l of volume v
// becomes table[base + l - 1] with base = table_base[v] (0 when table_base is null); 0
// stays 0. One CUDA block per chunk of GCCL_CHUNK voxels, 64-bit voxel indexes. The tables:
// a slab's slots to component numbers (the forest numbered, from the slab's first slot),
// or components to their labels after area filtering (gccl_kept_labels).
extern "C" __global__ void __launch_bounds__(GCCL_CHUNK_THREADS)
    gccl_volume_remap(u32* labels, u64 voxels, u32 chunks_per_volume, const u32* table,
                      const u32* table_base) {
  const BlockPlace place = block_place(chunks_per_volume);
  u32* L = labels + (u64)place.image * voxels;
  const u32* lookup = table + (table_base ? table_base[place.image] : 0u);
  const u64 start = (u64)place.index * GCCL_CHUNK;
  for (u32 step = 0; step < GCCL_CHUNK_ITEMS; ++step) {
    const u64 i = start + (u64)step * GCCL_CHUNK_THREADS + threadIdx.x;
    if (i >= voxels) break;
    const u32 label = L[i];
    if (label) L[i] = lookup[label - 1];
  }
}

// The label each component keeps after area filtering: kept_rank + 1 where keep, else 0
// (area_filter.cu's keep and rank, per label of the batch).
extern "C" __global__ void gccl_kept_labels(const u32* keep, const u32* kept_rank, u32* out,
                                            u64 count) {
  GCCL_GRID_STRIDE(i, count) out[i] = keep[i] ? kept_rank[i] + 1 : 0u;
}
