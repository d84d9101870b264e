"""`gccl bench` without a GPU: the generated suite, the engine adapters agreeing, the
cross-check catching a wrong engine, the reports' formats, and both levels end to end."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_bench
from PIL import Image
from rich.console import Console
from typer.testing import CliRunner

from ccl_cli.bench import engines as engines_module
from ccl_cli.bench.adapter import BenchEngine
from ccl_cli.bench.command import Options, parse_options, run_bench_command
from ccl_cli.bench.crosscheck import compare, same_components
from ccl_cli.bench.engines import Cc3d, GcclCpu, OpenCv, Skimage
from ccl_cli.bench.records import COLUMNS, Record
from ccl_cli.bench.report import add_speedups
from ccl_cli.bench.suite import (
    FAMILIES,
    SUITE_TAU,
    Case,
    generate,
    generated_cases,
    parse_size,
)
from ccl_cli.cli import app
from ccl_cli.contract.params import LabelParams
from ccl_cli.errors import UsageError

CPU_ENGINES = "gccl-cpu,opencv,opencv-contours,cc3d,skimage"
REQUIRED_KEYS = {
    "engine",
    "case",
    "level",
    "batch",
    "median_ms",
    "min_ms",
    "max_ms",
    "gpix_per_s",
    "components",
}


def options(**overrides: object) -> Options:
    """A tiny, fast bench: small images, few repeats, CPU engines."""
    values: dict[str, object] = {
        "engines": CPU_ENGINES,
        "level": "kernel",
        "batches": "1,2",
        "repeat": 2,
        "tau": None,
        "connectivity": None,
        "sizes": "48x32",
        "cases": "random-0.5,document,depth",
    }
    values.update(overrides)
    return parse_options(**values)  # type: ignore[arg-type]


# --- the generated suite -------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_generated_images_have_their_shape_dtype_and_are_deterministic(family: str) -> None:
    image = generate(family, 96, 64)
    assert image.shape == (64, 96)
    assert image.dtype == (np.uint16 if family == "depth" else np.uint8)
    assert np.array_equal(image, generate(family, 96, 64))
    assert (image.any() and not image.all()) or family == "random-0.9"


def test_generated_images_differ_between_sizes_and_families() -> None:
    assert not np.array_equal(generate("random-0.5", 64, 64), generate("random-0.1", 64, 64))
    assert not np.array_equal(generate("depth", 64, 48)[:32], generate("depth", 64, 32))


def test_random_density_and_depth_values() -> None:
    assert abs((generate("random-0.1", 400, 300) > 0).mean() - 0.1) < 0.01
    depth = generate("depth", 320, 240)
    holes = (depth == 0).mean()
    assert 0.01 < holes < 0.5
    assert depth.max() > depth[depth > 0].min() + 500  # ramps and boxes, not one plane


def test_generated_cases_cover_families_sizes_and_connectivities() -> None:
    cases = generated_cases(FAMILIES, [(64, 48), (32, 24)], [8, 4], None)
    assert len(cases) == len(FAMILIES) * 2 * 2
    assert len({case.name for case in cases}) == len(cases)
    for case in cases:
        assert case.params.tau == (SUITE_TAU if case.family == "depth" else None)
    depth = generated_cases(["depth"], [(64, 48)], [4], 3)
    assert depth[0].params.tau == 3 and depth[0].params.connectivity == 4
    assert depth[0].size == "64x48"


def test_parse_size() -> None:
    assert parse_size("640x480") == (640, 480)
    for bad in ("640", "x480", "640x4", "axb"):
        with pytest.raises(ValueError):
            parse_size(bad)


# --- engines agree ---------------------------------------------------------------------


def labels_of(engine: BenchEngine, case: Case, copies: int = 1) -> tuple[np.ndarray, int]:
    batch = np.repeat(case.image[None], copies, axis=0)
    output = engine.run(engine.prepare(batch, case.params), case.params)
    return engine.host_labels(output), output.total()


@pytest.mark.parametrize(
    "case",
    generated_cases(
        ["random-0.1", "random-0.5", "random-0.9", "document"], [(97, 61)], [4, 8], None
    ),
    ids=lambda case: case.name,
)
def test_binary_engines_agree_with_gccl_cpu(case: Case) -> None:
    reference, count = labels_of(GcclCpu(), case)
    for engine in (OpenCv(), Cc3d(), Skimage()):
        labels, components = labels_of(engine, case)
        assert components == count, engine.name
        assert same_components(labels, reference), engine.name


@pytest.mark.parametrize(
    "case", generated_cases(["depth"], [(160, 120)], [4, 8], None), ids=lambda case: case.name
)
def test_tau_engines_agree_with_gccl_cpu(case: Case) -> None:
    reference, count = labels_of(GcclCpu(), case)
    assert count > 10
    for engine in (Cc3d(), OpenCv()):
        labels, components = labels_of(engine, case)
        assert components == count, engine.name
        assert same_components(labels, reference), engine.name


def test_engines_count_every_image_of_a_batch() -> None:
    case = generated_cases(["random-0.5"], [(40, 30)], [8], None)[0]
    _, single = labels_of(GcclCpu(), case)
    for engine in (GcclCpu(), OpenCv(), Cc3d(), Skimage()):
        labels, components = labels_of(engine, case, copies=3)
        assert labels.shape == (3, 30, 40)
        assert components == 3 * single, engine.name


def test_engines_say_what_they_cannot_do() -> None:
    depth = generated_cases(["depth"], [(64, 48)], [8], None)[0]
    assert "tau" in (Skimage().unsupported(depth) or "")
    big_depth = generated_cases(["depth"], [(1000, 800)], [8], None)[0]
    assert "Mpixel" in (OpenCv().unsupported(big_depth) or "")
    assert OpenCv().unsupported(depth) is None


# --- the cross-check ---------------------------------------------------------------------


def test_same_components_is_equality_up_to_renumbering() -> None:
    a = np.array([[1, 1, 0, 2], [0, 3, 0, 2]])
    assert same_components(a, np.array([[7, 7, 0, 1], [0, 2, 0, 1]]))
    assert not same_components(a, np.array([[1, 1, 0, 1], [0, 3, 0, 1]]))  # merged
    assert not same_components(a, np.array([[1, 4, 0, 2], [0, 3, 0, 2]]))  # split
    assert not same_components(a, np.array([[1, 1, 5, 2], [0, 3, 0, 2]]))  # background


def test_compare_demands_exact_labels_between_raster_order_engines() -> None:
    a = np.array([[1, 0, 2]])
    b = np.array([[2, 0, 1]])
    assert compare("ref", a, 2, False, b, 2, False) is None
    assert "raster" in (compare("ref", a, 2, True, b, 2, True) or "")
    assert "3 components" in (compare("ref", a, 2, False, b, 3, False) or "")


def test_a_wrong_engine_is_reported_loudly_with_exit_code_1(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    honest = engines_module.OpenCv.run

    def drops_a_component(self: BenchEngine, prepared: object, params: object) -> object:
        output = honest(self, prepared, params)  # type: ignore[arg-type]
        output.labels[0][output.labels[0] == 1] = 0
        output.components -= 1  # an int for CPU engines
        return output

    monkeypatch.setattr(engines_module.OpenCv, "run", drops_a_component)
    code, printed = run_bench(options(cases="random-0.5", level="kernel"))
    assert code == 1
    assert "CROSS-CHECK FAILED" in printed and "MISMATCH" in printed and "opencv" in printed


# --- reports -------------------------------------------------------------------------------


@pytest.mark.slow
def test_json_csv_and_plot(tmp_path: Path) -> None:
    paths = {
        "json_path": tmp_path / "bench.json",
        "csv_path": tmp_path / "bench.csv",
        "plot_path": tmp_path / "bench.png",
    }
    code, printed = run_bench(options(), **paths)
    assert code == 0, printed
    records = json.loads(paths["json_path"].read_text())
    assert isinstance(records, list) and records
    for record in records:
        assert set(record) >= REQUIRED_KEYS
    measured = [r for r in records if r["status"] == "ok"]
    assert {r["engine"] for r in measured} == set(CPU_ENGINES.split(","))
    assert {r["batch"] for r in measured} == {1, 2}
    for r in measured:
        assert r["min_ms"] <= r["median_ms"] <= r["max_ms"] and r["gpix_per_s"] > 0
    assert any(r["engine"] == "skimage" and r["status"] == "skipped" for r in records)
    with open(paths["csv_path"], newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == COLUMNS and len(rows) == len(records)
    png = paths["plot_path"].read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    with Image.open(paths["plot_path"]) as image:
        image.load()
        assert image.width > 100 and image.height > 100


def test_speedups_compare_with_opencv_at_the_same_batch() -> None:
    case = generated_cases(["random-0.5"], [(16, 16)], [8], None)[0]
    records = []
    for engine, batch, median in (("opencv", 1, 10.0), ("cc3d", 1, 5.0), ("cc3d", 2, 5.0)):
        record = Record.for_case(engine, case, "kernel", batch)
        record.set_times([median], batch, case.pixels)
        records.append(record)
    add_speedups(records)
    assert [r.speedup_vs_opencv for r in records] == [1.0, 2.0, None]


# --- levels, inputs and the command line ---------------------------------------------------


@pytest.mark.slow
def test_end_to_end_level_on_a_tiny_suite(tmp_path: Path) -> None:
    json_path = tmp_path / "e2e.json"
    code, printed = run_bench(
        options(level="end-to-end", engines="gccl-cpu,opencv", cases="random-0.5,depth"),
        json_path=json_path,
    )
    assert code == 0, printed
    records = [r for r in json.loads(json_path.read_text()) if r["status"] == "ok"]
    gccl = [r for r in records if r["engine"] == "gccl-cpu"]
    assert {(r["case"].split()[0], r["batch"]) for r in gccl} == {
        (family, batch) for family in ("random-0.5", "depth") for batch in (1, 2)
    }
    assert all(r["level"] == "end-to-end" and r["images"] == 2 for r in records)
    opencv = {r["case"]: r["components"] for r in records if r["engine"] == "opencv"}
    assert len(opencv) == 2  # binary cases only; OpenCV has no tau mode end to end
    for r in gccl:
        assert r["components"] == opencv.get(r["case"], r["components"])


def test_user_images_are_cases(tmp_path: Path) -> None:
    image = generate("random-0.5", 40, 30)
    Image.fromarray(image).save(tmp_path / "a.png")
    json_path = tmp_path / "bench.json"
    code, _ = run_bench(
        parse_options("gccl-cpu,cc3d", "both", "1", 2, None, 8, None, None),
        [str(tmp_path / "a.png")],
        json_path=json_path,
    )
    assert code == 0
    records = json.loads(json_path.read_text())
    assert {r["case"] for r in records} == {"a.png 8c"}
    assert {r["level"] for r in records} == {"kernel", "end-to-end"}


@pytest.mark.parametrize(
    "change",
    [
        {"engines": "opencv,nope"},
        {"level": "fast"},
        {"batches": "1,x"},
        {"batches": "0"},
        {"repeat": 0},
        {"tau": "-1"},
        {"sizes": "640"},
        {"cases": "random-0.3"},
    ],
)
def test_bad_options_are_usage_errors(change: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        options(**change)


def test_a_report_into_a_missing_folder_fails_before_the_run(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--csv"):
        run_bench(options(), csv_path=tmp_path / "missing" / "bench.csv")


def test_batch_one_always_runs_and_connectivity_defaults_to_both() -> None:
    opts = options(batches="8,2")
    assert opts.batches == (1, 2, 8)
    assert opts.connectivities == (8, 4)
    assert options(connectivity=4).connectivities == (4,)


def test_cli_bench(tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["bench", "--sizes", "48x32", "--cases", "random-0.5", "--batch", "1", "--repeat", "1"]
    result = runner.invoke(app, [*args, "--engines", "gccl-cpu,opencv", "--quiet"])
    assert result.exit_code == 0, result.output
    assert "kernel level" in result.output and "opencv" in result.output
    assert runner.invoke(app, [*args, "--level", "fast"]).exit_code == 2
    Image.fromarray(generate("random-0.5", 40, 30)).save(tmp_path / "a.png")
    with_inputs = runner.invoke(app, ["bench", str(tmp_path / "a.png"), "--sizes", "48x32"])
    assert with_inputs.exit_code == 2


def test_an_unavailable_engine_asked_for_is_a_usage_error() -> None:
    if engines_module.GcclCuda().unavailable() is None:
        pytest.skip("a CUDA device is usable here")
    with pytest.raises(UsageError, match="gccl-cuda"):
        run_bench(options(engines="gccl-cuda"))


def ndi_label(mask: np.ndarray) -> tuple[np.ndarray, int]:
    """scipy.ndimage's 8-connected labels of `mask` (the independent reference)."""
    import scipy.ndimage as ndi

    labels, count = ndi.label(mask, np.ones((3, 3), bool))
    return labels, int(count)


def test_scans_bench_as_gccl_label_labels_them(tmp_path: Path) -> None:
    # Dark ink (0) on light paper (255): with --invert the ink is what is labeled.
    rng = np.random.default_rng(3)
    page = np.where(rng.random((40, 50)) < 0.3, 0, 255).astype(np.uint8)
    Image.fromarray(page).save(tmp_path / "scan.png")
    ink, ink_count = ndi_label(page == 0)
    json_path = tmp_path / "bench.json"
    opts = parse_options("gccl-cpu,opencv,cc3d", "both", "1", 1, None, 8, None, None, invert=True)
    code, _ = run_bench(opts, [str(tmp_path / "scan.png")], json_path=json_path)
    assert code == 0
    records = json.loads(json_path.read_text())
    counted = [r for r in records if r["components"] is not None]
    assert {(r["engine"], r["level"]) for r in counted} >= {("gccl-cpu", "end-to-end")}
    assert {r["components"] for r in counted} == {ink_count}
    assert ink.max() == ink_count
    # --threshold and --background choose the foreground the same way.
    opts = parse_options("gccl-cpu,cc3d", "kernel", "1", 1, None, 8, None, None, threshold="100")
    code, _ = run_bench(opts, [str(tmp_path / "scan.png")], json_path=json_path)
    assert {r["components"] for r in json.loads(json_path.read_text())} == {
        ndi_label(page > 100)[1]
    }
    opts = parse_options("gccl-cpu", "kernel", "1", 1, None, 8, None, None, background="255")
    code, _ = run_bench(opts, [str(tmp_path / "scan.png")], json_path=json_path)
    assert {r["components"] for r in json.loads(json_path.read_text())} == {ink_count}


def test_label_options_need_input_images_and_valid_values() -> None:
    with pytest.raises(UsageError, match="apply to INPUT images"):
        run_bench(options(invert=True))
    with pytest.raises(UsageError, match="--threshold must be a number"):
        options(threshold="dark")
    with pytest.raises(UsageError, match="--background must be a number"):
        options(background="white")


def test_without_a_gpu_the_default_suite_is_the_quick_one_with_progress(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ccl_cli.bench import command

    monkeypatch.setattr(command, "_gpu_usable", lambda: False)
    err = io.StringIO()
    json_path = tmp_path / "bench.json"
    opts = parse_options("gccl-cpu", "kernel", "1", 1, None, 8, None, "random-0.1")
    code = run_bench_command(
        [],
        opts,
        json_path=json_path,
        out=Console(file=io.StringIO(), width=200),
        err=Console(file=err, width=200),
    )
    assert code == 0
    assert {r["size"] for r in json.loads(json_path.read_text())} == {"640x480", "1920x1080"}
    text = err.getvalue()
    assert "no usable GPU: the suite at 640x480 and 1920x1080" in text
    assert "(1/2) kernel" in text and "(2/2, about" in text and "s left) kernel" in text


def test_a_growing_tolerance_reaches_every_gccl_level_and_no_peer_runs_without_it(
    tmp_path: Path,
) -> None:
    opts = options(
        engines="gccl-cpu,cc3d,opencv", level="both", batches="1", cases="depth",
        connectivity=4, tau_quadratic="2e-4",
    )  # fmt: skip
    (depth,) = [c for c in generated_cases(("depth",), ((48, 32),), (4,), opts.tau, None)]
    code, _ = run_bench(opts, json_path=tmp_path / "r.json")
    assert code == 0
    records = json.loads((tmp_path / "r.json").read_text())
    by = {(r["engine"], r["level"]): r for r in records}
    for peer in ("cc3d", "opencv"):
        assert by[(peer, "kernel")]["status"] == "skipped"
        assert "growing with the values" in by[(peer, "kernel")]["note"]
    from oracles import bfs_labels

    params = LabelParams(tau=0, tau_quadratic=2e-4, connectivity=4)
    want = int(bfs_labels(depth.image, params).max())
    assert want != int(bfs_labels(depth.image, LabelParams(tau=0, connectivity=4)).max())
    assert by[("gccl-cpu", "kernel")]["components"] == want
    assert by[("gccl-cpu", "end-to-end")]["components"] == want  # gccl label got it too


def test_quick_is_a_short_suite_unless_told_otherwise() -> None:
    quick = options(sizes=None, batches=None, repeat=None, quick=True)
    assert quick.sizes == ((640, 480),) and quick.batches == (1,) and quick.repeat == 3
    told = options(sizes="48x32", batches="1,4", repeat=2, quick=True)
    assert told.sizes == ((48, 32),) and told.batches == (1, 4) and told.repeat == 2
    default = options(sizes=None, batches=None, repeat=None)
    assert default.batches == (1, 8, 32, 64) and default.repeat == 10 and len(default.sizes) == 3
    result = CliRunner().invoke(
        app, ["bench", "--quick", "--engines", "gccl-cpu", "--cases", "random-0.1", "--quiet"]
    )
    assert result.exit_code == 0, result.output
    assert "random-0.1 640x480 8c" in result.output and "1920x1080" not in result.output
