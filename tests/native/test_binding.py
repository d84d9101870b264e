"""The CPython binding of the CPU engines (native/src/binding.c): checked against engine.h and
volume.h by the compiler, and strict about what its Batch and Volumes may point at."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

import ccl_cli
from ccl_cli.native import gccl_cpu

SOURCES = Path(ccl_cli.__file__).parent / "native" / "src"

#: Changes to a header that the binding was not changed with: (name, header, old, new, message).
HEADER_CHANGES = [
    (
        "a field added",
        "engine.h",
        "    int64_t label_bytes;",
        "    int64_t label_bytes;\n    int64_t connectivity;",
        "BATCH_FIELDS lists every field of gccl_batch",
    ),
    (
        "a field's type changed",
        "engine.h",
        "double tau, relative, quadratic;",
        "float tau;\n    double relative, quadratic;",
        "tau is a double",
    ),
    (
        "an array's element type changed",
        "engine.h",
        "int32_t *parent;",
        "int64_t *parent;",
        "parent is int32_t",
    ),
    (
        "an array the engine reads made writable",
        "engine.h",
        "const int64_t *tasks;     /*",
        "int64_t *tasks;     /*",
        "tasks is const int64_t",
    ),
    ("a field renamed", "engine.h", "floating, min_area;", "floating, minimum_area;", "min_area"),
    (
        "an integer widened",
        "engine.h",
        "int64_t count, height, width;",
        "int64_t count, height;\n    double width;",
        "width is an int64_t",
    ),
    (
        "a volume field added",
        "volume.h",
        "    int64_t connectivity; /* 6, 18 or 26 */",
        "    int64_t connectivity, cubic;",
        "VOLUME_FIELDS lists every field of gccl_volumes",
    ),
    (
        "a field added to the rules both structs embed",
        "engine.h",
        "    double tau, relative, quadratic;",
        "    double tau, relative, quadratic, cubic;",
        "BATCH_FIELDS lists every field of gccl_batch",
    ),
    (
        "a volume array's element type changed",
        "volume.h",
        "    uint32_t *labels; ",
        "    uint64_t *labels; ",
        "labels is uint32_t",
    ),
]


def _compile_binding(folder: Path) -> subprocess.CompletedProcess[str]:
    """binding.c of `folder` compiled (syntax and constraints only) as the package build does."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler})")
    include = sysconfig.get_paths()["include"]
    command = [compiler, "-std=c11", "-fsyntax-only", f"-I{include}", str(folder / "binding.c")]
    return subprocess.run(command, capture_output=True, text=True)


def _sources_with(tmp_path: Path, name: str, old: str, new: str) -> Path:
    folder = tmp_path / "src"
    shutil.copytree(SOURCES, folder)
    header = folder / name
    text = header.read_text()
    if old != new:
        assert text.count(old) == 1, f"{name} no longer has {old!r}"
        header.write_text(text.replace(old, new))
    return folder


def test_the_binding_compiles_against_the_headers_as_they_are(tmp_path: Path) -> None:
    result = _compile_binding(_sources_with(tmp_path, "engine.h", "", ""))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("header", "old", "new", "message"),
    [c[1:] for c in HEADER_CHANGES],
    ids=[c[0] for c in HEADER_CHANGES],
)
def test_a_header_changed_without_the_binding_does_not_build(
    tmp_path: Path, header: str, old: str, new: str, message: str
) -> None:
    result = _compile_binding(_sources_with(tmp_path, header, old, new))
    assert result.returncode != 0
    assert message in result.stderr


SCALARS = {
    "count": 1,
    "height": 2,
    "width": 3,
    "image_type": 0,
    "value_type": 0,
    "rule": 1,
    "connectivity": 8,
    "tau_mode": 0,
    "floating": 0,
    "min_area": 5,
    "label_bytes": 4,
    "rule_value": 0.5,
    "tau": 2.25,
    "relative": 0.125,
    "quadratic": 0.0,
}


def test_a_batch_holds_every_scalar_field_as_given() -> None:
    batch = gccl_cpu.Batch(**SCALARS)
    assert {name: getattr(batch, name) for name in SCALARS} == SCALARS
    assert batch.image is None and batch.labels is None


@pytest.mark.parametrize("missing", sorted(SCALARS))
def test_a_batch_needs_every_scalar_field(missing: str) -> None:
    fields = {name: value for name, value in SCALARS.items() if name != missing}
    with pytest.raises(TypeError, match=f"needs the field {missing}"):
        gccl_cpu.Batch(**fields)


def test_a_name_that_is_no_field_is_refused() -> None:
    with pytest.raises(TypeError, match="no field of gccl_batch"):
        gccl_cpu.Batch(**SCALARS, depth=8)
    with pytest.raises(AttributeError):
        gccl_cpu.Batch(**SCALARS).depth = 8  # type: ignore[misc]


def test_an_integer_field_refuses_a_float() -> None:
    with pytest.raises(TypeError):
        gccl_cpu.Batch(**{**SCALARS, "min_area": 5.5})


def test_an_array_is_held_while_it_is_pointed_at() -> None:
    batch = gccl_cpu.Batch(**SCALARS)
    parent = np.arange(12, dtype=np.int32)
    before = sys.getrefcount(parent)
    batch.parent = parent
    held = sys.getrefcount(parent)
    assert batch.parent is parent
    batch.parent = None
    assert batch.parent is None
    assert (held, sys.getrefcount(parent)) == (before + 1, before)


@pytest.mark.parametrize(
    ("field", "array", "message"),
    [
        ("parent", np.zeros(4, np.int64), "items of 4 bytes"),  # int32_t *
        ("tasks", np.zeros(6, np.int32), "items of 8 bytes"),  # const int64_t *
        ("stats", np.zeros(12, np.int64), "whole elements of 64 bytes"),  # gccl_record *
        ("mean", np.zeros(3, np.float32), "items of 8 bytes"),  # const double *
    ],
)
def test_an_array_of_the_wrong_item_size_is_refused(
    field: str, array: np.ndarray, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        setattr(gccl_cpu.Batch(**SCALARS), field, array)


def test_an_array_the_engine_writes_must_be_writable_and_contiguous() -> None:
    batch = gccl_cpu.Batch(**SCALARS)
    read_only = np.zeros(4, np.int32)
    read_only.flags.writeable = False
    with pytest.raises((ValueError, BufferError)):
        batch.parent = read_only
    batch.image = np.zeros(4, np.uint8)[::-1].copy()  # arrays it reads may be read-only
    with pytest.raises((ValueError, BufferError)):
        batch.parent = np.zeros(8, np.int32)[::2]
    assert batch.parent is None


VOLUME_SCALARS = {
    "count": 1,
    "depth": 2,
    "height": 3,
    "width": 4,
    "image_type": 0,
    "value_type": 0,
    "rule": 1,
    "connectivity": 26,
    "tau_mode": 0,
    "floating": 0,
    "min_area": 2,
    "statistics": 1,
    "selecting": 0,
    "zeroed": 0,
    "rule_value": 0.0,
    "tau": 1.5,
    "relative": 0.0,
    "quadratic": 0.0,
}


def test_volumes_hold_their_fields_and_refuse_others() -> None:
    volumes = gccl_cpu.Volumes(**VOLUME_SCALARS)
    assert {name: getattr(volumes, name) for name in VOLUME_SCALARS} == VOLUME_SCALARS
    with pytest.raises(TypeError, match="needs the field connectivity"):
        gccl_cpu.Volumes(**{k: v for k, v in VOLUME_SCALARS.items() if k != "connectivity"})
    with pytest.raises(TypeError, match="no field of gccl_volumes"):
        gccl_cpu.Volumes(**VOLUME_SCALARS, label_bytes=4)
    with pytest.raises(ValueError, match="items of 4 bytes"):  # uint32_t *labels
        volumes.labels = np.zeros(24, np.uint64)
    words = gccl_cpu.SLAB_WORDS
    with pytest.raises(ValueError, match=f"whole elements of {8 * words} bytes"):
        volumes.slabs = np.zeros(words + 1, np.int64)
    volumes.slabs = np.zeros(2 * words, np.int64)
    assert volumes.slabs.shape == (2 * words,)
