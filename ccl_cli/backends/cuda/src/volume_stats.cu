// Volumes: per-component statistics in one pass over the dense labels (+ one more for the
// float mean), aggregated per CUDA block before global atomics, as stats.cu does for
// images (stats.cuh: the shared table and the merge of neighbouring lanes).
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

// agg's 128-bit sum (low, high) += s. Each atomicAdd returns the low word it added to, so
// the carry out of every addition is known exactly and the total is that of the exact sum
// whatever the order.
__device__ __forceinline__ void add_wide(u64* low, u64* high, i64 s) {
  if (s == 0) return;
  const u64 old = atomicAdd(low, (u64)s);
  const u64 carry = old + (u64)s < old ? 1ull : 0ull;
  const u64 h = (s < 0 ? ~0ull : 0ull) + carry;
  if (h) atomicAdd(high, h);
}

// Pass 1: voxels, bounding box, coordinate sums, value sum (integers), min/max, and for
// floats the largest finite |v| and which infinities occur. A block's sums of values fit
// 64 bits (GCCL_CHUNK voxels of at most 2^32 each); global ones are 128-bit.
template <typename T>
struct VolumeStatsAcc {
  static constexpr bool is_float = ValueTraits<T>::is_float;
  struct Table {
    u32 key[GCCL_STATS_SLOTS];
    u32 area[GCCL_STATS_SLOTS], inf[GCCL_STATS_SLOTS];
    u32 xmin[GCCL_STATS_SLOTS], xmax[GCCL_STATS_SLOTS], ymin[GCCL_STATS_SLOTS];
    u32 ymax[GCCL_STATS_SLOTS], zmin[GCCL_STATS_SLOTS], zmax[GCCL_STATS_SLOTS];
    u64 sumx[GCCL_STATS_SLOTS], sumy[GCCL_STATS_SLOTS], sumz[GCCL_STATS_SLOTS];
    u64 sumv[GCCL_STATS_SLOTS], vmin[GCCL_STATS_SLOTS], vmax[GCCL_STATS_SLOTS];
    u64 absmax[GCCL_STATS_SLOTS];
  };
  u32 label, area, inf, xmin, xmax, ymin, ymax, zmin, zmax;
  u64 sumx, sumy, sumz, sumv, vmin, vmax, absmax;

  __device__ void start(u32 l, u32 x, u32 y, u32 z, T v, const u64*, u64, u64) {
    label = l;
    area = inf = 0;
    xmin = ymin = zmin = 0xFFFFFFFFu;
    xmax = ymax = zmax = 0;
    sumx = sumy = sumz = sumv = vmax = absmax = 0;
    vmin = ~0ull;
    add(x, y, z, v);
  }
  __device__ void add(u32 x, u32 y, u32 z, T v) {
    ++area;
    xmin = min(xmin, x);
    xmax = max(xmax, x);
    ymin = min(ymin, y);
    ymax = max(ymax, y);
    zmin = min(zmin, z);
    zmax = max(zmax, z);
    sumx += x;
    sumy += y;
    sumz += z;
    const double d = (double)v;
    const u64 k = order_key(d);
    vmin = min(vmin, k);
    vmax = max(vmax, k);
    if (is_float) {
      const double a = fabs(d);
      if (a < __longlong_as_double(0x7FF0000000000000ll))
        absmax = max(absmax, (u64)__double_as_longlong(a));
      else if (a == a)  // an infinity (a NaN shows in the extremes' keys)
        inf |= d > 0 ? GCCL_INF_POS : GCCL_INF_NEG;
    } else {
      sumv += (u64)(i64)v;
    }
  }
  __device__ void combine(const VolumeStatsAcc& o) {
    area += o.area;
    inf |= o.inf;
    xmin = min(xmin, o.xmin);
    xmax = max(xmax, o.xmax);
    ymin = min(ymin, o.ymin);
    ymax = max(ymax, o.ymax);
    zmin = min(zmin, o.zmin);
    zmax = max(zmax, o.zmax);
    sumx += o.sumx;
    sumy += o.sumy;
    sumz += o.sumz;
    sumv += o.sumv;
    vmin = min(vmin, o.vmin);
    vmax = max(vmax, o.vmax);
    absmax = max(absmax, o.absmax);
  }
  __device__ VolumeStatsAcc shfl_down(u32 offset) const {
    VolumeStatsAcc o;
    o.label = __shfl_down_sync(GCCL_FULL_WARP, label, offset);
    o.area = __shfl_down_sync(GCCL_FULL_WARP, area, offset);
    o.inf = __shfl_down_sync(GCCL_FULL_WARP, inf, offset);
    o.xmin = __shfl_down_sync(GCCL_FULL_WARP, xmin, offset);
    o.xmax = __shfl_down_sync(GCCL_FULL_WARP, xmax, offset);
    o.ymin = __shfl_down_sync(GCCL_FULL_WARP, ymin, offset);
    o.ymax = __shfl_down_sync(GCCL_FULL_WARP, ymax, offset);
    o.zmin = __shfl_down_sync(GCCL_FULL_WARP, zmin, offset);
    o.zmax = __shfl_down_sync(GCCL_FULL_WARP, zmax, offset);
    o.sumx = shfl_down_u64(sumx, offset);
    o.sumy = shfl_down_u64(sumy, offset);
    o.sumz = shfl_down_u64(sumz, offset);
    o.sumv = shfl_down_u64(sumv, offset);
    o.vmin = shfl_down_u64(vmin, offset);
    o.vmax = shfl_down_u64(vmax, offset);
    o.absmax = shfl_down_u64(absmax, offset);
    return o;
  }
  __device__ static void clear(Table& t, u32 s) {
    t.area[s] = t.inf[s] = t.xmax[s] = t.ymax[s] = t.zmax[s] = 0;
    t.xmin[s] = t.ymin[s] = t.zmin[s] = 0xFFFFFFFFu;
    t.sumx[s] = t.sumy[s] = t.sumz[s] = t.sumv[s] = t.vmax[s] = t.absmax[s] = 0;
    t.vmin[s] = ~0ull;
  }
  __device__ void to_table(Table& t, u32 s) const {
    atomicAdd(&t.area[s], area);
    atomicMin(&t.xmin[s], xmin);
    atomicMax(&t.xmax[s], xmax);
    atomicMin(&t.ymin[s], ymin);
    atomicMax(&t.ymax[s], ymax);
    atomicMin(&t.zmin[s], zmin);
    atomicMax(&t.zmax[s], zmax);
    atomicAdd(&t.sumx[s], sumx);
    atomicAdd(&t.sumy[s], sumy);
    atomicAdd(&t.sumz[s], sumz);
    atomicMin(&t.vmin[s], vmin);
    atomicMax(&t.vmax[s], vmax);
    if (is_float) {
      atomicMax(&t.absmax[s], absmax);
      if (inf) atomicOr(&t.inf[s], inf);
    } else {
      atomicAdd(&t.sumv[s], sumv);
    }
  }
  __device__ static void publish(u64* agg, u64 stride, u64 i, u32 area, u32 inf, u32 xmin,
                                 u32 xmax, u32 ymin, u32 ymax, u32 zmin, u32 zmax, u64 sumx,
                                 u64 sumy, u64 sumz, u64 sumv, u64 vmin, u64 vmax, u64 absmax) {
    atomicAdd(&agg[GCCL_V_AREA * stride + i], (u64)area);
    atomicMin(&agg[GCCL_V_XMIN * stride + i], (u64)xmin);
    atomicMax(&agg[GCCL_V_XMAX * stride + i], (u64)xmax);
    atomicMin(&agg[GCCL_V_YMIN * stride + i], (u64)ymin);
    atomicMax(&agg[GCCL_V_YMAX * stride + i], (u64)ymax);
    atomicMin(&agg[GCCL_V_ZMIN * stride + i], (u64)zmin);
    atomicMax(&agg[GCCL_V_ZMAX * stride + i], (u64)zmax);
    atomicAdd(&agg[GCCL_V_SUMX * stride + i], sumx);
    atomicAdd(&agg[GCCL_V_SUMY * stride + i], sumy);
    atomicAdd(&agg[GCCL_V_SUMZ * stride + i], sumz);
    atomicMin(&agg[GCCL_V_VMIN * stride + i], vmin);
    atomicMax(&agg[GCCL_V_VMAX * stride + i], vmax);
    if (is_float) {
      atomicMax(&agg[GCCL_V_ABSMAX * stride + i], absmax);
      if (inf) atomicOr(&agg[GCCL_V_INF * stride + i], (u64)inf);
    } else {
      add_wide(&agg[GCCL_V_SUMV * stride + i], &agg[GCCL_V_SUMV_HIGH * stride + i], (i64)sumv);
    }
  }
  __device__ void to_global(u64* agg, u64 stride, u64 i) const {
    publish(agg, stride, i, area, inf, xmin, xmax, ymin, ymax, zmin, zmax, sumx, sumy, sumz,
            sumv, vmin, vmax, absmax);
  }
  __device__ static void table_to_global(const Table& t, u32 s, u64* agg, u64 stride, u64 i) {
    publish(agg, stride, i, t.area[s], t.inf[s], t.xmin[s], t.xmax[s], t.ymin[s], t.ymax[s],
            t.zmin[s], t.zmax[s], t.sumx[s], t.sumy[s], t.sumz[s], t.sumv[s], t.vmin[s],
            t.vmax[s], t.absmax[s]);
  }
};

// The float-mean shift of a component (contract/stats.py's float_sum_shift) from its
// voxels and largest finite |v| (float64 bits): 62 - bits(area - 1) - frexp exponent.
__device__ __forceinline__ int float_mean_shift(u64 area, u64 absmax) {
  int exponent;
  frexp(__longlong_as_double((i64)absmax), &exponent);
  const int area_bits = area > 1 ? 64 - __clzll((i64)(area - 1)) : 0;
  return 62 - area_bits - exponent;
}

// Pass 2 (floats): sum of trunc(v * 2**shift) over finite v, the shift from the
// component's voxels and largest finite |v| in `sizes` (rows GCCL_V_AREA and
// GCCL_V_ABSMAX of `sizes_stride` columns, at the same columns as agg: pass 1's agg, or
// a slab labeling's sizes gathered beforehand).
template <typename T>
struct VolumeFloatSumAcc {
  struct Table {
    u32 key[GCCL_STATS_SLOTS];
    u64 sum[GCCL_STATS_SLOTS];
  };
  u32 label;
  int shift;
  u64 sum;

  __device__ void start(u32 l, u32 x, u32 y, u32 z, T v, const u64* sizes, u64 sizes_stride,
                        u64 base) {
    label = l;
    const u64 i = base + l - 1;
    shift = float_mean_shift(sizes[GCCL_V_AREA * sizes_stride + i],
                             sizes[GCCL_V_ABSMAX * sizes_stride + i]);
    sum = 0;
    add(x, y, z, v);
  }
  __device__ void add(u32, u32, u32, T v) {
    const double d = (double)v;
    if (fabs(d) < __longlong_as_double(0x7FF0000000000000ll))
      sum += (u64)(i64)trunc(ldexp(d, shift));
  }
  __device__ void combine(const VolumeFloatSumAcc& o) { sum += o.sum; }
  __device__ VolumeFloatSumAcc shfl_down(u32 offset) const {
    VolumeFloatSumAcc o;
    o.label = __shfl_down_sync(GCCL_FULL_WARP, label, offset);
    o.sum = shfl_down_u64(sum, offset);
    return o;
  }
  __device__ static void clear(Table& t, u32 s) { t.sum[s] = 0; }
  __device__ void to_table(Table& t, u32 s) const { atomicAdd(&t.sum[s], sum); }
  __device__ void to_global(u64* agg, u64 stride, u64 i) const {
    atomicAdd(&agg[GCCL_V_SUMV * stride + i], sum);
  }
  __device__ static void table_to_global(const Table& t, u32 s, u64* agg, u64 stride, u64 i) {
    atomicAdd(&agg[GCCL_V_SUMV * stride + i], t.sum[s]);
  }
};

// One CUDA block per chunk of GCCL_CHUNK consecutive voxels of a volume, each thread
// GCCL_CHUNK_ITEMS of them with two running accumulators (its first label, usually the
// large component, and the latest other one), as stats.cu's aggregate_chunk.
template <class Acc, typename T>
__device__ __forceinline__ void aggregate_volume_chunk(const u32* labels, const T* values,
                                                       u32 depth, u32 height, u32 width, u32 z0,
                                                       u32 chunks_per_volume,
                                                       const u32* label_base, u64* agg,
                                                       u64 stride, const u64* sizes,
                                                       u64 sizes_stride) {
  __shared__ typename Acc::Table table;
  const BlockPlace place = block_place(chunks_per_volume);
  const u64 voxels = volume_voxels(depth, height, width);
  const u64 volume_base = (u64)place.image * voxels;
  const u32* L = labels + volume_base;
  const T* V = values + volume_base;
  const u64 base = label_base[place.image];
  clear_table<Acc>(table);

  const u64 start =
      (u64)place.index * GCCL_CHUNK + (u64)threadIdx.x * GCCL_CHUNK_ITEMS;
  const u32 count = start < voxels ? (u32)min((u64)GCCL_CHUNK_ITEMS, voxels - start) : 0;
  const u64 plane = (u64)height * width;
  Acc first, other;
  first.label = other.label = 0;
  u32 x = 0, y = 0, z = 0;
  if (count) {
    const u64 zz = start / plane;
    const u64 rest = start - zz * plane;
    z = (u32)zz + z0;
    y = (u32)(rest / width);
    x = (u32)(rest - (u64)y * width);
  }
  auto visit = [&](u32 l, T v) {
    if (l == first.label) {
      first.add(x, y, z, v);
    } else if (first.label == 0) {
      first.start(l, x, y, z, v, sizes, sizes_stride, base);
    } else if (l == other.label) {
      other.add(x, y, z, v);
    } else {
      if (other.label) flush(other, table, agg, stride, base);
      other.start(l, x, y, z, v, sizes, sizes_stride, base);
    }
  };
  for (u32 i = 0; i < count; ++i) {
    const u32 l = L[start + i];
    if (l) visit(l, V[start + i]);
    if (++x == width) {
      x = 0;
      if (++y == height) {
        y = 0;
        ++z;
      }
    }
  }
  if (other.label) flush(other, table, agg, stride, base);
  flush_lanes(first, table, agg, stride, base);
  __syncthreads();
  publish_table<Acc>(table, agg, stride, base);
}

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

// gccl_volume_<name>_<suffix>: aggregate_volume_chunk with accumulator Acc over type T.
// sizes: where the float mean's shift comes from (agg itself, or a slab labeling's).
#define GCCL_VOLUME_AGGREGATE_KERNEL(name, Acc, suffix, T)                                   \
  extern "C" __global__ void __launch_bounds__(GCCL_CHUNK_THREADS)                          \
      gccl_volume_##name##_##suffix(const u32* labels, const T* values, u32 depth,          \
                                    u32 height, u32 width, u32 z0, u32 chunks_per_volume,   \
                                    const u32* label_base, u64* agg, u64 stride,            \
                                    const u64* sizes, u64 sizes_stride) {                   \
    aggregate_volume_chunk<Acc<T>, T>(labels, values, depth, height, width, z0,             \
                                      chunks_per_volume, label_base, agg, stride, sizes,    \
                                      sizes_stride);                                        \
  }
#define GCCL_VOLUME_STATS_KERNEL(suffix, T) \
  GCCL_VOLUME_AGGREGATE_KERNEL(stats, VolumeStatsAcc, suffix, T)
#define GCCL_VOLUME_FLOAT_SUM_KERNEL(suffix, T) \
  GCCL_VOLUME_AGGREGATE_KERNEL(float_sum, VolumeFloatSumAcc, suffix, T)
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
