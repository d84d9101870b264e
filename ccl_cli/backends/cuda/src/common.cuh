// Shared types, constants and the union-find primitives of every gccl kernel.
//
// Labels live in a u32 array L with one slot per pixel, indexed by the pixel's
// raster index inside its own image (images are < 2^31 pixels; the image's base
// offset in the batch is 64-bit). During union-find L[p] is a parent pointer
// and every parent is <= its child, so a root is the smallest index of its tree:
// the component's first pixel in raster order. A background pixel holds
// GCCL_BACKGROUND. Once a root's rank inside its chunk is known it is stored as
// GCCL_ROOT_FLAG | rank, which readers treat as "this node is a root".
#pragma once

#include "geometry.cuh"

typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

#define GCCL_BACKGROUND 0xFFFFFFFFu
#define GCCL_ROOT_FLAG 0x80000000u
#define GCCL_FULL_WARP 0xFFFFFFFFu  // every lane of a warp, for the *_sync intrinsics

// Which image of the batch and which tile/chunk of it a CUDA block works on.
// Blocks are numbered image-major on grid x only (no 65535 limit of y/z).
struct BlockPlace {
  u32 image;
  u32 index;
};

__device__ __forceinline__ BlockPlace block_place(u32 blocks_per_image) {
  BlockPlace place;
  place.image = blockIdx.x / blocks_per_image;
  place.index = blockIdx.x - place.image * blocks_per_image;
  return place;
}

// Root of x (a self-parented or flagged node), halving the path on the way:
// x's parent becomes its grandparent. Safe beside concurrent unions and root
// flagging: every write lowers x's parent to an ancestor in the same set, a
// union that loses a race retries from the value it displaced, and roots are
// never written here.
__device__ __forceinline__ u32 find_root(u32* parent, u32 x) {
  u32 p = parent[x];
  while (p != x && !(p & GCCL_ROOT_FLAG)) {
    const u32 g = parent[p];
    if (g == p || (g & GCCL_ROOT_FLAG)) return p;
    atomicMin(&parent[x], g);  // an atomic, so racecheck sees no plain-write race
    x = g;
    p = parent[x];
  }
  return x;
}

// Join the trees of a and b: the larger root is hung under the smaller one
// with atomicMin, retrying when another thread re-parented it meanwhile.
__device__ __forceinline__ void unite(u32* parent, u32 a, u32 b) {
  while (true) {
    a = find_root(parent, a);
    b = find_root(parent, b);
    if (a == b) return;
    if (a > b) {
      const u32 t = a;
      a = b;
      b = t;
    }
    const u32 old = atomicMin(&parent[b], a);
    if (old == b) return;
    b = old;
  }
}

// A grid-stride loop over i = 0 .. count - 1: any grid covers any size, 64-bit indices.
#define GCCL_GRID_STRIDE(i, count)                                         \
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (count); \
       i += (u64)gridDim.x * blockDim.x)

// Inclusive prefix sum of `v` over the 32 lanes of a warp (all lanes must call).
__device__ __forceinline__ u32 warp_inclusive_sum(u32 v, u32 lane) {
  for (u32 d = 1; d < 32; d <<= 1) {
    const u32 y = __shfl_up_sync(GCCL_FULL_WARP, v, d);
    if (lane >= d) v += y;
  }
  return v;
}
