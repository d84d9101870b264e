// Binary 8-connectivity, local phase: block-based union-find on 2x2 blocks.
//
// All foreground pixels of a 2x2 block are 8-connected, so a block is one
// node. One thread per block; a CUDA block covers a tile of B8_TBW x B8_TBH
// blocks and joins them in shared memory with atomicMin. A block's node id is
// the tile-local raster key of its first foreground pixel, so the smallest id
// of a tile component is its first pixel and roots stay raster-first. Each
// foreground pixel then gets the image index of its tile root in L; the tile
// borders are joined afterwards by gccl_border_8_* (border.cu).
#include "common.cuh"
#include "dtypes.cuh"
#include "foreground.cuh"

#define GCCL_B8_TBW 32
#define GCCL_B8_TBH 16
#define GCCL_B8_TILE_W (2 * GCCL_B8_TBW)
#define GCCL_B8_TILE_H (2 * GCCL_B8_TBH)

// Shared-memory slot of a tile-local pixel key: the 2x2 block holding it.
struct Block8Slot {
  __device__ __forceinline__ u32 operator()(u32 key) const {
    return (key / (2 * GCCL_B8_TILE_W)) * GCCL_B8_TBW + (key % GCCL_B8_TILE_W) / 2;
  }
};

// Key of the first foreground pixel of the block at (bx, by) with pixel mask
// m (bit 0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right: raster order).
__device__ __forceinline__ u32 block8_key(u32 bx, u32 by, u32 m) {
  u32 first = __ffs(m) - 1;
  return (2 * by + (first >> 1)) * GCCL_B8_TILE_W + 2 * bx + (first & 1);
}

template <typename T>
__device__ __forceinline__ void block8_local(const T* values, u32* labels, u32 height,
                                             u32 width, u32 tiles_x, u32 tiles_per_image,
                                             const ForegroundRule& rule) {
  __shared__ u32 parent[GCCL_B8_TBW * GCCL_B8_TBH];
  __shared__ unsigned char masks[GCCL_B8_TBW * GCCL_B8_TBH];
  const BlockPlace place = block_place(tiles_per_image);
  const u32 ty = place.index / tiles_x, tx = place.index - ty * tiles_x;
  const u32 bx = threadIdx.x, by = threadIdx.y, slot = by * GCCL_B8_TBW + bx;
  const u32 x0 = tx * GCCL_B8_TILE_W + 2 * bx, y0 = ty * GCCL_B8_TILE_H + 2 * by;
  const u64 image_base = (u64)place.image * height * width;
  const T* v = values + image_base;
  u32* L = labels + image_base;
  const bool inside = x0 < width && y0 < height;
  const bool right = x0 + 1 < width, below = y0 + 1 < height;
  const u32 row = y0 * width + x0;

  u32 m = 0;
  if (inside) {
    m = is_foreground(v[row], rule);
    if (right) m |= (u32)is_foreground(v[row + 1], rule) << 1;
    if (below) {
      m |= (u32)is_foreground(v[row + width], rule) << 2;
      if (right) m |= (u32)is_foreground(v[row + width + 1], rule) << 3;
    }
  }
  const u32 key = m ? block8_key(bx, by, m) : GCCL_BACKGROUND;
  parent[slot] = key;
  masks[slot] = (unsigned char)m;
  __syncthreads();

  const Block8Slot to_slot;
  if (m) {
    // Backward neighbour blocks: left, top-left, top, top-right.
    if (bx > 0) {
      const u32 n = masks[slot - 1];
      if ((m & 5) && (n & 10)) unite(parent, key, block8_key(bx - 1, by, n), to_slot);
    }
    if (by > 0) {
      const u32 n = masks[slot - GCCL_B8_TBW];
      if ((m & 3) && (n & 12)) unite(parent, key, block8_key(bx, by - 1, n), to_slot);
      if (bx > 0) {
        const u32 d = masks[slot - GCCL_B8_TBW - 1];
        if ((m & 1) && (d & 8)) unite(parent, key, block8_key(bx - 1, by - 1, d), to_slot);
      }
      if (bx + 1 < GCCL_B8_TBW) {
        const u32 d = masks[slot - GCCL_B8_TBW + 1];
        if ((m & 2) && (d & 4)) unite(parent, key, block8_key(bx + 1, by - 1, d), to_slot);
      }
    }
  }
  __syncthreads();

  if (!inside) return;
  u32 id = GCCL_BACKGROUND;
  if (m) {
    const u32 root = find_root(parent, key, to_slot);
    id = (ty * GCCL_B8_TILE_H + root / GCCL_B8_TILE_W) * width + tx * GCCL_B8_TILE_W +
         root % GCCL_B8_TILE_W;
  }
  L[row] = (m & 1) ? id : GCCL_BACKGROUND;
  if (right) L[row + 1] = (m & 2) ? id : GCCL_BACKGROUND;
  if (below) {
    L[row + width] = (m & 4) ? id : GCCL_BACKGROUND;
    if (right) L[row + width + 1] = (m & 8) ? id : GCCL_BACKGROUND;
  }
}

#define GCCL_BLOCK8_KERNEL(suffix, T)                                                     \
  extern "C" __global__ void __launch_bounds__(GCCL_B8_TBW* GCCL_B8_TBH)                 \
      gccl_block8_local_##suffix(const T* values, u32* labels, u32 height, u32 width,     \
                                 u32 tiles_x, u32 tiles_per_image, GCCL_RULE_PARAMS) {    \
    const ForegroundRule rule = GCCL_RULE_MAKE;                                           \
    block8_local<T>(values, labels, height, width, tiles_x, tiles_per_image, rule);       \
  }
GCCL_FOR_EACH_DTYPE(GCCL_BLOCK8_KERNEL)
