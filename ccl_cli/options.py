"""The options of `gccl label`, declared once: name, default, placeholder, help and check.

The command line (cli.py builds its Typer options from OPTIONS), the config
files and `ccl_cli.label`'s keywords (config.py checks every value with the
option's `check`), configs/default.yaml and the README's option table all
follow this list; tests/test_options.py holds them to it. A check (option_checks.py) takes a
YAML scalar, a command-line string or an API value and returns the value, or
raises ValueError with the text that follows "'key' must be ...". An option
with an `api` type is also a keyword of `ccl_cli.label` and `ccl_cli.Labeler`
(API_OPTIONS): api.py builds their signatures from it, and values of another
type are refused there before the check (api_type_problem).
"""

from __future__ import annotations

import numbers
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import option_checks as checks
from .contract.stages import MAX_SMOOTH_RADIUS

#: How RGB/RGBA inputs become gray (--color-to-gray); io/decode/pixels.py implements them.
COLOR_TO_GRAY_CHOICES: tuple[str, ...] = ("luma", "red", "green", "blue")
#: Codecs of label TIFFs (--tiff-compression); io/label_images.py implements them.
TIFF_COMPRESSIONS: tuple[str, ...] = ("deflate", "zstd")
#: Label file formats (--label-format): png for images; tiff and npy hold images or volumes;
#: nifti, nrrd and metaimage volumes (io/volumes writes them).
LABEL_FORMATS: tuple[str, ...] = ("auto", "png", "tiff", "npy", "nifti", "nrrd", "metaimage")
#: Default of --max-image-bytes: the most bytes an input may decode to (width x height x
#: samples x bytes per sample), which also bounds every buffer on the way to them
#: (io/decode/checks.py). A few hundred bytes of PNG or TIFF can declare gigabytes of pixels;
#: with the copies labeling makes, a run needs a few times this per image in flight.
MAX_IMAGE_BYTES = 4 * 2**30


@dataclass(frozen=True)
class Option:
    """One option of `gccl label`.

    name: the Settings field and config key (config files also take dashes).
    default: the value when neither a config file nor a flag gives one.
    metavar: the placeholder in --help ("" for an on/off flag, which gets --name/--no-name).
    short: a one-letter alias ("-o"), or "".
    help: one or two sentences for --help and the README's table.
    api: the keyword's type in the Python API (module docstring), or None.
    """

    name: str
    default: Any
    metavar: str
    help: str
    check: Callable[[Any], Any]
    short: str = ""
    #: The type `ccl_cli.label` takes it as (its keyword's annotation), or None where the
    #: option is the command line's only (inputs, outputs, the run).
    api: Any = None
    #: A value as the user writes it (help texts, `gccl config show`): 4GiB, not 4294967296.
    show: Callable[[Any], str] = str

    @property
    def flag(self) -> str:
        """The long command-line flag, e.g. --min-area."""
        return "--" + self.name.replace("_", "-")

    @property
    def default_text(self) -> str | None:
        """The default as --help shows it, or None where there is none to show (unset,
        or an on/off flag, whose --name/--no-name says it)."""
        if self.default is None or isinstance(self.default, bool):
            return None
        return self.show(self.default)

    @property
    def is_switch(self) -> bool:
        """An on/off flag (--preview/--no-preview) rather than one that takes a value."""
        return self.metavar == ""


OPTIONS: tuple[Option, ...] = (
    Option(
        "out", None, "DIR", "Folder for the outputs (required).", checks.optional(checks.path), "-o"
    ),
    Option("recursive", False, "", "Descend into sub-folders of folder inputs.", checks.flag, "-r"),
    Option(
        "relative_to",
        None,
        "ROOT",
        "Outputs mirror each input's path below ROOT (files named or on stdin included); "
        "an input outside ROOT fails.",
        checks.optional(checks.path),
    ),
    Option(
        "keep_extension",
        False,
        "",
        "Output names keep the input's extension (x.jpg gives x.jpg.labels.png), so that "
        "x.jpg and x.bmp in one folder do not collide.",
        checks.flag,
    ),
    Option(
        "null_separated",
        False,
        "",
        "The paths on stdin (-) are NUL-separated, as find -print0 writes them.",
        checks.flag,
        "-0",
    ),
    Option(
        "background",
        0,
        "V",
        "The value that is not foreground, compared after --invert; 'none' makes every "
        "non-NaN pixel foreground.",
        checks.background,
        api=float | None,
    ),
    Option(
        "invert",
        False,
        "",
        "Flip intensities first (max - v; -v for floats): dark ink on light paper becomes "
        "foreground.",
        checks.flag,
        api=bool,
    ),
    Option(
        "threshold",
        None,
        "T",
        "Binarize the original values instead: foreground is v > T (v < T with --invert).",
        checks.optional(checks.finite_number),
        api=float | None,
    ),
    Option(
        "tau",
        None,
        "T",
        "Grayscale mode: neighbours join when |v(p) - v(q)| <= T (an int or a float).",
        checks.optional(checks.non_negative),
        api=float | None,
    ),
    Option(
        "tau_relative",
        None,
        "R",
        "Tau mode with a tolerance that grows with the value: + R * max(|v(p)|, |v(q)|) "
        "(range sensors whose noise grows linearly; --tau defaults to 0).",
        checks.optional(checks.coefficient),
        api=float | None,
    ),
    Option(
        "tau_quadratic",
        None,
        "Q",
        "Tau mode, + Q * max(|v(p)|, |v(q)|)^2 (depth cameras and stereo, whose depth step "
        "grows with the square of the range; --tau defaults to 0).",
        checks.optional(checks.coefficient),
        api=float | None,
    ),
    Option(
        "connectivity",
        8,
        "4|8|6|18|26",
        "Neighbours: 4 (edges) or 8 (and corners) in images; 6 (faces), 18 (and edges) or 26 "
        "(and corners) in volumes. Each input takes its own kind's: 4 and 6 mean faces (4 in "
        "an image, 6 in a volume), 8 and 26 every neighbour, 18 is 8 in an image; the default "
        "8 labels volumes at 26.",
        checks.connectivity,
        api=int,
    ),
    Option(
        "min_area",
        0,
        "N",
        "Remove components of fewer than N pixels; the rest are renumbered.",
        checks.int_at_least(0),
        api=int,
    ),
    Option(
        "max_area",
        None,
        "N",
        "Remove components of more than N pixels; the rest are renumbered.",
        checks.optional(checks.int_at_least(1)),
        api=int | None,
    ),
    Option(
        "largest",
        None,
        "K",
        "Keep only the K largest components (the lower label on equal areas), of those "
        "--min-area and --max-area keep; renumbered.",
        checks.optional(checks.int_at_least(1)),
        api=int | None,
    ),
    Option(
        "fill_holes",
        False,
        "",
        "Fill the holes of each kept component (background it alone encloses) before "
        "the statistics.",
        checks.flag,
        api=bool,
    ),
    Option(
        "erode",
        0,
        "N",
        "Erode the foreground mask N times before labeling (3x3 square, a cross with "
        "--connectivity 4; outside the image never changes the result).",
        checks.steps,
        api=int,
    ),
    Option("dilate", 0, "N", "Dilate the foreground mask N times.", checks.steps, api=int),
    Option(
        "open", 0, "N", "Open the mask: erode N times, then dilate N times.", checks.steps, api=int
    ),
    Option(
        "close",
        0,
        "N",
        "Close the mask: dilate N times, then erode N times.",
        checks.steps,
        api=int,
    ),
    Option(
        "smooth",
        None,
        "KIND:R",
        f"Tau mode: smooth the values over the mask first, box:R or binomial:R "
        f"(nodata-aware, R <= {MAX_SMOOTH_RADIUS}).",
        checks.optional(checks.smooth),
        api=str | None,
    ),
    Option(
        "color_to_gray",
        None,
        "|".join(COLOR_TO_GRAY_CHOICES),
        "How RGB/RGBA images become gray (without it they are an error).",
        checks.optional(checks.choice(*COLOR_TO_GRAY_CHOICES)),
    ),
    Option(
        "label_format",
        "auto",
        "|".join(LABEL_FORMATS),
        "Label images: auto (16-bit PNG up to 65535 labels, else 32-bit TIFF), png, tiff, or "
        "npy (NumPy's .npy, uint16 up to 65535 labels, else uint32). Label volumes: auto "
        "(the input's format; slices: a TIFF stack), tiff, npy, nifti, nrrd or metaimage.",
        checks.choice(*LABEL_FORMATS),
    ),
    Option(
        "tiff_compression",
        "deflate",
        "|".join(TIFF_COMPRESSIONS),
        "Codec of label TIFFs: deflate (reads everywhere) or zstd (faster, smaller).",
        checks.choice(*TIFF_COMPRESSIONS),
    ),
    Option(
        "volume",
        False,
        "",
        "A multi-page TIFF is a z-stack (one volume, not pages); a folder argument's 2-D "
        "images, in natural name order, are the slices of one volume.",
        checks.flag,
    ),
    Option(
        "spacing",
        None,
        "SX,SY,SZ",
        "Voxel size of volumes along x, y, z (overrides the file's): adds physical columns "
        "to the statistics.",
        checks.optional(checks.spacing),
        show=lambda spacing: ",".join(f"{n:g}" for n in spacing),
    ),
    Option(
        "preview",
        False,
        "",
        "Also write a colored overlay PNG (a volume: three orthogonal projections).",
        checks.flag,
    ),
    Option(
        "polygons",
        False,
        "",
        "Also write each kept component's outline as GeoJSON (pixel-corner vertices).",
        checks.flag,
    ),
    Option(
        "skip_existing",
        False,
        "",
        "Skip inputs whose outputs are present and current: made with these options, after "
        "the input last changed.",
        checks.flag,
    ),
    Option("fail_fast", False, "", "Stop at the first failed input.", checks.flag),
    Option(
        "fsync",
        True,
        "",
        "Flush each output to disk before renaming it into place (--no-fsync: faster on "
        "slow disks, but a power cut may leave empty or old outputs).",
        checks.flag,
    ),
    Option(
        "batch_size",
        "auto",
        "N|auto",
        "Images per backend call, or auto (from memory).",
        checks.count_or_auto,
    ),
    Option(
        "batch_window",
        0.0,
        "MS",
        "Inputs that arrive over time (stdin, gccl watch): a batch waits up to MS "
        "milliseconds after its first input for more (0: a batch is what has been read "
        "by the time labeling is free; at most a minute).",
        checks.milliseconds,
    ),
    Option(
        "device",
        "auto",
        "DEVICE",
        "auto (CUDA when usable, else the CPU), cpu, cuda or cuda:N.",
        checks.check_device,
        api=str,
    ),
    Option(
        "devices",
        None,
        "all|0,1,..",
        "Spread batches over several GPUs: all, or GPU numbers (same output as one GPU).",
        checks.optional(checks.devices),
    ),
    Option(
        "workers",
        None,
        "N",
        "Threads decoding and encoding images, per process (default: the cores, shared).",
        checks.optional(checks.int_at_least(1, checks.MAX_WORKERS)),
    ),
    Option(
        "processes",
        "auto",
        "N|auto",
        "Worker processes, or auto (one per core, at most one per 8 inputs).",
        checks.processes,
    ),
    Option(
        "scheduler",
        None,
        "ADDRESS",
        "Label on the Dask cluster of this scheduler (tcp://host:8786); inputs and --out "
        "must be on storage every worker shares.",
        checks.optional(checks.scheduler),
    ),
    Option(
        "max_image_bytes",
        MAX_IMAGE_BYTES,
        "BYTES",
        "Refuse an input whose pixels would decode to more bytes; every buffer of a decode "
        "is checked before it is made (e.g. 4G, 512MiB).",
        checks.byte_count,
        show=checks.bytes_text,
    ),
    Option("json", False, "", "Print one JSON object per input on stdout.", checks.flag),
    Option("quiet", False, "", "No progress bar (errors still print).", checks.flag, "-q"),
)

#: The options by name.
BY_NAME: dict[str, Option] = {option.name: option for option in OPTIONS}
#: The options `ccl_cli.label` takes as keywords, in this order.
API_OPTIONS: tuple[Option, ...] = tuple(option for option in OPTIONS if option.api is not None)

#: Whether a value has one of the types an API keyword's annotation names, and how to say
#: that type. numpy's scalars count as Python's; True and False are not numbers.
_API_TYPES: dict[Any, tuple[Callable[[Any], bool], str]] = {
    bool: (lambda value: isinstance(value, (bool, np.bool_)), "True or False"),
    int: (
        lambda value: isinstance(value, numbers.Integral) and not isinstance(value, bool),
        "an int",
    ),
    float: (
        lambda value: isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)),
        "a number",
    ),
    str: (lambda value: isinstance(value, str), "a string"),
    type(None): (lambda value: value is None, "None"),
}


def close_names(name: str, names: Iterable[str]) -> list[str]:
    """The names among `names` that `name` is likely a typo of (at most two, closest first):
    within one edit per four characters (a letter added, dropped, changed, or two swapped),
    or begun by it (four characters at least), leading dashes and the - / _ spelling aside,
    so that --min-aera finds --min-area, --thresh and -threshold --threshold, and --verbose
    finds nothing."""

    def bare(text: str) -> str:
        return text.lstrip("-").replace("_", "-").lower()

    typed = bare(name)
    limit = max(1, len(typed) // 4)
    scored = sorted(
        (0 if bare(candidate).startswith(typed) and len(typed) >= 4 else distance, candidate)
        for candidate in dict.fromkeys(names)
        if (distance := _edits(typed, bare(candidate))) <= limit
        or (len(typed) >= 4 and bare(candidate).startswith(typed))
    )
    return [candidate for _, candidate in scored[:2]]


def _edits(a: str, b: str) -> int:
    """The optimal string alignment distance of a and b (Levenshtein with swaps)."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
    return previous[-1]


def api_type_problem(option: Option, value: Any) -> str | None:
    """What type `value` should have as `ccl_cli.label`'s keyword `option` ("an int or
    None"), or None when it has one of them."""
    kinds = typing.get_args(option.api) or (option.api,)
    if any(_API_TYPES[kind][0](value) for kind in kinds):
        return None
    return " or ".join(_API_TYPES[kind][1] for kind in kinds)


#: The options that mean nothing to `gccl watch`, and why: its command line has no such flag,
#: and a config file that sets one is refused (run/watch.py).
NOT_FOR_A_WATCH: dict[str, str] = {
    "null_separated": "a watch reads no stdin",
    "relative_to": "outputs mirror each file's path below its watched folder",
    "processes": "a watch labels in this process",
    "scheduler": "a watch labels in this process",
    "skip_existing": "a watch always skips, when it starts, what has current outputs",
}
