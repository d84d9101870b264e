// Volumes, the stages before labeling (contract/stages.py over the last three axes):
// morphology, nodata-aware smoothing and the fill of voxels morphology adds, on a batch of
// volumes (N, D, H, W), bit for bit the numpy of backends/cpu/stages.py. 64-bit indexes.
//
//   gccl_volume_{erode,dilate}_{6,18,26}: one step with the element of the connectivity
//     (the voxel and its 6, 18 or 26 neighbours); voxels outside the volume count as 1 for
//     an erosion and 0 for a dilation (OpenCV's default border), the value that leaves the
//     AND or the OR unchanged. One CUDA block per row, its threads across the row.
//   gccl_volume_smooth_masked_<dtype>, gccl_volume_smooth_pass_{f64,i64},
//     gccl_volume_smooth_finish_<dtype>: the normalized convolution as numpy computes it:
//     the masked values and the mask as float64 (float volumes) or int64 (integer ones),
//     one pass per axis (x, then y, then z) that sums w[k] times the element at offset
//     k - R for k = 0..2R (zero outside the volume; floats: each term a rounded multiply,
//     then a rounded add onto an accumulator that starts at +0.0, never a fused
//     multiply-add), then S / W rounded to the float type, or for integers
//     floor((2S + W) / (2W)), on the mask, NaN off it.
//   gccl_volume_fill_added_<dtype>: each voxel the mask has and the readings do not takes
//     the mean of the readings in the cube of side 2 radius + 1 around it (fill_added:
//     sums along x, then y, then z; integers floor((2S + W) / (2W)) of values shifted to
//     be non-negative).
#include "common.cuh"
#include "dtypes.cuh"
#include "foreground.cuh"
#include "volume.cuh"

// The (volume, z, y) of row r of a batch of volumes of depth x height rows each.
struct VolumeRow {
  u64 volume;
  u32 z, y;
};

__device__ __forceinline__ VolumeRow volume_row(u64 r, u32 depth, u32 height) {
  VolumeRow row;
  const u64 rows = (u64)depth * height;
  row.volume = r / rows;
  const u64 rest = r - row.volume * rows;
  row.z = (u32)(rest / height);
  row.y = (u32)(rest - (u64)row.z * height);
  return row;
}

template <bool ERODE, int CONN>
__device__ __forceinline__ void volume_morph(const unsigned char* in, unsigned char* out,
                                             u32 depth, u32 height, u32 width, u64 rows) {
  const u64 voxels = volume_voxels(depth, height, width);
  for (u64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const VolumeRow row = volume_row(r, depth, height);
    const unsigned char* V = in + row.volume * voxels;
    const u64 at = row.volume * voxels + ((u64)row.z * height + row.y) * width;
    for (u32 x = threadIdx.x; x < width; x += blockDim.x) {
      bool result = ERODE;
#pragma unroll
      for (int dz = -1; dz <= 1; ++dz) {
#pragma unroll
        for (int dy = -1; dy <= 1; ++dy) {
#pragma unroll
          for (int dx = -1; dx <= 1; ++dx) {
            if ((dz || dy || dx) && !volume_neighbour<CONN>(dz, dy, dx)) continue;
            const int z = (int)row.z + dz, y = (int)row.y + dy, xx = (int)x + dx;
            if (z < 0 || z >= (int)depth || y < 0 || y >= (int)height || xx < 0 ||
                xx >= (int)width)
              continue;  // outside: the value that changes nothing
            const bool v = V[((u64)z * height + (u64)y) * width + (u64)xx] != 0;
            result = ERODE ? (result && v) : (result || v);
          }
        }
      }
      out[at + x] = result ? 1 : 0;
    }
  }
}

#define GCCL_VOLUME_MORPH_KERNEL(name, erode, conn)                                         \
  extern "C" __global__ void gccl_volume_##name##_##conn(const unsigned char* in,          \
                                                         unsigned char* out, u32 depth,    \
                                                         u32 height, u32 width, u64 rows) { \
    volume_morph<erode, conn>(in, out, depth, height, width, rows);                         \
  }
GCCL_VOLUME_MORPH_KERNEL(erode, true, 6)
GCCL_VOLUME_MORPH_KERNEL(erode, true, 18)
GCCL_VOLUME_MORPH_KERNEL(erode, true, 26)
GCCL_VOLUME_MORPH_KERNEL(dilate, false, 6)
GCCL_VOLUME_MORPH_KERNEL(dilate, false, 18)
GCCL_VOLUME_MORPH_KERNEL(dilate, false, 26)

// The accumulator of a value type's smoothing sums: float64 for floats, int64 for integers.
template <typename T>
struct SmoothSum {
  typedef i64 type;
};
template <>
struct SmoothSum<float> {
  typedef double type;
};
template <>
struct SmoothSum<double> {
  typedef double type;
};

// acc + w * v, each operation rounded on its own for float64 (no contraction into a fused
// multiply-add), exact for int64.
__device__ __forceinline__ double weighted_add(double acc, int w, double v) {
  return __dadd_rn(acc, __dmul_rn((double)w, v));
}
__device__ __forceinline__ i64 weighted_add(i64 acc, int w, i64 v) { return acc + (i64)w * v; }

#define GCCL_VOLUME_SMOOTH_MASKED_KERNEL(suffix, T)                                        \
  extern "C" __global__ void gccl_volume_smooth_masked_##suffix(                           \
      const T* values, const unsigned char* mask, SmoothSum<T>::type* total,               \
      SmoothSum<T>::type* count, u64 size) {                                               \
    typedef SmoothSum<T>::type S;                                                          \
    GCCL_GRID_STRIDE(i, size) {                                                            \
      total[i] = mask[i] ? (S)values[i] : (S)0;                                            \
      count[i] = mask[i] ? (S)1 : (S)0;                                                    \
    }                                                                                      \
  }
GCCL_FOR_EACH_DTYPE(GCCL_VOLUME_SMOOTH_MASKED_KERNEL)

// One axis of the separable sums: element i's neighbours along the axis are `stride`
// apart and the axis has `length` elements; total and count are summed alike.
template <typename S>
__device__ __forceinline__ void smooth_pass(const S* total_in, const S* count_in, S* total_out,
                                            S* count_out, u64 size, u64 stride, u32 length,
                                            const int* weights, int radius) {
  GCCL_GRID_STRIDE(i, size) {
    const i64 c = (i64)(i / stride % length);
    S total = 0, count = 0;
    for (int k = 0; k <= 2 * radius; ++k) {
      const i64 j = c + k - radius;
      if (j < 0 || j >= (i64)length) continue;  // zero outside: adding it changes nothing
      const u64 q = i + (u64)((i64)(k - radius) * (i64)stride);
      total = weighted_add(total, weights[k], total_in[q]);
      count = weighted_add(count, weights[k], count_in[q]);
    }
    total_out[i] = total;
    count_out[i] = count;
  }
}

#define GCCL_VOLUME_SMOOTH_PASS_KERNEL(suffix, S)                                             \
  extern "C" __global__ void gccl_volume_smooth_pass_##suffix(                                \
      const S* total_in, const S* count_in, S* total_out, S* count_out, u64 size, u64 stride, \
      u32 length, const int* weights, int radius) {                                           \
    smooth_pass<S>(total_in, count_in, total_out, count_out, size, stride, length, weights,   \
                   radius);                                                                   \
  }
GCCL_VOLUME_SMOOTH_PASS_KERNEL(f64, double)
GCCL_VOLUME_SMOOTH_PASS_KERNEL(i64, i64)

// The smoothed value of a voxel on the mask from its sums (NaN off the mask).
template <typename T>
__device__ __forceinline__ double smoothed(double total, double count) {
  return (double)(T)__ddiv_rn(total, count);  // rounded to the float type, then widened
}
template <typename T>
__device__ __forceinline__ double smoothed(i64 total, i64 count) {
  const i64 n = 2 * total + count, d = 2 * count;  // count >= 1 on the mask
  i64 q = n / d;
  if (n % d != 0 && n < 0) --q;  // C truncates toward zero, the rule floors
  return (double)q;
}

#define GCCL_VOLUME_SMOOTH_FINISH_KERNEL(suffix, T)                                        \
  extern "C" __global__ void gccl_volume_smooth_finish_##suffix(                           \
      const SmoothSum<T>::type* total, const SmoothSum<T>::type* count,                    \
      const unsigned char* mask, double* out, u64 size) {                                  \
    GCCL_GRID_STRIDE(i, size) {                                                            \
      out[i] = mask[i] ? smoothed<T>(total[i], count[i])                                   \
                       : __longlong_as_double(0x7FF8000000000000ll);                       \
    }                                                                                      \
  }
GCCL_FOR_EACH_DTYPE(GCCL_VOLUME_SMOOTH_FINISH_KERNEL)

// The mean of the readings in the cube of side 2 radius + 1 around (z, y, x) of one
// volume: row sums left to right, their sums top to bottom per plane, the planes' sums
// front to back, as fill_added adds them; voxels outside or not readings add 0, which
// skipping is exact (a float sum that starts at +0.0 never becomes -0.0 when rounding
// to nearest).
template <typename T>
__device__ __forceinline__ T cube_mean(const T* V, const unsigned char* R, u32 depth, u32 height,
                                       u32 width, u32 z, u32 y, u32 x, int radius, i64 low) {
  const int z0 = max((int)z - radius, 0), z1 = min((int)z + radius, (int)depth - 1);
  const int y0 = max((int)y - radius, 0), y1 = min((int)y + radius, (int)height - 1);
  const int x0 = max((int)x - radius, 0), x1 = min((int)x + radius, (int)width - 1);
  if (ValueTraits<T>::is_float) {
    double total = 0.0, count = 0.0;
    for (int zz = z0; zz <= z1; ++zz) {
      double plane = 0.0, plane_count = 0.0;
      for (int yy = y0; yy <= y1; ++yy) {
        double row = 0.0, row_count = 0.0;
        for (int xx = x0; xx <= x1; ++xx) {
          const u64 q = ((u64)zz * height + (u64)yy) * width + (u64)xx;
          if (R[q]) {
            row += (double)V[q];
            row_count += 1.0;
          }
        }
        plane += row;
        plane_count += row_count;
      }
      total += plane;
      count += plane_count;
    }
    return (T)(total / count);
  }
  i64 total = 0, count = 0;
  for (int zz = z0; zz <= z1; ++zz) {
    for (int yy = y0; yy <= y1; ++yy) {
      for (int xx = x0; xx <= x1; ++xx) {
        const u64 q = ((u64)zz * height + (u64)yy) * width + (u64)xx;
        if (R[q]) {
          total += (i64)V[q] - low;
          count += 1;
        }
      }
    }
  }
  return (T)((2 * total + count) / (count > 0 ? 2 * count : 1) + low);
}

#define GCCL_VOLUME_FILL_ADDED(suffix, T)                                                   \
  extern "C" __global__ void gccl_volume_fill_added_##suffix(                               \
      const T* values, const unsigned char* readings, const unsigned char* mask, T* out,   \
      u32 depth, u32 height, u32 width, u64 size, int radius, i64 low) {                    \
    const u64 voxels = volume_voxels(depth, height, width), plane = (u64)height * width;   \
    GCCL_GRID_STRIDE(i, size) {                                                             \
      if (!mask[i] || readings[i]) {                                                        \
        out[i] = values[i];                                                                 \
        continue;                                                                           \
      }                                                                                     \
      const u64 base = i / voxels * voxels, p = i - base;                                   \
      const u32 z = (u32)(p / plane), rest = (u32)(p - z * plane);                          \
      const u32 y = rest / width, x = rest - y * width;                                     \
      out[i] = cube_mean<T>(values + base, readings + base, depth, height, width, z, y, x,  \
                            radius, low);                                                   \
    }                                                                                       \
  }
GCCL_FOR_EACH_DTYPE(GCCL_VOLUME_FILL_ADDED)
