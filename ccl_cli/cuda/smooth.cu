// Nodata-aware smoothing (normalized convolution over a mask) of a batch (N, H, W).
//
// For a pixel p in the mask: S = sum w(q) v(q), W = sum w(q) over the window
// pixels q in the mask, w(q) = w[i] * w[j] (integer weights, offsets -R..R).
// The output is the labeling input of tau mode: float64, V'(p) on the mask and
// NaN off it. This is ccl_cli/stages.py's smooth_numpy, operation for operation:
//   integers: exact sums in ACC (int32 where the host proved it cannot
//     overflow, else int64), V' = floor((2S + W) / (2W)) (halves round up);
//   floats: float64, horizontal pass j = -R..R then vertical pass i = -R..R,
//     acc = acc + w * v with separately rounded multiply and add (no FMA),
//     acc starting at +0.0, then S / W rounded to T.
// Two kernel families compute it:
//   gccl_smooth_<T>_r<R> (R <= 3, the common radii): register strips, below;
//   gccl_smooth_<T>_<ACC> (any R <= 7): a block loads its 32x32 tile plus an
//     R-pixel halo (values zeroed off the mask) into shared memory, runs the
//     horizontal pass over the tile's rows and the halo rows, then the
//     vertical pass, 4 output rows per thread.
#include "common.cuh"
#include "dtypes.cuh"

#define GCCL_SMOOTH_MAX_RADIUS 7
#define GCCL_SMOOTH_THREADS_X 32
#define GCCL_SMOOTH_THREADS_Y 8
#define GCCL_SMOOTH_THREADS (GCCL_SMOOTH_THREADS_X * GCCL_SMOOTH_THREADS_Y)
#define GCCL_SMOOTH_TILE 32  // output pixels per tile side
#define GCCL_SMOOTH_HALO (GCCL_SMOOTH_TILE + 2 * GCCL_SMOOTH_MAX_RADIUS)

template <typename ACC>
struct SmoothMath {  // exact integer arithmetic
  static __device__ __forceinline__ ACC madd(ACC acc, int w, ACC v) { return acc + (ACC)w * v; }
  template <typename T>
  static __device__ __forceinline__ double finish(ACC s, int count) {
    const ACC num = 2 * s + count, den = 2 * (ACC)count;
    ACC q = num / den;  // C truncates toward zero; floor wants one less below zero
    if (num % den != 0 && num < 0) q -= 1;
    return (double)q;
  }
};

template <>
struct SmoothMath<double> {  // float64 with every rounding step explicit
  static __device__ __forceinline__ double madd(double acc, int w, double v) {
    return __dadd_rn(acc, __dmul_rn((double)w, v));
  }
  template <typename T>
  static __device__ __forceinline__ double finish(double s, int count) {
    return (double)(T)__ddiv_rn(s, (double)count);  // (T) rounds to nearest even
  }
};

template <typename T, typename ACC>
__device__ __forceinline__ void smooth_tile(const T* values, const unsigned char* mask,
                                            double* out, const int* weights, int radius,
                                            u32 height, u32 width, u32 tiles_x,
                                            u32 tiles_per_image) {
  __shared__ ACC masked[GCCL_SMOOTH_HALO][GCCL_SMOOTH_HALO];
  __shared__ unsigned char on[GCCL_SMOOTH_HALO][GCCL_SMOOTH_HALO];
  __shared__ ACC row_sum[GCCL_SMOOTH_HALO][GCCL_SMOOTH_TILE];
  __shared__ int row_count[GCCL_SMOOTH_HALO][GCCL_SMOOTH_TILE];
  __shared__ int w[2 * GCCL_SMOOTH_MAX_RADIUS + 1];
  const BlockPlace place = block_place(tiles_per_image);
  const u32 ty = place.index / tiles_x, tx = place.index - ty * tiles_x;
  const u32 y0 = ty * GCCL_SMOOTH_TILE, x0 = tx * GCCL_SMOOTH_TILE;
  const u64 image_base = (u64)place.image * height * width;
  const u32 thread = threadIdx.y * GCCL_SMOOTH_THREADS_X + threadIdx.x;
  const u32 span = 2 * radius + 1, side = GCCL_SMOOTH_TILE + 2 * radius;
  if (thread < span) w[thread] = weights[thread];
  for (u32 i = thread; i < side * side; i += GCCL_SMOOTH_THREADS) {
    const u32 r = i / side, c = i - r * side;
    // Above/left of the image these wrap to huge u32 values: outside.
    const u32 y = y0 + r - radius, x = x0 + c - radius;
    bool in_mask = false;
    ACC v = 0;
    if (y < height && x < width) {
      const u64 p = image_base + (u64)y * width + x;
      in_mask = mask[p] != 0;
      if (in_mask) v = (ACC)values[p];
    }
    masked[r][c] = v;
    on[r][c] = in_mask;
  }
  __syncthreads();
  for (u32 i = thread; i < side * GCCL_SMOOTH_TILE; i += GCCL_SMOOTH_THREADS) {
    const u32 r = i / GCCL_SMOOTH_TILE, c = i - r * GCCL_SMOOTH_TILE;
    ACC s = 0;
    int count = 0;
    for (u32 j = 0; j < span; ++j) {
      s = SmoothMath<ACC>::madd(s, w[j], masked[r][c + j]);
      count += w[j] * on[r][c + j];
    }
    row_sum[r][c] = s;
    row_count[r][c] = count;
  }
  __syncthreads();
  const u32 c = threadIdx.x, x = x0 + c;
  if (x >= width) return;
  for (u32 r = threadIdx.y; r < GCCL_SMOOTH_TILE; r += GCCL_SMOOTH_THREADS_Y) {
    const u32 y = y0 + r;
    if (y >= height) return;
    double result = __longlong_as_double(0x7FF8000000000000LL);  // NaN off the mask
    if (on[r + radius][c + radius]) {
      ACC s = 0;
      int count = 0;
      for (u32 i = 0; i < span; ++i) {
        s = SmoothMath<ACC>::madd(s, w[i], row_sum[r + i][c]);
        count += w[i] * row_count[r + i][c];
      }
      result = SmoothMath<ACC>::template finish<T>(s, count);
    }
    out[image_base + (u64)y * width + x] = result;
  }
}

#define GCCL_SMOOTH_KERNEL(NAME, T, ACC)                                                     \
  extern "C" __global__ void __launch_bounds__(GCCL_SMOOTH_THREADS)                          \
      NAME(const T* values, const unsigned char* mask, double* out, const int* weights,      \
           int radius, u32 height, u32 width, u32 tiles_x, u32 tiles_per_image) {            \
    smooth_tile<T, ACC>(values, mask, out, weights, radius, height, width, tiles_x,          \
                        tiles_per_image);                                                    \
  }

// int32 sums only for the types whose values are below 2^16 in magnitude.
#define GCCL_SMOOTH_NARROW(SUFFIX, T)                    \
  GCCL_SMOOTH_KERNEL(gccl_smooth_##SUFFIX##_i32, T, int) \
  GCCL_SMOOTH_KERNEL(gccl_smooth_##SUFFIX##_i64, T, long long)

GCCL_SMOOTH_NARROW(u8, unsigned char)
GCCL_SMOOTH_NARROW(i8, signed char)
GCCL_SMOOTH_NARROW(u16, unsigned short)
GCCL_SMOOTH_NARROW(i16, short)
GCCL_SMOOTH_KERNEL(gccl_smooth_u32_i64, unsigned int, long long)
GCCL_SMOOTH_KERNEL(gccl_smooth_i32_i64, int, long long)
GCCL_SMOOTH_KERNEL(gccl_smooth_f32_f64, float, double)
GCCL_SMOOTH_KERNEL(gccl_smooth_f64_f64, double, double)

// ---------------------------------------------------------------------------
// gccl_smooth_<T>_r<R>: register strips for R <= 3.
//
// The stage reads sizeof(T) + 1 bytes and writes 8 per pixel, so it is bound
// by memory once the arithmetic stays out of the way. Each warp owns a strip
// of GCCL_SMOOTH_STRIP_H output rows by 128 columns and walks down it one input
// row at a time (the next row's loads issued before the current row's
// arithmetic). A lane holds 4 consecutive pixels (one vector load each of
// values and mask where the host proved it aligned); the R neighbours on each
// side come from the adjacent lanes by shuffles, and lanes 0 and 31 load the 4
// pixels beyond the strip's ends. The horizontal sums of the last 2R + 1 rows
// stay in registers, so every input byte is read once per strip (plus 2R halo
// rows) and no shared memory or barrier is involved.
//
// Integer results: floor((2S + W) / (2W)) by float64 division. With n = 2S + W
// and d = 2W exact in float64 (|n| < 2^53), the rounded quotient is within
// |n / d| * 2^-53 < 1 / d of n / d, while a non-integer n / d is at least 1 / d
// from every integer: rounding never crosses an integer, so floor of the
// rounded quotient is the exact floor. For R <= 3, W <= 64^2 and |S| <= 2^44.
// (tests/test_stages.py checks the same identity with numpy near integers.)

// Warps per block and output rows per warp (ccl_cli/backends/cuda_stages.py
// holds the same numbers; -D overrides them for tuning runs only).
#ifndef GCCL_SMOOTH_FAST_WARPS
#define GCCL_SMOOTH_FAST_WARPS 4
#endif
#ifndef GCCL_SMOOTH_STRIP_H
#define GCCL_SMOOTH_STRIP_H 16
#endif
#define GCCL_SMOOTH_LANE 4                           // columns per lane
#define GCCL_SMOOTH_STRIP_W (32 * GCCL_SMOOTH_LANE)  // columns per warp
#define GCCL_SMOOTH_FULL_WARP 0xFFFFFFFFu

// Four consecutive pixels of a row and their mask bytes (byte k of `on`).
template <typename T>
struct Quad {
  T v[4];
  u32 on;
};

// Four values at an address aligned to their size (16 bytes for double) in one
// or two vector loads.
template <typename T>
struct Vec4;
#define GCCL_VEC4(T, V)                                                    \
  template <>                                                              \
  struct Vec4<T> {                                                         \
    static __device__ __forceinline__ void load(const T* p, T v[4]) {      \
      const V q = *reinterpret_cast<const V*>(p);                          \
      v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;                      \
    }                                                                      \
  };
GCCL_VEC4(unsigned char, uchar4)
GCCL_VEC4(signed char, char4)
GCCL_VEC4(unsigned short, ushort4)
GCCL_VEC4(short, short4)
GCCL_VEC4(unsigned int, uint4)
GCCL_VEC4(int, int4)
GCCL_VEC4(float, float4)
template <>
struct Vec4<double> {
  static __device__ __forceinline__ void load(const double* p, double v[4]) {
    const double2 a = reinterpret_cast<const double2*>(p)[0];
    const double2 b = reinterpret_cast<const double2*>(p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
  }
};

// Pixels x .. x+3 of a row (values and mask row pointers); 0 and off the mask
// outside 0 .. width-1. With `vec` (width % 4 == 0, aligned rows) a quad is
// wholly inside or outside the row.
template <typename T>
__device__ __forceinline__ Quad<T> load_quad(const T* values, const unsigned char* mask, int x,
                                             int width, bool vec) {
  Quad<T> q;
#pragma unroll
  for (int k = 0; k < 4; ++k) q.v[k] = T(0);
  q.on = 0;
  if (vec) {
    if (x >= 0 && x < width) {
      Vec4<T>::load(values + x, q.v);
      q.on = *reinterpret_cast<const u32*>(mask + x);
    }
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (x + k >= 0 && x + k < width) {
        q.v[k] = values[x + k];
        q.on |= (u32)mask[x + k] << (8 * k);
      }
    }
  }
  return q;
}

// __shfl_{up,down}_sync for every pixel type (bytes and shorts travel as int).
template <typename T>
__device__ __forceinline__ T shfl_up_any(T v, u32 delta) {
  if constexpr (sizeof(T) < 4) {
    return (T)__shfl_up_sync(GCCL_SMOOTH_FULL_WARP, (int)v, delta);
  } else {
    return __shfl_up_sync(GCCL_SMOOTH_FULL_WARP, v, delta);
  }
}
template <typename T>
__device__ __forceinline__ T shfl_down_any(T v, u32 delta) {
  if constexpr (sizeof(T) < 4) {
    return (T)__shfl_down_sync(GCCL_SMOOTH_FULL_WARP, (int)v, delta);
  } else {
    return __shfl_down_sync(GCCL_SMOOTH_FULL_WARP, v, delta);
  }
}

__device__ __forceinline__ bool mask_byte(u32 packed, int k) {
  return ((packed >> (8 * k)) & 0xFFu) != 0;
}

// The output value from the window's S and W: the float rule of SmoothMath,
// or for integers the float64 division of the proof above.
template <typename ACC>
struct IsFloat {
  static constexpr bool value = false;
};
template <>
struct IsFloat<double> {
  static constexpr bool value = true;
};

template <typename T, typename ACC>
__device__ __forceinline__ double strip_finish(ACC s, int count) {
  if constexpr (IsFloat<ACC>::value) {
    return SmoothMath<double>::template finish<T>(s, count);
  } else {
    return floor(__ddiv_rn((double)(2 * s + count), (double)(2 * count)));
  }
}

// Row y of this lane (its quad) and, for lanes 0 and 31, the quad beyond the
// strip's end (`halo`); all zero above and below the image.
template <typename T>
__device__ __forceinline__ void load_strip_row(const T* values, const unsigned char* mask, int y,
                                               int height, int width, int x, int halo_x,
                                               bool edge_lane, bool vec, Quad<T>& own,
                                               Quad<T>& halo) {
  own = Quad<T>{};
  halo = Quad<T>{};
  if (y < 0 || y >= height) return;  // the same for the whole warp
  const u64 row = (u64)y * (u32)width;
  own = load_quad(values + row, mask + row, x, width, vec);
  if (edge_lane) halo = load_quad(values + row, mask + row, halo_x, width, vec);
}

template <typename T, typename ACC, int R>
__device__ __forceinline__ void smooth_strip(const T* values, const unsigned char* mask,
                                             double* out, const int (&w)[2 * R + 1],
                                             int height, int width, u32 strips_x,
                                             u32 strips_per_image, u32 images, bool vec) {
  constexpr int SPAN = 2 * R + 1;
  constexpr int EXT = GCCL_SMOOTH_LANE + 2 * R;  // a lane's pixels plus R on each side
  const u32 warp = blockIdx.x * GCCL_SMOOTH_FAST_WARPS + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const u32 image = warp / strips_per_image;
  if (image >= images) return;  // the whole warp: shuffles below see all 32 lanes
  const u32 strip = warp - image * strips_per_image;
  const u32 sy = strip / strips_x, sx = strip - sy * strips_x;
  const int y0 = sy * GCCL_SMOOTH_STRIP_H;
  const int x = sx * GCCL_SMOOTH_STRIP_W + lane * GCCL_SMOOTH_LANE;
  const int y_end = min(y0 + GCCL_SMOOTH_STRIP_H, height);  // output rows y0 .. y_end - 1
  const bool edge_lane = lane == 0 || lane == 31;
  const int halo_x = lane == 0 ? x - GCCL_SMOOTH_LANE : x + GCCL_SMOOTH_LANE;
  const u64 image_base = (u64)image * (u32)height * (u32)width;
  values += image_base;
  mask += image_base;
  out += image_base;

  // Horizontal sums of rows y - 2R .. y (slot SPAN - 1 newest). Counts travel in
  // pairs, 16 bits each: a column's count is at most (sum w)^2 <= 4096 for R <= 3.
  ACC row_sum[SPAN][4];
  u32 row_count[SPAN][2];
  u32 row_on[SPAN];  // the mask bytes of the lane's own pixels
#pragma unroll
  for (int i = 0; i < SPAN; ++i) {
#pragma unroll
    for (int k = 0; k < 4; ++k) row_sum[i][k] = ACC(0);
    row_count[i][0] = row_count[i][1] = row_on[i] = 0;
  }

  Quad<T> own, halo;
  load_strip_row(values, mask, y0 - R, height, width, x, halo_x, edge_lane, vec, own, halo);
  for (int y = y0 - R; y < y_end + R; ++y) {  // the same trip count for the whole warp
    Quad<T> next_own, next_halo;
    const int next_y = y + 1 < y_end + R ? y + 1 : -1;  // -1: nothing left to read
    load_strip_row(values, mask, next_y, height, width, x, halo_x, edge_lane, vec, next_own,
                   next_halo);

    // Columns x - R .. x + 3 + R of row y: masked values and mask flags.
    ACC e[EXT];
    bool on[EXT];
    u32 left_on = __shfl_up_sync(GCCL_SMOOTH_FULL_WARP, own.on, 1);
    u32 right_on = __shfl_down_sync(GCCL_SMOOTH_FULL_WARP, own.on, 1);
    if (lane == 0) left_on = halo.on;
    if (lane == 31) right_on = halo.on;
#pragma unroll
    for (int j = 0; j < R; ++j) {
      T left = shfl_up_any(own.v[GCCL_SMOOTH_LANE - R + j], 1);
      T right = shfl_down_any(own.v[j], 1);
      if (lane == 0) left = halo.v[GCCL_SMOOTH_LANE - R + j];
      if (lane == 31) right = halo.v[j];
      on[j] = mask_byte(left_on, GCCL_SMOOTH_LANE - R + j);
      e[j] = on[j] ? (ACC)left : ACC(0);
      on[R + GCCL_SMOOTH_LANE + j] = mask_byte(right_on, j);
      e[R + GCCL_SMOOTH_LANE + j] = on[R + GCCL_SMOOTH_LANE + j] ? (ACC)right : ACC(0);
    }
#pragma unroll
    for (int k = 0; k < GCCL_SMOOTH_LANE; ++k) {
      on[R + k] = mask_byte(own.on, k);
      e[R + k] = on[R + k] ? (ACC)own.v[k] : ACC(0);
    }

    // Shift the window up one row, then the horizontal pass into the newest slot.
#pragma unroll
    for (int i = 0; i + 1 < SPAN; ++i) {
#pragma unroll
      for (int k = 0; k < 4; ++k) row_sum[i][k] = row_sum[i + 1][k];
      row_count[i][0] = row_count[i + 1][0];
      row_count[i][1] = row_count[i + 1][1];
      row_on[i] = row_on[i + 1];
    }
    u32 counts[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      ACC s = ACC(0);
      u32 c = 0;
#pragma unroll
      for (int j = 0; j < SPAN; ++j) {
        s = SmoothMath<ACC>::madd(s, w[j], e[k + j]);
        c += on[k + j] ? (u32)w[j] : 0u;
      }
      row_sum[SPAN - 1][k] = s;
      counts[k] = c;
    }
    row_count[SPAN - 1][0] = counts[0] | (counts[1] << 16);
    row_count[SPAN - 1][1] = counts[2] | (counts[3] << 16);
    row_on[SPAN - 1] = own.on;

    if (y >= y0 + R) {  // the window is full: output row y - R
      u32 pair[2] = {0u, 0u};
#pragma unroll
      for (int i = 0; i < SPAN; ++i) {
        pair[0] += (u32)w[i] * row_count[i][0];
        pair[1] += (u32)w[i] * row_count[i][1];
      }
      double result[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        ACC s = ACC(0);
#pragma unroll
        for (int i = 0; i < SPAN; ++i) s = SmoothMath<ACC>::madd(s, w[i], row_sum[i][k]);
        const int count = (int)((pair[k / 2] >> (16 * (k % 2))) & 0xFFFFu);
        // Off the mask: NaN (its count may be 0; the quotient is discarded).
        const double smoothed = strip_finish<T, ACC>(s, count);
        result[k] = mask_byte(row_on[R], k) ? smoothed
                                            : __longlong_as_double(0x7FF8000000000000LL);
      }
      double* row = out + (u64)(y - R) * (u32)width;
      if (vec) {
        if (x < width) {
          reinterpret_cast<double2*>(row + x)[0] = make_double2(result[0], result[1]);
          reinterpret_cast<double2*>(row + x)[1] = make_double2(result[2], result[3]);
        }
      } else {
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if (x + k < width) row[x + k] = result[k];
      }
    }
    own = next_own;
    halo = next_halo;
  }
}

#define GCCL_SMOOTH_STRIP_KERNEL(NAME, T, ACC, R)                                            \
  extern "C" __global__ void __launch_bounds__(GCCL_SMOOTH_FAST_WARPS * 32)                  \
      NAME(const T* values, const unsigned char* mask, double* out, int w0, int w1, int w2,  \
           int w3, int w4, int w5, int w6, u32 height, u32 width, u32 strips_x,              \
           u32 strips_per_image, u32 images, int vec) {                                      \
    const int all[7] = {w0, w1, w2, w3, w4, w5, w6};                                         \
    int w[2 * R + 1];                                                                        \
    for (int j = 0; j < 2 * R + 1; ++j) w[j] = all[j];                                       \
    smooth_strip<T, ACC, R>(values, mask, out, w, (int)height, (int)width, strips_x,         \
                            strips_per_image, images, vec != 0);                             \
  }

// gccl_smooth_<T>_r1 .. _r3. Sums in int for the types below 2^16 in magnitude
// (2S + 3W < 2^31 for every R <= 3), in int64 for the 32-bit integers.
#define GCCL_SMOOTH_STRIPS(SUFFIX, T, ACC)                     \
  GCCL_SMOOTH_STRIP_KERNEL(gccl_smooth_##SUFFIX##_r1, T, ACC, 1) \
  GCCL_SMOOTH_STRIP_KERNEL(gccl_smooth_##SUFFIX##_r2, T, ACC, 2) \
  GCCL_SMOOTH_STRIP_KERNEL(gccl_smooth_##SUFFIX##_r3, T, ACC, 3)

GCCL_SMOOTH_STRIPS(u8, unsigned char, int)
GCCL_SMOOTH_STRIPS(i8, signed char, int)
GCCL_SMOOTH_STRIPS(u16, unsigned short, int)
GCCL_SMOOTH_STRIPS(i16, short, int)
GCCL_SMOOTH_STRIPS(u32, unsigned int, long long)
GCCL_SMOOTH_STRIPS(i32, int, long long)
GCCL_SMOOTH_STRIPS(f32, float, double)
GCCL_SMOOTH_STRIPS(f64, double, double)
