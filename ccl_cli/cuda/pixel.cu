// Pixel union-find, local phase: binary 4-connectivity and tau mode (4 and 8).
//
// One thread per pixel; a CUDA block covers a PX_TILE_W x PX_TILE_H tile and
// joins each pixel with its backward neighbours inside the tile (W, N; NW, NE
// for 8) in shared memory. In tau mode a pair joins only when tau_joins holds;
// in binary mode every foreground pair joins. This is the grayscale paper's
// "local partition" step: the tile roots are the regions whose boundary edges
// gccl_border_* joins next, so the global union works on few region ids.
#include "common.cuh"
#include "dtypes.cuh"
#include "foreground.cuh"

#define GCCL_PX_TILE_W 32
#define GCCL_PX_TILE_H 32

template <typename T, int CONN>
__device__ __forceinline__ void pixel_local(const T* values, u32* labels, u32 height, u32 width,
                                            u32 tiles_x, u32 tiles_per_image,
                                            const ForegroundRule& rule, int use_tau,
                                            double tau) {
  __shared__ u32 parent[GCCL_PX_TILE_W * GCCL_PX_TILE_H];
  __shared__ T tile[GCCL_PX_TILE_W * GCCL_PX_TILE_H];
  const BlockPlace place = block_place(tiles_per_image);
  const u32 ty = place.index / tiles_x, tx = place.index - ty * tiles_x;
  const u32 lx = threadIdx.x, ly = threadIdx.y, k = ly * GCCL_PX_TILE_W + lx;
  const u32 x = tx * GCCL_PX_TILE_W + lx, y = ty * GCCL_PX_TILE_H + ly;
  const u64 image_base = (u64)place.image * height * width;
  const bool inside = x < width && y < height;
  const T v = inside ? values[image_base + y * width + x] : T(0);
  const bool fg = inside && is_foreground(v, rule);
  tile[k] = v;
  parent[k] = fg ? k : GCCL_BACKGROUND;
  __syncthreads();

  if (fg) {
    const IdentitySlot id;
    auto link = [&](u32 n) {
      if (parent[n] != GCCL_BACKGROUND && (!use_tau || tau_joins(v, tile[n], tau)))
        unite(parent, k, n, id);
    };
    if (lx > 0) link(k - 1);
    if (ly > 0) {
      link(k - GCCL_PX_TILE_W);
      if (CONN == 8) {
        if (lx > 0) link(k - GCCL_PX_TILE_W - 1);
        if (lx + 1 < GCCL_PX_TILE_W) link(k - GCCL_PX_TILE_W + 1);
      }
    }
  }
  __syncthreads();

  if (!inside) return;
  u32 out = GCCL_BACKGROUND;
  if (fg) {
    const u32 root = find_root(parent, k, IdentitySlot());
    out = (ty * GCCL_PX_TILE_H + root / GCCL_PX_TILE_W) * width + tx * GCCL_PX_TILE_W +
          root % GCCL_PX_TILE_W;
  }
  labels[image_base + y * width + x] = out;
}

#define GCCL_PIXEL_KERNEL(conn, suffix, T)                                                    \
  extern "C" __global__ void __launch_bounds__(GCCL_PX_TILE_W* GCCL_PX_TILE_H)               \
      gccl_pixel_local_##conn##_##suffix(const T* values, u32* labels, u32 height, u32 width, \
                                         u32 tiles_x, u32 tiles_per_image, GCCL_RULE_PARAMS,  \
                                         int use_tau, double tau) {                           \
    const ForegroundRule rule = GCCL_RULE_MAKE;                                               \
    pixel_local<T, conn>(values, labels, height, width, tiles_x, tiles_per_image, rule,       \
                         use_tau, tau);                                                       \
  }
#define GCCL_PIXEL_KERNEL_4(suffix, T) GCCL_PIXEL_KERNEL(4, suffix, T)
#define GCCL_PIXEL_KERNEL_8(suffix, T) GCCL_PIXEL_KERNEL(8, suffix, T)
GCCL_FOR_EACH_DTYPE(GCCL_PIXEL_KERNEL_4)
GCCL_FOR_EACH_DTYPE(GCCL_PIXEL_KERNEL_8)
