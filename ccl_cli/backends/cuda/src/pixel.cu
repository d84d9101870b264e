// Pixel union-find, local phase: binary 4-connectivity and tau mode (4 and 8).
//
// A CUDA block covers a PX_TILE_W x PX_TILE_H tile, one thread per pixel and
// one warp per tile row. Row runs form through a ballot (runs.cuh); the
// upward edges that still matter are joined in shared memory (atomicMin
// union-find with path halving). In tau mode a pair joins only when tau_joins
// holds (under the tolerance); in binary mode every foreground pair joins. This is the grayscale
// paper's "local partition": the tile roots are the regions whose boundary
// edges gccl_border_* joins next, so the global union works on few region ids.
#include "common.cuh"
#include "dtypes.cuh"
#include "foreground.cuh"
#include "runs.cuh"

template <typename T, int CONN>
__device__ __forceinline__ void pixel_local(const T* values, u32* labels, u32 height, u32 width,
                                            u32 tiles_x, u32 tiles_per_image,
                                            const ForegroundRule& rule, int use_tau,
                                            const Tolerance& tolerance) {
  __shared__ u32 parent[GCCL_PX_TILE_W * GCCL_PX_TILE_H];
  __shared__ T tile[GCCL_PX_TILE_W * GCCL_PX_TILE_H];
  __shared__ u32 fg_rows[GCCL_PX_TILE_H], left_rows[GCCL_PX_TILE_H];
  const BlockPlace place = block_place(tiles_per_image);
  const u32 ty = place.index / tiles_x, tx = place.index - ty * tiles_x;
  const u32 lx = threadIdx.x, ly = threadIdx.y, k = ly * GCCL_PX_TILE_W + lx;
  const u32 x = tx * GCCL_PX_TILE_W + lx, y = ty * GCCL_PX_TILE_H + ly;
  const u64 image_base = (u64)place.image * height * width;
  const bool inside = x < width && y < height;
  const T v = inside ? values[image_base + y * width + x] : T(0);
  const bool fg = inside && is_foreground(v, rule);
  const u32 fg_row = __ballot_sync(GCCL_FULL_WARP, fg);
  tile[k] = v;
  if (lx == 0) fg_rows[ly] = fg_row;
  __syncthreads();

  auto joins = [&](u32 n) { return !use_tau || tau_joins(v, tile[n], tolerance); };
  const u32 fg_above = ly > 0 ? fg_rows[ly - 1] : 0;
  const bool join_left = fg && lx > 0 && row_bit(fg_row, lx - 1) && joins(k - 1);
  const bool join_up = fg && row_bit(fg_above, lx) && joins(k - GCCL_PX_TILE_W);
  RowJoins rows = row_joins(join_left, join_up, lx, ly, left_rows);
  const u32 head = run_head(rows.left, lx);
  parent[k] = fg ? ly * GCCL_PX_TILE_W + head : GCCL_BACKGROUND;
  __syncthreads();

  if (fg && ly > 0) {
    rows.above_left = left_rows[ly - 1];
    const u32 up = k - GCCL_PX_TILE_W;
    if (join_up && need_up(rows, lx)) unite(parent, k, up);
    if (CONN == 8) {
      if (lx > 0 && row_bit(fg_above, lx - 1) && joins(up - 1) && need_up_left(rows, lx))
        unite(parent, k, up - 1);
      if (lx + 1 < GCCL_PX_TILE_W && row_bit(fg_above, lx + 1) && joins(up + 1) &&
          need_up_right(rows, lx))
        unite(parent, k, up + 1);
    }
  }
  __syncthreads();

  const u32 root = run_root(parent, k, fg, head, lx);
  if (!inside) return;
  u32 out = GCCL_BACKGROUND;
  if (fg) {
    out = (ty * GCCL_PX_TILE_H + root / GCCL_PX_TILE_W) * width + tx * GCCL_PX_TILE_W +
          root % GCCL_PX_TILE_W;
  }
  labels[image_base + y * width + x] = out;
}

#define GCCL_PIXEL_KERNEL(conn, suffix, T)                                                    \
  extern "C" __global__ void __launch_bounds__(GCCL_PX_TILE_W* GCCL_PX_TILE_H)               \
      gccl_pixel_local_##conn##_##suffix(const T* values, u32* labels, u32 height, u32 width, \
                                         u32 tiles_x, u32 tiles_per_image, GCCL_RULE_PARAMS,  \
                                         GCCL_TAU_PARAMS) {                                   \
    const ForegroundRule rule = GCCL_RULE_MAKE;                                               \
    const Tolerance tolerance = GCCL_TAU_MAKE;                                                \
    pixel_local<T, conn>(values, labels, height, width, tiles_x, tiles_per_image, rule,       \
                         use_tau, tolerance);                                                 \
  }
#define GCCL_PIXEL_KERNEL_4(suffix, T) GCCL_PIXEL_KERNEL(4, suffix, T)
#define GCCL_PIXEL_KERNEL_8(suffix, T) GCCL_PIXEL_KERNEL(8, suffix, T)
GCCL_FOR_EACH_DTYPE(GCCL_PIXEL_KERNEL_4)
GCCL_FOR_EACH_DTYPE(GCCL_PIXEL_KERNEL_8)
