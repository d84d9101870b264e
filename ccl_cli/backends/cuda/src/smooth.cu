// Nodata-aware smoothing (normalized convolution over a mask) of a batch (N, H, W).
//
// For a pixel p in the mask: S = sum w(q) v(q), W = sum w(q) over the window
// pixels q in the mask, w(q) = w[i] * w[j] (integer weights, offsets -R..R).
// The output is the labeling input of tau mode: float64, V'(p) on the mask and
// NaN off it. This is ccl_cli/backends/cpu/stages.py's smooth_numpy, operation for operation:
//   integers: exact sums in ACC (int32 where the host proved it cannot
//     overflow, else int64), V' = floor((2S + W) / (2W)) (halves round up);
//   floats: float64, horizontal pass j = -R..R then vertical pass i = -R..R,
//     acc = acc + w * v with separately rounded multiply and add (the strip
//     kernels fuse the two only where the product is exact: same bits),
//     acc starting at +0.0, then S / W rounded to T.
// Two kernel families compute it:
//   gccl_smooth_<T>_r<R> (R <= 3, the common radii): warp strips, below;
//   gccl_smooth_<T>_<ACC> (any R <= 7): a block loads its 32x32 tile plus an
//     R-pixel halo (values zeroed off the mask) into shared memory, runs the
//     horizontal pass over the tile's rows and the halo rows, then the
//     vertical pass, 4 output rows per thread.
#include "common.cuh"
#include "dtypes.cuh"
#include "foreground.cuh"  // ValueTraits

// Tiles, strips and threads: geometry.cuh.
#define GCCL_SMOOTH_THREADS (GCCL_SMOOTH_THREADS_X * GCCL_SMOOTH_THREADS_Y)
#define GCCL_SMOOTH_HALO (GCCL_SMOOTH_TILE + 2 * GCCL_SMOOTH_MAX_RADIUS)

template <typename ACC>
struct SmoothMath {  // exact integer arithmetic
  static __device__ __forceinline__ ACC madd(ACC acc, int w, ACC v) { return acc + (ACC)w * v; }
  static __device__ __forceinline__ ACC add(ACC acc, ACC v) { return acc + v; }
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
  static __device__ __forceinline__ double add(double acc, double v) { return __dadd_rn(acc, v); }
  template <typename T>
  static __device__ __forceinline__ double finish(double s, int count) {
    return (double)(T)__ddiv_rn(s, count_to_double(count));  // (T) rounds to nearest even
  }
  // (double)c for 0 <= c < 2^32 by an add instead of a conversion instruction:
  // the bits 0x43300000'c are the float64 2^52 + c, and subtracting 2^52 is exact.
  static __device__ __forceinline__ double count_to_double(int c) {
    return __hiloint2double(0x43300000, c) - 4503599627370496.0;
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
// gccl_smooth_<T>_r<R>: warp strips for R <= 3.
//
// The stage reads sizeof(T) + 1 bytes and writes 8 per pixel; what keeps it
// from running at memory speed is instruction issue and latency (float64
// arithmetic, loads), so these kernels spend few instructions per pixel and
// keep as many warps resident as the registers and shared memory allow:
// - A warp walks down a strip of `rows` output rows (a launch argument: the
//   host picks it so that the grid fills whole waves), one input row at a
//   time, the next row's loads issued before the current row's arithmetic.
//   A lane holds 4 consecutive pixels: one vector load each of values and
//   mask where the host proved the rows aligned, values zeroed off the mask
//   as they arrive. The R neighbours on each side come from the adjacent
//   lanes by shuffles; lanes 0 and 31 only supply neighbours, so a warp reads
//   128 columns and writes the 120 between them.
// - Kernels with int32 sums also prefetch the row after the next into L2; the
//   others do not (with 64-bit sums the extra registers spill, and float32 was
//   slower with it).
// - Horizontal sums of the last 2R + 1 rows wait in a thread-private ring in
//   shared memory (SumRing), their weight totals and mask words in registers.
//   The row loop is unrolled 2R + 1 times (each_slot), so every ring slot is a
//   compile-time constant: fixed offsets, no index arithmetic, nothing moved.
// - __launch_bounds__ budgets registers for GCCL_SMOOTH_STRIP_BLOCKS blocks
//   per SM: more resident blocks with a few bytes spilled hide the row loads'
//   latency better than fewer blocks without spills (measured on Hopper);
//   that many float32 rings of R = 3 also just fit in an SM's shared memory.
// - The weights are those of box and binomial: w[0] = w[2R] = 1 (the host
//   checks it), so the first and last vertical terms need no multiply
//   (vertical_term). The float32 horizontal pass uses FMA, which is exact
//   there (horizontal_term).
// - The weight totals W of a lane's 4 pixels are computed 4 at a time: mask
//   bytes are 0 or 1 and sum w <= 64, so one 32-bit multiply-add per tap adds
//   up 4 byte lanes without carries (then 16-bit lanes for the vertical pass:
//   W <= 64^2).
// - Integer rounding without integer division: see floor_div_small and
//   floor_div_wide.

#define GCCL_SMOOTH_STRIP_BLOCKS 7  // blocks per SM that registers are budgeted for (above)
#define GCCL_SMOOTH_STRIP_THREADS (32 * GCCL_SMOOTH_STRIP_WARPS)

// Four consecutive pixels of a row, zero off the mask, and their mask bytes
// (byte k of `on`, 0 or 1).
template <typename T>
struct Quad {
  T v[4];
  u32 on;
};

// Four values at an address aligned to their size (16 bytes for double) in one
// or two vector loads.
template <typename T>
struct Vec4;
#define GCCL_VEC4(T, V)                                               \
  template <>                                                         \
  struct Vec4<T> {                                                    \
    static __device__ __forceinline__ void load(const T* p, T v[4]) { \
      const V q = *reinterpret_cast<const V*>(p);                     \
      v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;                 \
    }                                                                 \
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

// 1 in every byte of x that is not 0.
__device__ __forceinline__ u32 nonzero_bytes(u32 x) {
  x |= x >> 1;
  x |= x >> 2;
  x |= x >> 4;
  return x & 0x01010101u;
}

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
      q.on = nonzero_bytes(*reinterpret_cast<const u32*>(mask + x));
    }
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (x + k >= 0 && x + k < width) {
        q.v[k] = values[x + k];
        q.on |= (u32)(mask[x + k] != 0) << (8 * k);
      }
    }
  }
#pragma unroll
  for (int k = 0; k < 4; ++k)
    if (!((q.on >> (8 * k)) & 1u)) q.v[k] = T(0);
  return q;
}

// __shfl_{up,down}_sync for every pixel type (bytes and shorts travel as int).
template <typename T>
__device__ __forceinline__ T shfl_up_any(T v, u32 delta) {
  if constexpr (sizeof(T) < 4) {
    return (T)__shfl_up_sync(GCCL_FULL_WARP, (int)v, delta);
  } else {
    return __shfl_up_sync(GCCL_FULL_WARP, v, delta);
  }
}
template <typename T>
__device__ __forceinline__ T shfl_down_any(T v, u32 delta) {
  if constexpr (sizeof(T) < 4) {
    return (T)__shfl_down_sync(GCCL_FULL_WARP, (int)v, delta);
  } else {
    return __shfl_down_sync(GCCL_FULL_WARP, v, delta);
  }
}

// The mask bytes of columns k + offset (k = 0..3) at byte lane k, from the
// lane's own mask word and its neighbours' (left: columns -4..-1, right: 4..7).
__device__ __forceinline__ u32 mask_window(u32 left, u32 own, u32 right, int offset) {
  if (offset < 0) return __funnelshift_r(left, own, 8 * (4 + offset));
  if (offset == 0) return own;
  return __funnelshift_r(own, right, 8 * offset);
}

// floor(n / d) for 0 < d < 2^24, |n| < 2^31 and |n / d| < 2^17 (the int32
// sums: |V'| <= 2^16): the float estimate is within |n / d| * 2^-21 < 1/16 of
// n / d (float rounding of n, __fdividef's 2 ulp), so its floor is off by at
// most one, and the exact remainder corrects that.
__device__ __forceinline__ int floor_div_small(int n, int d) {
  const int q = __float2int_rd(__fdividef((float)n, (float)d));
  const int r = n - q * d;
  return q + (r >= d) - (r < 0);
}

// floor(n / d) for |n| < 2^53, 0 < d < 2^53 (the int64 sums of 32-bit values:
// |n| < 2^46 for R <= 3): n and d are exact in float64 and the rounded
// quotient is within |n / d| * 2^-53 < 1 / d of n / d, while a non-integer
// n / d is at least 1 / d from every integer, so rounding never crosses one.
// (tests/contract/test_stages.py checks the identity with numpy next to integers.)
__device__ __forceinline__ double floor_div_wide(long long n, long long d) {
  return floor(__ddiv_rn((double)n, (double)d));
}

// RN(s / count) in float64 for the float32 strip kernels, in five float64
// operations where __ddiv_rn takes about ten plus a range check and a slow
// path (float32 at R = 3 spent a quarter of its float64 work dividing):
//   r = the float32 reciprocal estimate of W, refined by one Newton step
//     (refined_reciprocal);
//   q0 = s * r, e = s - q0 * W (exact, by FMA), q = q0 + e * r.
// Why q = RN(s / W), for 1 <= W < 2^23 and s a finite float32 sum: s = 0 (then
// q = +0: s is never -0.0, see vertical_term) or 2^-149 <= |s| < 2^141, so no
// step underflows or overflows. rcp.approx.f32 is within 1 ulp (PTX ISA):
// |rf * W - 1| <= 2^-23, so after the Newton step |r * W - 1| <= 2^-45 and q0
// is within 2^-44 of s / W relatively. Then e is a multiple of ulp(q0) / 2 below
// 2^21 of them: exact. q0 + e * r = s / W + e (r - 1 / W), off s / W by at most
// 2^-88 relatively, and FMA rounds that once. s / W is never a midpoint
// between doubles (a midpoint has 54 significant bits, so midpoint * W cannot
// be the 53-bit s), and s - m * W for a midpoint m is a multiple of u / 4 (u:
// the spacing of doubles at s / W), so s / W is at least u / 2^14 >= 2^-67
// |s / W| from every midpoint: the 2^-88 cannot move the rounding. Infinite
// and NaN sums pass through, as division leaves them. tests/gpu checks the
// reciprocal for every W up to 2^12 and the quotient against numpy.
__device__ __forceinline__ double refined_reciprocal(int count) {
  const float wf = __int_as_float(0x4B000000 | count) - 8388608.0f;  // (float)count, exact
  float rf;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(rf) : "f"(wf));
  // (double)rf by moving its bits (rf is a positive normal float for count >= 1):
  // integer operations instead of a conversion, which issues at a quarter rate.
  const unsigned bits = __float_as_uint(rf);
  const double r = __hiloint2double((int)((bits >> 3) + 0x38000000u), (int)(bits << 29));
  return __fma_rn(r, __fma_rn(-SmoothMath<double>::count_to_double(count), r, 1.0), r);
}
__device__ __forceinline__ double quotient_of_float_sums(double s, int count) {
  const double w = SmoothMath<double>::count_to_double(count);
  const double r = refined_reciprocal(count);
  const double q0 = __dmul_rn(s, r);
  const double q = __fma_rn(__fma_rn(-q0, w, s), r, q0);
  return (__double2hiint(s) & 0x7FF00000) == 0x7FF00000 ? s : q;
}

// Whether T is float32 summed in float64 (the accumulator of every float image).
template <typename T, typename ACC>
constexpr bool kFloat32Sums =
    ValueTraits<T>::is_float && sizeof(T) == 4 && ValueTraits<ACC>::is_float;

// The output value from a window's S and W (W may be 0 off the mask, where the
// caller discards the value).
template <typename T, typename ACC>
__device__ __forceinline__ double strip_finish(ACC s, int count) {
  if constexpr (kFloat32Sums<T, ACC>) {
    return (double)(float)quotient_of_float_sums(s, count);  // (float) rounds to nearest even
  } else if constexpr (ValueTraits<ACC>::is_float) {  // float64 sums of float64
    return SmoothMath<double>::template finish<T>(s, count);
  } else if constexpr (sizeof(ACC) == 4) {  // int32 sums
    return (double)floor_div_small(2 * s + count, max(2 * count, 1));
  } else {  // int64 sums of 32-bit integers
    return floor_div_wide(2 * s + count, max(2 * count, 1));
  }
}

// One term w * v of a horizontal sum: acc + w * v as SmoothMath<ACC>::madd
// computes it, in one instruction where that gives the same bits. For float32
// v and the strip kernels' weights (1 <= w <= 20 < 2^5: binomial R <= 3), w * v
// has at most 24 + 5 significant bits and |w * v| < 2^133 (inf stays inf), so
// float64 holds it exactly: __dmul_rn(w, v) = w * v, and __dadd_rn(acc, w * v)
// = RN(acc + w * v) = __fma_rn(w, v, acc), signed zeros included. (The
// vertical pass multiplies float64 sums of up to 53 bits: no FMA there.)
template <typename T, typename ACC>
__device__ __forceinline__ ACC horizontal_term(ACC acc, int w, T v) {
  if constexpr (kFloat32Sums<T, ACC>) {
    return __fma_rn((double)w, (double)v, acc);
  } else {
    return SmoothMath<ACC>::madd(acc, w, (ACC)v);
  }
}

// Term i (i = 0 .. 2R) of a vertical sum, the window's rows oldest first: v is
// the horizontal sum of input row y + i - R. Terms in the documented order, acc
// from +0.0; w[0] = w[2R] = 1 makes the first term's product exact and its add
// +0.0 + v = v (a horizontal sum is never -0.0: it starts at +0.0, and in
// round-to-nearest x + y is -0.0 only for x = y = -0.0), the last term's
// product exact as well.
template <typename ACC, int SPAN>
__device__ __forceinline__ ACC vertical_term(ACC acc, int i, const int (&w)[SPAN], ACC v) {
  if (i == 0) return v;
  if (i == SPAN - 1) return SmoothMath<ACC>::add(acc, v);
  return SmoothMath<ACC>::madd(acc, w[i], v);
}

// The horizontal sums of a thread's 4 pixels for the last 2R + 1 input rows,
// slot k for the rows y with (y - y0 + R) % (2R + 1) == k, in shared memory
// that only the owning thread touches: laid out [slot][16-byte word][thread],
// so that a warp's access to one word is 512 contiguous bytes (no bank
// conflicts, no barrier). Slots are compile-time constants (each_slot), so
// every access has a fixed offset.
template <typename ACC, int SPAN>
struct SumRing {
  static constexpr int WORDS = sizeof(ACC) / 4;  // 16-byte words per 4 sums
  union Words {
    ACC s[4];
    uint4 w[WORDS];
  };
  uint4* const at = storage() + threadIdx.x;  // the thread's word 0 of slot 0
  static __device__ __forceinline__ uint4* storage() {
    __shared__ uint4 words[SPAN * WORDS * GCCL_SMOOTH_STRIP_THREADS];
    return words;
  }
  __device__ __forceinline__ void put(int k, const ACC (&v)[4]) {
    Words u;
#pragma unroll
    for (int c = 0; c < 4; ++c) u.s[c] = v[c];
#pragma unroll
    for (int h = 0; h < WORDS; ++h) at[(k * WORDS + h) * GCCL_SMOOTH_STRIP_THREADS] = u.w[h];
  }
  __device__ __forceinline__ void get(int k, ACC (&v)[4]) const {
    Words u;
#pragma unroll
    for (int h = 0; h < WORDS; ++h) u.w[h] = at[(k * WORDS + h) * GCCL_SMOOTH_STRIP_THREADS];
#pragma unroll
    for (int c = 0; c < 4; ++c) v[c] = u.s[c];
  }
};

// f(Slot<K>{}) for K = FIRST .. END - 1 while it returns true: the row loop
// unrolled with each ring slot a compile-time constant. False once f was.
template <int K>
struct Slot {
  static constexpr int value = K;
};
template <int FIRST, int END, typename F>
__device__ __forceinline__ bool each_slot(F& f) {
  if constexpr (FIRST == END) {
    return true;
  } else {
    return f(Slot<FIRST>{}) && each_slot<FIRST + 1, END>(f);
  }
}

template <typename T, typename ACC, int R>
__device__ __forceinline__ void smooth_strip(const T* values, const unsigned char* mask,
                                             double* out, const int (&w)[2 * R + 1],
                                             int height, int width, u32 rows, u32 strips_x,
                                             u32 strips_per_image, u32 images, bool vec) {
  constexpr int SPAN = 2 * R + 1;
  constexpr int EXT = GCCL_SMOOTH_LANE + 2 * R;  // a lane's pixels plus R on each side
  const u32 warp = blockIdx.x * GCCL_SMOOTH_STRIP_WARPS + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const u32 image = warp / strips_per_image;
  if (image >= images) return;  // the whole warp: shuffles below see all 32 lanes
  const u32 strip = warp - image * strips_per_image;
  const u32 sy = strip / strips_x, sx = strip - sy * strips_x;
  const int y0 = sy * rows;
  // Lane 0 holds the 4 columns left of the strip, lane 31 the 4 right of it.
  const int x = (int)(sx * GCCL_SMOOTH_STRIP_W) + (lane - 1) * GCCL_SMOOTH_LANE;
  const bool writes = lane != 0 && lane != 31 && x < width;
  const int y_end = min(y0 + (int)rows, height);  // output rows y0 .. y_end - 1
  const int y_stop = y_end + R;                   // input rows y0 - R .. y_stop - 1
  const int y_read = min(y_stop, height);         // rows from here on read as zero
  const u64 image_base = (u64)image * (u32)height * (u32)width;
  double* out_row = out + image_base + (u64)y0 * (u32)width;

  // Row y comes from `next`, loaded a row ahead; `load_y` is the next row to load.
  int load_y = y0 - R;
  const T* value_row = values + image_base + (long long)load_y * width;
  const unsigned char* mask_row = mask + image_base + (long long)load_y * width;
  auto load_next = [&]() {
    Quad<T> q = {};
    if (load_y >= 0 && load_y < y_read) q = load_quad(value_row, mask_row, x, width, vec);
    ++load_y;
    value_row += width;
    mask_row += width;
    return q;
  };
  Quad<T> next = load_next();

  // The rings, slot k for the input rows y with (y - y0 + R) % SPAN == k: their
  // horizontal sums, their W (columns 0 and 2, 1 and 3, in 16-bit halves) and
  // their mask word.
  SumRing<ACC, SPAN> sums;
  u32 pairs[SPAN][2], on[SPAN];
  int y = y0 - R;  // the input row
  auto step = [&](auto slot) {  // input row y into ring slot k; false past the last
    constexpr int k = decltype(slot)::value;
    if (y == y_stop) return false;  // the same for the whole warp
    const Quad<T> own = next;
    next = load_next();
    if constexpr (sizeof(ACC) == 4) {  // row y + 2 into L2 (int32 sums: see above)
      if (load_y < y_read && load_y >= 0 && x >= 0 && x < width) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(value_row + x));
        asm volatile("prefetch.global.L2 [%0];" ::"l"(mask_row + x));
      }
    }

    // Columns x - R .. x + 3 + R of row y (lanes 0 and 31 get some wrong: unused).
    const u32 left_on = __shfl_up_sync(GCCL_FULL_WARP, own.on, 1);
    const u32 right_on = __shfl_down_sync(GCCL_FULL_WARP, own.on, 1);
    T e[EXT];
#pragma unroll
    for (int j = 0; j < R; ++j) {
      e[j] = shfl_up_any(own.v[GCCL_SMOOTH_LANE - R + j], 1);
      e[R + GCCL_SMOOTH_LANE + j] = shfl_down_any(own.v[j], 1);
    }
#pragma unroll
    for (int c = 0; c < GCCL_SMOOTH_LANE; ++c) e[R + c] = own.v[c];

    // Horizontal pass: sums per column, weight totals 4 at a time.
    ACC row[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      row[c] = ACC(0);
#pragma unroll
      for (int j = 0; j < SPAN; ++j) row[c] = horizontal_term<T, ACC>(row[c], w[j], e[c + j]);
    }
    sums.put(k, row);
    u32 totals = 0;
#pragma unroll
    for (int j = 0; j < SPAN; ++j)
      totals += (u32)w[j] * mask_window(left_on, own.on, right_on, j - R);
    pairs[k][0] = totals & 0x00FF00FFu;
    pairs[k][1] = (totals >> 8) & 0x00FF00FFu;
    on[k] = own.on;

    if (y >= y0 + R) {  // the window is full: output row y - R
      const int oldest = (k + 1) % SPAN;  // the slot of row y - 2R
      u32 count_pairs[2] = {pairs[oldest][0], pairs[oldest][1]};
#pragma unroll
      for (int i = 1; i < SPAN; ++i) {
        count_pairs[0] += (u32)w[i] * pairs[(oldest + i) % SPAN][0];
        count_pairs[1] += (u32)w[i] * pairs[(oldest + i) % SPAN][1];
      }
      const u32 centre_on = on[(oldest + R) % SPAN];
      ACC window_sums[4] = {};
#pragma unroll
      for (int i = 0; i < SPAN; ++i) {
        ACC row_sums[4];
        sums.get((oldest + i) % SPAN, row_sums);
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const ACC v = i == SPAN - 1 ? row[c] : row_sums[c];  // row y: still at hand
          window_sums[c] = vertical_term(window_sums[c], i, w, v);
        }
      }
      double result[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int count = (int)((count_pairs[c % 2] >> (16 * (c / 2))) & 0xFFFFu);
        const double smoothed = strip_finish<T, ACC>(window_sums[c], count);
        result[c] = (centre_on >> (8 * c)) & 1u ? smoothed
                                                 : __longlong_as_double(0x7FF8000000000000LL);
      }
      if (writes) {
        if (vec) {
          reinterpret_cast<double2*>(out_row + x)[0] = make_double2(result[0], result[1]);
          reinterpret_cast<double2*>(out_row + x)[1] = make_double2(result[2], result[3]);
        } else {
#pragma unroll
          for (int c = 0; c < 4; ++c)
            if (x + c < width) out_row[x + c] = result[c];
        }
      }
      out_row += width;
    }
    ++y;
    return true;
  };
  while (each_slot<0, SPAN>(step)) {
  }
}

#define GCCL_SMOOTH_STRIP_KERNEL(NAME, T, ACC, R)                                            \
  extern "C" __global__ void __launch_bounds__(GCCL_SMOOTH_STRIP_THREADS,                   \
                                               GCCL_SMOOTH_STRIP_BLOCKS)                     \
      NAME(const T* values, const unsigned char* mask, double* out, int w0, int w1, int w2,  \
           int w3, int w4, int w5, int w6, u32 height, u32 width, u32 rows, u32 strips_x,    \
           u32 strips_per_image, u32 images, int vec) {                                      \
    const int all[7] = {w0, w1, w2, w3, w4, w5, w6};                                         \
    int w[2 * R + 1];                                                                        \
    for (int j = 0; j < 2 * R + 1; ++j) w[j] = all[j];                                       \
    smooth_strip<T, ACC, R>(values, mask, out, w, (int)height, (int)width, rows, strips_x,   \
                            strips_per_image, images, vec != 0);                             \
  }

static_assert(GCCL_SMOOTH_STRIP_RADIUS == 3, "the strip kernels below are r1 to r3");

// gccl_smooth_<T>_r1 .. _r3. Sums in int32 for the types below 2^16 in magnitude
// (2S + 3W < 2^31 for every R <= 3), in int64 for the 32-bit integers.
#define GCCL_SMOOTH_STRIPS(SUFFIX, T, ACC)                       \
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
