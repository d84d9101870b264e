// Volumes in tau mode, global phase: join the edges that leave the tiles of the local phase.
//
// After gccl_volume_local_* (volume_local.cu) every foreground voxel of L points at its tile
// component's first voxel. An edge is the backward offset of its later voxel p (volume.cuh);
// it leaves p's tile only where p lies on one of the faces the offset points through: the
// tile's first plane (dz = -1), its first or last row (dy = -1 or +1) or its first or last
// column (dx = -1 or +1). So one CUDA block per tile walks the tile's shell (its first
// plane, then the ring of first and last rows and columns of every later plane) and joins,
// in global memory, each backward edge of a shell voxel that leaves the tile where the two
// values join. Unlike binary mode (volume_cells.cu), no edge can be skipped for a path
// around it: a neighbour's neighbour may be out of reach.
#include "common.cuh"
#include "dtypes.cuh"
#include "foreground.cuh"
#include "volume.cuh"

template <typename T, int CONN>
__device__ __forceinline__ void volume_border(const T* values, u32* labels, u32 depth,
                                              u32 height, u32 width, u32 tile_w, u32 tile_h,
                                              u32 tile_d, u32 tiles_x, u32 tiles_y,
                                              u32 tiles_per_volume,
                                              const Tolerance& tolerance) {
  const BlockPlace place = block_place(tiles_per_volume);
  const TilePlace t = tile_place(place.index, tiles_x, tiles_y);
  const u64 base = (u64)place.image * volume_voxels(depth, height, width);
  u32* L = labels + base;
  const T* V = values + base;
  const u32 shell = shell_size(tile_w, tile_h, tile_d);  // volume.cuh
  for (u32 j = threadIdx.x; j < shell; j += blockDim.x) {
    u32 lx, ly, lz;
    shell_place(j, tile_w, tile_h, lx, ly, lz);
    const u32 x = t.x * tile_w + lx, y = t.y * tile_h + ly, z = t.z * tile_d + lz;
    if (x >= width || y >= height || z >= depth) continue;
    const u32 p = (z * height + y) * width + x;
    if (L[p] == GCCL_BACKGROUND) continue;
    const T v = V[p];
#pragma unroll
    for (int i = 0; i < GCCL_BACKWARD_OFFSETS; ++i) {
      int dz, dy, dx;
      backward_offset(i, dz, dy, dx);
      if (!volume_neighbour<CONN>(dz, dy, dx)) continue;
      const int nx = (int)lx + dx, ny = (int)ly + dy, nz = (int)lz + dz;
      if (nx >= 0 && nx < (int)tile_w && ny >= 0 && ny < (int)tile_h && nz >= 0)
        continue;  // inside the tile: the local phase joined it
      if ((dx < 0 && x == 0) || (dx > 0 && x + 1 >= width) || (dy < 0 && y == 0) ||
          (dy > 0 && y + 1 >= height) || (dz < 0 && z == 0))
        continue;  // outside the volume
      const u32 q = ((u32)((int)z + dz) * height + (u32)((int)y + dy)) * width +
                    (u32)((int)x + dx);
      if (L[q] == GCCL_BACKGROUND) continue;
      if (!tau_joins(v, V[q], tolerance)) continue;
      unite(L, p, q);
    }
  }
}

#define GCCL_VOLUME_BORDER_KERNEL(conn, suffix, T)                                             \
  extern "C" __global__ void __launch_bounds__(GCCL_VOLUME_BORDER_THREADS)                   \
      gccl_volume_border_##conn##_##suffix(const T* values, u32* labels, u32 depth,           \
                                           u32 height, u32 width, u32 tile_w, u32 tile_h,     \
                                           u32 tile_d, u32 tiles_x, u32 tiles_y,              \
                                           u32 tiles_per_volume, GCCL_TAU_PARAMS) {           \
    const Tolerance tolerance = GCCL_TAU_MAKE;                                                 \
    volume_border<T, conn>(values, labels, depth, height, width, tile_w, tile_h, tile_d,     \
                           tiles_x, tiles_y, tiles_per_volume, tolerance);                    \
  }
#define GCCL_VOLUME_BORDER_KERNEL_6(suffix, T) GCCL_VOLUME_BORDER_KERNEL(6, suffix, T)
#define GCCL_VOLUME_BORDER_KERNEL_18(suffix, T) GCCL_VOLUME_BORDER_KERNEL(18, suffix, T)
#define GCCL_VOLUME_BORDER_KERNEL_26(suffix, T) GCCL_VOLUME_BORDER_KERNEL(26, suffix, T)
GCCL_FOR_EACH_DTYPE(GCCL_VOLUME_BORDER_KERNEL_6)
GCCL_FOR_EACH_DTYPE(GCCL_VOLUME_BORDER_KERNEL_18)
GCCL_FOR_EACH_DTYPE(GCCL_VOLUME_BORDER_KERNEL_26)
