// Dense raster-order labels without a sort.
//
// Roots are the first pixels of their components (common.cuh), so ranking
// the roots in raster order numbers the components 1..K per image:
//   gccl_finalize: per chunk of GCCL_CHUNK pixels, store each root's rank
//     inside the chunk (GCCL_ROOT_FLAG | rank) and count the chunk's roots;
//   gccl_segmented_scan: exclusive scan of the chunk counts per image (and of
//     any per-segment u32 array: the label offsets and area_filter.cu reuse it);
//   gccl_resolve: find each pixel's root (halving paths as it goes);
//     label = chunk offset of the root + its rank + 1.
#include "common.cuh"

#define GCCL_WARPS (GCCL_CHUNK_THREADS / 32)

extern "C" __global__ void __launch_bounds__(GCCL_CHUNK_THREADS)
    gccl_finalize(u32* labels, u32 pixels, u32 chunks_per_image, u32* chunk_roots) {
  __shared__ u32 warp_roots[GCCL_WARPS];
  const BlockPlace place = block_place(chunks_per_image);
  u32* L = labels + (u64)place.image * pixels;
  const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const u32 start = place.index * GCCL_CHUNK;
  u32 seen = 0;
  for (u32 step = 0; step < GCCL_CHUNK_ITEMS; ++step) {
    const u32 p = start + step * GCCL_CHUNK_THREADS + threadIdx.x;
    const bool root = p < pixels && L[p] == p;
    const u32 ballot = __ballot_sync(GCCL_FULL_WARP, root);
    if (lane == 0) warp_roots[warp] = __popc(ballot);
    __syncthreads();
    u32 before = seen, total = 0;
    for (u32 w = 0; w < GCCL_WARPS; ++w) {
      const u32 c = warp_roots[w];
      before += w < warp ? c : 0;
      total += c;
    }
    if (root) L[p] = GCCL_ROOT_FLAG | (before + __popc(ballot & ((1u << lane) - 1)));
    seen += total;
    __syncthreads();
  }
  if (threadIdx.x == 0) chunk_roots[blockIdx.x] = seen;
}

// One CUDA block per segment, GCCL_SCAN_ITEMS consecutive values per thread
// and step. Segment s is [seg_start[s], seg_start[s+1]), or [s * seg_len,
// (s + 1) * seg_len) when seg_start is null; seg_total (may be null) gets
// each segment's sum.
extern "C" __global__ void __launch_bounds__(GCCL_SCAN_THREADS)
    gccl_segmented_scan(const u32* in, u32* out, const u32* seg_start, u64 seg_len,
                        u32* seg_total) {
  __shared__ u32 warp_sums[GCCL_SCAN_THREADS / 32];
  const u64 begin = seg_start ? seg_start[blockIdx.x] : (u64)blockIdx.x * seg_len;
  const u64 end = seg_start ? seg_start[blockIdx.x + 1] : begin + seg_len;
  const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  u32 carry = 0;
  for (u64 base = begin; base < end; base += GCCL_SCAN_THREADS * GCCL_SCAN_ITEMS) {
    const u64 first = base + (u64)threadIdx.x * GCCL_SCAN_ITEMS;
    u32 items[GCCL_SCAN_ITEMS];
    u32 own = 0;
    for (u32 j = 0; j < GCCL_SCAN_ITEMS; ++j) {
      items[j] = first + j < end ? in[first + j] : 0;
      own += items[j];
    }
    const u32 inclusive = warp_inclusive_sum(own, lane);
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    if (warp == 0) warp_sums[lane] = warp_inclusive_sum(warp_sums[lane], lane);
    __syncthreads();
    u32 running = carry + (warp ? warp_sums[warp - 1] : 0) + inclusive - own;
    for (u32 j = 0; j < GCCL_SCAN_ITEMS; ++j) {
      if (first + j < end) out[first + j] = running;
      running += items[j];
    }
    carry += warp_sums[31];
    __syncthreads();
  }
  if (threadIdx.x == 0 && seg_total) seg_total[blockIdx.x] = carry;
}

extern "C" __global__ void __launch_bounds__(GCCL_CHUNK_THREADS)
    gccl_resolve(u32* labels, u32* out, u32 pixels, u32 chunks_per_image,
                 const u32* chunk_offsets) {
  const BlockPlace place = block_place(chunks_per_image);
  const u64 image_base = (u64)place.image * pixels;
  u32* L = labels + image_base;
  u32* O = out + image_base;
  const u32* offsets = chunk_offsets + (u64)place.image * chunks_per_image;
  const u32 start = place.index * GCCL_CHUNK;
  for (u32 step = 0; step < GCCL_CHUNK_ITEMS; ++step) {
    const u32 p = start + step * GCCL_CHUNK_THREADS + threadIdx.x;
    if (p >= pixels) break;
    u32 label = 0;
    if (L[p] != GCCL_BACKGROUND) {
      const u32 root = find_root(L, p);
      label = offsets[root / GCCL_CHUNK] + (L[root] & ~GCCL_ROOT_FLAG) + 1;
    }
    O[p] = label;
  }
}
