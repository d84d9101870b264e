// Min-area filtering: survivors renumbered 1..K' in label order, others 0.
//
// The host ranks the kept labels per image with gccl_segmented_scan over
// keep = area >= min_area; this kernel rewrites the label image in place.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(GCCL_CHUNK_THREADS)
    gccl_min_area_remap(u32* out, u32 pixels, u32 chunks_per_image, const u32* label_base,
                        const u64* area, const u32* kept_rank, u64 min_area) {
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
      O[p] = area[i] >= min_area ? kept_rank[i] + 1 : 0;
    }
  }
}
