"""The `gccl` command line: thin commands that parse, build Settings and delegate.

Errors become messages and exit codes here and nowhere else: a GcclError is
one line on stderr and exit 2; per-input failures are reported by the
pipeline and give exit 1; Ctrl-C gives 130.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from . import __version__
from .errors import EXIT_INTERRUPTED, EXIT_USAGE, GcclError

if TYPE_CHECKING:  # the pipeline (numpy, codecs) loads only when a command runs
    from .run.records import Record, RunReport

app = typer.Typer(
    help="Label connected components in batches of images, on an NVIDIA GPU or the CPU.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
config_app = typer.Typer(help="Inspect configuration.", no_args_is_help=True)
app.add_typer(config_app, name="config")

stderr = Console(stderr=True, highlight=False, soft_wrap=True)  # one line per message

ConfigOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--config",
        help="YAML file with the same keys as the options (repeatable; later files and "
        "then command-line flags win).",
        show_default=False,
    ),
]


def _fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    stderr.print(Text(f"gccl: error: {message}", style="red"))
    return typer.Exit(code)


class _ImagesPerSecond(ProgressColumn):
    """Images per second over the whole run so far (rich's own speed is too jumpy)."""

    def render(self, task: Task) -> Text:
        elapsed = task.finished_time or task.elapsed
        if not elapsed or not task.completed:
            return Text("")
        return Text(f"{task.completed / elapsed:.1f} img/s")


class ConsoleReporter:
    """Progress and messages on stderr; with --json one object per input on stdout."""

    def __init__(self, quiet: bool, as_json: bool) -> None:
        self.as_json = as_json
        self.progress = Progress(
            TextColumn("labeling"),
            BarColumn(),
            MofNCompleteColumn(),
            _ImagesPerSecond(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=stderr,
            disable=quiet,
            transient=False,
        )
        self.task: Any = None

    def start(self, total: int) -> None:
        self.progress.start()
        self.task = self.progress.add_task("label", total=total)

    def finished(self, record: Record) -> None:
        if record.status == "failed":
            self.progress.console.print(
                Text(f"gccl: {record.item.display}: {record.message}", style="red")
            )
        if self.as_json:
            sys.stdout.write(json.dumps(record.as_json()) + "\n")
            sys.stdout.flush()
        if self.task is not None:
            self.progress.advance(self.task)

    def notice(self, message: str) -> None:
        self.progress.console.print(Text(f"gccl: {message}", style="yellow"))

    def stop(self, abandoned: bool = False) -> None:
        """End the progress display; an abandoned run (exit 2) leaves no bar behind."""
        if abandoned and self.task is not None:
            self.progress.remove_task(self.task)
        self.progress.stop()


def _closing_line(report: RunReport) -> str:
    done, failed, skipped = report.count("ok"), report.count("failed"), report.count("skipped")
    parts = [f"labeled {done} of {len(report.records)} input(s)"]
    if skipped:
        parts.append(f"{skipped} skipped")
    if failed:
        parts.append(f"{failed} failed")
    not_run = report.count("not-run")
    if not_run:
        parts.append(f"{not_run} not run")
    return f"{', '.join(parts)} in {report.seconds:.2f} s; summary: {report.summary}"


@app.command("label")
def label_command(
    inputs: Annotated[
        list[str],
        typer.Argument(
            help="Image files, folders, glob patterns, or - to read one path per line from stdin.",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Folder for the outputs (required).")
    ] = None,
    recursive: Annotated[
        bool | None,
        typer.Option("--recursive/--no-recursive", "-r", help="Descend into sub-folders."),
    ] = None,
    background: Annotated[
        str | None,
        typer.Option(
            help="Value that is not foreground, compared after --invert; 'none' makes every "
            "non-NaN pixel foreground.  \\[default: 0]",
            show_default=False,
        ),
    ] = None,
    invert: Annotated[
        bool | None,
        typer.Option(
            "--invert/--no-invert",
            help="Flip intensities first (max - v; -v for floats): dark ink on light paper "
            "becomes foreground.",
        ),
    ] = None,
    threshold: Annotated[
        str | None,
        typer.Option(
            help="Binarize on the original values: foreground is v > T (v < T with --invert).",
            show_default=False,
        ),
    ] = None,
    tau: Annotated[
        str | None,
        typer.Option(
            help="Grayscale mode: neighbours join when |v(p) - v(q)| <= T (int or float).",
            show_default=False,
        ),
    ] = None,
    connectivity: Annotated[
        int | None, typer.Option(help="4 or 8 neighbours.  \\[default: 8]", show_default=False)
    ] = None,
    min_area: Annotated[
        int | None,
        typer.Option(
            help="Remove components of fewer pixels; survivors are renumbered.  \\[default: 0]",
            show_default=False,
        ),
    ] = None,
    erode: Annotated[
        int | None,
        typer.Option(
            help="Erode the foreground mask N times before labeling (3x3 square, cross with "
            "--connectivity 4; border counts as background).  \\[default: 0]",
            show_default=False,
        ),
    ] = None,
    dilate: Annotated[
        int | None,
        typer.Option(
            help="Dilate the foreground mask N times.  \\[default: 0]", show_default=False
        ),
    ] = None,
    open_: Annotated[
        int | None,
        typer.Option(
            "--open",
            help="Open the mask: erode N, then dilate N.  \\[default: 0]",
            show_default=False,
        ),
    ] = None,
    close: Annotated[
        int | None,
        typer.Option(
            help="Close the mask: dilate N, then erode N.  \\[default: 0]", show_default=False
        ),
    ] = None,
    smooth: Annotated[
        str | None,
        typer.Option(
            help="Tau mode: smooth the values over the mask first, box:R or binomial:R "
            "(normalized, nodata-aware, R <= 7).",
            show_default=False,
        ),
    ] = None,
    color_to_gray: Annotated[
        str | None,
        typer.Option(
            help="How RGB/RGBA images become gray: luma, red, green or blue "
            "(without it they are an error).",
            show_default=False,
        ),
    ] = None,
    label_format: Annotated[
        str | None,
        typer.Option(
            help="auto (16-bit PNG up to 65535 labels, else 32-bit TIFF), png or tiff.  "
            "[default: auto]",
            show_default=False,
        ),
    ] = None,
    tiff_compression: Annotated[
        str | None,
        typer.Option(
            help="Codec of label TIFFs: deflate (reads everywhere) or zstd (3-8x faster to "
            "write, smaller; libtiff >= 4.0.10, GDAL, tifffile, Pillow).  \\[default: deflate]",
            show_default=False,
        ),
    ] = None,
    preview: Annotated[
        bool | None,
        typer.Option("--preview/--no-preview", help="Also write a colored overlay PNG."),
    ] = None,
    polygons: Annotated[
        bool | None,
        typer.Option(
            "--polygons/--no-polygons",
            help="Also write each kept component's outline as GeoJSON (pixel-corner vertices).",
        ),
    ] = None,
    skip_existing: Annotated[
        bool | None,
        typer.Option(
            "--skip-existing/--no-skip-existing",
            help="Skip inputs whose outputs are all present (resume a stopped run).",
        ),
    ] = None,
    fail_fast: Annotated[
        bool | None,
        typer.Option("--fail-fast/--no-fail-fast", help="Stop at the first failed input."),
    ] = None,
    batch_size: Annotated[
        str | None,
        typer.Option(
            help="Images per backend call, or auto (from memory).  \\[default: auto]",
            show_default=False,
        ),
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(
            help="auto (CUDA when usable, else CPU), cpu, cuda or cuda:N.  \\[default: auto]",
            show_default=False,
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            help="Threads decoding and encoding images, per process.  "
            "\\[default: the cores, shared among the processes]",
            show_default=False,
        ),
    ] = None,
    processes: Annotated[
        str | None,
        typer.Option(
            help="Worker processes, or auto (one per two cores, and at most one per 8 "
            "inputs: small jobs stay in this process).  \\[default: auto]",
            show_default=False,
        ),
    ] = None,
    devices: Annotated[
        str | None,
        typer.Option(
            help="Use several GPUs: all, or numbers like 0,1 (a thread per GPU; worker "
            "processes are served by the GPUs in turn; the output is the same as on one GPU).",
            show_default=False,
        ),
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option(
            help="Run the job on the Dask cluster of this scheduler (tcp://host:8786); "
            "inputs and --out must be on storage every worker shares.",
            show_default=False,
        ),
    ] = None,
    max_image_bytes: Annotated[
        str | None,
        typer.Option(
            help="Refuse an input whose pixels would decode to more bytes (from its header, "
            "before decoding), e.g. 4G or 512MiB.  \\[default: 4GiB]",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool | None,
        typer.Option("--json/--no-json", help="Print one JSON object per input on stdout."),
    ] = None,
    quiet: Annotated[
        bool | None,
        typer.Option("--quiet/--no-quiet", "-q", help="No progress bar (errors still print)."),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Label every input image and write label images, statistics CSVs and a summary."""
    from .config import resolve
    from .run.command import run_label
    from .run.records import exit_code

    flags = {
        "out": out,
        "recursive": recursive,
        "background": background,
        "invert": invert,
        "threshold": threshold,
        "tau": tau,
        "connectivity": connectivity,
        "min_area": min_area,
        "erode": erode,
        "dilate": dilate,
        "open": open_,
        "close": close,
        "smooth": smooth,
        "color_to_gray": color_to_gray,
        "label_format": label_format,
        "tiff_compression": tiff_compression,
        "preview": preview,
        "polygons": polygons,
        "skip_existing": skip_existing,
        "fail_fast": fail_fast,
        "batch_size": batch_size,
        "device": device,
        "workers": workers,
        "processes": processes,
        "devices": devices,
        "scheduler": scheduler,
        "max_image_bytes": max_image_bytes,
        "json": as_json,
        "quiet": quiet,
    }
    reporter: ConsoleReporter | None = None
    try:
        settings = resolve(config or [], flags)
        reporter = ConsoleReporter(settings.quiet, settings.json)
        report = run_label(inputs, settings, reporter)
    except GcclError as error:
        if reporter is not None:  # before the message, so that it is the last line
            reporter.stop(abandoned=True)
        raise _fail(str(error)) from None
    except KeyboardInterrupt:
        raise _fail("interrupted", EXIT_INTERRUPTED) from None
    finally:
        if reporter is not None:
            reporter.stop()
    stderr.print(Text(f"gccl: {_closing_line(report)}"))
    raise typer.Exit(exit_code(report))


@config_app.command("show")
def config_show(config: ConfigOption = None) -> None:
    """Print the effective settings (defaults overridden by each --config file)."""
    from .config import resolve

    try:
        settings = resolve(config or [], {})
    except GcclError as error:
        raise _fail(str(error)) from None
    sys.stdout.write(settings.as_yaml())


@app.command("info")
def info_command() -> None:
    """Version, backends, CUDA devices (or why none is usable), where the kernels come from."""
    from .info import collect_info

    sys.stdout.write(collect_info())


@app.command("bench")
def bench_command(
    inputs: Annotated[
        list[str] | None,
        typer.Argument(
            help="Image files, folders or glob patterns to measure on; without any, a built-in "
            "generated suite (random, document-like and depth-like images).",
            show_default=False,
        ),
    ] = None,
    engines: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated engines: gccl-cuda, gccl-cuda-labels (labels only), "
            "gccl-cuda-polygons (with --polygons outlines), gccl-cpu, opencv, opencv-contours "
            "(with cv2.findContours), cupyx, cc3d, skimage.  "
            "\\[default: every one available]",
            show_default=False,
        ),
    ] = None,
    level: Annotated[
        str,
        typer.Option(
            help="kernel (data already in memory or on the GPU; only labeling is timed), "
            "end-to-end (files in, label images and CSVs out through gccl label) or both."
        ),
    ] = "kernel",
    batch: Annotated[
        str,
        typer.Option(
            help="Comma-separated batch sizes (images per call); 1 always runs, as the "
            "cross-check and the estimate that skips calls over 1 s."
        ),
    ] = "1,8,32,64",
    repeat: Annotated[
        int, typer.Option(help="Timed calls per measurement (fewer once they take 0.5 s).")
    ] = 10,
    tau: Annotated[
        str | None,
        typer.Option(
            help="Tau mode with this tau for the INPUT images, and the tau of the generated "
            "depth images (else 8); without it INPUT images run in binary mode.",
            show_default=False,
        ),
    ] = None,
    connectivity: Annotated[
        int | None,
        typer.Option(help="4 or 8 neighbours.  \\[default: both, 8 first]", show_default=False),
    ] = None,
    sizes: Annotated[
        str | None,
        typer.Option(
            help="Sizes of the generated suite, e.g. 640x480,1920x1080.  "
            "\\[default: 640x480,1920x1080,4000x3000]",
            show_default=False,
        ),
    ] = None,
    cases: Annotated[
        str | None,
        typer.Option(
            help="Families of the generated suite: random-0.1, random-0.5, random-0.9, document, "
            "depth.  \\[default: all]",
            show_default=False,
        ),
    ] = None,
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="Write every record as a JSON list.", show_default=False),
    ] = None,
    csv_path: Annotated[
        Path | None,
        typer.Option("--csv", help="Write every record as CSV.", show_default=False),
    ] = None,
    plot_path: Annotated[
        Path | None,
        typer.Option(
            "--plot", help="Write a PNG bar chart of speed-ups over OpenCV.", show_default=False
        ),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress lines (the report still prints).")
    ] = False,
) -> None:
    """Time gccl against OpenCV and the GPU peers on the same images, and check they agree.

    Exit code 0, 1 when an engine's components differ from the reference's (or it fails),
    2 for a bad option.
    """
    from .bench.command import parse_options, run_bench_command

    try:
        options = parse_options(engines, level, batch, repeat, tau, connectivity, sizes, cases)
        code = run_bench_command(inputs or [], options, json_path, csv_path, plot_path, quiet)
    except GcclError as error:
        raise _fail(str(error)) from None
    except KeyboardInterrupt:
        raise _fail("interrupted", EXIT_INTERRUPTED) from None
    raise typer.Exit(code)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"gccl {__version__}\n")
        raise typer.Exit()


@app.callback()
def main_callback(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """gccl: connected-components labeling for batches of images."""


def main() -> None:
    """Console-script entry point."""
    app()
