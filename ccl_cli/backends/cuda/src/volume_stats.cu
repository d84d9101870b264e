// Volumes: per-component statistics in one pass over the dense labels (+ one more for the
// float mean), aggregated per CUDA block before global atomics, as stats.cu does for
// images (stats.cuh: the accumulators, the walk of a chunk, the shared table).
//
// The labels are a batch of volumes (N, D, H, W), or one slab of planes of a volume whose
// first plane is plane z0 (slab labeling, backends/cuda/volumes.py): voxel indexes are
// 64-bit, so a volume of any size is one launch. Results go to agg, GCCL_V_FIELDS rows
// of u64 with `stride` columns; the column of label l of volume i is label_base[i] + l - 1.
// Integer value sums are 128-bit (GCCL_V_SUMV low word, GCCL_V_SUMV_HIGH high word, two's
// complement): a uint32 volume's component of 2^32 voxels overflows 64 bits; float volumes
// keep their float-mean integer sum (contract/stats.py) in GCCL_V_SUMV alone.
// gccl_volume_stats_table turns the aggregates into the rows of ccl_cli/contract/stats.py's
// volume table with its arithmetic (the CPU engine's, native/src/volume.c), bit for bit.
#include "common.cuh"
#include "dtypes.cuh"
#include "foreground.cuh"
#include "stats.cuh"
#include "volume.cuh"

#define GCCL_V_AREA 0
#define GCCL_V_XMIN 1
#define GCCL_V_XMAX 2
#define GCCL_V_YMIN 3
#define GCCL_V_YMAX 4
#define GCCL_V_ZMIN 5
#define GCCL_V_ZMAX 6
#define GCCL_V_SUMX 7
#define GCCL_V_SUMY 8
#define GCCL_V_SUMZ 9
#define GCCL_V_SUMV 10
#define GCCL_V_SUMV_HIGH 11
#define GCCL_V_VMIN 12
#define GCCL_V_VMAX 13
#define GCCL_V_ABSMAX 14
#define GCCL_V_INF 15
#define GCCL_V_FIELDS 16

// stats.cuh's accumulators and walk with the rows above.
template <>
struct StatsRows<3> {
  static constexpr u32 area = GCCL_V_AREA, xmin = GCCL_V_XMIN, xmax = GCCL_V_XMAX;
  static constexpr u32 ymin = GCCL_V_YMIN, ymax = GCCL_V_YMAX, zmin = GCCL_V_ZMIN;
  static constexpr u32 zmax = GCCL_V_ZMAX, sumx = GCCL_V_SUMX, sumy = GCCL_V_SUMY;
  static constexpr u32 sumz = GCCL_V_SUMZ, sumv = GCCL_V_SUMV, sumv_high = GCCL_V_SUMV_HIGH;
  static constexpr u32 vmin = GCCL_V_VMIN, vmax = GCCL_V_VMAX, absmax = GCCL_V_ABSMAX;
  static constexpr u32 inf = GCCL_V_INF, fields = GCCL_V_FIELDS;
};

// Identity values of every aggregate column: all ones for the minima, else 0.
extern "C" __global__ void gccl_volume_stats_init(u64* agg, u64 stride) {
  const u64 step = (u64)gridDim.x * blockDim.x;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < stride; i += step) {
    for (u32 f = 0; f < GCCL_V_FIELDS; ++f) {
      const bool minimum = f == GCCL_V_XMIN || f == GCCL_V_YMIN || f == GCCL_V_ZMIN ||
                           f == GCCL_V_VMIN;
      agg[f * stride + i] = minimum ? ~0ull : 0ull;
    }
  }
}

// gccl_volume_<name>_<suffix>: stats.cuh's aggregate_chunk with accumulator Acc over
// type T. sizes: where the float mean's shift comes from (agg itself, or a slab labeling's).
#define GCCL_VOLUME_AGGREGATE_KERNEL(name, Acc, suffix, T)                                   \
  extern "C" __global__ void __launch_bounds__(GCCL_CHUNK_THREADS)                          \
      gccl_volume_##name##_##suffix(const u32* labels, const T* values, u32 depth,          \
                                    u32 height, u32 width, u32 z0, u32 chunks_per_volume,   \
                                    const u32* label_base, u64* agg, u64 stride,            \
                                    const u64* sizes, u64 sizes_stride) {                   \
    aggregate_chunk<Acc<T, 3>, T>(labels, values, depth, height, width, z0,                 \
                                  chunks_per_volume, label_base, agg, stride, sizes,        \
                                  sizes_stride);                                            \
  }
#define GCCL_VOLUME_STATS_KERNEL(suffix, T) \
  GCCL_VOLUME_AGGREGATE_KERNEL(stats, StatsAcc, suffix, T)
#define GCCL_VOLUME_FLOAT_SUM_KERNEL(suffix, T) \
  GCCL_VOLUME_AGGREGATE_KERNEL(float_sum, FloatSumAcc, suffix, T)
GCCL_FOR_EACH_DTYPE(GCCL_VOLUME_STATS_KERNEL)
GCCL_FOR_EACH_FLOAT_DTYPE(GCCL_VOLUME_FLOAT_SUM_KERNEL)

// The sizes of a slab's local components added into those of the volume's components
// they belong to: component into[j] (1-based) gets local component j's voxels area[j] and
// largest finite |v| absmax[j] (float volumes; null otherwise) in rows GCCL_V_AREA and
// GCCL_V_ABSMAX of `to` (`to_stride` columns); j < count. Slab labeling gathers the
// components' sizes this way before its last pass (backends/cuda/slabs.py).
extern "C" __global__ void gccl_volume_merge_sizes(const u64* area, const u64* absmax, u64 count,
                                                   const u32* into, u64* to, u64 to_stride) {
  GCCL_GRID_STRIDE(j, count) {
    const u64 i = into[j] - 1;
    atomicAdd(&to[GCCL_V_AREA * to_stride + i], area[j]);
    if (absmax) atomicMax(&to[GCCL_V_ABSMAX * to_stride + i], absmax[j]);
  }
}

// A 128-bit two's complement integer (high, low) as the nearest float64 (ties to even), as
// C converts an __int128 (the CPU engine's mean). The magnitude is cut to its top 64 bits
// with every bit below kept as a sticky bit 0, which rounds as the whole would: the
// rounding of 64 bits to 53 looks at bit 10 and anything below it.
__device__ __forceinline__ double wide_to_double(i64 high, u64 low) {
  if ((high == 0 && (i64)low >= 0) || (high == -1 && (i64)low < 0))
    return __ll2double_rn((i64)low);  // it fits 64 bits
  const bool negative = high < 0;
  u64 hi = (u64)high, lo = low;
  if (negative) {  // the magnitude: two's complement negation of (hi, lo)
    lo = ~lo + 1;
    hi = ~hi + (lo == 0 ? 1 : 0);
  }
  if (hi == 0) {  // |value| in [2^63, 2^64): exact as u64
    const double d = __ull2double_rn(lo);
    return negative ? -d : d;
  }
  const int shift = 64 - __clzll((i64)hi);  // bits of hi: 1..64
  const u64 dropped = shift == 64 ? lo : lo & ((1ull << shift) - 1);
  const u64 top = (shift == 64 ? hi : (hi << (64 - shift)) | (lo >> shift)) | (dropped != 0);
  const double d = ldexp(__ull2double_rn(top), shift);
  return negative ? -d : d;
}

// The volume statistics table from the aggregates: contract/stats.py's volume columns as
// 64-bit words, GCCL_VOLUME_TABLE_COLUMNS rows of `stride` (= labels in the batch):
//   area, x, y, z, width, height, depth: int64;
//   centroid_x, _y, _z: float64(sum) / float64(area), one rounded division;
//   mean: integers float64(128-bit sum v) / area (rounded to nearest, as C converts an
//     __int128); floats ldexp(float64(scaled sum), -s) / area, then +inf, -inf or NaN
//     where the component holds infinities (contract/stats.py's float_mean);
//   min, max: float64 from their order keys;
//   a component holding a NaN has mean, min and max NaN (stats.cu's rule).
// Rows of kept labels only, placed as stats.cu's gccl_stats_table places them.
#define GCCL_VOLUME_TABLE_COLUMNS 13
#define GCCL_VOLUME_TABLE_INTS 7

// The volume of batch label j: the last i with label_base[i] <= j.
__device__ __forceinline__ u32 volume_of(const u32* label_base, u32 volumes, u64 j) {
  u32 lo = 0, hi = volumes;  // label_base[lo] <= j < label_base[hi]
  while (hi - lo > 1) {
    const u32 mid = (lo + hi) / 2;
    if (label_base[mid] <= j) lo = mid; else hi = mid;
  }
  return lo;
}

extern "C" __global__ void gccl_volume_stats_table(const u64* agg, u64 stride, const u32* keep,
                                                   const u32* kept_rank, const u32* label_base,
                                                   const u32* kept_base, u32 volumes,
                                                   int float_values, u64* table) {
  const u64 step = (u64)gridDim.x * blockDim.x;
  for (u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x; j < stride; j += step) {
    if (keep && !keep[j]) continue;
    const u64 row = keep ? kept_base[volume_of(label_base, volumes, j)] + kept_rank[j] : j;
    const u64 area = agg[GCCL_V_AREA * stride + j];
    const double area_f = __ull2double_rn(area > 1 ? area : 1);
    const u64 sumv = agg[GCCL_V_SUMV * stride + j];
    double mean;
    if (float_values) {
      const int shift = float_mean_shift(area, agg[GCCL_V_ABSMAX * stride + j]);
      mean = __ddiv_rn(ldexp(__ll2double_rn((i64)sumv), -shift), area_f);
      const u64 inf = agg[GCCL_V_INF * stride + j];
      if (inf & GCCL_INF_POS) mean = __longlong_as_double(0x7FF0000000000000LL);
      if (inf & GCCL_INF_NEG) mean = __longlong_as_double((i64)0xFFF0000000000000ull);
      if ((inf & GCCL_INF_POS) && (inf & GCCL_INF_NEG))
        mean = __longlong_as_double(0x7FF8000000000000LL);
    } else {
      const i64 high = (i64)agg[GCCL_V_SUMV_HIGH * stride + j];
      mean = __ddiv_rn(wide_to_double(high, sumv), area_f);
    }
    const u64 xmin = agg[GCCL_V_XMIN * stride + j], ymin = agg[GCCL_V_YMIN * stride + j];
    const u64 zmin = agg[GCCL_V_ZMIN * stride + j];
    double v_min = from_order_key(agg[GCCL_V_VMIN * stride + j]);
    double v_max = from_order_key(agg[GCCL_V_VMAX * stride + j]);
    if (v_min != v_min || v_max != v_max)  // a NaN in the component (float_mean's rule)
      mean = v_min = v_max = __longlong_as_double(0x7FF8000000000000LL);
    const u64 columns_i[GCCL_VOLUME_TABLE_INTS] = {area,
                              xmin,
                              ymin,
                              zmin,
                              agg[GCCL_V_XMAX * stride + j] - xmin + 1,
                              agg[GCCL_V_YMAX * stride + j] - ymin + 1,
                              agg[GCCL_V_ZMAX * stride + j] - zmin + 1};
    const double columns_f[GCCL_VOLUME_TABLE_COLUMNS - GCCL_VOLUME_TABLE_INTS] = {
        __ddiv_rn(__ll2double_rn((i64)agg[GCCL_V_SUMX * stride + j]), area_f),
        __ddiv_rn(__ll2double_rn((i64)agg[GCCL_V_SUMY * stride + j]), area_f),
        __ddiv_rn(__ll2double_rn((i64)agg[GCCL_V_SUMZ * stride + j]), area_f),
        mean,
        v_min,
        v_max,
    };
    for (int c = 0; c < GCCL_VOLUME_TABLE_INTS; ++c) table[c * stride + row] = columns_i[c];
    for (int c = 0; c < GCCL_VOLUME_TABLE_COLUMNS - GCCL_VOLUME_TABLE_INTS; ++c)
      table[(GCCL_VOLUME_TABLE_INTS + c) * stride + row] = (u64)__double_as_longlong(columns_f[c]);
  }
}
