"""The CUDA launch geometry lives in geometry.cuh only: the host reads it from there.

CPU only: the header is parsed, the host modules' sources are walked.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

from ccl_cli.backends.cuda import loader, volumes
from ccl_cli.backends.cuda.loader import CUDA_DIR, GEOMETRY, GEOMETRY_HEADER, LAYOUT, read_defines
from ccl_cli.contract.stages import MAX_SMOOTH_RADIUS
from ccl_cli.contract.stats import empty_table

HOST_DIR = Path(loader.__file__).parent
#: Integer constants of the host modules that are the host's own choices, not the
#: kernels' geometry (name: why).
HOST_ONLY = {
    "_MAX_BATCH_PIXELS",  # label offsets are u32
    "HOST_BATCH_BYTES",  # --batch-size auto
    "_CHUNK_BYTES",  # how a host batch is cut
    "_CHUNK_STEPS",
    "_CHUNKS_LABELING",
    "_HOST_REGISTER_PORTABLE",  # a CUDA runtime flag
    "_MAX_GRID",  # CUDA's grid limit
    "_MAX_IMAGE_PIXELS",
    "_SMOOTH_MAX_ROWS",  # a runtime argument of the strip kernels
    "_INT32_LIMIT",
    "MAX_PART_PIXELS",  # label offsets are u32
    "_THREADS",  # arrays.cu's grid-stride kernels take any block and grid size
    "_MAX_BLOCKS",
    "MAX_VOLUME_VOXELS",  # labels and ranks share a u32 with a flag bit
    "_MAX_CELL_KEYS",  # cell indexes and keys share a u32 with a flag bit
    "_INIT_BLOCKS",  # grid-stride kernels' grids
    "_TABLE_BLOCKS",
    "_MAX_ROW_BLOCKS",
    "_FOREST_GROWTH",  # how slab labeling grows its forest
    "_LABEL_BYTES",  # device bytes per voxel the slab planner counts
    "_BINARY_STAGE_BYTES",
    "_TAU_STAGE_BYTES",
    # the values kernel names take (kernel_names.py; test_kernel_names checks them against
    # the fatbin's kernels)
    "IMAGE_CONNECTIVITIES",
    "VOLUME_CONNECTIVITIES",
    "MORPHOLOGY_ACCESS",
    "STRIP_RADII",
    "KERNELS",
}


def test_read_defines_evaluates_expressions_of_earlier_names() -> None:
    text = (
        "#pragma once\n"
        "// #define GCCL_COMMENTED 3\n"
        "#define GCCL_A 32u  // a comment\n"
        "  #  define GCCL_B (2 * GCCL_A + 1)\n"
        "#define GCCL_C (GCCL_B / 4 - 1)\n"
        "#define GCCL_D (1 << 4)\n"
    )
    assert read_defines(text, "h.cuh") == {"GCCL_A": 32, "GCCL_B": 65, "GCCL_C": 15, "GCCL_D": 16}


def test_read_defines_of_given_names_skips_the_other_macros_and_needs_each() -> None:
    text = "#define GCCL_KERNEL(T) void f(T)\n#define GCCL_A 3\n#define GCCL_CODE {1, 2}\n"
    assert read_defines(text, "k.cu", ("GCCL_A",)) == {"GCCL_A": 3}
    with pytest.raises(ValueError, match=r"^k\.cu: no #define of GCCL_B$"):
        read_defines(text, "k.cu", ("GCCL_A", "GCCL_B"))


def test_the_table_layout_matches_the_statistics_table() -> None:
    assert len(empty_table(True).measured()) == LAYOUT["GCCL_TABLE_COLUMNS"]
    assert LAYOUT["GCCL_F_AREA"] < LAYOUT["GCCL_STATS_FIELDS"]
    kinds = [LAYOUT[f"GCCL_FG_{kind}"] for kind in ("BACKGROUND", "ALL", "ABOVE", "BELOW")]
    assert len(set(kinds)) == 4


def test_the_volume_table_layout_matches_the_volume_statistics_table() -> None:
    """volume_stats.cu's table rows are contract/stats.py's volume columns in CSV order, the
    int64 ones first, and volumes.table_view reads each row as its column."""
    columns = empty_table(True, rank=3).measured()
    assert len(columns) == LAYOUT["GCCL_VOLUME_TABLE_COLUMNS"]
    ints = [name for name, column in columns.items() if column.dtype == np.int64]
    assert list(columns)[: len(ints)] == ints and len(ints) == LAYOUT["GCCL_VOLUME_TABLE_INTS"]
    assert LAYOUT["GCCL_V_AREA"] < LAYOUT["GCCL_V_FIELDS"] > LAYOUT["GCCL_V_ABSMAX"]
    words = np.zeros((LAYOUT["GCCL_VOLUME_TABLE_COLUMNS"], 2), np.uint64)
    for row, name in enumerate(columns):
        value = np.array([row + 1, row + 2], np.int64 if name in ints else np.float64)
        words[row] = value.view(np.uint64)
    table = volumes.table_view(words, 2, True)
    assert table.is_volume
    for row, (name, column) in enumerate(table.measured().items()):
        assert column.tolist() == [row + 1, row + 2], name


@pytest.mark.parametrize(
    "line",
    [
        "#define GCCL_LATER (GCCL_UNDEFINED + 1)",
        "#define GCCL_CALL(x) (x + 1)",
        "#define GCCL_EMPTY",
        "#define GCCL_FLOAT 1.5",
        "#define GCCL_CALLS max(1, 2)",
    ],
)
def test_read_defines_refuses_what_it_cannot_evaluate(line: str) -> None:
    with pytest.raises(ValueError, match=r"^h\.cuh:2: cannot read"):
        read_defines(f"#pragma once\n{line}\n", "h.cuh")


def test_geometry_header_values_are_consistent() -> None:
    g = GEOMETRY
    assert g["GCCL_CHUNK"] == g["GCCL_CHUNK_THREADS"] * g["GCCL_CHUNK_ITEMS"] == loader.CHUNK
    assert g["GCCL_CHUNK_THREADS"] == loader.CHUNK_THREADS
    assert (g["GCCL_B8_TILE_W"], g["GCCL_B8_TILE_H"]) == (
        2 * g["GCCL_B8_TBW"],
        2 * g["GCCL_B8_TBH"],
    )
    assert g["GCCL_B8_TBW"] == g["GCCL_PX_TILE_W"] == 32  # one warp per row (runs.cuh)
    assert g["GCCL_SMOOTH_MAX_RADIUS"] >= MAX_SMOOTH_RADIUS


def _sources() -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(CUDA_DIR.glob("*.cu*"))}


def test_geometry_is_defined_in_the_header_only() -> None:
    """No .cu or other .cuh defines a name of geometry.cuh again, and each is used."""
    for name, text in _sources().items():
        if name == GEOMETRY_HEADER.name:
            continue
        again = [n for n in GEOMETRY if re.search(rf"#\s*define\s+{n}\b", text)]
        assert not again, f"{name} defines {again} again"
    host = "".join(path.read_text() for path in HOST_DIR.glob("*.py"))
    kernels = "".join(t for n, t in _sources().items() if n != GEOMETRY_HEADER.name)
    header = GEOMETRY_HEADER.read_text()
    for name in GEOMETRY:
        used = name in host or name in kernels or header.count(name) > 1
        assert used, f"{name} is used by neither the host nor a kernel"


def _module_constants(path: Path) -> list[tuple[str, ast.expr]]:
    tree = ast.parse(path.read_text())
    constants = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            targets, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = node.target, node.value
        else:
            continue
        names = targets.elts if isinstance(targets, ast.Tuple) else [targets]
        constants += [(n.id, value) for n in names if isinstance(n, ast.Name)]
    return constants


def _literal_ints(value: ast.expr) -> list[int]:
    """The integer literals of an expression, but dict keys (access widths, say)."""
    keys = {id(k) for n in ast.walk(value) if isinstance(n, ast.Dict) for k in n.keys}
    return [
        n.value
        for n in ast.walk(value)
        if isinstance(n, ast.Constant) and type(n.value) is int and id(n) not in keys
    ]


@pytest.mark.parametrize("module", sorted(p.name for p in HOST_DIR.glob("*.py")))
def test_host_constants_come_from_the_header(module: str) -> None:
    """Every integer constant of the CUDA host modules is read from geometry.cuh, or is
    one of the host's own (HOST_ONLY); every GEOMETRY name they read exists."""
    path = HOST_DIR / module
    for name, value in _module_constants(path):
        if name in HOST_ONLY:
            continue
        literals = [v for v in _literal_ints(value) if v not in (0, 1)]
        assert not literals, f"{module}: {name} = {ast.unparse(value)} holds numbers {literals}"
    read = re.findall(r'GEOMETRY\["(\w+)"\]', path.read_text())
    assert set(read) <= set(GEOMETRY), f"{module} reads names geometry.cuh lacks"
    read = re.findall(r'LAYOUT\["(\w+)"\]', path.read_text())
    assert set(read) <= set(LAYOUT), f"{module} reads layout names the kernels lack"
