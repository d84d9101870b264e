// Global phase of every labeling mode: join the edges that cross tile borders.
//
// After a local phase (block8.cu or pixel.cu) every foreground pixel of L
// points at its tile root. Each pixel edge appears once as a backward edge
// (W, N, and NW, NE for 8-connectivity) of its later pixel; the edges that
// leave a tile start at its top row (N, NW, NE), its left column (W, and NW
// below the top row) or its right column (NE below the top row). One thread
// per such pixel (tile_w + 2 * tile_h - 1 <= blockDim.x) joins them in global
// memory. Joining pixels rather than 2x2 blocks is also exact for block8.cu's
// tiles: any two 8-adjacent foreground pixels belong together.
#include "common.cuh"
#include "dtypes.cuh"
#include "foreground.cuh"

template <typename T, int CONN>
__device__ __forceinline__ void border_merge(const T* values, u32* labels, u32 height,
                                             u32 width, u32 tile_w, u32 tile_h, u32 tiles_x,
                                             u32 tiles_per_image, int use_tau,
                                             const Tolerance& tolerance) {
  const BlockPlace place = block_place(tiles_per_image);
  const u32 ty = place.index / tiles_x, tx = place.index - ty * tiles_x;
  const u32 j = threadIdx.x;
  u32 x, y;
  bool up = false, left = false, up_left = false, up_right = false;
  if (j < tile_w) {  // top row: every upward edge leaves the tile
    if (ty == 0) return;
    x = tx * tile_w + j;
    y = ty * tile_h;
    up = true;
    up_left = up_right = CONN == 8;
  } else if (j < tile_w + tile_h) {  // left column
    if (tx == 0) return;
    const u32 r = j - tile_w;
    x = tx * tile_w;
    y = ty * tile_h + r;
    left = true;
    up_left = CONN == 8 && r > 0;
  } else if (CONN == 8 && j < tile_w + 2 * tile_h - 1) {  // right column, below the top row
    x = tx * tile_w + tile_w - 1;
    y = ty * tile_h + (j - tile_w - tile_h + 1);
    up_right = true;
  } else {
    return;
  }
  if (x >= width || y >= height) return;
  const u64 image_base = (u64)place.image * height * width;
  u32* L = labels + image_base;
  const T* V = values + image_base;
  const u32 p = y * width + x;
  if (L[p] == GCCL_BACKGROUND) return;
  const T v = use_tau ? V[p] : T(0);
  auto link = [&](u32 q) {
    if (L[q] != GCCL_BACKGROUND && (!use_tau || tau_joins(v, V[q], tolerance))) unite(L, p, q);
  };
  if (left) link(p - 1);
  if (y > 0) {
    if (up) link(p - width);
    if (up_left && x > 0) link(p - width - 1);
    if (up_right && x + 1 < width) link(p - width + 1);
  }
}

#define GCCL_BORDER_KERNEL(conn, suffix, T)                                                  \
  extern "C" __global__ void gccl_border_##conn##_##suffix(                                  \
      const T* values, u32* labels, u32 height, u32 width, u32 tile_w, u32 tile_h,           \
      u32 tiles_x, u32 tiles_per_image, GCCL_TAU_PARAMS) {                                   \
    const Tolerance tolerance = GCCL_TAU_MAKE;                                               \
    border_merge<T, conn>(values, labels, height, width, tile_w, tile_h, tiles_x,            \
                          tiles_per_image, use_tau, tolerance);                              \
  }
#define GCCL_BORDER_KERNEL_4(suffix, T) GCCL_BORDER_KERNEL(4, suffix, T)
#define GCCL_BORDER_KERNEL_8(suffix, T) GCCL_BORDER_KERNEL(8, suffix, T)
GCCL_FOR_EACH_DTYPE(GCCL_BORDER_KERNEL_4)
GCCL_FOR_EACH_DTYPE(GCCL_BORDER_KERNEL_8)
