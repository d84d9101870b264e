// Volumes, local phase: union-find inside each tile of a batch of volumes (N, D, H, W).
//
// gccl_volume_local_<6|18|26>_<dtype> (voxel union-find: every connectivity in tau
// mode, 6 and 18 in binary mode): a CUDA block covers a tile of VX_TILE_W x _H x _D
// voxels, one thread per voxel, one warp per tile row. Row runs form through a ballot
// (runs.cuh); every other backward edge inside the tile (volume.cuh's offsets: the row
// above in the plane and three rows of the plane before) is joined in shared memory
// unless an edge one voxel to its left already implies it:
//   (a) p joins its left neighbour p - 1 (same run) and the edge (p - 1, q) joins, or
//   (b) p and q both join their left neighbours and the edge (p - 1, q - 1) joins.
// Either way the voxel left of p settles the join, and that voxel's own edges are
// settled the same way further left, down to its run's first voxel, which skips none.
//
// gccl_volume_block26_<dtype> (binary 26-connectivity, the block-based union-find of
// Allegretti, Bolelli and Grana's BUF-3D): all foreground voxels of a 2x2x2 block are
// 26-connected, so a block is one node, an eighth of the voxels. Two neighbouring blocks
// join when each holds a foreground voxel on the side that faces the other (its face,
// edge or corner, side_mask): any two voxels so placed are 26-neighbours. One thread per
// block, a tile of B26_TBW x _TBH x _TBD blocks, rows, runs and the skips (a), (b) as
// above at block level; a tile component is then named by its first voxel in raster order
// (the smallest tile-local key of its blocks' first voxels), which every voxel gets.
//
// Either way L then holds, for every foreground voxel, the index of its tile component's
// first voxel (GCCL_BACKGROUND elsewhere); gccl_volume_border_* (volume_border.cu) joins
// the edges that leave the tiles.
#include "common.cuh"
#include "dtypes.cuh"
#include "foreground.cuh"
#include "runs.cuh"
#include "volume.cuh"

template <typename T, int CONN>
__device__ __forceinline__ void voxel_local(const T* values, u32* labels, u32 depth, u32 height,
                                            u32 width, u32 tiles_x, u32 tiles_y,
                                            u32 tiles_per_volume, const ForegroundRule& rule,
                                            int use_tau, const Tolerance& tolerance) {
  constexpr u32 TW = GCCL_VX_TILE_W, TH = GCCL_VX_TILE_H, TD = GCCL_VX_TILE_D;
  __shared__ u32 parent[TW * TH * TD];
  __shared__ T tile[TW * TH * TD];
  __shared__ u32 fg_rows[TH * TD], left_rows[TH * TD];
  const BlockPlace place = block_place(tiles_per_volume);
  const TilePlace t = tile_place(place.index, tiles_x, tiles_y);
  const u32 lx = threadIdx.x, ly = threadIdx.y, lz = threadIdx.z;
  const u32 row = lz * TH + ly, k = row * TW + lx;
  const u32 x = t.x * TW + lx, y = t.y * TH + ly, z = t.z * TD + lz;
  const u64 base = (u64)place.image * volume_voxels(depth, height, width);
  const bool inside = x < width && y < height && z < depth;
  const u32 p = inside ? (z * height + y) * width + x : 0;
  const T v = inside ? values[base + p] : T(0);
  const bool fg = inside && is_foreground(v, rule);
  const u32 fg_row = __ballot_sync(GCCL_FULL_WARP, fg);
  tile[k] = v;
  if (lx == 0) fg_rows[row] = fg_row;
  __syncthreads();

  // Whether the edge between tile slots a and b (both foreground) joins.
  auto joins = [&](u32 a, u32 b) { return !use_tau || tau_joins(tile[a], tile[b], tolerance); };
  const bool join_left = fg && lx > 0 && row_bit(fg_row, lx - 1) && joins(k, k - 1);
  const u32 left = __ballot_sync(GCCL_FULL_WARP, join_left);
  if (lx == 0) left_rows[row] = left;
  const u32 head = run_head(left, lx);
  parent[k] = fg ? row * TW + head : GCCL_BACKGROUND;
  __syncthreads();

  if (fg) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {  // the rows before: (0, -1), then (-1, -1), (-1, 0), (-1, 1)
      const int dz = r == 0 ? 0 : -1, dy = r == 0 ? -1 : r - 2;
      const int nz = (int)lz + dz, ny = (int)ly + dy;
      if (nz < 0 || ny < 0 || ny >= (int)TH) continue;  // outside the tile: the border's
      const u32 near_row = (u32)nz * TH + (u32)ny;
      const u32 near_fg = fg_rows[near_row], near_left = left_rows[near_row];
#pragma unroll
      for (int dx = -1; dx <= 1; ++dx) {
        if (!volume_neighbour<CONN>(dz, dy, dx)) continue;
        const int nx = (int)lx + dx;
        if (nx < 0 || nx >= (int)TW || !row_bit(near_fg, (u32)nx)) continue;
        const u32 q = near_row * TW + (u32)nx;
        if (!joins(k, q)) continue;
        if (row_bit(left, lx)) {
          if (dx < 1 && volume_neighbour<CONN>(dz, dy, dx + 1) && joins(k - 1, q)) continue;
          if (nx > 0 && row_bit(near_left, (u32)nx) && joins(k - 1, q - 1)) continue;
        }
        unite(parent, k, q);
      }
    }
  }
  __syncthreads();

  const u32 root = run_root(parent, k, fg, head, lx);
  if (!inside) return;
  u32 out = GCCL_BACKGROUND;
  if (fg) {
    const u32 rz = root / (TW * TH), ry = root / TW % TH, rx = root % TW;
    out = ((t.z * TD + rz) * height + t.y * TH + ry) * width + t.x * TW + rx;
  }
  labels[base + p] = out;
}

#define GCCL_VOLUME_LOCAL_KERNEL(conn, suffix, T)                                            \
  extern "C" __global__ void __launch_bounds__(GCCL_VX_TILE_W* GCCL_VX_TILE_H* GCCL_VX_TILE_D) \
      gccl_volume_local_##conn##_##suffix(const T* values, u32* labels, u32 depth, u32 height, \
                                          u32 width, u32 tiles_x, u32 tiles_y,                 \
                                          u32 tiles_per_volume, GCCL_RULE_PARAMS,              \
                                          GCCL_TAU_PARAMS) {                                   \
    const ForegroundRule rule = GCCL_RULE_MAKE;                                                \
    const Tolerance tolerance = GCCL_TAU_MAKE;                                                 \
    voxel_local<T, conn>(values, labels, depth, height, width, tiles_x, tiles_y,               \
                         tiles_per_volume, rule, use_tau, tolerance);                          \
  }
#define GCCL_VOLUME_LOCAL_KERNEL_6(suffix, T) GCCL_VOLUME_LOCAL_KERNEL(6, suffix, T)
#define GCCL_VOLUME_LOCAL_KERNEL_18(suffix, T) GCCL_VOLUME_LOCAL_KERNEL(18, suffix, T)
#define GCCL_VOLUME_LOCAL_KERNEL_26(suffix, T) GCCL_VOLUME_LOCAL_KERNEL(26, suffix, T)
GCCL_FOR_EACH_DTYPE(GCCL_VOLUME_LOCAL_KERNEL_6)
GCCL_FOR_EACH_DTYPE(GCCL_VOLUME_LOCAL_KERNEL_18)
GCCL_FOR_EACH_DTYPE(GCCL_VOLUME_LOCAL_KERNEL_26)

// The voxels of a 2x2x2 block that face a block at block offset (dz, dy, dx): bit
// (vz << 2) | (vy << 1) | vx is voxel (vx, vy, vz) of the block, bit order = raster order.
// Along an axis whose offset is 0 both layers face it, else the layer on its side (the
// block's own side when `own`, the neighbour's side of the neighbour otherwise: the
// neighbour at offset -1 shows its layer 1, at +1 its layer 0).
__device__ __forceinline__ u32 side_mask(int dz, int dy, int dx, bool own) {
  auto layers = [&](int d) -> u32 {  // bit c: layer c faces the other block
    if (d == 0) return 3u;
    return (d < 0) == own ? 1u : 2u;
  };
  const u32 lz = layers(dz), ly = layers(dy), lx = layers(dx);
  u32 mask = 0;
#pragma unroll
  for (u32 b = 0; b < 8; ++b) {
    if (((lz >> (b >> 2)) & 1u) && ((ly >> ((b >> 1) & 1u)) & 1u) && ((lx >> (b & 1u)) & 1u))
      mask |= 1u << b;
  }
  return mask;
}

// Whether blocks with masks `own` and `other`, the other at block offset (dz, dy, dx),
// hold 26-neighbouring foreground voxels.
__device__ __forceinline__ bool blocks_touch(u32 own, u32 other, int dz, int dy, int dx) {
  return (own & side_mask(dz, dy, dx, true)) && (other & side_mask(dz, dy, dx, false));
}

template <typename T>
__device__ __forceinline__ void block26_local(const T* values, u32* labels, u32 depth,
                                              u32 height, u32 width, u32 tiles_x, u32 tiles_y,
                                              u32 tiles_per_volume, const ForegroundRule& rule) {
  constexpr u32 BW = GCCL_B26_TBW, BH = GCCL_B26_TBH, BD = GCCL_B26_TBD;
  constexpr u32 TW = GCCL_B26_TILE_W, TH = GCCL_B26_TILE_H, TD = GCCL_B26_TILE_D;
  __shared__ u32 parent[BW * BH * BD];
  __shared__ u32 first_voxel[BW * BH * BD];
  __shared__ unsigned char masks[BW * BH * BD];
  __shared__ u32 left_rows[BH * BD];
  const BlockPlace place = block_place(tiles_per_volume);
  const TilePlace t = tile_place(place.index, tiles_x, tiles_y);
  const u32 bx = threadIdx.x, by = threadIdx.y, bz = threadIdx.z;
  const u32 row = bz * BH + by, slot = row * BW + bx;
  const u32 x0 = t.x * TW + 2 * bx, y0 = t.y * TH + 2 * by, z0 = t.z * TD + 2 * bz;
  const u64 base = (u64)place.image * volume_voxels(depth, height, width);
  const T* V = values + base;

  u32 m = 0;  // bit b: voxel (x0 + (b & 1), y0 + (b >> 1 & 1), z0 + (b >> 2)) is foreground
#pragma unroll
  for (u32 b = 0; b < 8; ++b) {
    const u32 x = x0 + (b & 1u), y = y0 + ((b >> 1) & 1u), z = z0 + (b >> 2);
    if (x < width && y < height && z < depth && is_foreground(V[(z * height + y) * width + x], rule))
      m |= 1u << b;
  }
  masks[slot] = (unsigned char)m;
  first_voxel[slot] = GCCL_BACKGROUND;
  __syncthreads();

  const bool join_left = m && bx > 0 && blocks_touch(m, masks[slot - 1], 0, 0, -1);
  const u32 left = __ballot_sync(GCCL_FULL_WARP, join_left);
  if (bx == 0) left_rows[row] = left;
  const u32 head = run_head(left, bx);
  parent[slot] = m ? row * BW + head : GCCL_BACKGROUND;
  __syncthreads();

  if (m) {
#pragma unroll
    for (int i = 1; i < GCCL_BACKWARD_OFFSETS; ++i) {  // i = 0, the left block: the runs
      int dz, dy, dx;
      backward_offset(i, dz, dy, dx);
      const int nz = (int)bz + dz, ny = (int)by + dy, nx = (int)bx + dx;
      if (nz < 0 || ny < 0 || ny >= (int)BH || nx < 0 || nx >= (int)BW) continue;
      const u32 near_row = (u32)nz * BH + (u32)ny, n = near_row * BW + (u32)nx;
      const u32 mn = masks[n];
      if (!blocks_touch(m, mn, dz, dy, dx)) continue;
      if (row_bit(left, bx)) {
        const u32 ml = masks[slot - 1];
        if (dx < 1 && blocks_touch(ml, mn, dz, dy, dx + 1)) continue;
        if (nx > 0 && row_bit(left_rows[near_row], (u32)nx) &&
            blocks_touch(ml, masks[n - 1], dz, dy, dx))
          continue;
      }
      unite(parent, slot, n);
    }
  }
  __syncthreads();

  // The component's id is its first voxel: the smallest tile-local raster key of its
  // blocks' first foreground voxels (raster order inside a block is the bit order of m),
  // gathered per run, then per root.
  const u32 root = run_root(parent, slot, m != 0, head, bx);
  u32 key = GCCL_BACKGROUND;
  if (m) {
    const u32 first = __ffs(m) - 1;
    key = ((2 * bz + (first >> 2)) * TH + 2 * by + ((first >> 1) & 1u)) * TW + 2 * bx +
          (first & 1u);
  }
  key = run_min(key, left, bx);
  if (m && head == bx) atomicMin(&first_voxel[root], key);
  __syncthreads();

  u32 id = GCCL_BACKGROUND;
  if (m) {
    const u32 first_key = first_voxel[root];
    const u32 fz = first_key / (TW * TH), fy = first_key / TW % TH, fx = first_key % TW;
    id = ((t.z * TD + fz) * height + t.y * TH + fy) * width + t.x * TW + fx;
  }
  u32* L = labels + base;
#pragma unroll
  for (u32 b = 0; b < 8; ++b) {
    const u32 x = x0 + (b & 1u), y = y0 + ((b >> 1) & 1u), z = z0 + (b >> 2);
    if (x < width && y < height && z < depth)
      L[(z * height + y) * width + x] = ((m >> b) & 1u) ? id : GCCL_BACKGROUND;
  }
}

#define GCCL_BLOCK26_KERNEL(suffix, T)                                                        \
  extern "C" __global__ void __launch_bounds__(GCCL_B26_TBW* GCCL_B26_TBH* GCCL_B26_TBD)     \
      gccl_volume_block26_##suffix(const T* values, u32* labels, u32 depth, u32 height,       \
                                   u32 width, u32 tiles_x, u32 tiles_y, u32 tiles_per_volume, \
                                   GCCL_RULE_PARAMS) {                                        \
    const ForegroundRule rule = GCCL_RULE_MAKE;                                               \
    block26_local<T>(values, labels, depth, height, width, tiles_x, tiles_y,                  \
                     tiles_per_volume, rule);                                                 \
  }
GCCL_FOR_EACH_DTYPE(GCCL_BLOCK26_KERNEL)
