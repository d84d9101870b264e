// Polygon outlines (--polygons): ring corners, ring order and the canonical
// arrays of ccl_cli.contract.outlines.Outlines, on the device.
//
// Input: the 4-connected parts of a labeled batch (dense per image, 0 for
// background; relabel.cu's labels of the label image with tau 0). The tracing
// rules are ccl_cli/contract/outlines.py's: a boundary edge is a side of a part's cell
// whose neighbour is another part (or outside), walked in direction d (0 E,
// 1 S, 2 W, 3 N; the side faces step d + 3) with the cell on its left; at its
// end the trace turns right into the ahead-right cell when that is the part,
// goes straight into the ahead-left cell when that is, else turns left around
// the cell. A corner edge is one whose trace turns at its end; its end vertex
// is a ring corner. backends/cuda/outlines.py launches, in this order:
//   gccl_outline_mask: per chunk of GCCL_CHUNK pixels, a bit per direction
//     whose edge is a corner edge, each pixel's count of corners before it in
//     its chunk and the chunk's count (the host scans those into offsets);
//   gccl_outline_corners: per corner, its vertex, global part and feature
//     (component), the next corner of its ring (walking the straight edges in
//     between), and the start state of gccl_outline_jump;
//   gccl_outline_jump, once per round (ceil(log2 V) rounds for V corners):
//     pointer jumping. After round k each corner knows the smallest vertex key
//     y * (width + 1) + x among the 2^(k+1) corners from it on and how many
//     steps ahead its first occurrence is; after the last round that is its
//     ring's start (the ring's smallest (y, x) vertex) and the distance to it;
//   gccl_outline_starts: the ring starts (distance 0) list their rings, in any
//     order, and each part's sort key (feature, part);
//   gccl_outline_parts (over the sorted part keys): each part's canonical
//     index and the feature offsets;
//   gccl_outline_ring_keys: each ring's sort key (canonical part, start key);
//   gccl_outline_rank (after the ring keys are sorted): each corner finds its
//     ring's canonical index by binary search; ring starts write their ring's
//     length and the part offsets;
//   gccl_outline_vertices (after the lengths are scanned into ring offsets):
//     each corner writes its vertex at ring offset + steps from the start, and
//     adds its shoelace term to its feature's doubled area.
// Vertex keys fit 32 bits: (H + 1)(W + 1) <= 2 H W + 2 <= 2^32 for images of
// fewer than 2^31 pixels, and so do the distances (a simple ring repeats no
// vertex). Packed state: low = key << 32 | distance.
#include "common.cuh"

#define GCCL_OUTLINE_WARPS (GCCL_CHUNK_THREADS / 32)
#define GCCL_LOW32 0xFFFFFFFFull

__constant__ int gccl_step_r[4] = {0, 1, 0, -1};
__constant__ int gccl_step_c[4] = {1, 0, -1, 0};
__constant__ int gccl_end_x[4] = {1, 1, 0, 0};
__constant__ int gccl_end_y[4] = {0, 1, 1, 0};

// The part of pixel (r, c) of the image at `base`, 0 outside the image.
__device__ __forceinline__ u32 part_at(const u32* parts, u64 base, long long r, long long c,
                                       u32 height, u32 width) {
  if (r < 0 || c < 0 || r >= height || c >= width) return 0;
  return parts[base + (u64)r * width + (u64)c];
}

// A bit per direction whose edge of pixel g (batch index) is a corner edge.
__device__ __forceinline__ u32 corner_bits(const u32* parts, u64 g, u32 height, u32 width) {
  const u64 pixels = (u64)height * width;
  const u64 base = g / pixels * pixels;
  const u64 inside = g - base;
  const long long r = (long long)(inside / width), c = (long long)(inside % width);
  const u32 own = parts[g];
  u32 bits = 0;
  if (own) {
    for (int d = 0; d < 4; ++d) {
      const int right = (d + 3) & 3;
      const long long ar = r + gccl_step_r[d], ac = c + gccl_step_c[d];
      const bool edge = part_at(parts, base, r + gccl_step_r[right], c + gccl_step_c[right],
                                height, width) != own;
      const bool ahead_left = part_at(parts, base, ar, ac, height, width) == own;
      const bool ahead_right = part_at(parts, base, ar + gccl_step_r[right],
                                       ac + gccl_step_c[right], height, width) == own;
      if (edge && (ahead_right || !ahead_left)) bits |= 1u << d;
    }
  }
  return bits;
}

// Chunks run over the whole batch (they may straddle images: only the corner
// numbering uses them). before[g] < 4 * GCCL_CHUNK fits 16 bits. counts gets
// chunk c's corners at c + 1 (and 0 at 0), so its inclusive scan is each
// chunk's first corner, with the batch's total last.
extern "C" __global__ void __launch_bounds__(GCCL_CHUNK_THREADS)
    gccl_outline_mask(const u32* parts, u64 total, u32 height, u32 width, unsigned char* mask,
                      unsigned short* before, i64* counts) {
  __shared__ u32 warp_sums[GCCL_OUTLINE_WARPS];
  const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const u64 start = (u64)blockIdx.x * GCCL_CHUNK;
  u32 seen = 0;
  for (u32 step = 0; step < GCCL_CHUNK_ITEMS; ++step) {
    const u64 g = start + step * GCCL_CHUNK_THREADS + threadIdx.x;
    const u32 bits = g < total ? corner_bits(parts, g, height, width) : 0;
    const u32 own = __popc(bits);
    const u32 inclusive = warp_inclusive_sum(own, lane);
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    u32 earlier = 0, step_total = 0;
    for (u32 w = 0; w < GCCL_OUTLINE_WARPS; ++w) {
      const u32 s = warp_sums[w];
      earlier += w < warp ? s : 0;
      step_total += s;
    }
    if (g < total) {
      mask[g] = (unsigned char)bits;
      before[g] = (unsigned short)(seen + earlier + inclusive - own);
    }
    seen += step_total;
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    counts[blockIdx.x + 1] = seen;
    if (blockIdx.x == 0) counts[0] = 0;
  }
}

// Index of the corner edge (pixel g, direction d): the chunk's first corner,
// the pixel's corners before it in the chunk, then lower directions first.
__device__ __forceinline__ i64 corner_index(const i64* chunk_first, const unsigned short* before,
                                            u64 g, u32 bits, int d) {
  return chunk_first[g / GCCL_CHUNK] + before[g] + __popc(bits & ((1u << d) - 1));
}

// bases: per image (first global part, first feature) of the batch.
extern "C" __global__ void __launch_bounds__(GCCL_OUTLINE_THREADS)
    gccl_outline_corners(const u32* parts, const u32* labels, const unsigned char* mask,
                         const unsigned short* before, const i64* chunk_first, const u64* bases,
                         u64 total, u32 height, u32 width, int* x, int* y, u32* part,
                         u32* feature, i64* next, i64* jump, u64* low) {
  const u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= total) return;
  const u32 bits = mask[g];
  if (!bits) return;
  const u64 pixels = (u64)height * width;
  const u64 image = g / pixels;
  const u64 base = image * pixels;
  const u64 inside = g - base;
  const long long r = (long long)(inside / width), c = (long long)(inside % width);
  const u32 own = parts[g];
  for (int d = 0; d < 4; ++d) {
    if (!(bits >> d & 1)) continue;
    const i64 i = corner_index(chunk_first, before, g, bits, d);
    const int right = (d + 3) & 3;
    const int vx = (int)c + gccl_end_x[d], vy = (int)r + gccl_end_y[d];
    x[i] = vx;
    y[i] = vy;
    part[i] = (u32)(bases[2 * image] + own - 1);
    feature[i] = (u32)(bases[2 * image + 1] + labels[g] - 1);
    low[i] = ((u64)vy * ((u64)width + 1) + (u64)vx) << 32;
    // The next edge: the ahead-right cell in direction d + 3, or this cell in d + 1.
    long long nr = r + gccl_step_r[d] + gccl_step_r[right];
    long long nc = c + gccl_step_c[d] + gccl_step_c[right];
    int nd = right;
    if (part_at(parts, base, nr, nc, height, width) != own) {
      nr = r;
      nc = c;
      nd = (d + 1) & 3;
    }
    // Straight edges go on into the ahead-left cell (in the part, so inside the image).
    u64 h = base + (u64)nr * width + (u64)nc;
    u32 next_bits = mask[h];
    while (!(next_bits >> nd & 1)) {
      nr += gccl_step_r[nd];
      nc += gccl_step_c[nd];
      h = base + (u64)nr * width + (u64)nc;
      next_bits = mask[h];
    }
    next[i] = corner_index(chunk_first, before, h, next_bits, nd);
    jump[i] = next[i];
  }
}

// One round: low_in covers `window` corners from each corner on, so low_out
// covers twice as many. On equal keys the nearer occurrence stays; a smaller
// key ahead is first seen `window` steps further than from there (and that
// distance stays below the ring's length, so the add never carries into the key).
extern "C" __global__ void __launch_bounds__(GCCL_OUTLINE_THREADS)
    gccl_outline_jump(const i64* jump_in, const u64* low_in, i64* jump_out, u64* low_out,
                      u64 count, u64 window) {
  const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const i64 j = jump_in[i];
  const u64 own = low_in[i], ahead = low_in[j];
  low_out[i] = (ahead >> 32) < (own >> 32) ? ahead + window : own;
  jump_out[i] = jump_in[j];
}

// rings: the ring counter (zeroed by the host); ring_keys[slot] = part << 32 | start key.
extern "C" __global__ void __launch_bounds__(GCCL_OUTLINE_THREADS)
    gccl_outline_starts(const u64* low, const u32* part, const u32* feature, u64 count,
                        u64* part_keys, u64* ring_keys, unsigned long long* rings) {
  const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const u64 own = low[i];
  if (own & GCCL_LOW32) return;  // not a ring start
  const u32 p = part[i];
  part_keys[p] = (u64)feature[i] << 32 | p;  // every ring of the part writes the same key
  const unsigned long long slot = atomicAdd(rings, 1ull);
  ring_keys[slot] = (u64)p << 32 | own >> 32;
}

// Over the part keys sorted ascending (feature, then part: parts of a feature
// in raster order of their first pixel): rank[part] = canonical index, and
// feature_offsets[f] = its first canonical part (features [count] = count).
extern "C" __global__ void __launch_bounds__(GCCL_OUTLINE_THREADS)
    gccl_outline_parts(const u64* sorted, u64 count, u64 features, u32* rank,
                       i64* feature_offsets) {
  const u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= count) return;
  const u64 key = sorted[k];
  rank[key & GCCL_LOW32] = (u32)k;
  if (k == 0 || sorted[k - 1] >> 32 != key >> 32) feature_offsets[key >> 32] = k;
  if (k == count - 1) feature_offsets[features] = count;
}

// In place: part << 32 | start key becomes canonical part << 32 | start key.
extern "C" __global__ void __launch_bounds__(GCCL_OUTLINE_THREADS)
    gccl_outline_ring_keys(u64* ring_keys, const u32* rank, u64 count) {
  const u64 s = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= count) return;
  const u64 key = ring_keys[s];
  ring_keys[s] = (u64)rank[key >> 32] << 32 | (key & GCCL_LOW32);
}

// sorted: the R ring keys ascending, so a ring's canonical index is its key's
// place. ends (R + 1): 0, then each ring's length at its index + 1 (the host's
// inclusive scan makes them the ring offsets). part_offsets (P + 1): the first
// ring of each canonical part, then R.
extern "C" __global__ void __launch_bounds__(GCCL_OUTLINE_THREADS)
    gccl_outline_rank(const u64* low, const i64* next, const u32* part, const u32* rank,
                      const u64* sorted, u64 count, u64 rings, u64 parts, i64* ring_of,
                      i64* ends, i64* part_offsets) {
  const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const u64 own = low[i];
  const u64 key = (u64)rank[part[i]] << 32 | own >> 32;
  u64 lo = 0, hi = rings;
  while (lo < hi) {
    const u64 mid = lo + (hi - lo) / 2;
    if (sorted[mid] < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  ring_of[i] = (i64)lo;
  if (own & GCCL_LOW32) return;  // only ring starts go on
  // The corner after the start is length - 1 steps before it.
  ends[lo + 1] = (i64)(low[next[i]] & GCCL_LOW32) + 1;
  if (lo == 0) ends[0] = 0;
  if (lo == 0 || sorted[lo - 1] >> 32 != key >> 32) part_offsets[key >> 32] = (i64)lo;
  if (lo == rings - 1) part_offsets[parts] = (i64)rings;
}

// vertices: (V, 2) x, y in canonical order; twice_area: per feature, zeroed by
// the host (two's complement sums: the unsigned adds give the signed total).
extern "C" __global__ void __launch_bounds__(GCCL_OUTLINE_THREADS)
    gccl_outline_vertices(const int* x, const int* y, const i64* next, const u64* low,
                          const u32* feature, const i64* ring_of, const i64* ring_offsets,
                          u64 count, int* vertices, unsigned long long* twice_area) {
  const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const i64 ring = ring_of[i];
  const i64 first = ring_offsets[ring], length = ring_offsets[ring + 1] - first;
  const i64 to_start = (i64)(low[i] & GCCL_LOW32);
  const i64 at = first + (to_start ? length - to_start : 0);
  vertices[2 * at] = x[i];
  vertices[2 * at + 1] = y[i];
  const i64 n = next[i];
  const i64 term = (i64)x[i] * y[n] - (i64)x[n] * y[i];
  atomicAdd(&twice_area[feature[i]], (unsigned long long)term);
}
