// Per-component statistics in one pass over the dense labels (+ one more for
// the float mean), aggregated per CUDA block before global atomics.
//
// Results go to agg, GCCL_STATS_FIELDS rows of u64 with `stride` columns; the
// column of label l of image i is label_base[i] + l - 1. Min/max values are
// stored as order-preserving keys of their float64 (order_key). The host
// turns the exact integer sums into centroids and means with the arithmetic
// of ccl_cli/contract/stats.py.
//
// Each thread walks GCCL_CHUNK_ITEMS consecutive pixels keeping two running
// accumulators (its first label, usually the large component, and the latest
// other one). A warp merges the first-label accumulators of neighbouring lanes
// that share a label (segmented shuffle reduction), then everything goes to a
// shared-memory hash table, and the table to global memory once per block.
// A label that finds no free slot goes straight to global memory.
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

// Pass 1: area, bounding box, coordinate sums, value sum (integers), min/max,
// and for floats the largest finite |v| and which infinities occur.
template <typename T>
struct StatsAcc {
  static constexpr bool is_float = ValueTraits<T>::is_float;
  struct Table {
    u32 key[GCCL_STATS_SLOTS];
    u32 area[GCCL_STATS_SLOTS], xmin[GCCL_STATS_SLOTS], xmax[GCCL_STATS_SLOTS];
    u32 ymin[GCCL_STATS_SLOTS], ymax[GCCL_STATS_SLOTS], inf[GCCL_STATS_SLOTS];
    u64 sumx[GCCL_STATS_SLOTS], sumy[GCCL_STATS_SLOTS], sumv[GCCL_STATS_SLOTS];
    u64 vmin[GCCL_STATS_SLOTS], vmax[GCCL_STATS_SLOTS], absmax[GCCL_STATS_SLOTS];
  };
  u32 label, area, xmin, xmax, ymin, ymax, inf;
  u64 sumx, sumy, sumv, vmin, vmax, absmax;

  __device__ void start(u32 l, u32 x, u32 y, T v, const u64*, u64, u64) {
    label = l;
    area = 0;
    xmin = ymin = 0xFFFFFFFFu;
    xmax = ymax = inf = 0;
    sumx = sumy = sumv = vmax = absmax = 0;
    vmin = ~0ull;
    add(x, y, v);
  }
  __device__ void add(u32 x, u32 y, T v) {
    ++area;
    xmin = min(xmin, x);
    xmax = max(xmax, x);
    ymin = min(ymin, y);
    ymax = max(ymax, y);
    sumx += x;
    sumy += y;
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
  __device__ void combine(const StatsAcc& o) {
    area += o.area;
    xmin = min(xmin, o.xmin);
    xmax = max(xmax, o.xmax);
    ymin = min(ymin, o.ymin);
    ymax = max(ymax, o.ymax);
    inf |= o.inf;
    sumx += o.sumx;
    sumy += o.sumy;
    sumv += o.sumv;
    vmin = min(vmin, o.vmin);
    vmax = max(vmax, o.vmax);
    absmax = max(absmax, o.absmax);
  }
  __device__ StatsAcc shfl_down(u32 offset) const {
    StatsAcc o;
    o.label = __shfl_down_sync(GCCL_FULL_WARP, label, offset);
    o.area = __shfl_down_sync(GCCL_FULL_WARP, area, offset);
    o.xmin = __shfl_down_sync(GCCL_FULL_WARP, xmin, offset);
    o.xmax = __shfl_down_sync(GCCL_FULL_WARP, xmax, offset);
    o.ymin = __shfl_down_sync(GCCL_FULL_WARP, ymin, offset);
    o.ymax = __shfl_down_sync(GCCL_FULL_WARP, ymax, offset);
    o.inf = __shfl_down_sync(GCCL_FULL_WARP, inf, offset);
    o.sumx = shfl_down_u64(sumx, offset);
    o.sumy = shfl_down_u64(sumy, offset);
    o.sumv = shfl_down_u64(sumv, offset);
    o.vmin = shfl_down_u64(vmin, offset);
    o.vmax = shfl_down_u64(vmax, offset);
    o.absmax = shfl_down_u64(absmax, offset);
    return o;
  }
  __device__ static void clear(Table& t, u32 s) {
    t.area[s] = t.xmax[s] = t.ymax[s] = t.inf[s] = 0;
    t.xmin[s] = t.ymin[s] = 0xFFFFFFFFu;
    t.sumx[s] = t.sumy[s] = t.sumv[s] = t.vmax[s] = t.absmax[s] = 0;
    t.vmin[s] = ~0ull;
  }
  __device__ void to_table(Table& t, u32 s) const {
    atomicAdd(&t.area[s], area);
    atomicMin(&t.xmin[s], xmin);
    atomicMax(&t.xmax[s], xmax);
    atomicMin(&t.ymin[s], ymin);
    atomicMax(&t.ymax[s], ymax);
    atomicAdd(&t.sumx[s], sumx);
    atomicAdd(&t.sumy[s], sumy);
    atomicMin(&t.vmin[s], vmin);
    atomicMax(&t.vmax[s], vmax);
    if (is_float) {
      atomicMax(&t.absmax[s], absmax);
      if (inf) atomicOr(&t.inf[s], inf);
    } else {
      atomicAdd(&t.sumv[s], sumv);
    }
  }
  __device__ static void publish(u64* agg, u64 stride, u64 i, u32 area, u32 xmin, u32 xmax,
                                 u32 ymin, u32 ymax, u32 inf, u64 sumx, u64 sumy, u64 sumv,
                                 u64 vmin, u64 vmax, u64 absmax) {
    atomicAdd(&agg[GCCL_F_AREA * stride + i], (u64)area);
    atomicMin(&agg[GCCL_F_XMIN * stride + i], (u64)xmin);
    atomicMax(&agg[GCCL_F_XMAX * stride + i], (u64)xmax);
    atomicMin(&agg[GCCL_F_YMIN * stride + i], (u64)ymin);
    atomicMax(&agg[GCCL_F_YMAX * stride + i], (u64)ymax);
    atomicAdd(&agg[GCCL_F_SUMX * stride + i], sumx);
    atomicAdd(&agg[GCCL_F_SUMY * stride + i], sumy);
    atomicMin(&agg[GCCL_F_VMIN * stride + i], vmin);
    atomicMax(&agg[GCCL_F_VMAX * stride + i], vmax);
    if (is_float) {
      atomicMax(&agg[GCCL_F_ABSMAX * stride + i], absmax);
      if (inf) atomicOr(&agg[GCCL_F_INF * stride + i], (u64)inf);
    } else {
      atomicAdd(&agg[GCCL_F_SUMV * stride + i], sumv);
    }
  }
  __device__ void to_global(u64* agg, u64 stride, u64 i) const {
    publish(agg, stride, i, area, xmin, xmax, ymin, ymax, inf, sumx, sumy, sumv, vmin, vmax,
            absmax);
  }
  __device__ static void table_to_global(const Table& t, u32 s, u64* agg, u64 stride, u64 i) {
    publish(agg, stride, i, t.area[s], t.xmin[s], t.xmax[s], t.ymin[s], t.ymax[s], t.inf[s],
            t.sumx[s], t.sumy[s], t.sumv[s], t.vmin[s], t.vmax[s], t.absmax[s]);
  }
};

// Pass 2 (floats): sum of trunc(v * 2**shift) over finite v, shift from pass
// 1's area and largest |v| (the rule in ccl_cli/contract/stats.py).
template <typename T>
struct FloatSumAcc {
  struct Table {
    u32 key[GCCL_STATS_SLOTS];
    u64 sum[GCCL_STATS_SLOTS];
  };
  u32 label;
  int shift;
  u64 sum;

  __device__ void start(u32 l, u32 x, u32 y, T v, const u64* agg, u64 stride, u64 base) {
    label = l;
    const u64 i = base + l - 1;
    const u32 area = (u32)agg[GCCL_F_AREA * stride + i];
    int exponent;
    frexp(__longlong_as_double((i64)agg[GCCL_F_ABSMAX * stride + i]), &exponent);
    const int area_bits = area > 1 ? 32 - __clz(area - 1) : 0;
    shift = 62 - area_bits - exponent;
    sum = 0;
    add(x, y, v);
  }
  __device__ void add(u32, u32, T v) {
    const double d = (double)v;
    if (fabs(d) < __longlong_as_double(0x7FF0000000000000ll))
      sum += (u64)(i64)trunc(ldexp(d, shift));
  }
  __device__ void combine(const FloatSumAcc& o) { sum += o.sum; }
  __device__ FloatSumAcc shfl_down(u32 offset) const {
    FloatSumAcc o;
    o.label = __shfl_down_sync(GCCL_FULL_WARP, label, offset);
    o.sum = shfl_down_u64(sum, offset);
    return o;
  }
  __device__ static void clear(Table& t, u32 s) { t.sum[s] = 0; }
  __device__ void to_table(Table& t, u32 s) const { atomicAdd(&t.sum[s], sum); }
  __device__ void to_global(u64* agg, u64 stride, u64 i) const {
    atomicAdd(&agg[GCCL_F_SUMV * stride + i], sum);
  }
  __device__ static void table_to_global(const Table& t, u32 s, u64* agg, u64 stride, u64 i) {
    atomicAdd(&agg[GCCL_F_SUMV * stride + i], t.sum[s]);
  }
};

template <class Acc, typename T>
__device__ __forceinline__ void aggregate_chunk(const u32* labels, const T* values, u32 height,
                                                u32 width, u32 chunks_per_image,
                                                const u32* label_base, u64* agg, u64 stride) {
  __shared__ typename Acc::Table table;
  const BlockPlace place = block_place(chunks_per_image);
  const u32 pixels = height * width;
  const u64 image_base = (u64)place.image * pixels;
  const u32* L = labels + image_base;
  const T* V = values + image_base;
  const u64 base = label_base[place.image];
  clear_table<Acc>(table);

  const u32 start = place.index * GCCL_CHUNK + threadIdx.x * GCCL_CHUNK_ITEMS;
  const u32 count = start < pixels ? min((u32)GCCL_CHUNK_ITEMS, pixels - start) : 0;
  Acc first, other;
  first.label = other.label = 0;
  u32 y = count ? start / width : 0, x = count ? start - y * width : 0;
  auto visit = [&](u32 l, T v) {
    if (l == first.label) {
      first.add(x, y, v);
    } else if (first.label == 0) {
      first.start(l, x, y, v, agg, stride, base);
    } else if (l == other.label) {
      other.add(x, y, v);
    } else {
      if (other.label) flush(other, table, agg, stride, base);
      other.start(l, x, y, v, agg, stride, base);
    }
  };
  for (u32 i = 0; i < count; ++i) {
    const u32 l = L[start + i];
    if (l) visit(l, V[start + i]);
    if (++x == width) {
      x = 0;
      ++y;
    }
  }
  if (other.label) flush(other, table, agg, stride, base);

  flush_lanes(first, table, agg, stride, base);
  __syncthreads();
  publish_table<Acc>(table, agg, stride, base);
}

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

// gccl_<name>_<suffix>: aggregate_chunk with accumulator Acc over element type T.
#define GCCL_AGGREGATE_KERNEL(name, Acc, suffix, T)                                        \
  extern "C" __global__ void __launch_bounds__(GCCL_CHUNK_THREADS) gccl_##name##_##suffix( \
      const u32* labels, const T* values, u32 height, u32 width, u32 chunks_per_image,     \
      const u32* label_base, u64* agg, u64 stride) {                                       \
    aggregate_chunk<Acc<T>, T>(labels, values, height, width, chunks_per_image, label_base,\
                               agg, stride);                                               \
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
      int exponent;
      frexp(__longlong_as_double((long long)agg[GCCL_F_ABSMAX * stride + j]), &exponent);
      const int area_bits = area > 1 ? 64 - __clzll((long long)(area - 1)) : 0;
      const int shift = 62 - area_bits - exponent;
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
