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

// stats.cuh's accumulators, walk, identity values and table with the rows above.
template <>
struct StatsRows<2> {
  static constexpr u32 area = GCCL_F_AREA, xmin = GCCL_F_XMIN, xmax = GCCL_F_XMAX;
  static constexpr u32 ymin = GCCL_F_YMIN, ymax = GCCL_F_YMAX, sumx = GCCL_F_SUMX;
  static constexpr u32 sumy = GCCL_F_SUMY, sumv = GCCL_F_SUMV, vmin = GCCL_F_VMIN;
  static constexpr u32 vmax = GCCL_F_VMAX, absmax = GCCL_F_ABSMAX, inf = GCCL_F_INF;
  static constexpr u32 fields = GCCL_STATS_FIELDS;
};

extern "C" __global__ void gccl_stats_init(u64* agg, u64 stride) {
  init_aggregates<2>(agg, stride);
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

// The statistics table: stats.cuh's stats_table, in contract/stats.py's StatsTable columns
// area, x, y, width, height (int64), centroid_x, centroid_y, mean, min, max.
#define GCCL_TABLE_COLUMNS 10
static_assert(GCCL_TABLE_COLUMNS == stats_table_columns(2), "image table columns");

extern "C" __global__ void gccl_stats_table(const u64* agg, u64 stride, const u32* keep,
                                            const u32* kept_rank, const u32* label_base,
                                            const u32* kept_base, u32 images, int float_values,
                                            u64* table) {
  stats_table<2>(agg, stride, keep, kept_rank, label_base, kept_base, images, float_values,
                 table);
}
