"""`gccl bench`'s command-line parameters: its own options and the schema options it shares
with `gccl label`, in the bench's wording; the measuring itself is in bench/."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from .cli_parameters import fail, schema_parameter, with_default
from .errors import EXIT_INTERRUPTED, GcclError
from .options import BY_NAME

#: gccl bench's options shared with gccl label (the schema's names, metavars and checks),
#: with the bench's own wording: (help, default shown).
BENCH_SHARED: dict[str, tuple[str, str | None]] = {
    "tau": (
        "Tau mode with this tau for the INPUT images, and the tau of the generated depth "
        "images (else 8); without it INPUT images run in binary mode.",
        None,
    ),
    "tau_relative": (
        "Tau mode's tolerance grows by R * max(|a|, |b|), as gccl label's does (engines "
        "without a growing tolerance are not run on those cases).",
        None,
    ),
    "tau_quadratic": (
        "Tau mode's tolerance grows by Q * max(|a|, |b|)^2 (depth cameras), as gccl label's does.",
        None,
    ),
    "connectivity": (
        "Neighbours: 4 (edges) or 8 (and corners); for volumes 6, 18 or 26 (4 means 6, "
        "8 means 26).",
        "both, 8 first",
    ),
    "invert": ("Flip the INPUT images' intensities first, as gccl label does.", None),
    "threshold": (
        "Binarize the INPUT images as gccl label does: foreground is v > T (v < T with --invert).",
        None,
    ),
    "background": (
        "The INPUT images' non-foreground value (after --invert), or none.",
        BY_NAME["background"].default_text,
    ),
}


def bench_command(
    inputs: Annotated[
        list[str] | None,
        typer.Argument(
            help="Image or volume files, folders or glob patterns to measure on; without any, a "
            "built-in generated suite (random, document-like and depth-like images).",
            metavar="INPUT",
            show_default=False,
        ),
    ] = None,
    engines: Annotated[
        str | None,
        typer.Option(
            metavar="NAMES",
            help=with_default(
                "Comma-separated engines: gccl-cuda, gccl-cuda-labels (labels only), "
                "gccl-cuda-polygons (with --polygons outlines), gccl-cpu, opencv, "
                "opencv-contours (with cv2.findContours), cupyx, cc3d, skimage, scipy (volumes).",
                "every one available",
            ),
            show_default=False,
        ),
    ] = None,
    level: Annotated[
        str,
        typer.Option(
            metavar="kernel|end-to-end|both",
            help=with_default(
                "kernel (data already in memory or on the GPU; only labeling is timed), "
                "end-to-end (files in, label images and CSVs out through gccl label) or both.",
                "kernel",
            ),
            show_default=False,
        ),
    ] = "kernel",
    batch: Annotated[
        str | None,
        typer.Option(
            metavar="N,N,..",
            help=with_default(
                "Comma-separated batch sizes (images per call); 1 always runs, as the "
                "cross-check and the estimate that skips calls over 1 s.",
                "1,8,32,64; --quick 1",
            ),
            show_default=False,
        ),
    ] = None,
    repeat: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help=with_default(
                "Timed calls per measurement (fewer once they take 0.5 s).", "10; --quick 3"
            ),
            show_default=False,
        ),
    ] = None,
    quick: Annotated[
        bool,
        typer.Option(
            "--quick",
            help="A short suite (half a minute on 2 cores): 640x480 images, batch 1, 3 "
            "timed calls, unless --sizes, --batch or --repeat say otherwise.",
            show_default=False,
        ),
    ] = False,
    sizes: Annotated[
        str | None,
        typer.Option(
            metavar="WxH,WxHxD,..",
            help=with_default(
                "Sizes of the generated suite, e.g. 640x480,1920x1080; WxHxD for volumes.",
                "640x480,1920x1080,4000x3000 and 128x128x128,512x512x512; without a usable GPU "
                "640x480,1920x1080 and 128x128x128",
            ),
            show_default=False,
        ),
    ] = None,
    cases: Annotated[
        str | None,
        typer.Option(
            metavar="NAMES",
            help=with_default(
                "Families of the generated suite: random-0.1, random-0.5, random-0.9, "
                "document, depth; volumes: blobs3d, pores3d, random3d, ct3d.",
                "the images'",
            ),
            show_default=False,
        ),
    ] = None,
    json_path: Annotated[
        Path | None,
        typer.Option(
            "--json", metavar="FILE", help="Write every record as a JSON list.", show_default=False
        ),
    ] = None,
    csv_path: Annotated[
        Path | None,
        typer.Option(
            "--csv", metavar="FILE", help="Write every record as CSV.", show_default=False
        ),
    ] = None,
    plot_path: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            metavar="FILE",
            help="Write a PNG bar chart of speed-ups over OpenCV.",
            show_default=False,
        ),
    ] = None,
    wide: Annotated[
        bool,
        typer.Option(
            "--wide",
            help="The report's full table (about 150 columns); without it the table fits 100 "
            "columns unless the terminal is wider.",
            show_default=False,
        ),
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet", "-q", help="No progress lines (the report still prints).", show_default=False
        ),
    ] = False,
    **shared: Any,
) -> None:
    """Time gccl against OpenCV and the GPU peers on the same images, and check they agree.

    Exit code 0, 1 when an engine's components differ from the reference's (or it fails),
    2 for a bad option.
    """
    from .bench.command import parse_options, run_bench_command

    try:
        options = parse_options(
            engines, level, batch, repeat, shared.get("tau"), shared.get("connectivity"),
            sizes, cases, bool(shared.get("invert")), shared.get("threshold"),
            shared.get("background"), shared.get("tau_relative"), shared.get("tau_quadratic"),
            quick,
        )  # fmt: skip
        code = run_bench_command(
            inputs or [], options, json_path, csv_path, plot_path, quiet, wide=wide
        )
    except GcclError as error:
        raise fail(str(error)) from None
    except KeyboardInterrupt:
        raise fail("interrupted", EXIT_INTERRUPTED) from None
    raise typer.Exit(code)


def with_shared(function: Callable[..., Any], shared: dict[str, tuple[str, str | None]]) -> None:
    """Give `function` (whose last parameter is **shared) the signature Typer reads: its own
    parameters, then the schema options named in `shared` with the command's wording."""
    hints = typing.get_type_hints(function, include_extras=True)
    own = [
        parameter.replace(annotation=hints[parameter.name])
        for parameter in inspect.signature(function).parameters.values()
        if parameter.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    options = [schema_parameter(BY_NAME[name], *wording) for name, wording in shared.items()]
    function.__signature__ = inspect.Signature([*own, *options])  # type: ignore[attr-defined]


with_shared(bench_command, BENCH_SHARED)
