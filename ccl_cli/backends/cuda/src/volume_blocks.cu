// Volumes, binary 26-connectivity on 2x2x2 blocks (the block-based union-find of
// Allegretti, Bolelli and Grana's BUF-3D): all foreground voxels of a 2x2x2 block are
// 26-connected, so the union-find works on blocks, an eighth of the voxels, from the
// tiles to the dense labels:
//   gccl_volume_block26_<dtype>: each block's mask and the union-find inside a tile;
//   gccl_volume_block_border: the joins between blocks of neighbouring tiles;
//   gccl_volume_block_roots: each root's rank among the roots of its voxel row and of the
//     rows before it in its group of rows, and each group's count;
//   relabel.cu's gccl_segmented_scan: the groups' label offsets;
//   gccl_volume_block_resolve: every voxel's label.
//
// Blocks are numbered in raster order over the block grid of a volume (D/2, H/2, W/2,
// rounded up; a block past the volume's end holds its voxels inside it). masks[b] bit
// (vz << 2) | (vy << 1) | vx is voxel (vx, vy, vz) of block b (bit order = raster order).
// The forest F[b]: GCCL_BACKGROUND for an empty block, GCCL_ROOT_FLAG | key for a root,
// key = the raster index in the volume of its component's first voxel (below 2^31), and
// otherwise the block index of a parent whose key is smaller. A union hangs the root with
// the larger key under the other, so each component's root holds its first voxel
// whatever the order of block indices, and dense labels in raster order of first voxels
// follow from ranking the roots by voxel row.
#include "common.cuh"
#include "dtypes.cuh"
#include "foreground.cuh"
#include "runs.cuh"
#include "volume.cuh"

// The block grid of a volume and a volume's offset in a batch's block arrays.
struct BlockGrid {
  u32 w, h, d;  // blocks across, down and deep
};

__device__ __forceinline__ BlockGrid block_grid(u32 depth, u32 height, u32 width) {
  BlockGrid g;
  g.w = (width + 1) / 2, g.h = (height + 1) / 2, g.d = (depth + 1) / 2;
  return g;
}

__device__ __forceinline__ u64 grid_blocks(const BlockGrid& g) { return (u64)g.d * g.h * g.w; }

// The voxels of a 2x2x2 block that face a block at block offset (dz, dy, dx): bit
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

// Whether blocks with masks `own` and `other`, the other at block offset (dz, dy, dx),
// hold 26-neighbouring foreground voxels.
__device__ __forceinline__ bool blocks_touch(u32 own, u32 other, int dz, int dy, int dx) {
  return (own & side_mask(dz, dy, dx, true)) && (other & side_mask(dz, dy, dx, false));
}

// Root of block b in the forest F, and the root's word (GCCL_ROOT_FLAG | key or rank),
// halving the path on the way. Safe beside concurrent unions: only non-roots are written,
// each time to an ancestor, and a union only ever rewrites a root.
__device__ __forceinline__ u32 find_block_root(u32* F, u32 b, u32& root_word) {
  u32 p = F[b];
  while (!(p & GCCL_ROOT_FLAG)) {
    const u32 g = F[p];
    if (g & GCCL_ROOT_FLAG) {
      root_word = g;
      return p;
    }
    F[b] = g;
    b = g;
    p = F[b];
  }
  root_word = p;
  return b;
}

// Join the trees of blocks a and b: the root with the larger key goes under the other
// (a compare-and-swap on its root word), retrying when another thread re-parented it.
__device__ __forceinline__ void unite_blocks(u32* F, u32 a, u32 b) {
  while (true) {
    u32 word_a, word_b;
    a = find_block_root(F, a, word_a);
    b = find_block_root(F, b, word_b);
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

// The local phase: one thread per block, a tile of B26_TBW x _TBH x _TBD blocks, rows,
// runs and the skips of volume_local.cu at block level (two neighbouring blocks join when
// each holds a foreground voxel on the side that faces the other: any two voxels so
// placed are 26-neighbours). A tile component's root is the block of its first voxel in
// raster order (the smallest tile-local key of its blocks' first voxels), which every
// other block of it gets as its parent.
template <typename T>
__device__ __forceinline__ void block26_local(const T* values, u32* forest,
                                              unsigned char* masks, u32 depth, u32 height,
                                              u32 width, u32 tiles_x, u32 tiles_y,
                                              u32 tiles_per_volume, const ForegroundRule& rule) {
  constexpr u32 BW = GCCL_B26_TBW, BH = GCCL_B26_TBH, BD = GCCL_B26_TBD;
  constexpr u32 TW = GCCL_B26_TILE_W, TH = GCCL_B26_TILE_H;
  __shared__ u32 parent[BW * BH * BD];
  __shared__ u32 first_voxel[BW * BH * BD];
  __shared__ unsigned char tile_masks[BW * BH * BD];
  __shared__ u32 left_rows[BH * BD];
  const BlockPlace place = block_place(tiles_per_volume);
  const TilePlace t = tile_place(place.index, tiles_x, tiles_y);
  const BlockGrid g = block_grid(depth, height, width);
  const u32 bx = threadIdx.x, by = threadIdx.y, bz = threadIdx.z;
  const u32 row = bz * BH + by, slot = row * BW + bx;
  const u32 gx = t.x * BW + bx, gy = t.y * BH + by, gz = t.z * BD + bz;
  const u32 x0 = 2 * gx, y0 = 2 * gy, z0 = 2 * gz;
  const T* V = values + (u64)place.image * volume_voxels(depth, height, width);

  u32 m = 0;  // bit b: voxel (x0 + (b & 1), y0 + (b >> 1 & 1), z0 + (b >> 2)) is foreground
#pragma unroll
  for (u32 b = 0; b < 8; ++b) {
    const u32 x = x0 + (b & 1u), y = y0 + ((b >> 1) & 1u), z = z0 + (b >> 2);
    if (x < width && y < height && z < depth && is_foreground(V[(z * height + y) * width + x], rule))
      m |= 1u << b;
  }
  tile_masks[slot] = (unsigned char)m;
  first_voxel[slot] = GCCL_BACKGROUND;
  __syncthreads();

  const bool join_left = m && bx > 0 && blocks_touch(m, tile_masks[slot - 1], 0, 0, -1);
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
      const u32 mn = tile_masks[n];
      if (!blocks_touch(m, mn, dz, dy, dx)) continue;
      if (row_bit(left, bx)) {
        const u32 ml = tile_masks[slot - 1];
        if (dx < 1 && blocks_touch(ml, mn, dz, dy, dx + 1)) continue;
        if (nx > 0 && row_bit(left_rows[near_row], (u32)nx) &&
            blocks_touch(ml, tile_masks[n - 1], dz, dy, dx))
          continue;
      }
      unite(parent, slot, n);
    }
  }
  __syncthreads();

  // The component's first voxel: the smallest tile-local raster key of its blocks' first
  // foreground voxels (raster order inside a block is the bit order of m), gathered per
  // run, then per root.
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

  if (gx >= g.w || gy >= g.h || gz >= g.d) return;
  const u64 base = (u64)place.image * grid_blocks(g);
  const u32 b = (gz * g.h + gy) * g.w + gx;
  u32 word = GCCL_BACKGROUND;
  if (m) {
    const u32 first_key = first_voxel[root];
    const u32 fz = first_key / (TW * TH), fy = first_key / TW % TH, fx = first_key % TW;
    const u32 root_block =
        ((t.z * BD + fz / 2) * g.h + t.y * BH + fy / 2) * g.w + t.x * BW + fx / 2;
    word = root_block != b ? root_block
                           : GCCL_ROOT_FLAG | (((2 * t.z * BD + fz) * height + 2 * t.y * BH + fy) *
                                                   width +
                                               2 * t.x * BW + fx);
  }
  forest[base + b] = word;
  masks[base + b] = (unsigned char)m;
}

#define GCCL_BLOCK26_KERNEL(suffix, T)                                                       \
  extern "C" __global__ void __launch_bounds__(GCCL_B26_TBW* GCCL_B26_TBH* GCCL_B26_TBD)    \
      gccl_volume_block26_##suffix(const T* values, u32* forest, unsigned char* masks,       \
                                   u32 depth, u32 height, u32 width, u32 tiles_x,            \
                                   u32 tiles_y, u32 tiles_per_volume, GCCL_RULE_PARAMS) {    \
    const ForegroundRule rule = GCCL_RULE_MAKE;                                              \
    block26_local<T>(values, forest, masks, depth, height, width, tiles_x, tiles_y,          \
                     tiles_per_volume, rule);                                                \
  }
GCCL_FOR_EACH_DTYPE(GCCL_BLOCK26_KERNEL)

// The joins between tiles: one CUDA block per tile walks the tile's shell of blocks (its
// first plane, then the ring of first and last rows and columns of every later plane; an
// edge leaves the tile only there, as in volume_border.cu) and joins each backward block
// offset that leaves the tile where the two blocks p and q touch, less the edges another
// path settles through a block r that touches both:
//   (a) r = p - 1, the block to the left (same run: joined by the local phase), when the
//       edge (r, q) is a backward offset of r; it leaves r's tile too (through the first
//       plane or the first or last row, which r shares with p);
//   (b) r straight behind p (z - 1), for the other edges into the plane behind: r and q
//       are neighbours in that plane;
//   (c) r straight above p (y - 1), for the diagonals into the row above: r and q are
//       neighbours in that row.
// The skips are well founded: ordered by (z, y, x) of the later block, with the straight
// edge of a place before its diagonals, (a) leans on an edge further left, (b) and (c) on
// a straight edge, which only (a) skips, and on an edge of an earlier plane or row.
extern "C" __global__ void __launch_bounds__(GCCL_VOLUME_BORDER_THREADS)
    gccl_volume_block_border(const unsigned char* masks, u32* forest, u32 depth, u32 height,
                             u32 width, u32 tiles_x, u32 tiles_y, u32 tiles_per_volume) {
  constexpr u32 BW = GCCL_B26_TBW, BH = GCCL_B26_TBH, BD = GCCL_B26_TBD;
  const BlockPlace place = block_place(tiles_per_volume);
  const TilePlace t = tile_place(place.index, tiles_x, tiles_y);
  const BlockGrid g = block_grid(depth, height, width);
  const u64 base = (u64)place.image * grid_blocks(g);
  const unsigned char* M = masks + base;
  u32* F = forest + base;
  constexpr u32 face = BW * BH, ring = 2 * BW + 2 * (BH - 2);
  constexpr u32 shell = face + (BD - 1) * ring;
  for (u32 j = threadIdx.x; j < shell; j += blockDim.x) {
    u32 bx, by, bz;
    if (j < face) {
      bz = 0, by = j / BW, bx = j % BW;
    } else {
      const u32 s = j - face;
      bz = 1 + s / ring;
      const u32 r = s % ring;
      if (r < BW) {
        by = 0, bx = r;
      } else if (r < 2 * BW) {
        by = BH - 1, bx = r - BW;
      } else {
        const u32 side = r - 2 * BW;
        by = 1 + side / 2;
        bx = (side & 1u) ? BW - 1 : 0;
      }
    }
    const u32 gx = t.x * BW + bx, gy = t.y * BH + by, gz = t.z * BD + bz;
    if (gx >= g.w || gy >= g.h || gz >= g.d) continue;
    const u32 b = (gz * g.h + gy) * g.w + gx;
    const u32 m = M[b];
    if (!m) continue;
    const u32 ml = bx > 0 ? M[b - 1] : 0;
    const u32 mb = gz > 0 ? M[b - g.h * g.w] : 0;
    const u32 ma = gy > 0 ? M[b - g.w] : 0;
    const bool left_joins = blocks_touch(m, ml, 0, 0, -1);
    const bool behind_joins = blocks_touch(m, mb, -1, 0, 0);
    const bool above_joins = blocks_touch(m, ma, 0, -1, 0);
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
      if (!blocks_touch(m, mn, dz, dy, dx)) continue;
      if (dx < 1 && left_joins && blocks_touch(ml, mn, dz, dy, dx + 1)) continue;
      if (dz < 0 && (dy != 0 || dx != 0) && behind_joins && blocks_touch(mb, mn, 0, dy, dx))
        continue;
      if (dz == 0 && dy < 0 && dx != 0 && above_joins && blocks_touch(ma, mn, 0, 0, dx))
        continue;
      unite_blocks(F, b, n);
    }
  }
}

// The rows of blocks of a volume in groups of GCCL_B26_ROW_WARPS consecutive rows of one
// plane of blocks (`groups_per_plane` per plane), a CUDA block per group, a warp per row.
struct BlockRow {
  u32 image, bz, by, group;  // group: the group's number in its plane
  bool inside;
};

__device__ __forceinline__ BlockRow block_row(const BlockGrid& g, u32 groups_per_plane) {
  const BlockPlace place = block_place(g.d * groups_per_plane);
  BlockRow r;
  r.image = place.image;
  r.bz = place.index / groups_per_plane;
  r.group = place.index - r.bz * groups_per_plane;
  r.by = r.group * GCCL_B26_ROW_WARPS + (threadIdx.x >> 5);
  r.inside = r.by < g.h;
  return r;
}

// Which of the block's four voxel rows (vz << 1 | vy) holds its first voxel.
__device__ __forceinline__ u32 first_row(u32 mask) { return (__ffs(mask) - 1) >> 1; }

// The voxel rows (z, y) of a volume's block grid (z < 2 g.d, y < 2 g.h), in raster order.
__device__ __forceinline__ u32 voxel_row(const BlockGrid& g, u32 bz, u32 by, u32 sub_row) {
  return (2 * bz + (sub_row >> 1)) * 2 * g.h + 2 * by + (sub_row & 1u);
}

// A group's voxel rows of one plane (sz = 0 or 1) follow each other in raster order: their
// roots form one run of the ranking, whose count is run_counts[(2 bz + sz) groups_per_plane
// + group] (in raster order too).
__device__ __forceinline__ u32 group_run(u32 bz, u32 sz, u32 group, u32 groups_per_plane) {
  return (2 * bz + sz) * groups_per_plane + group;
}

// Ranks the roots: each root's rank among the roots whose first voxel lies in its voxel row
// (in x order, that is block order) is stored as GCCL_ROOT_FLAG | rank; row_starts gets
// each voxel row's count of roots before it in its group's run, run_counts each run's
// count (2 g.d groups_per_plane per volume), whose scan gives the runs' label offsets.
extern "C" __global__ void __launch_bounds__(GCCL_B26_ROW_WARPS * 32)
    gccl_volume_block_roots(u32* forest, const unsigned char* masks, u32 depth, u32 height,
                            u32 width, u32 groups_per_plane, u32* row_starts, u32* run_counts) {
  __shared__ u32 warp_counts[GCCL_B26_ROW_WARPS][4];
  const BlockGrid g = block_grid(depth, height, width);
  const BlockRow r = block_row(g, groups_per_plane);
  const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5, before = (1u << lane) - 1;
  u32 counts[4] = {0, 0, 0, 0};
  if (r.inside) {
    const u64 row_start = (u64)r.image * grid_blocks(g) + (u64)(r.bz * g.h + r.by) * g.w;
    for (u32 x0 = 0; x0 < g.w; x0 += 32) {
      const u32 bx = x0 + lane;
      const u32 word = bx < g.w ? forest[row_start + bx] : GCCL_BACKGROUND;
      const bool root = word != GCCL_BACKGROUND && (word & GCCL_ROOT_FLAG);
      const u32 sub = root ? first_row(masks[row_start + bx]) : 4;
      u32 rank = 0;
#pragma unroll
      for (u32 s = 0; s < 4; ++s) {
        const u32 ballot = __ballot_sync(GCCL_FULL_WARP, sub == s);
        if (sub == s) rank = counts[s] + __popc(ballot & before);
        counts[s] += __popc(ballot);
      }
      if (root) forest[row_start + bx] = GCCL_ROOT_FLAG | rank;
    }
  }
  if (lane == 0) {
#pragma unroll
    for (u32 s = 0; s < 4; ++s) warp_counts[warp][s] = counts[s];
  }
  __syncthreads();
  // Lanes 0-3 of each warp: the roots of its rows' runs before the row.
  if (lane < 4) {
    const u32 sz = lane >> 1, sy = lane & 1u;
    u32 start = sy ? warp_counts[warp][2 * sz] : 0;
    for (u32 w = 0; w < warp; ++w) start += warp_counts[w][2 * sz] + warp_counts[w][2 * sz + 1];
    if (r.inside) row_starts[(u64)r.image * 4 * g.d * g.h + voxel_row(g, r.bz, r.by, lane)] = start;
    if (warp == GCCL_B26_ROW_WARPS - 1 && !sy) {
      const u32 total = start + warp_counts[warp][2 * sz] + warp_counts[warp][2 * sz + 1];
      run_counts[(u64)r.image * 2 * g.d * groups_per_plane +
                 group_run(r.bz, sz, r.group, groups_per_plane)] = total;
    }
  }
}

// Every voxel's label: 0 off the components, else its root's run offset (the scan of
// run_counts) + the roots before its row in the run + its rank in the row + 1; one thread
// per block writes the block's 8 voxels.
extern "C" __global__ void __launch_bounds__(GCCL_B26_ROW_WARPS * 32)
    gccl_volume_block_resolve(u32* forest, const unsigned char* masks, u32* out, u32 depth,
                              u32 height, u32 width, u32 groups_per_plane,
                              const u32* row_starts, const u32* run_offsets) {
  const BlockGrid g = block_grid(depth, height, width);
  const BlockRow r = block_row(g, groups_per_plane);
  if (!r.inside) return;
  const u64 base = (u64)r.image * grid_blocks(g);
  const u32 row_start = (r.bz * g.h + r.by) * g.w;
  u32* F = forest + base;
  const unsigned char* M = masks + base;
  const u32* starts = row_starts + (u64)r.image * 4 * g.d * g.h;
  const u32* offsets = run_offsets + (u64)r.image * 2 * g.d * groups_per_plane;
  u32* O = out + (u64)r.image * volume_voxels(depth, height, width);
  for (u32 bx = threadIdx.x & 31; bx < g.w; bx += 32) {
    const u32 m = M[row_start + bx];
    u32 label = 0;
    if (m) {
      u32 word;
      const u32 root = find_block_root(F, row_start + bx, word);
      const u32 rz = root / (g.h * g.w), ry = root / g.w - rz * g.h, sub = first_row(M[root]);
      label = offsets[group_run(rz, sub >> 1, ry / GCCL_B26_ROW_WARPS, groups_per_plane)] +
              starts[voxel_row(g, rz, ry, sub)] + (word & ~GCCL_ROOT_FLAG) + 1;
    }
#pragma unroll
    for (u32 s = 0; s < 4; ++s) {
      const u32 z = 2 * r.bz + (s >> 1), y = 2 * r.by + (s & 1u), x = 2 * bx;
      if (z >= depth || y >= height) continue;
      u32* line = O + ((u64)z * height + y) * width;
      line[x] = (m >> (2 * s)) & 1u ? label : 0;
      if (x + 1 < width) line[x + 1] = (m >> (2 * s + 1)) & 1u ? label : 0;
    }
  }
}
