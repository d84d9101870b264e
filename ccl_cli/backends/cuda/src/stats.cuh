// The pieces of the statistics passes that images (stats.cu) and volumes
// (volume_stats.cu) share: min/max as order keys of float64, the per-block hash table
// of accumulators and its way to global memory.
//
// An accumulator type Acc has a `label` (0: none), a shared-memory `Table` with a
// `key` array of GCCL_STATS_SLOTS labels, and to_table, to_global, combine, shfl_down,
// clear and table_to_global; stats.cu's StatsAcc is the model.
#pragma once

#include "common.cuh"

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
