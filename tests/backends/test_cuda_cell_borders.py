"""The joins between tiles of binary volumes' cells (src/volume_cells.cu), emulated in Python
from the kernel's text, without a GPU: every tile's cells joined inside the tile (what the
local phase leaves), then the border's edges less its skips (a)-(c). Whatever edges the
skips leave out, the cells' sets must be scipy.ndimage.label's components.

The GPU tests (tests/gpu/test_cuda_volumes.py) run the kernels; this checks on every machine
that the skips are well founded, on tiles small enough that most edges cross them.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import ndimage

#: Cells (voxels deep, high) per connectivity; every cell is two voxels wide.
CELLS = {26: (2, 2), 18: (1, 2), 6: (1, 1)}
#: The backward cell offsets (dz, dy, dx) in the kernels' order: left, the row above, the
#: plane behind.
BACKWARD = [(0, 0, -1)] + [(0, -1, dx) for dx in (-1, 0, 1)]
BACKWARD += [(-1, dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)]


def neighbours(conn: int, oz: int, oy: int, ox: int) -> bool:
    nonzero = (oz != 0) + (oy != 0) + (ox != 0)
    return max(abs(oz), abs(oy), abs(ox)) == 1 and nonzero <= {6: 1, 18: 2, 26: 3}[conn]


def touch(conn: int, own: int, other: int, dz: int, dy: int, dx: int) -> bool:
    """Whether a foreground voxel of cell mask `own` neighbours one of `other`, the other
    cell at cell offset (dz, dy, dx); bit (vz * H + vy) * 2 + vx is voxel (vx, vy, vz)."""
    cd, ch = CELLS[conn]
    voxels = [(b // 2 // ch, b // 2 % ch, b % 2) for b in range(2 * cd * ch)]
    for i, (iz, iy, ix) in enumerate(voxels):
        if not (own >> i) & 1:
            continue
        for j, (jz, jy, jx) in enumerate(voxels):
            if (other >> j) & 1 and neighbours(
                conn, dz * cd + jz - iz, dy * ch + jy - iy, 2 * dx + jx - ix
            ):
                return True
    return False


def cell_masks(volume: np.ndarray, conn: int) -> np.ndarray:
    cd, ch = CELLS[conn]
    depth, height, width = volume.shape
    padded = np.zeros((-(-depth // cd) * cd, -(-height // ch) * ch, -(-width // 2) * 2), int)
    padded[:depth, :height, :width] = volume
    masks = np.zeros((padded.shape[0] // cd, padded.shape[1] // ch, padded.shape[2] // 2), int)
    for vz, vy, vx in itertools.product(range(cd), range(ch), range(2)):
        masks |= padded[vz::cd, vy::ch, vx::2] << ((vz * ch + vy) * 2 + vx)
    return masks


class Forest:
    def __init__(self, size: int) -> None:
        self.parent = list(range(size))

    def find(self, a: int) -> int:
        while self.parent[a] != a:
            a = self.parent[a]
        return a

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


def cell_components(volume: np.ndarray, conn: int, tile: tuple[int, int, int]) -> Forest:
    """The sets of the cells after the local phase and the border on tiles of `tile` cells
    (across, down, deep)."""
    masks = cell_masks(volume, conn)
    gd, gh, gw = masks.shape
    bw, bh, bd = tile
    index = np.arange(masks.size).reshape(masks.shape)
    forest = Forest(masks.size)
    cells = list(itertools.product(range(gd), range(gh), range(gw)))
    for z, y, x in cells:  # the local phase: every edge inside a tile
        for dz, dy, dx in BACKWARD:
            nz, ny, nx = z + dz, y + dy, x + dx
            same_tile = (nz // bd, ny // bh, nx // bw) == (z // bd, y // bh, x // bw)
            inside = nz >= 0 and 0 <= ny < gh and 0 <= nx < gw
            if inside and same_tile and touch(conn, masks[z, y, x], masks[nz, ny, nx], dz, dy, dx):
                forest.union(index[z, y, x], index[nz, ny, nx])
    for z, y, x in cells:  # the border kernel's loop, its skips as written there
        m = masks[z, y, x]
        if not m:
            continue
        bx, by, bz = x % bw, y % bh, z % bd
        ml = masks[z, y, x - 1] if bx > 0 else 0
        mb = masks[z - 1, y, x] if z > 0 else 0
        ma = masks[z, y - 1, x] if y > 0 else 0
        left_joins = touch(conn, m, ml, 0, 0, -1)
        behind_joins = touch(conn, m, mb, -1, 0, 0)
        above_joins = touch(conn, m, ma, 0, -1, 0)
        for dz, dy, dx in BACKWARD:
            nx, ny, nz = bx + dx, by + dy, bz + dz
            if 0 <= nx < bw and 0 <= ny < bh and nz >= 0:
                continue
            if not (0 <= x + dx < gw and 0 <= y + dy < gh and z + dz >= 0):
                continue
            mn = masks[z + dz, y + dy, x + dx]
            if not touch(conn, m, mn, dz, dy, dx):
                continue
            if dx < 1 and left_joins and touch(conn, ml, mn, dz, dy, dx + 1):
                continue
            if dz < 0 and (dy, dx) != (0, 0) and behind_joins and touch(conn, mb, mn, 0, dy, dx):
                continue
            if dz == 0 and dy < 0 and dx != 0 and above_joins and touch(conn, ma, mn, 0, 0, dx):
                continue
            forest.union(index[z, y, x], index[z + dz, y + dy, x + dx])
    return forest


def assert_components(volume: np.ndarray, conn: int, tile: tuple[int, int, int]) -> None:
    forest = cell_components(volume, conn, tile)
    structure = ndimage.generate_binary_structure(3, {6: 1, 18: 2, 26: 3}[conn])
    want, count = ndimage.label(volume, structure)
    cd, ch = CELLS[conn]
    _, gh, gw = cell_masks(volume, conn).shape
    root_of = {}
    for z, y, x in zip(*np.nonzero(volume), strict=True):
        root = forest.find((z // cd * gh + y // ch) * gw + x // 2)
        assert root_of.setdefault(int(want[z, y, x]), root) == root  # one set per component
    assert len(set(root_of.values())) == count  # and one component per set


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    conn=st.sampled_from([6, 18, 26]),
    tile=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 2)),
)
def test_the_border_skips_keep_scipys_components(data, conn, tile) -> None:
    shape = data.draw(st.tuples(st.integers(1, 7), st.integers(1, 7), st.integers(1, 9)))
    density = data.draw(st.sampled_from([0.2, 0.5, 0.8]))
    seed = data.draw(st.integers(0, 2**32 - 1))
    volume = (np.random.default_rng(seed).random(shape) < density).astype(np.uint8)
    assert_components(volume, conn, tile)


def test_runs_along_whole_tile_sides() -> None:
    """Full rows meet the plane behind and the row above along whole runs, with one bridge
    between two rows: every skip has a run beside it to lean on."""
    for conn in (6, 18, 26):
        volume = np.zeros((4, 6, 16), np.uint8)
        volume[:, ::2] = 1  # full rows, every other row of every plane
        volume[1:3, 1, 5] = 1  # one bridge between rows 0 and 2 in planes 1 and 2
        assert_components(volume, conn, (4, 2, 2))
