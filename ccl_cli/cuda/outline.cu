// Polygon outlines (--polygons): the corners of every ring and their ring order.
//
// Input: the 4-connected parts of a labeled batch (dense per image, 0 for
// background; relabel.cu's labels of the label image with tau 0). The rules
// are ccl_cli/polygons.py's: a boundary edge is a side of a part's cell whose
// neighbour is another part (or outside), walked in direction d (0 E, 1 S,
// 2 W, 3 N; the side faces step d + 3) with the cell on its left; at its end
// the trace turns right into the ahead-right cell when that is the part, goes
// straight into the ahead-left cell when that is, else turns left around the
// cell. A corner edge is one whose trace turns at its end; its end vertex is
// a ring corner.
//   gccl_outline_mask: per pixel, a bit per direction whose edge is a corner
//     edge, and their count (the host scans the counts into corner indices);
//   gccl_outline_corners: per corner edge, its vertex, ids and the index of
//     the next corner edge (walking the straight edges in between);
//   gccl_outline_min_jump / rank_init / rank_jump / rank_finish: pointer
//     jumping over the corner cycles (double-buffered, one launch per round):
//     the smallest vertex key of each ring marks its start, then list ranking
//     gives every corner its steps from the start.
#include "common.cuh"

#define GCCL_OUTLINE_THREADS 256

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

extern "C" __global__ void __launch_bounds__(GCCL_OUTLINE_THREADS)
    gccl_outline_mask(const u32* parts, u64 total, u32 height, u32 width, unsigned char* mask,
                      unsigned char* count) {
  const u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= total) return;
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
  mask[g] = (unsigned char)bits;
  count[g] = (unsigned char)__popc(bits);
}

// Index of the corner edge (pixel g, direction d): the scan gives the pixel's
// first corner (inclusive sum minus its own count), lower directions come first.
__device__ __forceinline__ i64 corner_index(const i64* scanned, u64 g, u32 bits, int d) {
  return scanned[g] - __popc(bits) + __popc(bits & ((1u << d) - 1));
}

extern "C" __global__ void __launch_bounds__(GCCL_OUTLINE_THREADS)
    gccl_outline_corners(const u32* parts, const u32* labels, const unsigned char* mask,
                         const i64* scanned, u64 total, u32 height, u32 width, int* x, int* y,
                         u32* image, u32* label, u32* part, i64* next, i64* key) {
  const u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= total) return;
  const u32 bits = mask[g];
  if (!bits) return;
  const u64 pixels = (u64)height * width;
  const u64 image_index = g / pixels;
  const u64 base = image_index * pixels;
  const u64 inside = g - base;
  const long long r = (long long)(inside / width), c = (long long)(inside % width);
  const u32 own = parts[g];
  for (int d = 0; d < 4; ++d) {
    if (!(bits >> d & 1)) continue;
    const i64 i = corner_index(scanned, g, bits, d);
    const int right = (d + 3) & 3;
    x[i] = (int)c + gccl_end_x[d];
    y[i] = (int)r + gccl_end_y[d];
    key[i] = (i64)y[i] * ((i64)width + 1) + x[i];
    image[i] = (u32)image_index;
    label[i] = labels[g];
    part[i] = own;
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
    next[i] = corner_index(scanned, h, next_bits, nd);
  }
}

extern "C" __global__ void __launch_bounds__(GCCL_OUTLINE_THREADS)
    gccl_outline_min_jump(const i64* low_in, const i64* jump_in, i64* low_out, i64* jump_out,
                          u64 count) {
  const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const i64 j = jump_in[i];
  const i64 a = low_in[i], b = low_in[j];
  low_out[i] = a < b ? a : b;
  jump_out[i] = jump_in[j];
}

// Cut each cycle before its start (the corner whose key is the ring's minimum):
// the corner before it is the tail, 0 steps from the tail.
extern "C" __global__ void __launch_bounds__(GCCL_OUTLINE_THREADS)
    gccl_outline_rank_init(const i64* key, const i64* low, const i64* next, i64* to_tail,
                           i64* jump, u64 count) {
  const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const bool tail = key[next[i]] == low[i];
  to_tail[i] = tail ? 0 : 1;
  jump[i] = tail ? (i64)i : next[i];
}

extern "C" __global__ void __launch_bounds__(GCCL_OUTLINE_THREADS)
    gccl_outline_rank_jump(const i64* to_tail_in, const i64* jump_in, i64* to_tail_out,
                           i64* jump_out, u64 count) {
  const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const i64 j = jump_in[i];
  to_tail_out[i] = to_tail_in[i] + to_tail_in[j];
  jump_out[i] = jump_in[j];
}

// ring = the start corner (after the tail), position = steps from it.
extern "C" __global__ void __launch_bounds__(GCCL_OUTLINE_THREADS)
    gccl_outline_rank_finish(const i64* next, const i64* tail, const i64* to_tail, i64* ring,
                             i64* position, u64 count) {
  const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const i64 start = next[tail[i]];
  ring[i] = start;
  position[i] = to_tail[start] - to_tail[i];
}
