// Launch geometry shared by the kernels and their host code: tiles, chunks,
// strips and threads per block. The host (ccl_cli/backends/cuda/loader.py)
// reads every `#define GCCL_NAME VALUE` line of this file at import time, so
// each number lives here only. Values are integer expressions of numbers and
// names defined above them.
#pragma once

// The raster-order kernels (relabel.cu, stats.cu, area_filter.cu, outline.cu's
// mask): chunks of GCCL_CHUNK pixels, GCCL_CHUNK_THREADS threads x
// GCCL_CHUNK_ITEMS pixels each; the segmented scan's block (relabel.cu).
#define GCCL_CHUNK_THREADS 256
#define GCCL_CHUNK_ITEMS 16
#define GCCL_CHUNK (GCCL_CHUNK_THREADS * GCCL_CHUNK_ITEMS)
#define GCCL_SCAN_THREADS 1024
#define GCCL_SCAN_ITEMS 4

// block8.cu: a CUDA block of GCCL_B8_TBW x GCCL_B8_TBH threads, one per 2x2
// pixel block, one warp per block row (runs.cuh); its tile in pixels.
#define GCCL_B8_TBW 32
#define GCCL_B8_TBH 16
#define GCCL_B8_TILE_W (2 * GCCL_B8_TBW)
#define GCCL_B8_TILE_H (2 * GCCL_B8_TBH)

// pixel.cu: a tile of one thread per pixel, one warp per tile row (runs.cuh).
#define GCCL_PX_TILE_W 32
#define GCCL_PX_TILE_H 16

// morphology.cu: warps per block; output rows per warp (of the byte-access
// kernels: rare, so less code); columns per lane and per warp; the
// multi-step kernels' iterations per launch at most (their strips also hold
// that many rows above and below their output rows) and output columns per
// warp (lanes 0 and 31 hold the halo columns, so at most 16 steps).
#define GCCL_MORPH_WARPS 2
#define GCCL_MORPH_ROWS 16
#define GCCL_MORPH_ROWS_BYTES 4
#define GCCL_MORPH_LANE_BYTES 16
#define GCCL_MORPH_STRIP_W (32 * GCCL_MORPH_LANE_BYTES)
#define GCCL_MORPH_MAX_STEPS 8
#define GCCL_MORPH_STEP_W (30 * GCCL_MORPH_LANE_BYTES)

// smooth.cu's shared-tile kernels (any radius up to GCCL_SMOOTH_MAX_RADIUS):
// threads per block and output pixels per tile side.
#define GCCL_SMOOTH_MAX_RADIUS 7
#define GCCL_SMOOTH_THREADS_X 32
#define GCCL_SMOOTH_THREADS_Y 8
#define GCCL_SMOOTH_TILE 32
// smooth.cu's warp-strip kernels (radii 1 to GCCL_SMOOTH_STRIP_RADIUS): warps
// per block, columns per lane, columns written per warp.
#define GCCL_SMOOTH_STRIP_RADIUS 3
#define GCCL_SMOOTH_STRIP_WARPS 4
#define GCCL_SMOOTH_LANE 4
#define GCCL_SMOOTH_STRIP_W (30 * GCCL_SMOOTH_LANE)

// outline.cu: threads per block of the corner and ring kernels.
#define GCCL_OUTLINE_THREADS 256

// volume_local.cu, voxel union-find (6-, 18-connectivity and tau mode): a tile of
// GCCL_VX_TILE_W x _H x _D voxels, one thread per voxel, one warp per tile row (runs.cuh).
#define GCCL_VX_TILE_W 32
#define GCCL_VX_TILE_H 4
#define GCCL_VX_TILE_D 4

// volume_cells.cu, binary volumes on cells of CELL_D_<conn> x CELL_H_<conn> x 2 voxels
// (z, y, x) whose foreground voxels are all connected: a CUDA block of GCCL_CELL_TBW x _TBH
// x _TBD threads, one per cell, one warp per row of cells; the row kernels' warps per CUDA
// block, one warp per row of cells.
#define GCCL_CELL_D_26 2
#define GCCL_CELL_H_26 2
#define GCCL_CELL_D_18 1
#define GCCL_CELL_H_18 2
#define GCCL_CELL_D_6 1
#define GCCL_CELL_H_6 1
#define GCCL_CELL_TBW 32
#define GCCL_CELL_TBH 4
#define GCCL_CELL_TBD 2
#define GCCL_CELL_ROW_WARPS 8

// volume_border.cu: threads of the CUDA block that walks one tile's shell.
#define GCCL_VOLUME_BORDER_THREADS 256

// volume_stages.cu: threads per block of the row kernels (a block per row of a volume,
// its threads across the row).
#define GCCL_VOLUME_ROW_THREADS 128
