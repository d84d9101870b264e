// Per-component statistics in one pass over the dense labels (+ one more for
// the float mean), aggregated per CUDA block before global atomics.
//
// Results go to agg, GCCL_STATS_FIELDS rows of u64 with `stride` columns; the
// column of label l of image i is label_base[i] + l - 1. Min/max values are
// stored as order-preserving keys of their float64 (order_key). The host
// turns the exact integer sums into centroids and means with the arithmetic
// of ccl_cli/contract/stats.py.
//
// The walk of a block's chunk of pixels and the accumulators are stats.cuh's, shared
// with volume_stats.cu; this file gives them its rows.
#include "common.cuh"
#include "dtypes.cuh"
#include "foreground.cuh"
#include "stats.cuh"

#define GCCL_F_AREA 0
#define GCCL_F_XMIN 1
#define GCCL_F_XMAX 2
#define GCCL_F_YMIN 3
#define GCCL_F_YMAX 4
#define GCCL_F_SUMX 5
#define GCCL_F_SUMY 6
#define GCCL_F_SUMV 7
#define GCCL_F_VMIN 8
#define GCCL_F_VMAX 9
#define GCCL_F_ABSMAX 10
#define GCCL_F_INF 11
#define GCCL_STATS_FIELDS 12

// stats.cuh's accumulators and walk with the rows above.
template <>
struct StatsRows<2> {
  static constexpr u32 area = GCCL_F_AREA, xmin = GCCL_F_XMIN, xmax = GCCL_F_XMAX;
  static constexpr u32 ymin = GCCL_F_YMIN, ymax = GCCL_F_YMAX, sumx = GCCL_F_SUMX;
  static constexpr u32 sumy = GCCL_F_SUMY, sumv = GCCL_F_SUMV, vmin = GCCL_F_VMIN;
  static constexpr u32 vmax = GCCL_F_VMAX, absmax = GCCL_F_ABSMAX, inf = GCCL_F_INF;
  static constexpr u32 fields = GCCL_STATS_FIELDS;
};

// Identity values of every aggregate column: all ones for the minima, else 0.
extern "C" __global__ void gccl_stats_init(u64* agg, u64 stride) {
  const u64 step = (u64)gridDim.x * blockDim.x;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < stride; i += step) {
    for (u32 f = 0; f < GCCL_STATS_FIELDS; ++f) {
      const bool minimum = f == GCCL_F_XMIN || f == GCCL_F_YMIN || f == GCCL_F_VMIN;
      agg[f * stride + i] = minimum ? ~0ull : 0ull;
    }
  }
}

// gccl_<name>_<suffix>: stats.cuh's aggregate_chunk with accumulator Acc over element
// type T; pass 2 takes its float-mean shifts from agg.
#define GCCL_AGGREGATE_KERNEL(name, Acc, suffix, T)                                        \
  extern "C" __global__ void __launch_bounds__(GCCL_CHUNK_THREADS) gccl_##name##_##suffix( \
      const u32* labels, const T* values, u32 height, u32 width, u32 chunks_per_image,     \
      const u32* label_base, u64* agg, u64 stride) {                                       \
    aggregate_chunk<Acc<T, 2>, T>(labels, values, 1, height, width, 0, chunks_per_image,   \
                                  label_base, agg, stride, agg, stride);                   \
  }
#define GCCL_STATS_KERNEL(suffix, T) GCCL_AGGREGATE_KERNEL(stats, StatsAcc, suffix, T)
#define GCCL_FLOAT_SUM_KERNEL(suffix, T) GCCL_AGGREGATE_KERNEL(float_sum, FloatSumAcc, suffix, T)
GCCL_FOR_EACH_DTYPE(GCCL_STATS_KERNEL)
GCCL_FOR_EACH_FLOAT_DTYPE(GCCL_FLOAT_SUM_KERNEL)

// The statistics table from the aggregates: ccl_cli/contract/stats.py's StatsTable
// columns as 64-bit words, GCCL_TABLE_COLUMNS rows of `stride` (= labels in
// the batch), with that module's arithmetic, so the bits equal the CPU's:
//   area, x, y, width, height: int64;
//   centroid_x, centroid_y: float64(sum) / float64(area), one rounded division;
//   mean: integers float64(sum v) / area; floats ldexp(float64(scaled sum),
//     -s) / area with s = 62 - bits(area - 1) - frexp exponent of the largest
//     finite |v| (float_sum_shift; bits(area - 1) = ceil(log2(area))), then
//     +inf, -inf or NaN where the component holds infinities (float_mean);
//   min, max: float64 from their order keys;
//   a component holding a NaN (a hole's pixels filled by --fill-holes) has mean,
//     min and max NaN.
// Only kept labels get a row: label j of image i goes to row kept_base[i] +
// kept_rank[j] where keep[j] (area filtering; the rank is area_filter.cu's), to row j
// when keep is null. The host copies these rows back instead of the
// aggregates and uses them as they are.
#define GCCL_TABLE_COLUMNS 10

// The image of batch label j: the last i with label_base[i] <= j.
__device__ __forceinline__ u32 image_of(const u32* label_base, u32 images, u64 j) {
  u32 lo = 0, hi = images;  // label_base[lo] <= j < label_base[hi]
  while (hi - lo > 1) {
    const u32 mid = (lo + hi) / 2;
    if (label_base[mid] <= j) lo = mid; else hi = mid;
  }
  return lo;
}

extern "C" __global__ void gccl_stats_table(const u64* agg, u64 stride, const u32* keep,
                                            const u32* kept_rank, const u32* label_base,
                                            const u32* kept_base, u32 images, int float_values,
                                            u64* table) {
  const u64 step = (u64)gridDim.x * blockDim.x;
  for (u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x; j < stride; j += step) {
    if (keep && !keep[j]) continue;
    const u64 row = keep ? kept_base[image_of(label_base, images, j)] + kept_rank[j] : j;
    const u64 area = agg[GCCL_F_AREA * stride + j];
    const double area_f = (double)(area > 1 ? area : 1);  // exact: area < 2^53
    const u64 xmin = agg[GCCL_F_XMIN * stride + j], ymin = agg[GCCL_F_YMIN * stride + j];
    const long long sumv = (long long)agg[GCCL_F_SUMV * stride + j];
    double mean;
    if (float_values) {
      const int shift = float_mean_shift(area, agg[GCCL_F_ABSMAX * stride + j]);
      mean = __ddiv_rn(ldexp(__ll2double_rn(sumv), -shift), area_f);
      const u64 inf = agg[GCCL_F_INF * stride + j];
      if (inf & GCCL_INF_POS) mean = __longlong_as_double(0x7FF0000000000000LL);
      if (inf & GCCL_INF_NEG) mean = __longlong_as_double((long long)0xFFF0000000000000ull);
      if ((inf & GCCL_INF_POS) && (inf & GCCL_INF_NEG))
        mean = __longlong_as_double(0x7FF8000000000000LL);
    } else {
      mean = __ddiv_rn(__ll2double_rn(sumv), area_f);
    }
    double v_min = from_order_key(agg[GCCL_F_VMIN * stride + j]);
    double v_max = from_order_key(agg[GCCL_F_VMAX * stride + j]);
    if (v_min != v_min || v_max != v_max)  // a NaN in the component (float_mean's rule)
      mean = v_min = v_max = __longlong_as_double(0x7FF8000000000000LL);
    const double columns_f[5] = {
        __ddiv_rn(__ll2double_rn((long long)agg[GCCL_F_SUMX * stride + j]), area_f),
        __ddiv_rn(__ll2double_rn((long long)agg[GCCL_F_SUMY * stride + j]), area_f),
        mean,
        v_min,
        v_max,
    };
    const u64 columns_i[5] = {area, xmin, ymin, agg[GCCL_F_XMAX * stride + j] - xmin + 1,
                              agg[GCCL_F_YMAX * stride + j] - ymin + 1};
    for (int c = 0; c < 5; ++c) table[c * stride + row] = columns_i[c];
    for (int c = 0; c < 5; ++c)
      table[(5 + c) * stride + row] = (u64)__double_as_longlong(columns_f[c]);
  }
}
