// Volumes, local phase: union-find inside each tile of a batch of volumes (N, D, H, W).
//
// gccl_volume_local_<6|18|26>_<dtype> (voxel union-find in tau mode; binary volumes are
// labeled on cells, volume_cells.cu): a CUDA block covers a tile of VX_TILE_W x _H x _D
// voxels, one thread per voxel, one warp per tile row. Row runs form through a ballot
// (runs.cuh); every other backward edge inside the tile (volume.cuh's offsets: the row
// above in the plane and three rows of the plane before) is joined in shared memory
// unless an edge one voxel to its left already implies it:
//   (a) p joins its left neighbour p - 1 (same run) and the edge (p - 1, q) joins, or
//   (b) p and q both join their left neighbours and the edge (p - 1, q - 1) joins.
// Either way the voxel left of p settles the join, and that voxel's own edges are
// settled the same way further left, down to its run's first voxel, which skips none.
//
// L then holds, for every foreground voxel, the index of its tile component's first voxel
// (GCCL_BACKGROUND elsewhere); gccl_volume_border_* (volume_border.cu) joins the edges that
// leave the tiles.
#include "common.cuh"
#include "dtypes.cuh"
#include "foreground.cuh"
#include "runs.cuh"
#include "volume.cuh"

template <typename T, int CONN>
__device__ __forceinline__ void voxel_local(const T* values, u32* labels, u32 depth, u32 height,
                                            u32 width, u32 tiles_x, u32 tiles_y,
                                            u32 tiles_per_volume, const ForegroundRule& rule,
                                            const Tolerance& tolerance) {
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
  auto joins = [&](u32 a, u32 b) { return tau_joins(tile[a], tile[b], tolerance); };
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
                         tiles_per_volume, rule, tolerance);                                   \
  }
#define GCCL_VOLUME_LOCAL_KERNEL_6(suffix, T) GCCL_VOLUME_LOCAL_KERNEL(6, suffix, T)
#define GCCL_VOLUME_LOCAL_KERNEL_18(suffix, T) GCCL_VOLUME_LOCAL_KERNEL(18, suffix, T)
#define GCCL_VOLUME_LOCAL_KERNEL_26(suffix, T) GCCL_VOLUME_LOCAL_KERNEL(26, suffix, T)
GCCL_FOR_EACH_DTYPE(GCCL_VOLUME_LOCAL_KERNEL_6)
GCCL_FOR_EACH_DTYPE(GCCL_VOLUME_LOCAL_KERNEL_18)
GCCL_FOR_EACH_DTYPE(GCCL_VOLUME_LOCAL_KERNEL_26)
