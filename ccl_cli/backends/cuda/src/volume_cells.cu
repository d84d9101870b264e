// Binary volumes on cells (the block-based union-find of Allegretti, Bolelli and Grana's
// BUF-3D, for every connectivity): a cell of CELL_D x CELL_H x 2 voxels (z, y, x) whose
// foreground voxels are all connected under the connectivity, so the union-find works on
// cells from the tiles to the dense labels: 2x2x2 blocks for 26 (an eighth of the voxels),
// 1x2x2 squares for 18 (any two voxels of a square share a face or an edge), 1x1x2 pairs for
// 6 (geometry.cuh's GCCL_CELL_*):
//   gccl_volume_cells_local_<conn>_<dtype>: each cell's mask and the union-find in a tile;
//   gccl_volume_cells_border_<conn>: the joins between cells of neighbouring tiles;
//   gccl_volume_cells_roots_<conn>: each root's rank among the roots of its voxel row and
//     of the rows before it in its group of rows, and each group's count;
//   relabel.cu's gccl_segmented_scan: the groups' label offsets;
//   gccl_volume_cells_resolve_<conn>: every voxel's label.
//
// Cells are numbered in raster order over the cell grid of a volume (D / CELL_D, H /
// CELL_H, W / 2, rounded up; a cell past the volume's end holds its voxels inside it). Bit
// (vz * CELL_H + vy) * 2 + vx of masks[c] is voxel (vx, vy, vz) of cell c (bit order =
// raster order; bit >> 1 is the voxel row). The forest F[c]: GCCL_BACKGROUND for an empty
// cell, GCCL_ROOT_FLAG | key for a root, and otherwise the cell index of a parent whose key
// is smaller. A root's key places its component's first voxel: its voxel row (z * H + y)
// times the cells across plus its cell's column, which orders first voxels as raster order
// does (two roots' first voxels in one voxel row lie in different cells of it) and stays
// below 2^31 for volumes of up to 2^32 voxels (the host's limit of a volume in one piece:
// backends/cuda/volumes.py). A union hangs the root with the larger key under the other, so
// each component's root holds its first voxel whatever the order of cell indexes, and dense
// labels in raster order of first voxels follow from ranking the roots by voxel row.
#include "common.cuh"
#include "dtypes.cuh"
#include "foreground.cuh"
#include "runs.cuh"
#include "volume.cuh"

// The cell of a connectivity: D x H x 2 voxels, VOXELS mask bits, ROWS voxel rows.
template <int CONN>
struct Cell {
  static constexpr u32 D =
      CONN == 26 ? GCCL_CELL_D_26 : CONN == 18 ? GCCL_CELL_D_18 : GCCL_CELL_D_6;
  static constexpr u32 H =
      CONN == 26 ? GCCL_CELL_H_26 : CONN == 18 ? GCCL_CELL_H_18 : GCCL_CELL_H_6;
  static constexpr u32 ROWS = D * H;
  static constexpr u32 VOXELS = 2 * ROWS;
};

// Voxel (x, y, z) of a cell from its mask bit.
template <int CONN>
__device__ __forceinline__ void cell_voxel(u32 bit, u32& vx, u32& vy, u32& vz) {
  vx = bit & 1u, vy = (bit >> 1) % Cell<CONN>::H, vz = (bit >> 1) / Cell<CONN>::H;
}

// The cell grid of a volume.
struct CellGrid {
  u32 w, h, d;  // cells across, down and deep
};

template <int CONN>
__device__ __forceinline__ CellGrid cell_grid(u32 depth, u32 height, u32 width) {
  using C = Cell<CONN>;
  CellGrid g;
  g.w = (width + 1) / 2, g.h = (height + C::H - 1) / C::H, g.d = (depth + C::D - 1) / C::D;
  return g;
}

__device__ __forceinline__ u64 grid_cells(const CellGrid& g) { return (u64)g.d * g.h * g.w; }

// The voxels of a 2x2x2 block (CONN 26) that face a block at block offset (dz, dy, dx): bit
// (vz << 2) | (vy << 1) | vx is voxel (vx, vy, vz) of the block. Along an axis whose
// offset is 0 both layers face it, else the layer on its side (the block's own side when
// `own`, the neighbour's side of the neighbour otherwise: the neighbour at offset -1
// shows its layer 1, at +1 its layer 0).
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

// The voxels of the cell at cell offset (dz, dy, dx) that neighbour voxel `bit` of a cell.
template <int CONN>
__device__ __forceinline__ u32 reach(int dz, int dy, int dx, u32 bit) {
  using C = Cell<CONN>;
  u32 ix, iy, iz, mask = 0;
  cell_voxel<CONN>(bit, ix, iy, iz);
#pragma unroll
  for (u32 j = 0; j < C::VOXELS; ++j) {
    u32 jx, jy, jz;
    cell_voxel<CONN>(j, jx, jy, jz);
    const int ox = 2 * dx + (int)jx - (int)ix, oy = dy * (int)C::H + (int)jy - (int)iy,
              oz = dz * (int)C::D + (int)jz - (int)iz;
    if (ox >= -1 && ox <= 1 && oy >= -1 && oy <= 1 && oz >= -1 && oz <= 1 &&
        (ox != 0 || oy != 0 || oz != 0) && volume_neighbour<CONN>(oz, oy, ox))
      mask |= 1u << j;
  }
  return mask;
}

// Whether cells with masks `own` and `other`, the other at cell offset (dz, dy, dx), hold
// neighbouring foreground voxels. 2x2x2 blocks under 26 touch through any voxel of the
// facing sides (side_mask); the other cells voxel by voxel.
template <int CONN>
__device__ __forceinline__ bool cells_touch(u32 own, u32 other, int dz, int dy, int dx) {
  if constexpr (CONN == 26) {
    return (own & side_mask(dz, dy, dx, true)) && (other & side_mask(dz, dy, dx, false));
  } else {
    bool touch = false;
#pragma unroll
    for (u32 i = 0; i < Cell<CONN>::VOXELS; ++i)
      touch = touch || (((own >> i) & 1u) && (other & reach<CONN>(dz, dy, dx, i)));
    return touch;
  }
}

// Root of cell c in the forest F, and the root's word (GCCL_ROOT_FLAG | key or rank),
// halving the path on the way. Safe beside concurrent unions: only non-roots are written,
// each time to an ancestor, and a union only ever rewrites a root.
__device__ __forceinline__ u32 find_cell_root(u32* F, u32 c, u32& root_word) {
  u32 p = F[c];
  while (!(p & GCCL_ROOT_FLAG)) {
    const u32 g = F[p];
    if (g & GCCL_ROOT_FLAG) {
      root_word = g;
      return p;
    }
    F[c] = g;
    c = g;
    p = F[c];
  }
  root_word = p;
  return c;
}

// Join the trees of cells a and b: the root with the larger key goes under the other (a
// compare-and-swap on its root word), retrying when another thread re-parented it.
__device__ __forceinline__ void unite_cells(u32* F, u32 a, u32 b) {
  while (true) {
    u32 word_a, word_b;
    a = find_cell_root(F, a, word_a);
    b = find_cell_root(F, b, word_b);
    if (a == b) return;
    if (word_a > word_b) {  // both flagged: the larger word has the larger key
      const u32 t = a;
      a = b, b = t;
      const u32 w = word_a;
      word_a = word_b, word_b = w;
    }
    if (atomicCAS(&F[b], word_b, a) == word_b) return;
  }
}

// The local phase: one thread per cell, a tile of CELL_TBW x _TBH x _TBD cells, rows, runs
// and the skips of volume_local.cu at cell level (two neighbouring cells join when they
// touch: cells_touch). A tile component's root is the cell of its first voxel in raster
// order (the smallest tile-local key of its cells' first voxels), which every other cell of
// it gets as its parent.
template <typename T, int CONN>
__device__ __forceinline__ void cells_local(const T* values, u32* forest, unsigned char* masks,
                                            u32 depth, u32 height, u32 width, u32 tiles_x,
                                            u32 tiles_y, u32 tiles_per_volume,
                                            const ForegroundRule& rule) {
  using C = Cell<CONN>;
  constexpr u32 BW = GCCL_CELL_TBW, BH = GCCL_CELL_TBH, BD = GCCL_CELL_TBD;
  constexpr u32 TW = 2 * BW, TH = C::H * BH, TD = C::D * BD;  // the tile in voxels
  __shared__ u32 parent[BW * BH * BD];
  __shared__ u32 first_voxel[BW * BH * BD];
  __shared__ unsigned char tile_masks[BW * BH * BD];
  __shared__ u32 left_rows[BH * BD];
  const BlockPlace place = block_place(tiles_per_volume);
  const TilePlace t = tile_place(place.index, tiles_x, tiles_y);
  const CellGrid g = cell_grid<CONN>(depth, height, width);
  const u32 bx = threadIdx.x, by = threadIdx.y, bz = threadIdx.z;
  const u32 row = bz * BH + by, slot = row * BW + bx;
  const u32 gx = t.x * BW + bx, gy = t.y * BH + by, gz = t.z * BD + bz;
  const T* V = values + (u64)place.image * volume_voxels(depth, height, width);

  u32 m = 0;  // bit b: voxel cell_voxel(b) of the cell is foreground
#pragma unroll
  for (u32 b = 0; b < C::VOXELS; ++b) {
    u32 vx, vy, vz;
    cell_voxel<CONN>(b, vx, vy, vz);
    const u32 x = 2 * gx + vx, y = C::H * gy + vy, z = C::D * gz + vz;
    if (x < width && y < height && z < depth &&
        is_foreground(V[(z * height + y) * width + x], rule))
      m |= 1u << b;
  }
  tile_masks[slot] = (unsigned char)m;
  first_voxel[slot] = GCCL_BACKGROUND;
  __syncthreads();

  const bool join_left = m && bx > 0 && cells_touch<CONN>(m, tile_masks[slot - 1], 0, 0, -1);
  const u32 left = __ballot_sync(GCCL_FULL_WARP, join_left);
  if (bx == 0) left_rows[row] = left;
  const u32 head = run_head(left, bx);
  parent[slot] = m ? row * BW + head : GCCL_BACKGROUND;
  __syncthreads();

  if (m) {
#pragma unroll
    for (int i = 1; i < GCCL_BACKWARD_OFFSETS; ++i) {  // i = 0, the left cell: the runs
      int dz, dy, dx;
      backward_offset(i, dz, dy, dx);
      const int nz = (int)bz + dz, ny = (int)by + dy, nx = (int)bx + dx;
      if (nz < 0 || ny < 0 || ny >= (int)BH || nx < 0 || nx >= (int)BW) continue;
      const u32 near_row = (u32)nz * BH + (u32)ny, n = near_row * BW + (u32)nx;
      const u32 mn = tile_masks[n];
      if (!cells_touch<CONN>(m, mn, dz, dy, dx)) continue;
      if (row_bit(left, bx)) {
        const u32 ml = tile_masks[slot - 1];
        if (dx < 1 && cells_touch<CONN>(ml, mn, dz, dy, dx + 1)) continue;
        if (nx > 0 && row_bit(left_rows[near_row], (u32)nx) &&
            cells_touch<CONN>(ml, tile_masks[n - 1], dz, dy, dx))
          continue;
      }
      unite(parent, slot, n);
    }
  }
  __syncthreads();

  // The component's first voxel: the smallest tile-local raster key of its cells' first
  // foreground voxels (raster order inside a cell is the bit order of m), gathered per run,
  // then per root.
  const u32 root = run_root(parent, slot, m != 0, head, bx);
  u32 key = GCCL_BACKGROUND;
  if (m) {
    u32 vx, vy, vz;
    cell_voxel<CONN>(__ffs(m) - 1, vx, vy, vz);
    key = ((C::D * bz + vz) * TH + C::H * by + vy) * TW + 2 * bx + vx;
  }
  key = run_min(key, left, bx);
  if (m && head == bx) atomicMin(&first_voxel[root], key);
  __syncthreads();

  if (gx >= g.w || gy >= g.h || gz >= g.d) return;
  const u64 base = (u64)place.image * grid_cells(g);
  const u32 c = (gz * g.h + gy) * g.w + gx;
  u32 word = GCCL_BACKGROUND;
  if (m) {
    const u32 first_key = first_voxel[root];
    const u32 fz = first_key / (TW * TH), fy = first_key / TW % TH, fx = first_key % TW;
    const u32 root_cell =
        ((t.z * BD + fz / C::D) * g.h + t.y * BH + fy / C::H) * g.w + t.x * BW + fx / 2;
    const u32 key = ((t.z * TD + fz) * height + t.y * TH + fy) * g.w + t.x * BW + fx / 2;
    word = root_cell != c ? root_cell : GCCL_ROOT_FLAG | key;
  }
  forest[base + c] = word;
  masks[base + c] = (unsigned char)m;
}

#define GCCL_CELLS_LOCAL_KERNEL(conn, suffix, T)                                                \
  extern "C" __global__ void __launch_bounds__(GCCL_CELL_TBW* GCCL_CELL_TBH* GCCL_CELL_TBD)    \
      gccl_volume_cells_local_##conn##_##suffix(                                               \
          const T* values, u32* forest, unsigned char* masks, u32 depth, u32 height,           \
          u32 width, u32 tiles_x, u32 tiles_y, u32 tiles_per_volume, GCCL_RULE_PARAMS) {       \
    const ForegroundRule rule = GCCL_RULE_MAKE;                                                \
    cells_local<T, conn>(values, forest, masks, depth, height, width, tiles_x, tiles_y,        \
                         tiles_per_volume, rule);                                              \
  }
#define GCCL_CELLS_LOCAL_KERNEL_6(suffix, T) GCCL_CELLS_LOCAL_KERNEL(6, suffix, T)
#define GCCL_CELLS_LOCAL_KERNEL_18(suffix, T) GCCL_CELLS_LOCAL_KERNEL(18, suffix, T)
#define GCCL_CELLS_LOCAL_KERNEL_26(suffix, T) GCCL_CELLS_LOCAL_KERNEL(26, suffix, T)
GCCL_FOR_EACH_DTYPE(GCCL_CELLS_LOCAL_KERNEL_6)
GCCL_FOR_EACH_DTYPE(GCCL_CELLS_LOCAL_KERNEL_18)
GCCL_FOR_EACH_DTYPE(GCCL_CELLS_LOCAL_KERNEL_26)

// The joins between tiles: one CUDA block per tile walks the tile's shell of cells
// (volume.cuh's shell_place) and joins each backward cell offset that leaves the tile where
// the two cells p and q touch, less the edges another path settles through a cell r that
// touches both:
//   (a) r = p - 1, the cell to the left (same run: joined by the local phase), when the
//       edge (r, q) is a backward offset of r; it leaves r's tile too (through the first
//       plane or the first or last row, which r shares with p);
//   (b) r straight behind p (z - 1), for the other edges into the plane behind: r and q
//       are neighbours in that plane;
//   (c) r straight above p (y - 1), for the diagonals into the row above: r and q are
//       neighbours in that row.
// The skips are well founded: ordered by (z, y, x) of the later cell, with the straight
// edge of a place before its diagonals, (a) leans on an edge further left, (b) and (c) on
// a straight edge, which only (a) skips, and on an edge of an earlier plane or row.
template <int CONN>
__device__ __forceinline__ void cells_border(const unsigned char* masks, u32* forest, u32 depth,
                                             u32 height, u32 width, u32 tiles_x, u32 tiles_y,
                                             u32 tiles_per_volume) {
  constexpr u32 BW = GCCL_CELL_TBW, BH = GCCL_CELL_TBH, BD = GCCL_CELL_TBD;
  const BlockPlace place = block_place(tiles_per_volume);
  const TilePlace t = tile_place(place.index, tiles_x, tiles_y);
  const CellGrid g = cell_grid<CONN>(depth, height, width);
  const u64 base = (u64)place.image * grid_cells(g);
  const unsigned char* M = masks + base;
  u32* F = forest + base;
  constexpr u32 shell = shell_size(BW, BH, BD);
  for (u32 j = threadIdx.x; j < shell; j += blockDim.x) {
    u32 bx, by, bz;
    shell_place(j, BW, BH, bx, by, bz);
    const u32 gx = t.x * BW + bx, gy = t.y * BH + by, gz = t.z * BD + bz;
    if (gx >= g.w || gy >= g.h || gz >= g.d) continue;
    const u32 c = (gz * g.h + gy) * g.w + gx;
    const u32 m = M[c];
    if (!m) continue;
    const u32 ml = bx > 0 ? M[c - 1] : 0;
    const u32 mb = gz > 0 ? M[c - g.h * g.w] : 0;
    const u32 ma = gy > 0 ? M[c - g.w] : 0;
    const bool left_joins = cells_touch<CONN>(m, ml, 0, 0, -1);
    const bool behind_joins = cells_touch<CONN>(m, mb, -1, 0, 0);
    const bool above_joins = cells_touch<CONN>(m, ma, 0, -1, 0);
#pragma unroll
    for (int i = 0; i < GCCL_BACKWARD_OFFSETS; ++i) {
      int dz, dy, dx;
      backward_offset(i, dz, dy, dx);
      const int nx = (int)bx + dx, ny = (int)by + dy, nz = (int)bz + dz;
      if (nx >= 0 && nx < (int)BW && ny >= 0 && ny < (int)BH && nz >= 0)
        continue;  // inside the tile: the local phase joined it
      if ((dx < 0 && gx == 0) || (dx > 0 && gx + 1 >= g.w) || (dy < 0 && gy == 0) ||
          (dy > 0 && gy + 1 >= g.h) || (dz < 0 && gz == 0))
        continue;  // outside the volume
      const u32 n = ((u32)((int)gz + dz) * g.h + (u32)((int)gy + dy)) * g.w + (u32)((int)gx + dx);
      const u32 mn = M[n];
      if (!cells_touch<CONN>(m, mn, dz, dy, dx)) continue;
      if (dx < 1 && left_joins && cells_touch<CONN>(ml, mn, dz, dy, dx + 1)) continue;
      if (dz < 0 && (dy != 0 || dx != 0) && behind_joins &&
          cells_touch<CONN>(mb, mn, 0, dy, dx))
        continue;
      if (dz == 0 && dy < 0 && dx != 0 && above_joins && cells_touch<CONN>(ma, mn, 0, 0, dx))
        continue;
      unite_cells(F, c, n);
    }
  }
}

// The rows of cells of a volume in groups of GCCL_CELL_ROW_WARPS consecutive rows of one
// plane of cells (`groups_per_plane` per plane), a CUDA block per group, a warp per row.
struct CellRow {
  u32 image, bz, by, group;  // group: the group's number in its plane
  bool inside;
};

__device__ __forceinline__ CellRow cell_row(const CellGrid& g, u32 groups_per_plane) {
  const BlockPlace place = block_place(g.d * groups_per_plane);
  CellRow r;
  r.image = place.image;
  r.bz = place.index / groups_per_plane;
  r.group = place.index - r.bz * groups_per_plane;
  r.by = r.group * GCCL_CELL_ROW_WARPS + (threadIdx.x >> 5);
  r.inside = r.by < g.h;
  return r;
}

// Which of the cell's voxel rows (vz * CELL_H + vy) holds its first voxel.
__device__ __forceinline__ u32 first_row(u32 mask) { return (__ffs(mask) - 1) >> 1; }

// The voxel rows (z, y) of a volume's cell grid (z < CELL_D * g.d, y < CELL_H * g.h), in
// raster order.
template <int CONN>
__device__ __forceinline__ u32 voxel_row(const CellGrid& g, u32 bz, u32 by, u32 sub_row) {
  using C = Cell<CONN>;
  return (C::D * bz + sub_row / C::H) * (C::H * g.h) + C::H * by + sub_row % C::H;
}

// A group's voxel rows of one plane (vz) follow each other in raster order: their roots
// form one run of the ranking, whose count is run_counts[(CELL_D * bz + vz) *
// groups_per_plane + group] (in raster order too).
template <int CONN>
__device__ __forceinline__ u32 group_run(u32 bz, u32 vz, u32 group, u32 groups_per_plane) {
  return (Cell<CONN>::D * bz + vz) * groups_per_plane + group;
}

// Ranks the roots: each root's rank among the roots whose first voxel lies in its voxel row
// (in x order, that is cell order) is stored as GCCL_ROOT_FLAG | rank; row_starts gets each
// voxel row's count of roots before it in its group's run, run_counts each run's count
// (CELL_D * g.d * groups_per_plane per volume), whose scan gives the runs' label offsets.
template <int CONN>
__device__ __forceinline__ void cells_roots(u32* forest, const unsigned char* masks, u32 depth,
                                            u32 height, u32 width, u32 groups_per_plane,
                                            u32* row_starts, u32* run_counts) {
  using C = Cell<CONN>;
  __shared__ u32 warp_counts[GCCL_CELL_ROW_WARPS][C::ROWS];
  const CellGrid g = cell_grid<CONN>(depth, height, width);
  const CellRow r = cell_row(g, groups_per_plane);
  const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5, before = (1u << lane) - 1;
  u32 counts[C::ROWS];
#pragma unroll
  for (u32 s = 0; s < C::ROWS; ++s) counts[s] = 0;
  if (r.inside) {
    const u64 row_start = (u64)r.image * grid_cells(g) + (u64)(r.bz * g.h + r.by) * g.w;
    for (u32 x0 = 0; x0 < g.w; x0 += 32) {
      const u32 bx = x0 + lane;
      const u32 word = bx < g.w ? forest[row_start + bx] : GCCL_BACKGROUND;
      const bool root = word != GCCL_BACKGROUND && (word & GCCL_ROOT_FLAG);
      const u32 sub = root ? first_row(masks[row_start + bx]) : C::ROWS;
      u32 rank = 0;
#pragma unroll
      for (u32 s = 0; s < C::ROWS; ++s) {
        const u32 ballot = __ballot_sync(GCCL_FULL_WARP, sub == s);
        if (sub == s) rank = counts[s] + __popc(ballot & before);
        counts[s] += __popc(ballot);
      }
      if (root) forest[row_start + bx] = GCCL_ROOT_FLAG | rank;
    }
  }
  if (lane == 0) {
#pragma unroll
    for (u32 s = 0; s < C::ROWS; ++s) warp_counts[warp][s] = counts[s];
  }
  __syncthreads();
  // Lanes 0 .. ROWS - 1 of each warp: the roots of its rows' runs before the row.
  if (lane < C::ROWS) {
    const u32 vz = lane / C::H, vy = lane % C::H, first = vz * C::H;
    u32 start = 0;
    for (u32 s = first; s < lane; ++s) start += warp_counts[warp][s];
    for (u32 w = 0; w < warp; ++w)
      for (u32 s = first; s < first + C::H; ++s) start += warp_counts[w][s];
    if (r.inside)
      row_starts[(u64)r.image * C::ROWS * g.d * g.h + voxel_row<CONN>(g, r.bz, r.by, lane)] =
          start;
    if (warp == GCCL_CELL_ROW_WARPS - 1 && vy == 0) {
      u32 total = start;
      for (u32 s = first; s < first + C::H; ++s) total += warp_counts[warp][s];
      run_counts[(u64)r.image * C::D * g.d * groups_per_plane +
                 group_run<CONN>(r.bz, vz, r.group, groups_per_plane)] = total;
    }
  }
}

// Every voxel's label: 0 off the components, else its root's run offset (the scan of
// run_counts) + the roots before its row in the run + its rank in the row + 1; one thread
// per cell writes the cell's voxels.
template <int CONN>
__device__ __forceinline__ void cells_resolve(u32* forest, const unsigned char* masks, u32* out,
                                              u32 depth, u32 height, u32 width,
                                              u32 groups_per_plane, const u32* row_starts,
                                              const u32* run_offsets) {
  using C = Cell<CONN>;
  const CellGrid g = cell_grid<CONN>(depth, height, width);
  const CellRow r = cell_row(g, groups_per_plane);
  if (!r.inside) return;
  const u64 base = (u64)r.image * grid_cells(g);
  const u32 row_start = (r.bz * g.h + r.by) * g.w;
  u32* F = forest + base;
  const unsigned char* M = masks + base;
  const u32* starts = row_starts + (u64)r.image * C::ROWS * g.d * g.h;
  const u32* offsets = run_offsets + (u64)r.image * C::D * g.d * groups_per_plane;
  u32* O = out + (u64)r.image * volume_voxels(depth, height, width);
  for (u32 bx = threadIdx.x & 31; bx < g.w; bx += 32) {
    const u32 m = M[row_start + bx];
    u32 label = 0;
    if (m) {
      u32 word;
      const u32 root = find_cell_root(F, row_start + bx, word);
      const u32 rz = root / (g.h * g.w), ry = root / g.w - rz * g.h, sub = first_row(M[root]);
      label = offsets[group_run<CONN>(rz, sub / C::H, ry / GCCL_CELL_ROW_WARPS,
                                      groups_per_plane)] +
              starts[voxel_row<CONN>(g, rz, ry, sub)] + (word & ~GCCL_ROOT_FLAG) + 1;
    }
#pragma unroll
    for (u32 s = 0; s < C::ROWS; ++s) {
      const u32 z = C::D * r.bz + s / C::H, y = C::H * r.by + s % C::H, x = 2 * bx;
      if (z >= depth || y >= height) continue;
      u32* line = O + ((u64)z * height + y) * width;
      line[x] = (m >> (2 * s)) & 1u ? label : 0;
      if (x + 1 < width) line[x + 1] = (m >> (2 * s + 1)) & 1u ? label : 0;
    }
  }
}

#define GCCL_CELLS_KERNELS(conn)                                                                \
  extern "C" __global__ void __launch_bounds__(GCCL_VOLUME_BORDER_THREADS)                    \
      gccl_volume_cells_border_##conn(const unsigned char* masks, u32* forest, u32 depth,      \
                                      u32 height, u32 width, u32 tiles_x, u32 tiles_y,         \
                                      u32 tiles_per_volume) {                                  \
    cells_border<conn>(masks, forest, depth, height, width, tiles_x, tiles_y,                  \
                       tiles_per_volume);                                                      \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(GCCL_CELL_ROW_WARPS * 32)                      \
      gccl_volume_cells_roots_##conn(u32* forest, const unsigned char* masks, u32 depth,       \
                                     u32 height, u32 width, u32 groups_per_plane,              \
                                     u32* row_starts, u32* run_counts) {                       \
    cells_roots<conn>(forest, masks, depth, height, width, groups_per_plane, row_starts,       \
                      run_counts);                                                             \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(GCCL_CELL_ROW_WARPS * 32)                      \
      gccl_volume_cells_resolve_##conn(u32* forest, const unsigned char* masks, u32* out,      \
                                       u32 depth, u32 height, u32 width,                       \
                                       u32 groups_per_plane, const u32* row_starts,            \
                                       const u32* run_offsets) {                               \
    cells_resolve<conn>(forest, masks, out, depth, height, width, groups_per_plane,            \
                        row_starts, run_offsets);                                              \
  }
GCCL_CELLS_KERNELS(6)
GCCL_CELLS_KERNELS(18)
GCCL_CELLS_KERNELS(26)
