// Dense raster-order labels without a sort, in one pass (gccl_relabel).
//
// Roots are the first pixels of their components (common.cuh), so ranking
// the roots in raster order numbers the components 1..K per image. Each CUDA
// block takes the next chunk of GCCL_CHUNK pixels (a ticket keeps chunks in
// raster order), flags each of its roots with its rank inside the chunk
// (GCCL_ROOT_FLAG | rank), learns the number of roots before the chunk by a
// decoupled look-back over the earlier chunks' published counts, then labels
// its pixels: label = roots before the root's chunk + the root's rank + 1.
// Roots never lie after their pixels, so every chunk a pixel needs has begun.
//
// gccl_segmented_scan (per-segment exclusive scan) serves the label offsets
// and min_area.cu.
#include "common.cuh"

#define GCCL_WARPS (GCCL_CHUNK_THREADS / 32)
#define GCCL_SCAN_THREADS 1024
#define GCCL_SCAN_ITEMS 4

// A chunk's published state, one u64: state (2 bits) | roots (30) | prefix (32).
#define GCCL_CHUNK_COUNTED 1ull  // roots known
#define GCCL_CHUNK_DONE 2ull     // roots and the number of roots before the chunk known

__device__ __forceinline__ u64 chunk_word(u64 state, u32 roots, u32 prefix) {
  return state << 62 | (u64)roots << 32 | prefix;
}

// The word of a chunk once it is DONE (other blocks publish it; we wait).
__device__ __forceinline__ u64 wait_done(const u64* status) {
  u64 word;
  do {
    word = *(const volatile u64*)status;
  } while ((word >> 62) != GCCL_CHUNK_DONE);
  __threadfence();
  return word;
}

// status: n * chunks_per_image + 1 zeros (the last one is the ticket counter);
// components: K per image.
extern "C" __global__ void __launch_bounds__(GCCL_CHUNK_THREADS)
    gccl_relabel(u32* labels, u32* out, u32 pixels, u32 chunks_per_image, u64* status,
                 u32* components) {
  __shared__ u32 warp_roots[GCCL_WARPS];
  __shared__ u32 ticket, prefix;
  const u64 chunks = (u64)gridDim.x;
  if (threadIdx.x == 0) ticket = atomicAdd((unsigned long long*)&status[chunks], 1ull);
  __syncthreads();
  const u32 image = ticket / chunks_per_image, chunk = ticket - image * chunks_per_image;
  const u64 image_base = (u64)image * pixels;
  u32* L = labels + image_base;
  u64* chunk_status = status + (u64)image * chunks_per_image;
  const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const u32 start = chunk * GCCL_CHUNK;

  // 1. Rank this chunk's roots in raster order.
  u32 roots = 0;
  for (u32 step = 0; step < GCCL_CHUNK_ITEMS; ++step) {
    const u32 p = start + step * GCCL_CHUNK_THREADS + threadIdx.x;
    const bool root = p < pixels && L[p] == p;
    const u32 ballot = __ballot_sync(0xFFFFFFFFu, root);
    if (lane == 0) warp_roots[warp] = __popc(ballot);
    __syncthreads();
    u32 before = roots, total = 0;
    for (u32 w = 0; w < GCCL_WARPS; ++w) {
      const u32 c = warp_roots[w];
      before += w < warp ? c : 0;
      total += c;
    }
    if (root) L[p] = GCCL_ROOT_FLAG | (before + __popc(ballot & ((1u << lane) - 1)));
    roots += total;
    __syncthreads();
  }

  // 2. Publish the count, look back for the roots before the chunk, publish that.
  if (threadIdx.x == 0) {
    __threadfence();
    u32 before = 0;
    if (chunk > 0) {
      atomicExch((unsigned long long*)&chunk_status[chunk],
                 chunk_word(GCCL_CHUNK_COUNTED, roots, 0));
      for (u32 j = chunk; j-- > 0;) {
        u64 word;
        do {
          word = *(volatile u64*)&chunk_status[j];
        } while ((word >> 62) == 0);
        before += (u32)(word >> 32) & 0x3FFFFFFFu;
        if ((word >> 62) == GCCL_CHUNK_DONE) {
          before += (u32)word;
          break;
        }
      }
    }
    __threadfence();
    atomicExch((unsigned long long*)&chunk_status[chunk],
               chunk_word(GCCL_CHUNK_DONE, roots, before));
    if (chunk + 1 == chunks_per_image) components[image] = before + roots;
    prefix = before;
  }
  __syncthreads();

  // 3. Label the chunk's pixels.
  u32* O = out + image_base;
  for (u32 step = 0; step < GCCL_CHUNK_ITEMS; ++step) {
    const u32 p = start + step * GCCL_CHUNK_THREADS + threadIdx.x;
    if (p >= pixels) break;
    u32 label = 0;
    if (L[p] != GCCL_BACKGROUND) {
      const u32 root = find_root(L, p);
      const u32 root_chunk = root / GCCL_CHUNK;
      const u32 before = root_chunk == chunk ? prefix : (u32)wait_done(&chunk_status[root_chunk]);
      label = before + (__ldcg(&L[root]) & ~GCCL_ROOT_FLAG) + 1;
    }
    O[p] = label;
  }
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
    u32 inclusive = own;
    for (u32 d = 1; d < 32; d <<= 1) {
      const u32 y = __shfl_up_sync(0xFFFFFFFFu, inclusive, d);
      if (lane >= d) inclusive += y;
    }
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
      u32 s = warp_sums[lane];
      for (u32 d = 1; d < 32; d <<= 1) {
        const u32 y = __shfl_up_sync(0xFFFFFFFFu, s, d);
        if (lane >= d) s += y;
      }
      warp_sums[lane] = s;
    }
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
