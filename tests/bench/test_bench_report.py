"""`gccl bench` read by a person: an estimate of the time left that holds from the start, a
table that fits 100 columns, plain progress lines in a log, short case names, a summary
line per engine, and no error text or unmarked emulation in the report or the plot."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from rich.console import Console
from typer.testing import CliRunner

from ccl_cli.bench import command
from ccl_cli.bench.adapter import BenchEngine, Output
from ccl_cli.bench.command import parse_options, run_bench_command
from ccl_cli.bench.inputs import short_names
from ccl_cli.bench.suite import generate
from ccl_cli.cli import app
from ccl_cli.contract.params import LabelParams

PROGRESS = re.compile(r"^\[ *([\d.]+) s\] \((\d+)/(\d+)(?:, about (.+?) left)?\) ")


class Sleepy(BenchEngine):
    """An engine whose call takes `rate` seconds per pixel of the batch (and gives gccl's
    labels, so that it passes the cross-check)."""

    raster_order = True
    modes = ("binary", "tau")

    def __init__(self, name: str, rate: float) -> None:
        self.name, self.rate = name, rate

    def description(self) -> str:
        return f"sleeps {self.rate} s per pixel"

    def unavailable(self) -> str | None:
        return None

    def run(self, prepared: Any, params: LabelParams) -> Output:
        import ccl_cli

        time.sleep(self.rate * prepared.size)
        labels, counts = ccl_cli.label(
            prepared, batch=True, stats=False, device="cpu", **_keys(params)
        )
        return Output(labels, int(counts.sum()))


def _keys(params: LabelParams) -> dict[str, Any]:
    return {"connectivity": params.connectivity, "tau": params.tau}


def seconds(text: str) -> float:
    value, _, unit = text.partition(" ")
    if unit.startswith("min"):
        minutes, _, rest = text.partition(" min ")
        return int(minutes) * 60 + float(rest.split()[0])
    return float(value)


@pytest.mark.slow
def test_every_estimate_is_within_2x_of_the_time_left_from_the_first_case_on(monkeypatch):
    # Small cases first, 16 times larger ones later, batches of 1 and 4: an estimate that
    # assumes every measurement costs the average so far is 5-20 times too short.
    engines = [Sleepy("sleepy-a", 1e-6), Sleepy("sleepy-b", 2e-6)]
    monkeypatch.setattr(command, "_engines", lambda options: (engines, {}))
    err = io.StringIO()
    options = parse_options(
        None, "kernel", "1,4", 3, None, 8, "48x32,192x128", "random-0.5,document"
    )
    code = run_bench_command(
        [], options, out=Console(file=io.StringIO(), width=100), err=Console(file=err, width=80)
    )
    assert code == 0
    lines = err.getvalue().splitlines()
    end = float(re.match(r"^\[ *([\d.]+) s\] done", lines[-1]).group(1))  # type: ignore[union-attr]
    estimates = []
    for line in lines[:-1]:
        match = PROGRESS.match(line)
        assert match, line
        if match.group(4):
            estimates.append((float(match.group(1)), seconds(match.group(4))))
    assert len(estimates) == 15 and end > 2.0
    for at, estimate in estimates[:-2]:  # the last ones' few tenths are within the report's time
        left = end - at
        assert left / 2 <= estimate <= left * 2, (at, estimate, left, err.getvalue())


@pytest.mark.slow
def test_the_table_fits_100_columns_unless_wide_and_a_log_gets_whole_lines():
    options = parse_options(
        "gccl-cpu,opencv,opencv-contours,cc3d,skimage", "both", "1,2", 1, None, None,
        "48x32", "random-0.5,depth",
    )  # fmt: skip
    out, err = io.StringIO(), io.StringIO()
    code = run_bench_command(
        [], options, out=Console(file=out, width=100), err=Console(file=err, width=80)
    )
    assert code == 0
    report = out.getvalue().splitlines()
    assert max(len(line) for line in report) <= 100
    assert any(line.strip() == "random-0.5 48x32 8c" for line in report)  # cases as headings
    progress = err.getvalue().splitlines()
    assert all(line.startswith("[") for line in progress)  # one line each, never folded
    assert max(len(line) for line in progress) > 80
    wide = io.StringIO()
    run_bench_command(
        [], options, quiet=True, wide=True, out=Console(file=wide, width=150),
        err=Console(file=io.StringIO()),
    )  # fmt: skip
    assert "images/s" in wide.getvalue() and "images/s" not in out.getvalue()


def test_a_log_file_gets_the_100_column_report():
    args = ["bench", "--sizes", "48x32", "--cases", "random-0.5", "--batch", "1", "--repeat", "1"]
    result = CliRunner().invoke(app, [*args, "--engines", "gccl-cpu,opencv,cc3d", "-q"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100 and len(lines) > 10


def test_case_names_are_the_shortest_tails_that_tell_files_apart(tmp_path: Path):
    paths = [tmp_path / "a" / "x.png", tmp_path / "b" / "x.png", tmp_path / "c" / "y.png"]
    assert short_names([(p, None) for p in paths]) == ["a/x.png", "b/x.png", "y.png"]
    assert short_names([(paths[2], 0), (paths[2], 1)]) == ["y.png p1", "y.png p2"]
    for path in paths:
        path.parent.mkdir()
        Image.fromarray(generate("random-0.5", 40, 30)).save(path)
    out = io.StringIO()
    options = parse_options("gccl-cpu,cc3d", "kernel", "1", 1, None, 8, None, None)
    run_bench_command(
        [str(p) for p in paths], options, quiet=True, out=Console(file=out, width=100),
        err=Console(file=io.StringIO()),
    )  # fmt: skip
    text = out.getvalue()
    assert "a/x.png 8c" in text and "b/x.png 8c" in text and "y.png 8c" in text
    assert str(tmp_path) not in text


def test_a_summary_line_per_engine_and_level(monkeypatch):
    from ccl_cli.bench import engines as engines_module

    honest = engines_module.Cc3d.run

    def drops_a_component(self: BenchEngine, prepared: object, params: object) -> object:
        output = honest(self, prepared, params)  # type: ignore[arg-type]
        output.labels[0][output.labels[0] == 1] = 0
        output.components -= 1
        return output

    monkeypatch.setattr(engines_module.Cc3d, "run", drops_a_component)
    options = parse_options(
        "gccl-cpu,opencv,cc3d", "kernel", "1", 1, None, 8, "48x32", "random-0.5,document"
    )
    out = io.StringIO()
    run_bench_command(
        [], options, quiet=True, out=Console(file=out, width=100), err=Console(file=io.StringIO())
    )
    text = out.getvalue()
    summary = text[text.index("summary: speed-up over OpenCV") : text.index("gccl against")]
    summary = summary.splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in summary[3:] if line.strip()}
    assert rows["gccl-cpu"][0] == "kernel" and rows["gccl-cpu"][-2:] == ["2", "0"]
    assert re.fullmatch(r"[\d.]+x", rows["gccl-cpu"][1]) and re.fullmatch(
        r"[\d.]+x", rows["gccl-cpu"][2]
    )
    assert rows["opencv"][1:3] == ["1", "(reference)"] and rows["opencv"][-1] == "0"
    assert rows["cc3d"][-2:] == ["2", "2"]  # both cases disagreed


@pytest.mark.slow
def test_no_gpu_is_said_in_the_report_and_emulation_is_marked(monkeypatch, tmp_path: Path):
    import matplotlib.figure

    from ccl_cli.bench import machine

    monkeypatch.setattr(
        machine,
        "describe_machine",
        lambda: {"gpu": "none", "no gpu": "no GPU engine (CuPy not installed)"},
    )
    figures: list[Any] = []

    def savefig(self: Any, path: Path, *args: Any, **kwargs: Any) -> None:
        figures.append(self)
        Path(path).write_bytes(b"")  # (the report is renamed into place once written)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    options = parse_options(
        "gccl-cpu,opencv", "kernel", "1", 1, None, 8, "48x32", "random-0.5,depth"
    )
    out = io.StringIO()
    run_bench_command(
        [], options, plot_path=tmp_path / "p.png", quiet=True,
        out=Console(file=out, width=100), err=Console(file=io.StringIO()),
    )  # fmt: skip
    report = out.getvalue()
    assert "no gpu: no GPU engine (CuPy not installed)" in report
    assert "opencv*: emulated with cv2.floodFill region growing (OpenCV has no tau mode)" in report
    assert "  opencv*" in report and "  opencv " in report  # tau rows marked, binary ones not
    (figure,) = figures
    title = figure.get_suptitle()
    assert "GPU: none" in title and "Error" not in title and "cupy" not in title
    ticks = [t.get_text() for t in figure.axes[-1].get_xticklabels()]
    assert "depth 48x32 8c *" in ticks and "random-0.5 48x32 8c" in ticks
    assert any("OpenCV emulated: cv2.floodFill" in t.get_text() for t in figure.texts)


def test_machine_says_none_and_why_without_cuda():
    pytest.importorskip("cv2")
    from ccl_cli.bench.machine import describe_machine

    try:
        import cupy  # noqa: F401
    except ImportError:
        machine = describe_machine()
        assert machine["gpu"] == "none"
        assert machine["no gpu"] == "no GPU engine (CuPy not installed)"
    else:
        pytest.skip("CuPy is installed here")


def test_sleepy_engine_is_what_the_estimate_test_assumes():
    engine = Sleepy("s", 1e-6)
    batch = np.zeros((2, 100, 100), np.uint8)
    started = time.perf_counter()
    engine.run(batch, LabelParams())
    assert time.perf_counter() - started >= 0.02


def test_the_summary_compares_gccl_with_every_peer_and_says_who_computes_more():
    from ccl_cli.bench.records import Record
    from ccl_cli.bench.report import peer_rows, print_report

    def timed(engine: str, case: str, median: float, level: str = "kernel") -> Record:
        record = Record(engine, case, "random-0.5", "48x32", "binary", None, 8, level, 1)
        record.median_ms = median
        return record

    records = [
        timed("gccl-cpu", "a", 2.0),
        timed("cc3d", "a", 1.0),  # cc3d faster here
        timed("gccl-cpu", "b", 1.0),
        timed("cc3d", "b", 4.0),
        timed("gccl-cpu", "c", 1.0),
        timed("cc3d", "c", 3.0),
        timed("opencv", "a", 6.0),
        timed("opencv", "c", 3.0),
        timed("gccl-cpu", "a", 10.0, "end-to-end"),
        timed("opencv", "a", 20.0, "end-to-end"),
    ]
    rows = peer_rows(records)
    assert rows == [
        ("gccl-cpu", "cc3d", "kernel", "2 of 3", "3.00x", "0.5-4x"),
        ("gccl-cpu", "opencv", "kernel", "2 of 2", "3.00x", "3-3x"),
        ("gccl-cpu", "opencv", "end-to-end", "1 of 1", "2.00x", "2-2x"),
    ]
    out = io.StringIO()
    work = {"gccl-cpu": ("labels", "box+centroid", "mean/min/max"), "cc3d": ("labels",)}
    work["opencv"] = ("labels", "box+centroid")
    print_report(Console(file=out, width=100), records, {}, {}, work=work)
    text = " ".join(out.getvalue().split())
    assert "gccl against each peer" in text
    assert "gccl-cpu cc3d kernel 2 of 3 3.00x 0.5-4x box+centroid, mean/min/max" in text
    assert (
        "gccl-cpu also computes box+centroid, mean/min/max per component, which cc3d does not: "
        "its times include that work"
    ) in text
    assert "gccl-cpu also computes mean/min/max per component, which opencv does not" in text
