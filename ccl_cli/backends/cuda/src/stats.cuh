// The statistics passes of images (stats.cu) and volumes (volume_stats.cu): min/max as
// order keys of float64, the accumulators (StatsAcc, FloatSumAcc), the per-block hash
// table of accumulators and its way to global memory, and the walk of a block's chunk
// of elements (aggregate_chunk).
//
// An accumulator type Acc has a `label` (0: none), a shared-memory `Table` with a
// `key` array of GCCL_STATS_SLOTS labels, and start, add, to_table, to_global, combine,
// shfl_down, clear and table_to_global; StatsAcc is the model. Dims is 2 for images and 3
// for volumes, which add the z statistics and a 128-bit global sum of integer values.
#pragma once

#include "common.cuh"
#include "foreground.cuh"

#define GCCL_STATS_SLOTS 512
#define GCCL_STATS_PROBES 16

#define GCCL_INF_POS 1u
#define GCCL_INF_NEG 2u

// float64 -> u64 whose unsigned order is the numeric order (-0 < +0).
__device__ __forceinline__ u64 order_key(double d) {
  const u64 b = (u64)__double_as_longlong(d);
  return (b >> 63) ? ~b : b | 0x8000000000000000ull;
}

__device__ __forceinline__ u64 shfl_down_u64(u64 v, u32 offset) {
  return __shfl_down_sync(GCCL_FULL_WARP, v, offset);
}

__device__ __forceinline__ double from_order_key(u64 key) {
  return __longlong_as_double(
      (long long)((key >> 63) ? key & 0x7FFFFFFFFFFFFFFFull : ~key));
}

// Add acc to the block's table (or to global memory when no slot is free).
template <class Acc>
__device__ __forceinline__ void flush(const Acc& acc, typename Acc::Table& table, u64* agg,
                                      u64 stride, u64 base) {
  u32 h = (acc.label * 2654435761u) >> (32 - 9);  // 9 = log2(GCCL_STATS_SLOTS)
  for (u32 probe = 0; probe < GCCL_STATS_PROBES; ++probe) {
    const u32 k = atomicCAS(&table.key[h], 0u, acc.label);
    if (k == 0 || k == acc.label) {
      acc.to_table(table, h);
      return;
    }
    h = (h + 1) & (GCCL_STATS_SLOTS - 1);
  }
  acc.to_global(agg, stride, base + acc.label - 1);
}

// Every slot of the block's table free and its accumulator empty (then a barrier).
template <class Acc>
__device__ __forceinline__ void clear_table(typename Acc::Table& table) {
  for (u32 s = threadIdx.x; s < GCCL_STATS_SLOTS; s += blockDim.x) {
    table.key[s] = 0;
    Acc::clear(table, s);
  }
  __syncthreads();
}

// Each lane's `first` accumulator covers a run of consecutive elements: merge those of
// neighbouring lanes that hold the same label (a segmented shuffle reduction) and flush
// each segment's. Every lane of the warp must call.
template <class Acc>
__device__ __forceinline__ void flush_lanes(Acc& first, typename Acc::Table& table, u64* agg,
                                            u64 stride, u64 base) {
  const u32 lane = threadIdx.x & 31;
  const u32 previous = __shfl_up_sync(GCCL_FULL_WARP, first.label, 1);
  const bool head = lane == 0 || previous != first.label;
  const u32 later_heads = __ballot_sync(GCCL_FULL_WARP, head) & ~((2u << lane) - 1u);
  const u32 segment_end = later_heads ? __ffs(later_heads) - 1 : 32;
  for (u32 offset = 1; offset < 32; offset <<= 1) {
    const Acc o = first.shfl_down(offset);
    if (lane + offset < segment_end) first.combine(o);
  }
  if (head && first.label) flush(first, table, agg, stride, base);
}

// The block's table to global memory (after a barrier): column base + label - 1 of agg.
template <class Acc>
__device__ __forceinline__ void publish_table(const typename Acc::Table& table, u64* agg,
                                              u64 stride, u64 base) {
  for (u32 s = threadIdx.x; s < GCCL_STATS_SLOTS; s += blockDim.x) {
    const u32 k = table.key[s];
    if (k) Acc::table_to_global(table, s, agg, stride, base + k - 1);
  }
}

// The rows of the aggregate array (u64, one column per label) where the statistics go:
// stats.cu specializes it for images (Dims 2, its GCCL_F_* rows), volume_stats.cu for
// volumes (Dims 3, its GCCL_V_* rows, which add zmin, zmax, sumz and sumv_high).
template <int Dims>
struct StatsRows;

// An element's index inside its image or volume: u32 for images (< 2^31 pixels), u64 for
// volumes (any size).
template <int Dims>
struct ElementIndex {
  typedef u64 type;
};
template <>
struct ElementIndex<2> {
  typedef u32 type;
};

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

// The bits of n's binary form (0 for 0), in n's own width.
__device__ __forceinline__ int bit_length(u32 n) { return 32 - __clz((int)n); }
__device__ __forceinline__ int bit_length(u64 n) { return 64 - __clzll((i64)n); }

// The float-mean shift of a component (contract/stats.py's float_sum_shift) from its
// elements and largest finite |v| (float64 bits): 62 - bits(area - 1) - frexp exponent.
// Count: u32 where the area is known to fit (an image's), u64 otherwise.
template <typename Count>
__device__ __forceinline__ int float_mean_shift(Count area, u64 absmax) {
  int exponent;
  frexp(__longlong_as_double((i64)absmax), &exponent);
  const int area_bits = area > 1 ? bit_length(area - 1) : 0;
  return 62 - area_bits - exponent;
}

// StatsAcc's shared-memory table: the keys and a column per statistic, to which volumes
// add the z ones (images' table has none). The keys come first (offset 0): every probe
// of flush addresses them.
struct StatsColumns {
  u32 key[GCCL_STATS_SLOTS];
  u32 area[GCCL_STATS_SLOTS], xmin[GCCL_STATS_SLOTS], xmax[GCCL_STATS_SLOTS];
  u32 ymin[GCCL_STATS_SLOTS], ymax[GCCL_STATS_SLOTS], inf[GCCL_STATS_SLOTS];
  u64 sumx[GCCL_STATS_SLOTS], sumy[GCCL_STATS_SLOTS], sumv[GCCL_STATS_SLOTS];
  u64 vmin[GCCL_STATS_SLOTS], vmax[GCCL_STATS_SLOTS], absmax[GCCL_STATS_SLOTS];
};
template <int Dims>
struct StatsTable : StatsColumns {};
template <>
struct StatsTable<3> : StatsColumns {
  u32 zmin[GCCL_STATS_SLOTS], zmax[GCCL_STATS_SLOTS];
  u64 sumz[GCCL_STATS_SLOTS];
};

// Pass 1: elements, bounding box, coordinate sums, value sum (integers), min/max, and for
// floats the largest finite |v| and which infinities occur. A block's sums of values fit
// 64 bits (GCCL_CHUNK elements of at most 2^32 each); a volume's global ones are 128-bit
// (an image's fit 64: fewer than 2^31 pixels).
template <typename T, int Dims>
struct StatsAcc {
  static constexpr int dims = Dims;
  static constexpr bool is_float = ValueTraits<T>::is_float;
  typedef StatsRows<Dims> Rows;
  typedef StatsTable<Dims> Table;
  u32 label, area, xmin, xmax, ymin, ymax, zmin, zmax, inf;  // zmin, zmax, sumz: Dims 3
  u64 sumx, sumy, sumz, sumv, vmin, vmax, absmax;

  __device__ void start(u32 l, u32 x, u32 y, u32 z, T v, const u64*, u64, u64) {
    label = l;
    area = 0;
    xmin = ymin = 0xFFFFFFFFu;
    xmax = ymax = inf = 0;
    sumx = sumy = sumv = vmax = absmax = 0;
    vmin = ~0ull;
    if constexpr (Dims == 3) {
      zmin = 0xFFFFFFFFu;
      zmax = 0;
      sumz = 0;
    }
    add(x, y, z, v);
  }
  __device__ void add(u32 x, u32 y, u32 z, T v) {
    ++area;
    xmin = min(xmin, x);
    xmax = max(xmax, x);
    ymin = min(ymin, y);
    ymax = max(ymax, y);
    if constexpr (Dims == 3) {
      zmin = min(zmin, z);
      zmax = max(zmax, z);
    }
    sumx += x;
    sumy += y;
    if constexpr (Dims == 3) sumz += z;
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
    if constexpr (Dims == 3) {
      zmin = min(zmin, o.zmin);
      zmax = max(zmax, o.zmax);
      sumz += o.sumz;
    }
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
    if constexpr (Dims == 3) {
      o.zmin = __shfl_down_sync(GCCL_FULL_WARP, zmin, offset);
      o.zmax = __shfl_down_sync(GCCL_FULL_WARP, zmax, offset);
      o.sumz = shfl_down_u64(sumz, offset);
    }
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
    if constexpr (Dims == 3) {
      t.zmin[s] = 0xFFFFFFFFu;
      t.zmax[s] = 0;
      t.sumz[s] = 0;
    }
  }
  __device__ void to_table(Table& t, u32 s) const {
    atomicAdd(&t.area[s], area);
    atomicMin(&t.xmin[s], xmin);
    atomicMax(&t.xmax[s], xmax);
    atomicMin(&t.ymin[s], ymin);
    atomicMax(&t.ymax[s], ymax);
    if constexpr (Dims == 3) {
      atomicMin(&t.zmin[s], zmin);
      atomicMax(&t.zmax[s], zmax);
    }
    atomicAdd(&t.sumx[s], sumx);
    atomicAdd(&t.sumy[s], sumy);
    if constexpr (Dims == 3) atomicAdd(&t.sumz[s], sumz);
    atomicMin(&t.vmin[s], vmin);
    atomicMax(&t.vmax[s], vmax);
    if (is_float) {
      atomicMax(&t.absmax[s], absmax);
      if (inf) atomicOr(&t.inf[s], inf);
    } else {
      atomicAdd(&t.sumv[s], sumv);
    }
  }
  __device__ void to_global(u64* agg, u64 stride, u64 i) const {
    atomicAdd(&agg[Rows::area * stride + i], (u64)area);
    atomicMin(&agg[Rows::xmin * stride + i], (u64)xmin);
    atomicMax(&agg[Rows::xmax * stride + i], (u64)xmax);
    atomicMin(&agg[Rows::ymin * stride + i], (u64)ymin);
    atomicMax(&agg[Rows::ymax * stride + i], (u64)ymax);
    if constexpr (Dims == 3) {
      atomicMin(&agg[Rows::zmin * stride + i], (u64)zmin);
      atomicMax(&agg[Rows::zmax * stride + i], (u64)zmax);
    }
    atomicAdd(&agg[Rows::sumx * stride + i], sumx);
    atomicAdd(&agg[Rows::sumy * stride + i], sumy);
    if constexpr (Dims == 3) atomicAdd(&agg[Rows::sumz * stride + i], sumz);
    atomicMin(&agg[Rows::vmin * stride + i], vmin);
    atomicMax(&agg[Rows::vmax * stride + i], vmax);
    if (is_float) {
      atomicMax(&agg[Rows::absmax * stride + i], absmax);
      if (inf) atomicOr(&agg[Rows::inf * stride + i], (u64)inf);
    } else if constexpr (Dims == 3) {
      add_wide(&agg[Rows::sumv * stride + i], &agg[Rows::sumv_high * stride + i], (i64)sumv);
    } else {
      atomicAdd(&agg[Rows::sumv * stride + i], sumv);
    }
  }
  __device__ static void table_to_global(const Table& t, u32 s, u64* agg, u64 stride, u64 i) {
    StatsAcc a;
    a.area = t.area[s];
    a.xmin = t.xmin[s];
    a.xmax = t.xmax[s];
    a.ymin = t.ymin[s];
    a.ymax = t.ymax[s];
    if constexpr (Dims == 3) {
      a.zmin = t.zmin[s];
      a.zmax = t.zmax[s];
      a.sumz = t.sumz[s];
    }
    a.inf = t.inf[s];
    a.sumx = t.sumx[s];
    a.sumy = t.sumy[s];
    a.sumv = t.sumv[s];
    a.vmin = t.vmin[s];
    a.vmax = t.vmax[s];
    a.absmax = t.absmax[s];
    a.to_global(agg, stride, i);
  }
};

// Pass 2 (floats): sum of trunc(v * 2**shift) over finite v, the shift from the
// component's elements and largest finite |v| in `sizes` (rows Rows::area and
// Rows::absmax of `sizes_stride` columns, at the same columns as agg: pass 1's agg, or a
// volume slab labeling's sizes gathered beforehand).
template <typename T, int Dims>
struct FloatSumAcc {
  static constexpr int dims = Dims;
  typedef StatsRows<Dims> Rows;
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
    typedef typename ElementIndex<Dims>::type Count;  // an item's elements fit its index
    shift = float_mean_shift((Count)sizes[Rows::area * sizes_stride + i],
                             sizes[Rows::absmax * sizes_stride + i]);
    sum = 0;
    add(x, y, z, v);
  }
  __device__ void add(u32, u32, u32, T v) {
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
    atomicAdd(&agg[Rows::sumv * stride + i], sum);
  }
  __device__ static void table_to_global(const Table& t, u32 s, u64* agg, u64 stride, u64 i) {
    atomicAdd(&agg[Rows::sumv * stride + i], t.sum[s]);
  }
};

// One CUDA block per chunk of GCCL_CHUNK consecutive elements of an image (depth 1) or a
// volume (whose first plane is plane z0 of the whole: slab labeling), each thread
// GCCL_CHUNK_ITEMS of them with two running accumulators (its first label, usually the
// large component, and the latest other one). A warp merges the first-label accumulators
// of neighbouring lanes that share a label (flush_lanes), everything goes to the block's
// table, and the table to global memory once per block; a label that finds no free slot
// goes straight to global memory. The column of label l of item i is label_base[i] + l - 1.
template <class Acc, typename T>
__device__ __forceinline__ void aggregate_chunk(const u32* labels, const T* values, u32 depth,
                                                u32 height, u32 width, u32 z0,
                                                u32 chunks_per_item, const u32* label_base,
                                                u64* agg, u64 stride, const u64* sizes,
                                                u64 sizes_stride) {
  typedef typename ElementIndex<Acc::dims>::type Index;
  __shared__ typename Acc::Table table;
  const BlockPlace place = block_place(chunks_per_item);
  const Index elements = (Index)depth * height * width;
  const u64 item_base = (u64)place.image * elements;
  const u32* L = labels + item_base;
  const T* V = values + item_base;
  const u64 base = label_base[place.image];
  clear_table<Acc>(table);

  const Index start = (Index)place.index * GCCL_CHUNK + (Index)threadIdx.x * GCCL_CHUNK_ITEMS;
  const u32 count = start < elements ? (u32)min((Index)GCCL_CHUNK_ITEMS, elements - start) : 0;
  Acc first, other;
  first.label = other.label = 0;
  u32 x = 0, y = 0, z = 0;
  if constexpr (Acc::dims == 3) {
    const u64 plane = (u64)height * width;
    if (count) {
      const u64 zz = start / plane;
      const u64 rest = start - zz * plane;
      z = (u32)zz + z0;
      y = (u32)(rest / width);
      x = (u32)(rest - (u64)y * width);
    }
  } else {
    y = count ? start / width : 0;
    x = count ? start - y * width : 0;
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
      if constexpr (Acc::dims == 3) {
        if (++y == height) {
          y = 0;
          ++z;
        }
      } else {
        ++y;
      }
    }
  }
  if (other.label) flush(other, table, agg, stride, base);
  flush_lanes(first, table, agg, stride, base);
  __syncthreads();
  publish_table<Acc>(table, agg, stride, base);
}

// Identity values of every aggregate row: all ones for the minima, else 0.
template <int Dims>
__device__ __forceinline__ void init_aggregates(u64* agg, u64 stride) {
  typedef StatsRows<Dims> Rows;
  const u64 step = (u64)gridDim.x * blockDim.x;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < stride; i += step) {
    for (u32 f = 0; f < Rows::fields; ++f) {
      bool minimum = f == Rows::xmin || f == Rows::ymin || f == Rows::vmin;
      if constexpr (Dims == 3) minimum = minimum || f == Rows::zmin;
      agg[f * stride + i] = minimum ? ~0ull : 0ull;
    }
  }
}

// The columns of the statistics table: ints (area, the bounding box's corner and extent)
// then float64 (centroid, mean, min, max).
constexpr int stats_table_ints(int dims) { return 1 + 2 * dims; }
constexpr int stats_table_columns(int dims) { return stats_table_ints(dims) + dims + 3; }

// The batch item (image or volume) of batch label j: the last i with label_base[i] <= j.
__device__ __forceinline__ u32 item_of(const u32* label_base, u32 items, u64 j) {
  u32 lo = 0, hi = items;  // label_base[lo] <= j < label_base[hi]
  while (hi - lo > 1) {
    const u32 mid = (lo + hi) / 2;
    if (label_base[mid] <= j) lo = mid; else hi = mid;
  }
  return lo;
}

// The statistics table from the aggregates: ccl_cli/contract/stats.py's columns as 64-bit
// words, stats_table_columns(Dims) rows of `stride` (= labels in the batch), with that
// module's arithmetic (the CPU engine's), so the bits equal the CPU's:
//   area; x, y (, z); width, height (, depth): int64;
//   centroid_x, _y (, _z): float64(sum) / float64(area), one rounded division;
//   mean: integers float64(sum v) / area (a volume's 128-bit sum rounded to nearest, as C
//     converts an __int128); floats ldexp(float64(scaled sum), -s) / area with
//     s = float_mean_shift (float_sum_shift), then +inf, -inf or NaN where the component
//     holds infinities (float_mean);
//   min, max: float64 from their order keys;
//   a component holding a NaN (e.g. a hole's elements filled by --fill-holes) has mean,
//     min and max NaN.
// Only kept labels get a row: label j of item i goes to row kept_base[i] + kept_rank[j]
// where keep[j] (area filtering; the rank is area_filter.cu's), to row j when keep is
// null. The host copies these rows back instead of the aggregates and uses them as they are.
template <int Dims>
__device__ __forceinline__ void stats_table(const u64* agg, u64 stride, const u32* keep,
                                            const u32* kept_rank, const u32* label_base,
                                            const u32* kept_base, u32 items, int float_values,
                                            u64* table) {
  typedef StatsRows<Dims> Rows;
  const u64 step = (u64)gridDim.x * blockDim.x;
  for (u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x; j < stride; j += step) {
    if (keep && !keep[j]) continue;
    const u64 row = keep ? kept_base[item_of(label_base, items, j)] + kept_rank[j] : j;
    auto at = [&](u32 agg_row) { return agg[agg_row * stride + j]; };
    const u64 area = at(Rows::area);
    const double area_f = __ull2double_rn(area > 1 ? area : 1);
    const u64 sumv = at(Rows::sumv);
    double mean;
    if (float_values) {
      const int shift = float_mean_shift(area, at(Rows::absmax));
      mean = __ddiv_rn(ldexp(__ll2double_rn((i64)sumv), -shift), area_f);
      const u64 inf = at(Rows::inf);
      if (inf & GCCL_INF_POS) mean = __longlong_as_double(0x7FF0000000000000LL);
      if (inf & GCCL_INF_NEG) mean = __longlong_as_double((i64)0xFFF0000000000000ull);
      if ((inf & GCCL_INF_POS) && (inf & GCCL_INF_NEG))
        mean = __longlong_as_double(0x7FF8000000000000LL);
    } else if constexpr (Dims == 3) {
      const i64 high = (i64)at(Rows::sumv_high);
      mean = __ddiv_rn(wide_to_double(high, sumv), area_f);
    } else {
      mean = __ddiv_rn(__ll2double_rn((i64)sumv), area_f);
    }
    double v_min = from_order_key(at(Rows::vmin));
    double v_max = from_order_key(at(Rows::vmax));
    if (v_min != v_min || v_max != v_max)  // a NaN in the component (float_mean's rule)
      mean = v_min = v_max = __longlong_as_double(0x7FF8000000000000LL);
    const u64 xmin = at(Rows::xmin), ymin = at(Rows::ymin);
    u64* out = table + row;  // column c at out[c * stride]
    u64 c = 0;
    auto put = [&](u64 word) { out[c++ * stride] = word; };
    auto put_centroid = [&](u64 sum) {
      put((u64)__double_as_longlong(__ddiv_rn(__ll2double_rn((i64)sum), area_f)));
    };
    put(area);
    put(xmin);
    put(ymin);
    if constexpr (Dims == 3) put(at(Rows::zmin));
    put(at(Rows::xmax) - xmin + 1);
    put(at(Rows::ymax) - ymin + 1);
    if constexpr (Dims == 3) put(at(Rows::zmax) - at(Rows::zmin) + 1);
    put_centroid(at(Rows::sumx));
    put_centroid(at(Rows::sumy));
    if constexpr (Dims == 3) put_centroid(at(Rows::sumz));
    put((u64)__double_as_longlong(mean));
    put((u64)__double_as_longlong(v_min));
    put((u64)__double_as_longlong(v_max));
  }
}
