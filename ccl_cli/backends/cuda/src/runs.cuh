// Row runs: the local phases' cheap first step, and the unions it saves.
//
// A tile row is one warp (32 lanes). Elements that join their left neighbour
// form runs; every element points at its run's first lane (run_head) without
// a single atomic. Of the upward edges (N, NW, NE) only those that connect
// runs not already connected through a neighbouring edge need a union; the
// tests below skip the others, always in favour of an edge further left or
// of the N edge, so no two skips lean on each other.
#pragma once
#include "common.cuh"

// One tile row's ballots: left = joins its left neighbour, up = joins the
// element above; above_left = the row above's `left`.
struct RowJoins {
  u32 left, up, above_left;
};

__device__ __forceinline__ bool row_bit(u32 bits, u32 lane) { return (bits >> lane) & 1u; }

// The row's ballots (above_left is filled in after the next barrier); lane 0
// stores `left` in left_rows[row] for the row below.
__device__ __forceinline__ RowJoins row_joins(bool join_left, bool join_up, u32 lane, u32 row,
                                              u32* left_rows) {
  RowJoins rows;
  rows.left = __ballot_sync(GCCL_FULL_WARP, join_left);
  rows.up = __ballot_sync(GCCL_FULL_WARP, join_up);
  rows.above_left = 0;
  if (lane == 0) left_rows[row] = rows.left;
  return rows;
}

// Lane of the first element of the run holding `lane`.
__device__ __forceinline__ u32 run_head(u32 left, u32 lane) {
  return 31 - __clz(~left & (0xFFFFFFFFu >> (31 - lane)));
}

// At each run's first lane: the smallest `value` of the run (other lanes get
// partial minima). Runs are contiguous, so a segmented shuffle reduction does.
__device__ __forceinline__ u32 run_min(u32 value, u32 left, u32 lane) {
  const u32 later_heads = ~left & ~(0xFFFFFFFFu >> (31 - lane));
  const u32 run_end = later_heads ? __ffs(later_heads) - 1 : 32;
  for (u32 offset = 1; offset < 32; offset <<= 1) {
    const u32 other = __shfl_down_sync(GCCL_FULL_WARP, value, offset);
    if (lane + offset < run_end) value = min(value, other);
  }
  return value;
}

// The root of every lane's run, found once per run (by its first lane).
__device__ __forceinline__ u32 run_root(u32* parent, u32 id, bool member, u32 head, u32 lane) {
  const u32 root = member && head == lane ? find_root(parent, id) : 0;
  return __shfl_sync(GCCL_FULL_WARP, root, head);
}

// N edge (given that it joins): redundant when both ends continue runs whose
// previous elements are joined vertically.
__device__ __forceinline__ bool need_up(const RowJoins& r, u32 lane) {
  return !(lane > 0 && row_bit(r.left, lane) && row_bit(r.above_left, lane) &&
           row_bit(r.up, lane - 1));
}

// NW edge (lane > 0, given that it joins).
__device__ __forceinline__ bool need_up_left(const RowJoins& r, u32 lane) {
  const bool via_left = row_bit(r.left, lane) && row_bit(r.up, lane - 1);
  const bool via_up = row_bit(r.up, lane) && row_bit(r.above_left, lane);
  return !(via_left || via_up);
}

// NE edge (lane < 31, given that it joins).
__device__ __forceinline__ bool need_up_right(const RowJoins& r, u32 lane) {
  const bool via_up = row_bit(r.up, lane) && row_bit(r.above_left, lane + 1);
  const bool via_right = row_bit(r.left, lane + 1) && row_bit(r.up, lane + 1);
  return !(via_up || via_right);
}
