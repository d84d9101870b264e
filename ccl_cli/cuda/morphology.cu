// Binary erosion and dilation of a mask batch (N, H, W) of 0/1 bytes, one iteration.
//
// The element is the 3x3 cross (CONN 4) or square (CONN 8); pixels outside the
// image count as background (scipy.ndimage's border_value=0). A block reads
// its tile plus a one-pixel halo into shared memory once, then every thread
// writes GCCL_MORPH_ITEMS pixels of one row, 32 columns apart, so each store
// of a warp covers 32 consecutive bytes. N iterations are N launches with
// ping-pong buffers (ccl_cli/backends/cuda_stages.py).
#include "common.cuh"

#define GCCL_MORPH_THREADS_X 32
#define GCCL_MORPH_THREADS_Y 8
#define GCCL_MORPH_ITEMS 4  // columns per thread
#define GCCL_MORPH_ROWS 2   // rows per thread
#define GCCL_MORPH_TILE_W (GCCL_MORPH_THREADS_X * GCCL_MORPH_ITEMS)
#define GCCL_MORPH_TILE_H (GCCL_MORPH_THREADS_Y * GCCL_MORPH_ROWS)
#define GCCL_MORPH_HALO_W (GCCL_MORPH_TILE_W + 2)
#define GCCL_MORPH_HALO_H (GCCL_MORPH_TILE_H + 2)

template <bool ERODE, int CONN>
__device__ __forceinline__ void morph_tile(const unsigned char* in, unsigned char* out,
                                           u32 height, u32 width, u32 tiles_x,
                                           u32 tiles_per_image) {
  __shared__ unsigned char tile[GCCL_MORPH_HALO_H][GCCL_MORPH_HALO_W];
  const BlockPlace place = block_place(tiles_per_image);
  const u32 ty = place.index / tiles_x, tx = place.index - ty * tiles_x;
  const u32 y0 = ty * GCCL_MORPH_TILE_H, x0 = tx * GCCL_MORPH_TILE_W;
  const u64 image_base = (u64)place.image * height * width;
  const u32 thread = threadIdx.y * GCCL_MORPH_THREADS_X + threadIdx.x;
  for (u32 i = thread; i < GCCL_MORPH_HALO_H * GCCL_MORPH_HALO_W;
       i += GCCL_MORPH_THREADS_X * GCCL_MORPH_THREADS_Y) {
    const u32 r = i / GCCL_MORPH_HALO_W, c = i - r * GCCL_MORPH_HALO_W;
    // y0 + r - 1 and x0 + c - 1 wrap to 0xFFFFFFFF above/left of the image: outside.
    const u32 y = y0 + r - 1, x = x0 + c - 1;
    tile[r][c] = (y < height && x < width) ? in[image_base + (u64)y * width + x] : 0;
  }
  __syncthreads();
#pragma unroll
  for (u32 row = 0; row < GCCL_MORPH_ROWS; ++row) {
    const u32 r = threadIdx.y + row * GCCL_MORPH_THREADS_Y + 1;
    const u32 y = y0 + r - 1;
    if (y >= height) break;
#pragma unroll
    for (u32 item = 0; item < GCCL_MORPH_ITEMS; ++item) {
      const u32 c = threadIdx.x + item * GCCL_MORPH_THREADS_X + 1;
      const u32 x = x0 + c - 1;
      if (x >= width) break;
      unsigned char v = tile[r][c];
      const unsigned char cross[4] = {tile[r - 1][c], tile[r + 1][c], tile[r][c - 1],
                                      tile[r][c + 1]};
#pragma unroll
      for (int k = 0; k < 4; ++k) v = ERODE ? (v & cross[k]) : (v | cross[k]);
      if (CONN == 8) {
        const unsigned char corners[4] = {tile[r - 1][c - 1], tile[r - 1][c + 1],
                                          tile[r + 1][c - 1], tile[r + 1][c + 1]};
#pragma unroll
        for (int k = 0; k < 4; ++k) v = ERODE ? (v & corners[k]) : (v | corners[k]);
      }
      out[image_base + (u64)y * width + x] = v;
    }
  }
}

#define GCCL_MORPH_KERNEL(NAME, ERODE, CONN)                                              \
  extern "C" __global__ void __launch_bounds__(GCCL_MORPH_THREADS_X * GCCL_MORPH_THREADS_Y) \
      NAME(const unsigned char* in, unsigned char* out, u32 height, u32 width, u32 tiles_x, \
           u32 tiles_per_image) {                                                         \
    morph_tile<ERODE, CONN>(in, out, height, width, tiles_x, tiles_per_image);            \
  }

GCCL_MORPH_KERNEL(gccl_erode_4, true, 4)
GCCL_MORPH_KERNEL(gccl_erode_8, true, 8)
GCCL_MORPH_KERNEL(gccl_dilate_4, false, 4)
GCCL_MORPH_KERNEL(gccl_dilate_8, false, 8)
