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
// A block loads its 32x32 tile plus an R-pixel halo (values zeroed off the
// mask) into shared memory, runs the horizontal pass over the tile's rows and
// the halo rows, then the vertical pass, 4 output rows per thread.
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
