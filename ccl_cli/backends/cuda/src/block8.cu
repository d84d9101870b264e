// Binary 8-connectivity, local phase: block-based union-find on 2x2 blocks.
//
// All foreground pixels of a 2x2 block are 8-connected, so a block is one
// node. One thread per block; a CUDA block covers a tile of B8_TBW x B8_TBH
// blocks, one warp per block row. Blocks join their left neighbour through row
// runs (runs.cuh), then the remaining upward edges in shared memory. A tile
// component is then named by the smallest raster index of its pixels (its
// first pixel), which every foreground pixel gets in L; the tile borders are
// joined afterwards by gccl_border_8_* (border.cu).
#include "common.cuh"
#include "dtypes.cuh"
#include "foreground.cuh"
#include "runs.cuh"

template <typename T>
__device__ __forceinline__ void block8_local(const T* values, u32* labels, u32 height,
                                             u32 width, u32 tiles_x, u32 tiles_per_image,
                                             const ForegroundRule& rule) {
  __shared__ u32 parent[GCCL_B8_TBW * GCCL_B8_TBH];
  __shared__ u32 first_pixel[GCCL_B8_TBW * GCCL_B8_TBH];
  __shared__ unsigned char masks[GCCL_B8_TBW * GCCL_B8_TBH];
  __shared__ u32 left_rows[GCCL_B8_TBH];
  const BlockPlace place = block_place(tiles_per_image);
  const u32 ty = place.index / tiles_x, tx = place.index - ty * tiles_x;
  const u32 bx = threadIdx.x, by = threadIdx.y, slot = by * GCCL_B8_TBW + bx;
  const u32 x0 = tx * GCCL_B8_TILE_W + 2 * bx, y0 = ty * GCCL_B8_TILE_H + 2 * by;
  const u64 image_base = (u64)place.image * height * width;
  const T* v = values + image_base;
  const bool inside = x0 < width && y0 < height;
  const bool right = x0 + 1 < width, below = y0 + 1 < height;
  const u32 row = y0 * width + x0;

  // Pixel mask: bit 0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right.
  u32 m = 0;
  if (inside) {
    m = is_foreground(v[row], rule);
    if (right) m |= (u32)is_foreground(v[row + 1], rule) << 1;
    if (below) {
      m |= (u32)is_foreground(v[row + width], rule) << 2;
      if (right) m |= (u32)is_foreground(v[row + width + 1], rule) << 3;
    }
  }
  masks[slot] = (unsigned char)m;
  first_pixel[slot] = GCCL_BACKGROUND;
  __syncthreads();

  const u32 m_left = bx > 0 ? masks[slot - 1] : 0;
  const u32 m_up = by > 0 ? masks[slot - GCCL_B8_TBW] : 0;
  RowJoins rows = row_joins((m & 5) && (m_left & 10), (m & 3) && (m_up & 12), bx, by, left_rows);
  const u32 head = run_head(rows.left, bx);
  parent[slot] = m ? by * GCCL_B8_TBW + head : GCCL_BACKGROUND;
  __syncthreads();

  if (m && by > 0) {
    rows.above_left = left_rows[by - 1];
    const u32 up = slot - GCCL_B8_TBW;
    if (row_bit(rows.up, bx) && need_up(rows, bx)) unite(parent, slot, up);
    if (bx > 0 && (m & 1) && (masks[up - 1] & 8) && need_up_left(rows, bx))
      unite(parent, slot, up - 1);
    if (bx + 1 < GCCL_B8_TBW && (m & 2) && (masks[up + 1] & 4) && need_up_right(rows, bx))
      unite(parent, slot, up + 1);
  }
  __syncthreads();

  // The component's id is its first pixel: the smallest tile-local raster key
  // of its blocks' first foreground pixels (raster order inside a block is
  // the bit order of m), gathered per run, then per root.
  const u32 root = run_root(parent, slot, m != 0, head, bx);
  u32 key = GCCL_BACKGROUND;
  if (m) {
    const u32 first = __ffs(m) - 1;
    key = (2 * by + (first >> 1)) * GCCL_B8_TILE_W + 2 * bx + (first & 1);
  }
  key = run_min(key, rows.left, bx);
  if (m && head == bx) atomicMin(&first_pixel[root], key);
  __syncthreads();

  if (!inside) return;
  u32 id = GCCL_BACKGROUND;
  if (m) {
    const u32 first_key = first_pixel[root];
    id = (ty * GCCL_B8_TILE_H + first_key / GCCL_B8_TILE_W) * width + tx * GCCL_B8_TILE_W +
         first_key % GCCL_B8_TILE_W;
  }
  u32* L = labels + image_base;
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
