"""The options of `gccl label`, declared once: name, default, placeholder, help and check.

The command line (cli.py builds its Typer options from OPTIONS), the config
files and `ccl_cli.label`'s keywords (config.py checks every value with the
option's `check`), configs/default.yaml and the README's option table all
follow this list; tests/test_options.py holds them to it. A check takes a
YAML scalar, a command-line string or an API value and returns the value, or
raises ValueError with the text that follows "'key' must be ...". An option
with an `api` type is also a keyword of `ccl_cli.label` and `ccl_cli.Labeler`
(API_OPTIONS): api.py builds their signatures from it, and values of another
type are refused there before the check (api_type_problem).
"""

from __future__ import annotations

import numbers
import re
import sys
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .contract.params import IMAGE_CONNECTIVITIES, VOLUME_CONNECTIVITIES
from .contract.stages import MAX_MORPHOLOGY_STEPS, MAX_SMOOTH_RADIUS, SMOOTH_KINDS

#: How RGB/RGBA inputs become gray (--color-to-gray); io/decode/pixels.py implements them.
COLOR_TO_GRAY_CHOICES: tuple[str, ...] = ("luma", "red", "green", "blue")
#: Codecs of label TIFFs (--tiff-compression); io/label_images.py implements them.
TIFF_COMPRESSIONS: tuple[str, ...] = ("deflate", "zstd")
#: Label file formats (--label-format): png for images; tiff and npy hold images or volumes;
#: nifti, nrrd and metaimage volumes (io/volumes writes them).
LABEL_FORMATS: tuple[str, ...] = ("auto", "png", "tiff", "npy", "nifti", "nrrd", "metaimage")
#: What --device names: the CPU, CUDA's first device, or device N.
DEVICE_PATTERN = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")
#: A Dask scheduler's TCP address: tcp://host:port or host:port (IPv6 hosts in brackets).
_SCHEDULER_PATTERN = re.compile(r"^(tcp://)?([^\s/:\[\]]+|\[[0-9a-fA-F:.]+\]):\d+$")
#: Default of --max-image-bytes: the most bytes an input may decode to (width x height x
#: samples x bytes per sample), which also bounds every buffer on the way to them
#: (io/decode/checks.py). A few hundred bytes of PNG or TIFF can declare gigabytes of pixels;
#: with the copies labeling makes, a run needs a few times this per image in flight.
MAX_IMAGE_BYTES = 4 * 2**30
#: The most threads (--workers) and worker processes (--processes) a run may ask for: more
#: than any machine has cores, fewer than a system's thread and process limits.
MAX_WORKERS = 1024
#: The longest --batch-window, in milliseconds (a minute).
MAX_BATCH_WINDOW_MS = 60_000
#: The largest whole number an option takes (areas, counts, bytes): what the engines' 64-bit
#: signed counts hold. A larger one would fail every input at the first engine call.
MAX_COUNT = 2**63 - 1
#: The largest magnitude of a number option (tau, background, threshold): a 64-bit float's.
MAX_NUMBER = sys.float_info.max
#: The most characters of a value quoted back in a message.
_QUOTE_CHARS = 40
#: Multiples of --max-image-bytes's suffixes (K, M, G, T; with or without "iB", all 1024-based).
_BYTE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _quoted(value: Any) -> str:
    """`value` as a message quotes it: its repr, cut short where it is long."""
    text = repr(value)
    return text if len(text) <= _QUOTE_CHARS else f"{text[: _QUOTE_CHARS - 5]}...{text[-4:]}"


def _number(value: Any) -> int | float:
    """An int or float from a YAML scalar or a command-line string, within a 64-bit float's
    range (the engines compare values as float64); infinities only where spelled so."""
    if isinstance(value, bool):
        raise ValueError("a number, not true/false")
    if isinstance(value, (int, float)):
        number: int | float = value
        spelled_infinite = isinstance(value, float)
    else:
        text = str(value).strip()
        spelled_infinite = "inf" in text.lower()
        try:
            number = int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                raise ValueError(f"a number, got {_quoted(value)}") from None
    if abs(number) > MAX_NUMBER and not spelled_infinite:
        raise ValueError(
            f"a number within a 64-bit float's range (+-{MAX_NUMBER:.4g}), got {_quoted(value)}"
        )
    return number


def _finite_number(value: Any) -> int | float:
    number = _number(value)
    if number != number:
        raise ValueError("a number, got nan")
    return number


def _non_negative(value: Any) -> int | float:
    number = _finite_number(value)
    if number < 0:
        raise ValueError(f"a number >= 0, got {value!r}")
    return number


def _coefficient(value: Any) -> int | float:
    """A coefficient of the tolerance: finite and >= 0."""
    number = _non_negative(value)
    if number == float("inf"):
        raise ValueError(f"a finite number >= 0, got {value!r}")
    return number


def _milliseconds(value: Any) -> int | float:
    """A --batch-window: 0..MAX_BATCH_WINDOW_MS."""
    number = _non_negative(value)
    if number > MAX_BATCH_WINDOW_MS:
        raise ValueError(f"at most {MAX_BATCH_WINDOW_MS} (a minute), got {value!r}")
    return number


def _spacing(value: Any) -> tuple[float, float, float]:
    """A --spacing: three finite numbers > 0, "SX,SY,SZ" (or a list of three)."""
    parts = value.split(",") if isinstance(value, str) else value
    try:
        numbers = tuple(float(part) for part in parts)
    except (TypeError, ValueError):
        numbers = ()
    if len(numbers) != 3 or not all(0 < n < float("inf") for n in numbers):
        raise ValueError(f"three numbers > 0, SX,SY,SZ, got {value!r}")
    return numbers


def _optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else check(value)


def _background(value: Any) -> int | float | None:
    if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
        return None
    return _finite_number(value)


def _int_at_least(minimum: int, maximum: int = MAX_COUNT) -> Callable[[Any], int]:
    """A whole number in minimum..maximum; at most MAX_COUNT, which the engines hold."""
    most = (
        f"{maximum}" if maximum < MAX_COUNT else "2**63 - 1 (what the engines' 64-bit counts hold)"
    )

    def check(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError("a whole number, not true/false")
        text = str(value).strip()
        try:
            number = int(text)
        except ValueError:
            if not text.lstrip("+-").isdigit():
                raise ValueError(f"a whole number, got {_quoted(value)}") from None
            # more digits than int() reads: past any bound
            number = -MAX_COUNT - 1 if text.startswith("-") else MAX_COUNT + 1
        if number < minimum:
            raise ValueError(f"a whole number >= {minimum}, got {_quoted(value)}")
        if number > maximum:
            raise ValueError(f"a whole number <= {most}, got {_quoted(value)}")
        return number

    return check


def _steps(value: Any) -> int:
    """A morphology count: 0..MAX_MORPHOLOGY_STEPS (each step is a pass over the image)."""
    number = _int_at_least(0)(value)
    if number > MAX_MORPHOLOGY_STEPS:
        raise ValueError(
            f"at most {MAX_MORPHOLOGY_STEPS} (each step is a pass over every image, and "
            f"{MAX_MORPHOLOGY_STEPS} steps already cross a {2 * MAX_MORPHOLOGY_STEPS}-pixel "
            f"image), got {value!r}"
        )
    return number


def _choice(*allowed: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        normalized = str(value).strip().lower() if isinstance(value, str) else value
        if normalized not in allowed:
            raise ValueError(f"one of {', '.join(allowed)}, got {value!r}")
        return normalized

    return check


def _connectivity(value: Any) -> int:
    allowed = tuple(str(c) for c in (*IMAGE_CONNECTIVITIES, *VOLUME_CONNECTIVITIES))
    if isinstance(value, bool) or str(value).strip() not in allowed:
        raise ValueError(f"4 or 8 (images), or 6, 18 or 26 (volumes), got {value!r}")
    return int(str(value).strip())


#: The words YAML 1.1 reads as booleans, which a config file may also quote ("false").
_BOOLEAN_WORDS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _BOOLEAN_WORDS:
        return _BOOLEAN_WORDS[value.strip().lower()]
    raise ValueError(f"true or false, got {value!r}")


def _count_or_auto(value: Any) -> int | str:
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    return _int_at_least(1)(value)


def _processes(value: Any) -> int | str:
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    return _int_at_least(1, MAX_WORKERS)(value)


def check_device(value: Any) -> str:
    """A --device value (auto, cpu, cuda or cuda:N), lower-cased."""
    text = str(value).strip().lower()
    if not DEVICE_PATTERN.match(text):
        raise ValueError(f"auto, cpu, cuda or cuda:N, got {value!r}")
    return text


def _devices(value: Any) -> str:
    text = str(value).strip().lower().replace(" ", "")
    if text != "all" and not re.fullmatch(r"\d+(,\d+)*", text):
        raise ValueError(f"all or GPU numbers like 0,1, got {value!r}")
    if text != "all" and len(set(text.split(","))) != len(text.split(",")):
        raise ValueError(f"each GPU once, got {value!r}")
    return text


def _scheduler(value: Any) -> str:
    text = value.strip() if isinstance(value, str) else ""
    if not _SCHEDULER_PATTERN.match(text):
        raise ValueError(f"a Dask scheduler address tcp://host:port, got {value!r}")
    return text


def _byte_count(value: Any) -> int:
    """A number of bytes: 4294967296, 4G, 4GiB or 512M (K, M, G, T are powers of 1024)."""
    if isinstance(value, bool):
        raise ValueError("a number of bytes, not true/false")
    text = str(value).strip().lower().replace(" ", "")
    match = re.fullmatch(r"(\d+)(([kmgt])(i?b)?|b)?", text)
    if match is None:
        raise ValueError(f"a number of bytes like 4G or 512MiB, got {value!r}")
    digits = match.group(1).lstrip("0") or "0"
    if len(digits) > len(str(MAX_COUNT)):  # past int()'s digits, and past any bound
        raise ValueError(f"at most 2**63 - 1 bytes (8EiB), got {_quoted(value)}")
    number = int(digits) * _BYTE_UNITS[match.group(3) or ""]
    if number < 1:
        raise ValueError(f"at least 1 byte, got {value!r}")
    if number > MAX_COUNT:
        raise ValueError(f"at most 2**63 - 1 bytes (8EiB), got {_quoted(value)}")
    return number


def _bytes_text(count: int) -> str:
    """A number of bytes as a user writes it: 4GiB, 512MiB, or plain bytes."""
    for suffix, unit in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count % unit == 0:
            return f"{count // unit}{suffix}"
    return str(count)


def _smooth(value: Any) -> str | None:
    text = str(value).strip().lower()
    if text == "none":
        return None
    kind, _, radius = text.partition(":")
    if (
        kind not in SMOOTH_KINDS
        or not radius.isdigit()
        or not 1 <= int(radius) <= MAX_SMOOTH_RADIUS
    ):
        raise ValueError(f"box:R or binomial:R with R in 1..{MAX_SMOOTH_RADIUS}, got {value!r}")
    return f"{kind}:{int(radius)}"


def _path(value: Any) -> Path:
    if not isinstance(value, (str, Path)) or not str(value):
        raise ValueError(f"a path, got {value!r}")
    if "\0" in str(value):
        raise ValueError(f"a path without NUL bytes, got {value!r}")
    return Path(value)


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
    Option("out", None, "DIR", "Folder for the outputs (required).", _optional(_path), "-o"),
    Option("recursive", False, "", "Descend into sub-folders of folder inputs.", _flag, "-r"),
    Option(
        "relative_to",
        None,
        "ROOT",
        "Outputs mirror each input's path below ROOT (files named or on stdin included); "
        "an input outside ROOT fails.",
        _optional(_path),
    ),
    Option(
        "null_separated",
        False,
        "",
        "The paths on stdin (-) are NUL-separated, as find -print0 writes them.",
        _flag,
        "-0",
    ),
    Option(
        "background",
        0,
        "V",
        "The value that is not foreground, compared after --invert; 'none' makes every "
        "non-NaN pixel foreground.",
        _background,
        api=float | None,
    ),
    Option(
        "invert",
        False,
        "",
        "Flip intensities first (max - v; -v for floats): dark ink on light paper becomes "
        "foreground.",
        _flag,
        api=bool,
    ),
    Option(
        "threshold",
        None,
        "T",
        "Binarize the original values instead: foreground is v > T (v < T with --invert).",
        _optional(_finite_number),
        api=float | None,
    ),
    Option(
        "tau",
        None,
        "T",
        "Grayscale mode: neighbours join when |v(p) - v(q)| <= T (an int or a float).",
        _optional(_non_negative),
        api=float | None,
    ),
    Option(
        "tau_relative",
        None,
        "R",
        "Tau mode with a tolerance that grows with the value: + R * max(|v(p)|, |v(q)|) "
        "(range sensors whose noise grows linearly; --tau defaults to 0).",
        _optional(_coefficient),
        api=float | None,
    ),
    Option(
        "tau_quadratic",
        None,
        "Q",
        "Tau mode, + Q * max(|v(p)|, |v(q)|)^2 (depth cameras and stereo, whose depth step "
        "grows with the square of the range; --tau defaults to 0).",
        _optional(_coefficient),
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
        _connectivity,
        api=int,
    ),
    Option(
        "min_area",
        0,
        "N",
        "Remove components of fewer than N pixels; the rest are renumbered.",
        _int_at_least(0),
        api=int,
    ),
    Option(
        "max_area",
        None,
        "N",
        "Remove components of more than N pixels; the rest are renumbered.",
        _optional(_int_at_least(1)),
        api=int | None,
    ),
    Option(
        "largest",
        None,
        "K",
        "Keep only the K largest components (the lower label on equal areas), of those "
        "--min-area and --max-area keep; renumbered.",
        _optional(_int_at_least(1)),
        api=int | None,
    ),
    Option(
        "fill_holes",
        False,
        "",
        "Fill the holes of each kept component (background it alone encloses) before "
        "the statistics.",
        _flag,
        api=bool,
    ),
    Option(
        "erode",
        0,
        "N",
        "Erode the foreground mask N times before labeling (3x3 square, a cross with "
        "--connectivity 4; outside the image never changes the result).",
        _steps,
        api=int,
    ),
    Option("dilate", 0, "N", "Dilate the foreground mask N times.", _steps, api=int),
    Option("open", 0, "N", "Open the mask: erode N times, then dilate N times.", _steps, api=int),
    Option("close", 0, "N", "Close the mask: dilate N times, then erode N times.", _steps, api=int),
    Option(
        "smooth",
        None,
        "KIND:R",
        f"Tau mode: smooth the values over the mask first, box:R or binomial:R "
        f"(nodata-aware, R <= {MAX_SMOOTH_RADIUS}).",
        _optional(_smooth),
        api=str | None,
    ),
    Option(
        "color_to_gray",
        None,
        "|".join(COLOR_TO_GRAY_CHOICES),
        "How RGB/RGBA images become gray (without it they are an error).",
        _optional(_choice(*COLOR_TO_GRAY_CHOICES)),
    ),
    Option(
        "label_format",
        "auto",
        "|".join(LABEL_FORMATS),
        "Label images: auto (16-bit PNG up to 65535 labels, else 32-bit TIFF), png, tiff, or "
        "npy (NumPy's .npy, uint16 up to 65535 labels, else uint32). Label volumes: auto "
        "(the input's format; slices: a TIFF stack), tiff, npy, nifti, nrrd or metaimage.",
        _choice(*LABEL_FORMATS),
    ),
    Option(
        "tiff_compression",
        "deflate",
        "|".join(TIFF_COMPRESSIONS),
        "Codec of label TIFFs: deflate (reads everywhere) or zstd (faster, smaller).",
        _choice(*TIFF_COMPRESSIONS),
    ),
    Option(
        "volume",
        False,
        "",
        "A multi-page TIFF is a z-stack (one volume, not pages); a folder argument's 2-D "
        "images, in natural name order, are the slices of one volume.",
        _flag,
    ),
    Option(
        "spacing",
        None,
        "SX,SY,SZ",
        "Voxel size of volumes along x, y, z (overrides the file's): adds physical columns "
        "to the statistics.",
        _optional(_spacing),
        show=lambda spacing: ",".join(f"{n:g}" for n in spacing),
    ),
    Option(
        "preview",
        False,
        "",
        "Also write a colored overlay PNG (a volume: three orthogonal projections).",
        _flag,
    ),
    Option(
        "polygons",
        False,
        "",
        "Also write each kept component's outline as GeoJSON (pixel-corner vertices).",
        _flag,
    ),
    Option(
        "skip_existing",
        False,
        "",
        "Skip inputs whose outputs are present and current: made with these options, after "
        "the input last changed.",
        _flag,
    ),
    Option("fail_fast", False, "", "Stop at the first failed input.", _flag),
    Option(
        "fsync",
        True,
        "",
        "Flush each output to disk before renaming it into place (--no-fsync: faster on "
        "slow disks, but a power cut may leave empty or old outputs).",
        _flag,
    ),
    Option(
        "batch_size",
        "auto",
        "N|auto",
        "Images per backend call, or auto (from memory).",
        _count_or_auto,
    ),
    Option(
        "batch_window",
        0.0,
        "MS",
        "Inputs that arrive over time (stdin, gccl watch): a batch waits up to MS "
        "milliseconds after its first input for more (0: a batch is what has been read "
        "by the time labeling is free; at most a minute).",
        _milliseconds,
    ),
    Option(
        "device",
        "auto",
        "DEVICE",
        "auto (CUDA when usable, else the CPU), cpu, cuda or cuda:N.",
        check_device,
        api=str,
    ),
    Option(
        "devices",
        None,
        "all|0,1,..",
        "Spread batches over several GPUs: all, or GPU numbers (same output as one GPU).",
        _optional(_devices),
    ),
    Option(
        "workers",
        None,
        "N",
        "Threads decoding and encoding images, per process (default: the cores, shared).",
        _optional(_int_at_least(1, MAX_WORKERS)),
    ),
    Option(
        "processes",
        "auto",
        "N|auto",
        "Worker processes, or auto (one per core, at most one per 8 inputs).",
        _processes,
    ),
    Option(
        "scheduler",
        None,
        "ADDRESS",
        "Label on the Dask cluster of this scheduler (tcp://host:8786); inputs and --out "
        "must be on storage every worker shares.",
        _optional(_scheduler),
    ),
    Option(
        "max_image_bytes",
        MAX_IMAGE_BYTES,
        "BYTES",
        "Refuse an input whose pixels would decode to more bytes; every buffer of a decode "
        "is checked before it is made (e.g. 4G, 512MiB).",
        _byte_count,
        show=_bytes_text,
    ),
    Option("json", False, "", "Print one JSON object per input on stdout.", _flag),
    Option("quiet", False, "", "No progress bar (errors still print).", _flag, "-q"),
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
    leading dashes and the - / _ spelling aside, so that --min-aera finds --min-area and
    --verbose finds nothing."""

    def bare(text: str) -> str:
        return text.lstrip("-").replace("_", "-").lower()

    typed = bare(name)
    limit = max(1, len(typed) // 4)
    scored = sorted(
        (distance, candidate)
        for candidate in dict.fromkeys(names)
        if (distance := _edits(typed, bare(candidate))) <= limit
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
