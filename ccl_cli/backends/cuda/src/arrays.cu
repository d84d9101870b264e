// Array plumbing of the labeling paths, so that no device operation needs a kernel
// compiled at run time (CuPy's elementwise kernels are compiled on first use):
//   gccl_gather_b{1,2,4,8}: a strided (N, H, W) view copied into a contiguous batch
//     (byte strides, any sign), by element size; gccl_gather_bool also stores
//     booleans as bytes 0/1 (a bool view of bytes may hold 255);
//   gccl_narrow_u16: u32 labels to u16 (labels known to fit);
//   gccl_keep_area: keep[i] = min_area <= area[i] <= max_area (area filtering);
//   gccl_foreground_<dtype>: the ForegroundRule's mask as bytes 0/1;
//   gccl_clear_nan_<float dtype>: mask &= !isnan(v);
//   gccl_masked_f64_<dtype>: out = mask ? (double)v : NaN;
//   gccl_fill_added_<dtype>: the pixels morphology added (mask and not a reading)
//     take the box mean of the readings around them (contract/stages.py's
//     fill_added: the same sums in the same order, so the same bits).
// Grid-stride loops: any grid covers any size, indices are 64-bit.
#include "common.cuh"
#include "dtypes.cuh"
#include "foreground.cuh"

// One row of the view per iteration of a block-stride loop, its columns over the
// block's threads: one division per row, not per element.
template <typename T, bool Canonical>
__device__ __forceinline__ void gather_rows(const char* src, T* dst, u64 rows, u32 height,
                                            u32 width, i64 s0, i64 s1, i64 s2) {
  for (u64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const u64 image = r / height;
    const u64 y = r - image * height;
    const char* row = src + (i64)image * s0 + (i64)y * s1;
    T* out = dst + r * width;
    for (u32 x = threadIdx.x; x < width; x += blockDim.x) {
      const T v = *reinterpret_cast<const T*>(row + (i64)x * s2);
      out[x] = Canonical ? (T)(v != 0) : v;
    }
  }
}

#define GCCL_GATHER(name, type, canonical)                                                 \
  extern "C" __global__ void name(const char* src, type* dst, u64 rows, u32 height,        \
                                  u32 width, i64 s0, i64 s1, i64 s2) {                     \
    gather_rows<type, canonical>(src, dst, rows, height, width, s0, s1, s2);               \
  }
GCCL_GATHER(gccl_gather_b1, unsigned char, false)
GCCL_GATHER(gccl_gather_b2, unsigned short, false)
GCCL_GATHER(gccl_gather_b4, unsigned int, false)
GCCL_GATHER(gccl_gather_b8, unsigned long long, false)
GCCL_GATHER(gccl_gather_bool, unsigned char, true)

extern "C" __global__ void gccl_narrow_u16(const u32* src, unsigned short* dst, u64 count) {
  GCCL_GRID_STRIDE(i, count) dst[i] = (unsigned short)src[i];
}

extern "C" __global__ void gccl_keep_area(const u64* area, u64 min_area, u64 max_area, u32* keep,
                                           u64 count) {
  GCCL_GRID_STRIDE(i, count) keep[i] = area[i] >= min_area && area[i] <= max_area ? 1u : 0u;
}

#define GCCL_FOREGROUND(suffix, T)                                                          \
  extern "C" __global__ void gccl_foreground_##suffix(const T* values, unsigned char* mask, \
                                                      u64 count, GCCL_RULE_PARAMS) {        \
    const ForegroundRule rule = GCCL_RULE_MAKE;                                             \
    GCCL_GRID_STRIDE(i, count) mask[i] = is_foreground(values[i], rule) ? 1 : 0;            \
  }                                                                                         \
  extern "C" __global__ void gccl_masked_f64_##suffix(const T* values,                      \
                                                      const unsigned char* mask,            \
                                                      double* out, u64 count) {             \
    GCCL_GRID_STRIDE(i, count) out[i] = mask[i] ? (double)values[i] : __longlong_as_double( \
                                                                           0x7FF8000000000000ll); \
  }
GCCL_FOR_EACH_DTYPE(GCCL_FOREGROUND)

#define GCCL_CLEAR_NAN(suffix, T)                                                          \
  extern "C" __global__ void gccl_clear_nan_##suffix(const T* values, unsigned char* mask, \
                                                     u64 count) {                          \
    GCCL_GRID_STRIDE(i, count) if (values[i] != values[i]) mask[i] = 0;                    \
  }
GCCL_FOR_EACH_FLOAT_DTYPE(GCCL_CLEAR_NAN)

// The mean of the readings in the (2 radius + 1)-square window around (y, x) of one
// image: row sums left to right, then their sum top to bottom, as fill_added adds
// them. Pixels outside the image or not readings add 0 there; skipping them is
// exact (a float sum that starts at +0.0 never becomes -0.0 when rounding to nearest).
template <typename T>
__device__ __forceinline__ T window_mean(const T* V, const unsigned char* R, u32 height,
                                         u32 width, u32 y, u32 x, int radius, i64 low) {
  const int y0 = max((int)y - radius, 0), y1 = min((int)y + radius, (int)height - 1);
  const int x0 = max((int)x - radius, 0), x1 = min((int)x + radius, (int)width - 1);
  if (ValueTraits<T>::is_float) {
    double total = 0.0, count = 0.0;
    for (int yy = y0; yy <= y1; ++yy) {
      double row = 0.0, row_count = 0.0;
      for (int xx = x0; xx <= x1; ++xx) {
        const u64 q = (u64)yy * width + xx;
        if (R[q]) {
          row += (double)V[q];
          row_count += 1.0;
        }
      }
      total += row;
      count += row_count;
    }
    return (T)(total / count);
  }
  i64 total = 0, count = 0;
  for (int yy = y0; yy <= y1; ++yy) {
    for (int xx = x0; xx <= x1; ++xx) {
      const u64 q = (u64)yy * width + xx;
      if (R[q]) {
        total += (i64)V[q] - low;
        count += 1;
      }
    }
  }
  return (T)((2 * total + count) / (count > 0 ? 2 * count : 1) + low);
}

#define GCCL_FILL_ADDED(suffix, T)                                                          \
  extern "C" __global__ void gccl_fill_added_##suffix(                                      \
      const T* values, const unsigned char* readings, const unsigned char* mask, T* out,   \
      u32 height, u32 width, u64 count, int radius, i64 low) {                              \
    const u64 pixels = (u64)height * width;                                                 \
    GCCL_GRID_STRIDE(i, count) {                                                            \
      if (!mask[i] || readings[i]) {                                                        \
        out[i] = values[i];                                                                 \
        continue;                                                                           \
      }                                                                                     \
      const u64 base = i / pixels * pixels;                                                 \
      const u32 p = (u32)(i - base), y = p / width, x = p - y * width;                     \
      out[i] = window_mean<T>(values + base, readings + base, height, width, y, x, radius, \
                              low);                                                         \
    }                                                                                       \
  }
GCCL_FOR_EACH_DTYPE(GCCL_FILL_ADDED)
