// Area filtering (--min-area, --max-area, --largest): the labels kept renumbered 1..K' in
// label order, the others 0.
//
// keep[i] says whether label i stays (gccl_keep_area in arrays.cu, or the host for
// --largest: contract/cleaning.py's rule); the host ranks the kept labels per image with
// gccl_segmented_scan over keep; this kernel rewrites the label image in place.
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
