"""`gccl bench` on volumes: the generated 3-D suite, the engines that label volumes agreeing
with scipy.ndimage.label (binary) and a 3-D BFS (tau), the options that choose volumes, and
volume files as inputs, at both levels. Tiny volumes: every test takes well under a second."""

from __future__ import annotations

import io
import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import scipy.ndimage as ndi
from cli_helpers import run_bench
from PIL import Image
from rich.console import Console
from typer.testing import CliRunner
from volume_oracles import bfs_volume

from ccl_cli.bench.adapter import BenchEngine
from ccl_cli.bench.command import Options, parse_options, run_bench_command
from ccl_cli.bench.crosscheck import same_components
from ccl_cli.bench.engines import (
    Cc3d,
    Cupyx,
    GcclCpu,
    GcclCuda,
    GcclCudaLabels,
    OpenCv,
    Scipy,
    Skimage,
)
from ccl_cli.bench.suite import (
    VOLUME_FAMILIES,
    VOLUME_TAU,
    Case,
    generate,
    generated_volume_cases,
    parse_size,
)
from ccl_cli.cli import app
from ccl_cli.contract.params import LabelParams
from ccl_cli.errors import UsageError

BINARY_FAMILIES = ("blobs3d", "pores3d", "random3d")
SCIPY_RANK = {6: 1, 18: 2, 26: 3}


def scipy_count(volume: np.ndarray, connectivity: int) -> tuple[np.ndarray, int]:
    """scipy.ndimage.label of a volume's nonzero voxels."""
    structure = ndi.generate_binary_structure(3, SCIPY_RANK[connectivity])
    labels, count = ndi.label(volume != 0, structure)
    return labels, int(count)


def options(**overrides: object) -> Options:
    values: dict[str, object] = {
        "engines": "gccl-cpu,cc3d,scipy",
        "level": "kernel",
        "batches": "1,4",
        "repeat": 1,
        "tau": None,
        "connectivity": None,
        "sizes": "20x16x12",
        "cases": ",".join(VOLUME_FAMILIES),
    }
    values.update(overrides)
    return parse_options(**values)  # type: ignore[arg-type]


def labels_of(engine: BenchEngine, case: Case) -> tuple[np.ndarray, int]:
    output = engine.run(engine.prepare(case.image[None], case.params), case.params)
    return engine.host_labels(output)[0], output.total()


# --- the generated volumes ---------------------------------------------------------------


@pytest.mark.parametrize("family", VOLUME_FAMILIES)
def test_generated_volumes_have_their_shape_and_are_deterministic(family: str) -> None:
    volume = generate(family, 40, 32, 24)
    assert volume.shape == (24, 32, 40)
    assert volume.dtype == (np.uint16 if family == "ct3d" else np.uint8)
    assert np.array_equal(volume, generate(family, 40, 32, 24))
    assert volume.any() and not volume.all()


def test_generated_volumes_look_like_their_families() -> None:
    assert abs((generate("random3d", 64, 64, 64) > 0).mean() - 0.3) < 0.01
    assert 0.4 < (generate("blobs3d", 64, 64, 64) > 0).mean() < 0.6
    pores = generate("pores3d", 64, 64, 64)
    assert (pores > 0).mean() < 0.1 and scipy_count(pores, 26)[1] > 30
    ct = generate("ct3d", 64, 64, 64)
    pores, material = ct[(ct > 0) & (ct < 1000)], ct[ct >= 1000]
    assert pores.size and pores.min() >= 797 and pores.max() <= 803
    assert material.min() >= 2997 and material.max() <= 3403
    assert ct[:, 0, 0].max() == 0  # outside the cylinder


def test_volume_cases_cover_families_sizes_and_connectivities() -> None:
    cases = generated_volume_cases(VOLUME_FAMILIES, [(20, 16, 12), (12, 10, 8)], [26, 6], None)
    assert len(cases) == len(VOLUME_FAMILIES) * 2 * 2
    assert len({case.name for case in cases}) == len(cases)
    for case in cases:
        assert case.is_volume and case.params.rank == 3
        assert case.params.tau == (VOLUME_TAU if case.family == "ct3d" else None)
    assert cases[0].size == "20x16x12" and cases[0].pixels == 20 * 16 * 12


def test_parse_size_takes_volumes() -> None:
    assert parse_size("128x96x64") == (128, 96, 64)
    for bad in ("128x96x4", "128x96x64x2", "128xx64"):
        with pytest.raises(ValueError):
            parse_size(bad)


# --- engines agree with the references ------------------------------------------------------


@pytest.mark.parametrize(
    "case",
    generated_volume_cases(BINARY_FAMILIES, [(23, 17, 13)], [6, 18, 26], None),
    ids=lambda case: case.name,
)
def test_volume_engines_agree_with_scipy(case: Case) -> None:
    reference, count = scipy_count(case.image, case.params.connectivity)
    assert count > (0 if case.family == "blobs3d" else 1)  # small blobs may be one
    for engine in (GcclCpu(), Cc3d(), Scipy()):
        labels, components = labels_of(engine, case)
        assert components == count, engine.name
        assert same_components(labels, reference), engine.name
    assert np.array_equal(labels_of(GcclCpu(), case)[0], reference)  # raster order


@pytest.mark.parametrize(
    "case",
    generated_volume_cases(["ct3d"], [(24, 20, 40)], [6, 26], None),
    ids=lambda case: case.name,
)
def test_tau_volume_engines_agree_with_the_bfs(case: Case) -> None:
    params = LabelParams(tau=VOLUME_TAU, connectivity=case.params.connectivity)
    reference = bfs_volume(case.image, params)
    assert int(reference.max()) > 1
    for engine in (GcclCpu(), Cc3d()):
        labels, components = labels_of(engine, case)
        assert components == int(reference.max()), engine.name
        assert same_components(labels, reference), engine.name


def cuda_usable() -> bool:
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount()) > 0
    except Exception:  # no CuPy, no driver, no device: CuPy raises several kinds
        return False


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA device")
@pytest.mark.parametrize(
    "case",
    generated_volume_cases(VOLUME_FAMILIES, [(23, 17, 41)], [6, 18, 26], None),
    ids=lambda case: case.name,
)
def test_gpu_volume_engines_agree_with_the_references(case: Case) -> None:
    if case.params.tau is None:
        reference, count = scipy_count(case.image, case.params.connectivity)
        engines: tuple[BenchEngine, ...] = (GcclCuda(), GcclCudaLabels(), Cupyx())
    else:
        reference = bfs_volume(case.image, case.params)
        count, engines = int(reference.max()), (GcclCuda(), GcclCudaLabels())
    for engine in engines:
        labels, components = labels_of(engine, case)
        assert components == count, engine.name
        assert same_components(labels, reference), engine.name
        if engine.raster_order:
            assert np.array_equal(labels, reference), engine.name


def test_engines_say_which_rank_they_label() -> None:
    volume = generated_volume_cases(["blobs3d"], [(12, 10, 8)], [26], None)[0]
    for engine in (OpenCv(), Skimage()):
        assert engine.unsupported(volume) == "labels 2-D images only"
    ct = generated_volume_cases(["ct3d"], [(12, 10, 8)], [26], None)[0]
    assert "tau" in (Scipy().unsupported(ct) or "")
    image = Case("image", "input", np.ones((4, 4), np.uint8), LabelParams())
    assert Scipy().unsupported(image) == "labels volumes only"
    assert GcclCpu().unsupported(volume) is None and Cc3d().unsupported(volume) is None


# --- the command ------------------------------------------------------------------------------


def test_cases_and_sizes_choose_volumes_and_connectivity_is_taken_per_kind() -> None:
    opts = options()
    assert opts.volume_families == VOLUME_FAMILIES and opts.families == ()
    assert opts.volume_sizes == ((20, 16, 12),) and opts.volume_connectivities == (26, 6)
    mixed = options(cases="random-0.5,pores3d", sizes="48x32,20x16x12", connectivity=6)
    assert mixed.families == ("random-0.5",) and mixed.sizes == ((48, 32),)
    assert mixed.connectivities == (4,) and mixed.volume_connectivities == (6,)
    assert options(connectivity=8).volume_connectivities == (26,)
    assert options(connectivity=18).connectivities == (8,)
    with pytest.raises(UsageError):
        options(cases="blobs3d,sponge3d")


def test_a_volume_connectivity_needs_volume_cases(tmp_path: Path) -> None:
    images = options(engines="gccl-cpu", cases="random-0.5", sizes="48x32", connectivity=18)
    with pytest.raises(UsageError, match="'connectivity' 18 labels 3-D volumes"):
        run_bench(images)
    mixed = options(
        engines="gccl-cpu", cases="random-0.5,pores3d", sizes="48x32,20x16x12", connectivity=18
    )
    code, _ = run_bench(mixed, json_path=tmp_path / "r.json")
    assert code == 0
    records = json.loads((tmp_path / "r.json").read_text())
    assert {(r["size"], r["connectivity"]) for r in records} == {("48x32", 8), ("20x16x12", 18)}


def test_the_volume_suite_runs_checked_at_batch_one_only(tmp_path: Path) -> None:
    code, _ = run_bench(options(level="both"), json_path=tmp_path / "r.json")
    assert code == 0
    records = json.loads((tmp_path / "r.json").read_text())
    measured = [r for r in records if r["status"] == "ok"]
    assert {r["batch"] for r in measured} == {1}
    assert {r["size"] for r in measured} == {"20x16x12"}
    for family in BINARY_FAMILIES:
        volume = generate(family, 20, 16, 12)
        for connectivity in (26, 6):
            want = scipy_count(volume, connectivity)[1]
            name = f"{family} 20x16x12 {connectivity}c"
            found = {
                (r["engine"], r["level"]): r["components"] for r in measured if r["case"] == name
            }
            assert found == {
                ("gccl-cpu", "kernel"): want,
                ("cc3d", "kernel"): want,
                ("scipy", "kernel"): want,
                ("gccl-cpu", "end-to-end"): want,
            }


def test_a_wrong_volume_engine_is_a_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    honest = Cc3d.run

    def splits_nothing(self: BenchEngine, prepared: object, params: LabelParams) -> object:
        output = honest(self, prepared, params)  # type: ignore[arg-type]
        output.components += 1
        return output

    monkeypatch.setattr(Cc3d, "run", splits_nothing)
    code, _ = run_bench(options(cases="pores3d", connectivity=26))
    assert code == 1


def test_volume_files_are_inputs(tmp_path: Path) -> None:
    volume = generate("pores3d", 20, 16, 12)
    nib.save(nib.Nifti1Image(volume.T.copy(), np.eye(4)), tmp_path / "mask.nii.gz")
    Image.fromarray(generate("random-0.5", 24, 16)).save(tmp_path / "image.png")
    opts = options(
        engines="gccl-cpu,cc3d,scipy,opencv", level="both", sizes=None, cases=None, connectivity=26
    )
    code, _ = run_bench(opts, [str(tmp_path)], json_path=tmp_path / "r.json")
    assert code == 0
    records = [r for r in json.loads((tmp_path / "r.json").read_text()) if r["status"] == "ok"]
    want = scipy_count(volume, 26)[1]
    on_volume = {
        (r["engine"], r["level"]): r["components"] for r in records if r["size"] == "20x16x12"
    }
    assert on_volume == {
        ("gccl-cpu", "kernel"): want,
        ("cc3d", "kernel"): want,
        ("scipy", "kernel"): want,
        ("gccl-cpu", "end-to-end"): want,
    }
    on_image = {r["engine"] for r in records if r["size"] == "24x16"}
    assert on_image == {"gccl-cpu", "opencv", "cc3d"}
    assert {r["connectivity"] for r in records if r["size"] == "24x16"} == {8}


def test_cli_bench_volumes(tmp_path) -> None:
    args = ["bench", "--cases", "blobs3d", "--sizes", "16x12x10", "--repeat", "1", "--quiet"]
    report = tmp_path / "bench.json"
    result = CliRunner().invoke(app, [*args, "--engines", "gccl-cpu,scipy", "--json", str(report)])
    assert result.exit_code == 0, result.output
    records = json.loads(report.read_text())
    cases = ("blobs3d 16x12x10 26c", "blobs3d 16x12x10 6c")
    want = {(case, engine) for case in cases for engine in ("gccl-cpu", "scipy")}
    assert {(r["case"], r["engine"]) for r in records} == want, result.output
    assert {r["status"] for r in records} == {"ok"}, result.output


def test_a_volume_over_the_batch_cap_still_runs_at_batch_one() -> None:
    from ccl_cli.bench.command import ProgressLines
    from ccl_cli.bench.runner import Limits, kernel_plan, run_kernel

    cases = generated_volume_cases(["pores3d"], [(20, 16, 12)], [26], None)
    image = Case("image", "input", generate("random-0.5", 48, 32), LabelParams())
    limits = Limits(repeat=1, max_batch_pixels=100)  # below either case
    engines = [GcclCpu(), Scipy()]
    planned = kernel_plan([*cases, image], engines, [1, 2], limits)
    assert {(p.case, p.engine, p.batch) for p in planned} == {
        (cases[0].name, "gccl-cpu", 1),
        (cases[0].name, "scipy", 1),
    }
    progress = ProgressLines(Console(file=io.StringIO()), planned, limits, quiet=True)
    records = run_kernel(cases, engines, [1, 2], limits, progress)
    want = scipy_count(cases[0].image, 26)[1]
    assert [(r.engine, r.batch, r.status, r.components) for r in records] == [
        ("gccl-cpu", 1, "ok", want),
        ("scipy", 1, "ok", want),
    ]


def test_without_a_gpu_volumes_run_at_their_small_size(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ccl_cli.bench import command

    monkeypatch.setattr(command, "_gpu_usable", lambda: False)
    err = io.StringIO()
    opts = parse_options("gccl-cpu", "kernel", "1", 1, None, 26, None, "pores3d")
    code = run_bench_command(
        [],
        opts,
        json_path=tmp_path / "r.json",
        out=Console(file=io.StringIO(), width=200),
        err=Console(file=err, width=200),
    )
    assert code == 0
    assert {r["size"] for r in json.loads((tmp_path / "r.json").read_text())} == {"128x128x128"}
    assert "no usable GPU: volumes at 128x128x128;" in err.getvalue()
    assert "640x480" not in err.getvalue()  # no image suite was asked for
