// Binary erosion and dilation of a mask batch (N, H, W) of 0/1 bytes.
//
// The element is the 3x3 cross (CONN 4) or square (CONN 8). Pixels outside the
// image never change the result (OpenCV's default border): at every iteration
// they count as 1 for an erosion and 0 for a dilation, the value that leaves an
// AND or an OR unchanged (OUTSIDE below). One launch does one iteration (gccl_{erode,dilate}_{4,8}_b*)
// or 2 .. GCCL_MORPH_MAX_STEPS of them (the _n kernels, morph_steps_strip);
// more iterations are several launches with ping-pong buffers
// (ccl_cli/backends/cuda/stages.py).
//
// Why it is shaped like this: an iteration moves 1 byte in and 1 byte out per
// pixel, so it is a copy with a little logic, and its speed is set by how wide
// and how early the memory accesses are. Each warp owns a strip of
// GCCL_MORPH_ROWS rows (GCCL_MORPH_ROWS_BYTES with byte access) by 512
// columns; each lane holds 16 columns of a row in four 32-bit words (one
// 16-byte vector load where the rows allow it) and
// issues every load of its strip (its rows plus one above and below) before
// combining anything. The 0/1 bytes are combined four at a time with & or |;
// the horizontal neighbours are the same words shifted by one byte, the byte
// across a lane boundary comes from the next lane by a shuffle, and the two
// bytes beyond the warp's 512 columns are loaded by lanes 0 and 31. No shared
// memory, no barriers. The multi-step kernels iterate in registers on a strip
// with a halo as deep as the iterations (see morph_steps_strip): many
// iterations cost one launch (the host's time per launch limits small chunks)
// and about three bytes of traffic per pixel instead of two per iteration.
#include "common.cuh"

// Strips, rows and warps per block: geometry.cuh.

// 16 consecutive mask bytes: byte k in bits 8 * (k % 4) of w[k / 4].
struct MaskRow {
  u32 w[4];
};

// Four mask bytes of the value pixels outside the image have: 1 each for an
// erosion (AND keeps the other operand), 0 for a dilation (OR keeps it).
template <bool ERODE>
__device__ __forceinline__ u32 outside_word() {
  return ERODE ? 0x01010101u : 0u;
}

template <bool ERODE>
__device__ __forceinline__ MaskRow outside_row() {
  const u32 o = outside_word<ERODE>();
  return MaskRow{{o, o, o, o}};
}

// Bytes x .. x+15 of `row`, the outside value (outside_word) at and beyond
// `width`. LOAD is the access width the host proved aligned (16: width % 16 == 0
// and 16-byte aligned buffers; 4: the same for 4; 1: any), so with 16 or 4 a
// vector is wholly in or out.
template <bool ERODE, int LOAD>
__device__ __forceinline__ MaskRow load_mask_row(const unsigned char* row, u32 x, u32 width) {
  MaskRow r = outside_row<ERODE>();
  if (LOAD == 16) {
    if (x < width) {
      const uint4 q = *reinterpret_cast<const uint4*>(row + x);
      r.w[0] = q.x, r.w[1] = q.y, r.w[2] = q.z, r.w[3] = q.w;
    }
  } else if (LOAD == 4) {
#pragma unroll
    for (u32 k = 0; k < 4; ++k)
      if (x + 4 * k < width) r.w[k] = *reinterpret_cast<const u32*>(row + x + 4 * k);
  } else {  // any width: bytes, in a loop that is not unrolled (the rare, compact path)
    const u64 outside = ERODE ? 0x0101010101010101ull : 0ull;
    u64 low = outside, high = outside;
#pragma unroll 1
    for (u32 b = 0; b < 16 && x + b < width; ++b) {
      const u64 byte = row[x + b];
      const u32 shift = 8 * (b % 8);
      if (b < 8) low = (low & ~(0xFFull << shift)) | (byte << shift);
      else high = (high & ~(0xFFull << shift)) | (byte << shift);
    }
    r.w[0] = (u32)low, r.w[1] = (u32)(low >> 32), r.w[2] = (u32)high, r.w[3] = (u32)(high >> 32);
  }
  return r;
}

// Stores the bytes of `r` that lie before `width` at row[x ..].
template <int LOAD>
__device__ __forceinline__ void store_mask_row(unsigned char* row, u32 x, u32 width,
                                               const MaskRow& r) {
  if (LOAD == 16) {
    if (x < width) *reinterpret_cast<uint4*>(row + x) = make_uint4(r.w[0], r.w[1], r.w[2], r.w[3]);
  } else if (LOAD == 4) {
#pragma unroll
    for (u32 k = 0; k < 4; ++k)
      if (x + 4 * k < width) *reinterpret_cast<u32*>(row + x + 4 * k) = r.w[k];
  } else {
    const u64 low = r.w[0] | ((u64)r.w[1] << 32), high = r.w[2] | ((u64)r.w[3] << 32);
#pragma unroll 1
    for (u32 b = 0; b < 16 && x + b < width; ++b)
      row[x + b] = (unsigned char)((b < 8 ? low : high) >> (8 * (b % 8)));
  }
}

template <bool ERODE>
__device__ __forceinline__ u32 combine(u32 a, u32 b) {
  return ERODE ? (a & b) : (a | b);
}

// Each byte combined with its left and right neighbours; `left` and `right` are
// the bytes just outside the 16 (0 or 1, in bit 0).
template <bool ERODE>
__device__ __forceinline__ MaskRow horizontal(const MaskRow& c, u32 left, u32 right) {
  MaskRow h;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    // Byte j of `l` is byte j - 1 of the row, of `r` byte j + 1 (funnel shifts
    // carry the byte across the words).
    const u32 l = k == 0 ? (c.w[0] << 8) | left : __funnelshift_l(c.w[k - 1], c.w[k], 8);
    const u32 r = k == 3 ? (c.w[3] >> 8) | (right << 24) : __funnelshift_r(c.w[k], c.w[k + 1], 8);
    h.w[k] = combine<ERODE>(combine<ERODE>(c.w[k], l), r);
  }
  return h;
}

// The bytes just left and right of this lane's 16 (0 or 1, in bit 0), from the
// neighbouring lanes; lanes 0 and 31 get their own bytes back for the ones beyond
// the warp's 512 columns. Every lane must call.
__device__ __forceinline__ void lane_neighbours(const MaskRow& r, u32& left, u32& right) {
  left = __shfl_up_sync(GCCL_FULL_WARP, r.w[3], 1) >> 24;
  right = __shfl_down_sync(GCCL_FULL_WARP, r.w[0], 1) & 0xFFu;
}

template <bool ERODE, int CONN, int LOAD>
__device__ __forceinline__ void morph_strip(const unsigned char* in, unsigned char* out,
                                            u32 height, u32 width, u32 strips_x,
                                            u32 strips_per_image, u32 images) {
  constexpr u32 ROWS = LOAD == 1 ? GCCL_MORPH_ROWS_BYTES : GCCL_MORPH_ROWS;
  const u32 warp = blockIdx.x * GCCL_MORPH_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
  const u32 image = warp / strips_per_image;
  if (image >= images) return;  // the whole warp: shuffles below see all 32 lanes
  const u32 strip = warp - image * strips_per_image;
  const u32 sy = strip / strips_x, sx = strip - sy * strips_x;
  const u32 y0 = sy * ROWS, x0 = sx * GCCL_MORPH_STRIP_W;
  const u32 x = x0 + lane * GCCL_MORPH_LANE_BYTES;
  // Lane 0 reads the byte left of the strip, lane 31 the one right of it; x0 - 1
  // wraps to 0xFFFFFFFF at the left edge: outside. Rows and bytes outside the
  // image hold the outside value.
  const u32 edge_x = lane == 0 ? x0 - 1 : x0 + GCCL_MORPH_STRIP_W;
  const bool edge_lane = lane == 0 || lane == 31;
  const u64 image_base = (u64)image * height * width;

  // Rows y0 - 1 .. y0 + ROWS: every load first, so all of them are in flight at once.
  MaskRow rows[ROWS + 2];
  u32 edge[ROWS + 2];
#pragma unroll
  for (u32 t = 0; t < ROWS + 2; ++t) {
    const u32 y = y0 + t - 1;  // wraps above the image: outside
    rows[t] = outside_row<ERODE>();
    edge[t] = outside_word<ERODE>() & 0xFFu;
    if (y < height) {  // the same for the whole warp
      const unsigned char* row = in + image_base + (u64)y * width;
      rows[t] = load_mask_row<ERODE, LOAD>(row, x, width);
      if (edge_lane && edge_x < width) edge[t] = row[edge_x];
    }
  }

  MaskRow h[ROWS + 2];  // rows combined horizontally
#pragma unroll
  for (u32 t = 0; t < ROWS + 2; ++t) {
    u32 left, right;
    lane_neighbours(rows[t], left, right);
    if (lane == 0) left = edge[t];
    if (lane == 31) right = edge[t];
    h[t] = horizontal<ERODE>(rows[t], left, right);
  }

#pragma unroll
  for (u32 t = 1; t <= ROWS; ++t) {
    const u32 y = y0 + t - 1;
    if (y >= height) break;
    MaskRow result;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      // Square: three combined rows; cross: the combined row and the pixels above and below.
      const MaskRow& up = CONN == 8 ? h[t - 1] : rows[t - 1];
      const MaskRow& down = CONN == 8 ? h[t + 1] : rows[t + 1];
      result.w[k] = combine<ERODE>(combine<ERODE>(h[t].w[k], up.w[k]), down.w[k]);
    }
    store_mask_row<LOAD>(out + image_base + (u64)y * width, x, width, result);
  }
}

// Row `r` combined horizontally (lane_neighbours: the bytes lanes 0 and 31 use
// beyond the warp's columns are wrong, so the multi-step kernels keep those
// lanes as halo).
template <bool ERODE>
__device__ __forceinline__ MaskRow horizontal_in_warp(const MaskRow& r) {
  u32 left, right;
  lane_neighbours(r, left, right);
  return horizontal<ERODE>(r, left, right);
}

// `steps` (1 .. GCCL_MORPH_MAX_STEPS) iterations of one warp strip in registers.
//
// The strip's output is ROWS rows by GCCL_MORPH_STEP_W columns (lanes 1 .. 30);
// it holds K = GCCL_MORPH_MAX_STEPS rows more above and below, and lanes 0 and
// 31 hold the 16 columns left and right of it. An iteration changes a pixel
// from its 3x3 neighbourhood, so after s iterations the values are exact
// except within s rows or columns of the strip's edge, where the neighbours
// were missing: the output, K >= steps rows and 16 >= steps columns inside,
// stays exact. Rows beyond the `steps` halo rows are not loaded (their value
// cannot reach the output). Pixels outside the image are loaded with the
// outside value and then iterate like the others, which gives the result of
// an outside held fixed. Dilation (outside 0): an outside pixel it sets lies
// within s steps of a foreground pixel p inside, and every pixel inside that
// it reaches t steps later is within s + t steps of p along a path inside
// the image (a rectangle), so it is set anyway. Erosion (outside 1) is the
// same argument on the complement: erode(M) = NOT dilate(NOT M).
template <bool ERODE, int CONN, int LOAD>
__device__ __forceinline__ void morph_steps_strip(const unsigned char* in, unsigned char* out,
                                                  u32 height, u32 width, u32 strips_x,
                                                  u32 strips_per_image, u32 images, u32 steps) {
  constexpr u32 K = GCCL_MORPH_MAX_STEPS;
  constexpr u32 ROWS = LOAD == 1 ? GCCL_MORPH_ROWS_BYTES : GCCL_MORPH_ROWS;
  constexpr u32 T = ROWS + 2 * K;  // rows held
  const u32 warp = blockIdx.x * GCCL_MORPH_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
  const u32 image = warp / strips_per_image;
  if (image >= images) return;  // the whole warp: shuffles below see all 32 lanes
  const u32 strip = warp - image * strips_per_image;
  const u32 sy = strip / strips_x, sx = strip - sy * strips_x;
  const u32 y0 = sy * ROWS;  // the first output row; held row t is image row y0 + t - K
  // Lane 0 of the leftmost strip starts 16 columns left of the image: x wraps to
  // above 2^32 - 17, which every test below reads as outside.
  const u32 x = sx * GCCL_MORPH_STEP_W + (lane - 1) * GCCL_MORPH_LANE_BYTES;
  const u64 image_base = (u64)image * height * width;

  MaskRow rows[T];
#pragma unroll
  for (u32 t = 0; t < T; ++t) {
    const u32 y = y0 + t - K;  // wraps above the image: outside
    rows[t] = outside_row<ERODE>();
    if (y < height && t + steps >= K && t < K + ROWS + steps)  // the same for the whole warp
      rows[t] = load_mask_row<ERODE, LOAD>(in + image_base + (u64)y * width, x, width);
  }

#pragma unroll 1
  for (u32 s = 0; s < steps; ++s) {
    // In place, top to bottom: `above` keeps row t - 1 of the previous iteration.
    MaskRow above = rows[0];
    MaskRow h_above = horizontal_in_warp<ERODE>(rows[0]);
    MaskRow h_here = horizontal_in_warp<ERODE>(rows[1]);
#pragma unroll
    for (u32 t = 1; t + 1 < T; ++t) {
      const MaskRow h_below = horizontal_in_warp<ERODE>(rows[t + 1]);
      MaskRow result;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        // Square: three combined rows; cross: the combined row and the pixels above and below.
        const u32 up = CONN == 8 ? h_above.w[k] : above.w[k];
        const u32 down = CONN == 8 ? h_below.w[k] : rows[t + 1].w[k];
        result.w[k] = combine<ERODE>(combine<ERODE>(h_here.w[k], up), down);
      }
      above = rows[t];
      rows[t] = result;
      h_above = h_here;
      h_here = h_below;
    }
  }

  if (lane == 0 || lane == 31) return;
#pragma unroll
  for (u32 t = K; t < K + ROWS; ++t) {
    const u32 y = y0 + t - K;
    if (y >= height) break;
    store_mask_row<LOAD>(out + image_base + (u64)y * width, x, width, rows[t]);
  }
}

#define GCCL_MORPH_KERNEL(NAME, ERODE, CONN, LOAD)                                            \
  extern "C" __global__ void __launch_bounds__(GCCL_MORPH_WARPS * 32)                         \
      NAME(const unsigned char* in, unsigned char* out, u32 height, u32 width, u32 strips_x,  \
           u32 strips_per_image, u32 images) {                                                \
    morph_strip<ERODE, CONN, LOAD>(in, out, height, width, strips_x, strips_per_image, images); \
  }

#define GCCL_MORPH_STEPS_KERNEL(NAME, ERODE, CONN, LOAD)                                     \
  extern "C" __global__ void __launch_bounds__(GCCL_MORPH_WARPS * 32)                         \
      NAME(const unsigned char* in, unsigned char* out, u32 height, u32 width, u32 strips_x,  \
           u32 strips_per_image, u32 images, u32 steps) {                                     \
    morph_steps_strip<ERODE, CONN, LOAD>(in, out, height, width, strips_x, strips_per_image, \
                                         images, steps);                                      \
  }

// gccl_{erode,dilate}_{4,8}_b{16,4,1} (one iteration) and _n_b{16,4,1} (`steps`
// iterations): the suffix is the access width (see load_mask_row).
#define GCCL_MORPH_WIDTHS(NAME, ERODE, CONN)                 \
  GCCL_MORPH_KERNEL(NAME##_b16, ERODE, CONN, 16)            \
  GCCL_MORPH_KERNEL(NAME##_b4, ERODE, CONN, 4)              \
  GCCL_MORPH_KERNEL(NAME##_b1, ERODE, CONN, 1)              \
  GCCL_MORPH_STEPS_KERNEL(NAME##_n_b16, ERODE, CONN, 16)    \
  GCCL_MORPH_STEPS_KERNEL(NAME##_n_b4, ERODE, CONN, 4)      \
  GCCL_MORPH_STEPS_KERNEL(NAME##_n_b1, ERODE, CONN, 1)

GCCL_MORPH_WIDTHS(gccl_erode_4, true, 4)
GCCL_MORPH_WIDTHS(gccl_erode_8, true, 8)
GCCL_MORPH_WIDTHS(gccl_dilate_4, false, 4)
GCCL_MORPH_WIDTHS(gccl_dilate_8, false, 8)
