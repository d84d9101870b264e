"""Slab labeling's host side, without a GPU: the planner (backends/cuda/slabs.py) and the
seam merge's design (src/volume_slabs.cu), emulated in numpy from the text of the design.

The GPU tests (tests/gpu/test_cuda_volumes.py) run the kernels themselves; these check on
every machine that the plan covers each plane once under the budget and the 31-bit limit,
that the stages' halo is deep enough for a slab's planes to come out as from the whole
volume, and that numbering a forest of the slabs' local labels in slot order after joining
the seams gives scipy's raster-order labels of the whole volume.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shapes import helix
from volume_oracles import NEIGHBOURS_3D, bfs_volume, scipy_volume

from ccl_cli.backends.cpu.stages import NumpyStages
from ccl_cli.backends.cuda import slabs
from ccl_cli.backends.cuda.volumes import MAX_VOLUME_VOXELS, fits_one_piece
from ccl_cli.contract.params import LabelParams
from ccl_cli.contract.stages import label_input


@pytest.mark.slow
@settings(max_examples=300)
@given(
    depth=st.integers(1, 5000),
    plane=st.integers(1, 2**31 - 1),
    per_voxel=st.integers(1, 120),
    budget=st.integers(0, 2**40),
    halo=st.integers(0, 30),
)
def test_slabs_cover_every_plane_once_under_the_limits(depth, plane, per_voxel, budget, halo):
    plan = slabs.plan_slabs(depth, plane, per_voxel, budget, halo)
    assert plan[0][0] == 0 and plan[-1][1] == depth
    assert all(a < b for a, b in plan)
    assert all(b == c for (_, b), (c, _) in itertools.pairwise(plan))
    sizes = [b - a for a, b in plan]
    assert max(sizes) - min(sizes) <= 1  # as even as whole planes make them
    assert max(sizes) * plane <= MAX_VOLUME_VOXELS  # 31-bit indexes inside a slab
    fitting = budget // (plane * per_voxel) - 2 * halo
    if fitting >= 1:  # where one plane fits, every slab does, halo included
        assert (max(sizes) + 2 * halo) * plane * per_voxel <= budget
        assert len(plan) == -(-depth // min(fitting, MAX_VOLUME_VOXELS // plane, depth))
    else:
        assert sizes == [1] * depth


def test_a_volume_past_2_31_voxels_goes_in_two_slabs_of_31_bit_indexes():
    plan = slabs.plan_slabs(2048, 1024 * 1024, 9, 2**60, 0)
    assert plan == [(0, 1024), (1024, 2048)]  # 1024 planes are 2**30 voxels


def test_binary_volumes_fit_one_piece_below_2_32_voxels_and_tau_below_2_31():
    binary, tau = LabelParams(connectivity=26), LabelParams(connectivity=6, tau=1)
    assert fits_one_piece((2048, 1024, 1024), binary)  # 2**31 voxels
    assert fits_one_piece((4095, 1024, 1024), binary)
    assert not fits_one_piece((4096, 1024, 1024), binary)  # 2**32 voxels
    assert fits_one_piece((1, 1, 2**32 - 2), binary)  # cells two voxels wide: 2**31 - 1
    assert not fits_one_piece((1, 1, 2**32 - 1), binary)
    assert not fits_one_piece((1, 2, 2**31 - 1), binary)  # an odd width's last cell counts
    assert fits_one_piece((1, 1, 2**31 - 1), tau)
    assert not fits_one_piece((2048, 1024, 1024), tau)


def test_a_plane_past_the_limit_is_one_clear_error():
    with pytest.raises(ValueError, match=r"a volume's plane may hold at most 2\*\*31 - 1"):
        slabs.plan_slabs(3, 2**31, 1, 2**60, 0)


STAGED = [
    LabelParams(connectivity=6, morphology=(("open", 2),)),
    LabelParams(connectivity=26, morphology=(("close", 1), ("dilate", 2))),
    LabelParams(connectivity=18, tau=2, smooth=("binomial", 2)),
    LabelParams(connectivity=26, tau=1, smooth=("box", 1), morphology=(("close", 2),)),
    LabelParams(connectivity=6, tau=3, morphology=(("dilate", 1), ("erode", 3))),
]


@pytest.mark.parametrize("params", STAGED, ids=repr)
def test_the_halo_makes_each_slab_stage_as_the_whole_volume(params):
    """label_input (numpy, bit for bit the CUDA stages) on a slab with halo_planes of the
    volume on either side, then cut to the slab, equals the whole volume's planes."""
    rng = np.random.default_rng(len(params.morphology))
    values = (rng.integers(1, 9, (30, 11, 13)) * (rng.random((30, 11, 13)) < 0.6)).astype(np.uint16)
    whole = label_input(values[None], params, np, NumpyStages())
    halo = slabs.halo_planes(params)
    assert halo > 0
    for z0, z1 in slabs.plan_slabs(30, 11 * 13, 1, (3 + 2 * halo) * 11 * 13, halo):
        a, b = max(0, z0 - halo), min(30, z1 + halo)
        part = label_input(values[None, a:b], params, np, NumpyStages())
        for got, want in ((part[0], whole[0]), (part[2], whole[2])):
            np.testing.assert_array_equal(got[:, z0 - a : z1 - a], want[:, z0:z1])


def test_no_stages_no_halo():
    assert slabs.halo_planes(LabelParams(connectivity=26)) == 0
    assert slabs.halo_planes(LabelParams(connectivity=26, smooth=("box", 3))) == 0  # binary
    params = LabelParams(connectivity=6, tau=1, smooth=("box", 3), morphology=(("open", 2),))
    assert slabs.halo_planes(params) == 2 + 2 + 3


def slab_labels(values: np.ndarray, params: LabelParams, bounds: list[tuple[int, int]]):
    """Labels of `values` by the design of slab labeling (volume_slabs.cu), emulated: each
    slab labeled alone (dense local labels in raster order), local label l of slab s the
    slot first[s] + l - 1 of a forest, every pair of neighbouring voxels across a seam
    (offsets with dz = -1, joining in tau mode) joins its slots with the smaller root the
    root, the roots numbered in slot order, each voxel its slot's number."""
    local = []
    for z0, z1 in bounds:
        if params.tau is None:
            local.append(scipy_volume(values[z0:z1] != 0, params.connectivity)[0])
        else:
            local.append(bfs_volume(values[z0:z1], params))
    first = np.cumsum([0] + [int(labels.max(initial=0)) for labels in local])
    forest = np.arange(first[-1])

    def root(i: int) -> int:
        while forest[i] != i:
            i = forest[i]
        return i

    seams = [(d, dy, dx) for d, dy, dx in NEIGHBOURS_3D[params.connectivity] if d == -1]
    _, height, width = values.shape
    for s in range(1, len(bounds)):
        below, above = local[s - 1][-1], local[s][0]
        z = bounds[s][0]
        for y, x in zip(*np.nonzero(above), strict=True):
            for _, dy, dx in seams:
                yy, xx = y + dy, x + dx
                if not (0 <= yy < height and 0 <= xx < width) or not below[yy, xx]:
                    continue
                if params.tau is not None:
                    a, b = float(values[z, y, x]), float(values[z - 1, yy, xx])
                    if a != b and abs(a - b) > params.tau:
                        continue
                ra = root(first[s] + above[y, x] - 1)
                rb = root(first[s - 1] + below[yy, xx] - 1)
                forest[max(ra, rb)] = min(ra, rb)
    number = np.zeros(len(forest), np.int64)
    count = 0
    for i in range(len(forest)):
        if root(i) == i:
            count += 1
            number[i] = count
    out = np.zeros(values.shape, np.int64)
    for s, (z0, z1) in enumerate(bounds):
        piece = local[s]
        slots = first[s] + piece[piece > 0] - 1
        out[z0:z1][piece > 0] = number[[root(int(i)) for i in slots]]
    return out


def cuts(depth: int, draw) -> list[tuple[int, int]]:
    inner = sorted(draw(st.sets(st.integers(1, max(1, depth - 1)), max_size=depth - 1)))
    points = [0, *[p for p in inner if 0 < p < depth], depth]
    return list(itertools.pairwise(points))


@pytest.mark.parametrize("connectivity", [6, 18, 26])
@pytest.mark.parametrize("name", ["helix", "pillars", "random", "checker"])
def test_seams_numbered_in_slot_order_are_raster_order(connectivity, name):
    depth = 24
    volumes = {
        "helix": helix(depth, 9, 1.5),
        "pillars": np.indices((depth, 7, 8)).sum(axis=0)[:, :, :] % 3 == 0,
        "random": np.random.default_rng(2).random((depth, 7, 9)) < 0.4,
        "checker": np.indices((depth, 6, 7)).sum(axis=0) % 2 == 0,
    }
    mask = volumes[name]
    want, _ = scipy_volume(mask, connectivity)
    params = LabelParams(connectivity=connectivity)
    for bounds in ([(z, z + 1) for z in range(depth)], [(0, 5), (5, 6), (6, 17), (17, 24)]):
        np.testing.assert_array_equal(slab_labels(mask, params, bounds), want)


@settings(max_examples=40)
@given(st.data())
def test_random_slabs_of_random_volumes(data):
    shape = tuple(data.draw(st.integers(1, 9)) for _ in range(3))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    tau = data.draw(st.sampled_from([None, 0, 1]))
    values = (rng.integers(1, 4, shape) * (rng.random(shape) < data.draw(st.floats(0, 1)))).astype(
        np.int16
    )
    params = LabelParams(connectivity=data.draw(st.sampled_from([6, 18, 26])), tau=tau)
    want = bfs_volume(values, params)
    bounds = cuts(shape[0], data.draw)
    np.testing.assert_array_equal(slab_labels(values, params, bounds), want)
