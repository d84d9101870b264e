// Array plumbing of the labeling paths, so that no device operation needs a kernel
// compiled at run time (CuPy's elementwise kernels are compiled on first use):
//   gccl_gather_b{1,2,4,8}: a strided (N, H, W) view copied into a contiguous batch
//     (byte strides, any sign), by element size; gccl_gather_bool also stores
//     booleans as bytes 0/1 (a bool view of bytes may hold 255);
//   gccl_narrow_u16: u32 labels to u16 (labels known to fit);
//   gccl_keep_area: keep[i] = area[i] >= min_area (min-area filtering);
//   gccl_foreground_<dtype>: the ForegroundRule's mask as bytes 0/1;
//   gccl_clear_nan_<float dtype>: mask &= !isnan(v);
//   gccl_masked_f64_<dtype>: out = mask ? (double)v : NaN.
// Grid-stride loops: any grid covers any size, indices are 64-bit.
#include "common.cuh"
#include "dtypes.cuh"
#include "foreground.cuh"

#define GCCL_GRID_STRIDE(i, count)                                         \
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (count); \
       i += (u64)gridDim.x * blockDim.x)

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

extern "C" __global__ void gccl_keep_area(const u64* area, u64 min_area, u32* keep, u64 count) {
  GCCL_GRID_STRIDE(i, count) keep[i] = area[i] >= min_area ? 1u : 0u;
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
