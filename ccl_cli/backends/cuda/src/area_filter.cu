// Area filtering (--min-area, --max-area, --largest): the labels kept renumbered 1..K' in
// label order, the others 0.
//
// keep[i] says whether label i stays (gccl_keep_area in arrays.cu, or the host for
// --largest: contract/cleaning.py's rule); the host scans keep over the whole batch in tiles
// and over the tiles (gccl_segmented_scan, relabel.cu), gccl_kept_ranks turns that into each
// label's rank among its own image's kept labels and the kept count per image, and
// gccl_area_remap rewrites the label image in place.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(GCCL_CHUNK_THREADS)
    gccl_area_remap(u32* out, u32 pixels, u32 chunks_per_image, const u32* label_base,
                    const u32* keep, const u32* kept_rank) {
  const BlockPlace place = block_place(chunks_per_image);
  u32* O = out + (u64)place.image * pixels;
  const u64 base = label_base[place.image];
  const u32 start = place.index * GCCL_CHUNK;
  for (u32 step = 0; step < GCCL_CHUNK_ITEMS; ++step) {
    const u32 p = start + step * GCCL_CHUNK_THREADS + threadIdx.x;
    if (p >= pixels) break;
    const u32 label = O[p];
    if (label) {
      const u64 i = base + label - 1;
      O[p] = keep[i] ? kept_rank[i] + 1 : 0;
    }
  }
}

// rank[i] = the kept labels of label i's image before label i; counts[j] = image j's kept
// labels. The exclusive scan of keep over the batch comes in two levels, both of
// gccl_segmented_scan: `local` within tiles of `tile` labels, `tile_base` (tiles + 1 entries,
// the last the batch's total) before each tile. label_base (images + 1 entries) holds each
// image's first label, then the total.
__device__ __forceinline__ u32 kept_before(const u32* local, const u32* tile_base, u64 tile,
                                           u64 tiles, u64 i) {
  const u64 t = i / tile;
  return t < tiles ? local[i] + tile_base[t] : tile_base[tiles];
}

extern "C" __global__ void gccl_kept_ranks(const u32* local, const u32* tile_base, u64 tile,
                                           u64 tiles, const u32* label_base, u32 images,
                                           u32* rank, u32* counts, u64 total) {
  GCCL_GRID_STRIDE(i, total) {
    u32 low = 0, high = images;  // the image j with label_base[j] <= i < label_base[j + 1]
    while (high - low > 1) {
      const u32 middle = low + (high - low) / 2;
      if (label_base[middle] <= i) {
        low = middle;
      } else {
        high = middle;
      }
    }
    rank[i] = kept_before(local, tile_base, tile, tiles, i) -
              kept_before(local, tile_base, tile, tiles, label_base[low]);
  }
  GCCL_GRID_STRIDE(j, (u64)images) {
    counts[j] = kept_before(local, tile_base, tile, tiles, label_base[j + 1]) -
                kept_before(local, tile_base, tile, tiles, label_base[j]);
  }
}
