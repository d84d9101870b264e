// Volumes (D, H, W) = (z, y, x): the neighbourhoods of the volume connectivities and the
// places of the labeling kernels' tiles, shared by every volume kernel.
//
// A volume's voxels are indexed in raster order (z, then y, then x) as u32 inside the
// volume, which the host keeps below 2^31 for tau mode's voxel kernels and below 2^32 for
// the cells of binary volumes (volume_cells.cu), whose forest indexes cells (a larger
// volume is labeled in slabs: backends/cuda/volumes.py); a volume's base offset in its
// batch is 64-bit. The union-find of common.cuh then works on volumes unchanged: every
// parent is <= its child, so a root is its component's first voxel in raster order.
#pragma once

#include "common.cuh"

// Whether the voxels at offset (dz, dy, dx) (each -1, 0 or 1, not all 0) are neighbours
// under CONN: 6 share a face (one nonzero coordinate), 18 a face or an edge (at most two),
// 26 a face, an edge or a corner (scipy.ndimage.generate_binary_structure(3, 1 | 2 | 3)).
template <int CONN>
__device__ __forceinline__ bool volume_neighbour(int dz, int dy, int dx) {
  const int nonzero = (dz != 0) + (dy != 0) + (dx != 0);
  return nonzero <= (CONN == 6 ? 1 : CONN == 18 ? 2 : 3);
}

// The 13 offsets of the voxels before a voxel in raster order that can neighbour it:
// i = 0 is (0, 0, -1), 1..3 the row above in the same plane (0, -1, -1..1), 4..12 the
// three rows of the plane before (-1, -1..1, -1..1). Every edge of the voxel graph is the
// backward offset of its later end; loops over i are unrolled, so these are constants.
#define GCCL_BACKWARD_OFFSETS 13

__device__ __forceinline__ void backward_offset(int i, int& dz, int& dy, int& dx) {
  if (i == 0) {
    dz = 0, dy = 0, dx = -1;
  } else if (i < 4) {
    dz = 0, dy = -1, dx = i - 2;
  } else {
    dz = -1, dy = (i - 4) / 3 - 1, dx = (i - 4) % 3 - 1;
  }
}

// Which tile of its volume a CUDA block works on: tiles are numbered in raster order,
// tiles_x across, tiles_y down, then plane by plane (block_place gives the index).
struct TilePlace {
  u32 x, y, z;
};

__device__ __forceinline__ TilePlace tile_place(u32 index, u32 tiles_x, u32 tiles_y) {
  TilePlace t;
  const u32 plane = tiles_x * tiles_y;
  t.z = index / plane;
  const u32 rest = index - t.z * plane;
  t.y = rest / tiles_x;
  t.x = rest - t.y * tiles_x;
  return t;
}

// The shell of a tile of w x h x d elements (w, h >= 2), where every edge that leaves the
// tile starts (the backward offsets point through its first plane, its first or last row
// or its first or last column): the first plane's w h elements, then per later plane a
// ring of the first and last rows (w each) and the two end columns of the rows between.
// shell_size counts them; shell_place gives the tile-local place of the j-th.
__host__ __device__ constexpr u32 shell_size(u32 w, u32 h, u32 d) {
  return w * h + (d - 1) * (2 * w + 2 * (h - 2));
}

__device__ __forceinline__ void shell_place(u32 j, u32 w, u32 h, u32& x, u32& y, u32& z) {
  const u32 face = w * h, ring = 2 * w + 2 * (h - 2);
  if (j < face) {
    z = 0;
    y = j / w;
    x = j - y * w;
    return;
  }
  const u32 s = j - face;
  z = 1 + s / ring;
  const u32 r = s - (z - 1) * ring;
  if (r < w) {
    y = 0, x = r;
  } else if (r < 2 * w) {
    y = h - 1, x = r - w;
  } else {
    const u32 side = r - 2 * w;
    y = 1 + side / 2;
    x = (side & 1u) ? w - 1 : 0;
  }
}

// Voxels of one volume, as the 64-bit stride between the volumes of a batch.
__device__ __forceinline__ u64 volume_voxels(u32 depth, u32 height, u32 width) {
  return (u64)depth * height * width;
}
