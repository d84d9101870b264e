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

// stats.cuh's accumulators, walk, identity values and table with the rows above.
template <>
struct StatsRows<3> {
  static constexpr u32 area = GCCL_V_AREA, xmin = GCCL_V_XMIN, xmax = GCCL_V_XMAX;
  static constexpr u32 ymin = GCCL_V_YMIN, ymax = GCCL_V_YMAX, zmin = GCCL_V_ZMIN;
  static constexpr u32 zmax = GCCL_V_ZMAX, sumx = GCCL_V_SUMX, sumy = GCCL_V_SUMY;
  static constexpr u32 sumz = GCCL_V_SUMZ, sumv = GCCL_V_SUMV, sumv_high = GCCL_V_SUMV_HIGH;
  static constexpr u32 vmin = GCCL_V_VMIN, vmax = GCCL_V_VMAX, absmax = GCCL_V_ABSMAX;
  static constexpr u32 inf = GCCL_V_INF, fields = GCCL_V_FIELDS;
};

extern "C" __global__ void gccl_volume_stats_init(u64* agg, u64 stride) {
  init_aggregates<3>(agg, stride);
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

// The volume statistics table: stats.cuh's stats_table, in contract/stats.py's volume
// columns area, x, y, z, width, height, depth (int64), centroid_x, _y, _z, mean, min, max.
#define GCCL_VOLUME_TABLE_COLUMNS 13
#define GCCL_VOLUME_TABLE_INTS 7
static_assert(GCCL_VOLUME_TABLE_COLUMNS == stats_table_columns(3), "volume table columns");
static_assert(GCCL_VOLUME_TABLE_INTS == stats_table_ints(3), "volume table int columns");

extern "C" __global__ void gccl_volume_stats_table(const u64* agg, u64 stride, const u32* keep,
                                                   const u32* kept_rank, const u32* label_base,
                                                   const u32* kept_base, u32 volumes,
                                                   int float_values, u64* table) {
  stats_table<3>(agg, stride, keep, kept_rank, label_base, kept_base, volumes, float_values,
                 table);
}
