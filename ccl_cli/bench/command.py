"""`gccl bench`: check the options, build the cases and engines, run the levels, report.

The command-line edge (ccl_cli.cli) passes the options as typed; everything
else happens here. Bad options raise UsageError (exit 2); the return value is
the exit code: 0, or 1 when an engine disagreed with the reference or failed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from ..config import Settings, check_settings
from ..contract.params import AT_RANK, VOLUME_CONNECTIVITIES, LabelParams
from ..errors import EXIT_OK, EXIT_SOME_FAILED, BadValue, UsageError
from ..options import BY_NAME
from .adapter import BenchEngine
from .engines import ENGINE_NAMES, make_engines
from .eta import Planned, TimeLeft
from .inputs import read_input, short_names
from .records import Record
from .report import REPORT_COLUMNS, WIDE_REPORT_COLUMNS
from .runner import (
    MAX_BATCH_PIXELS,
    Limits,
    end_to_end_plan,
    kernel_plan,
    run_end_to_end,
    run_kernel,
)
from .suite import (
    FAMILIES,
    SIZES,
    VOLUME_FAMILIES,
    VOLUME_SIZES,
    Case,
    generated_cases,
    generated_volume_cases,
    input_cases,
    parse_size,
)

#: The generated sizes on a machine without a usable GPU (the full suite takes many
#: minutes on a small CPU machine).
CPU_SIZES = SIZES[:2]
#: --quick: the smallest size, batch 1, a few timed calls (half a minute on 2 cores).
QUICK_SIZES = SIZES[:1]
QUICK_BATCHES = (1,)
QUICK_REPEAT = 3
#: The generated volume sizes without a usable GPU, and with --quick.
CPU_VOLUME_SIZES = VOLUME_SIZES[:1]
#: The connectivities of images and of volumes when --connectivity does not choose.
DEFAULT_CONNECTIVITIES = (8, 4)
DEFAULT_VOLUME_CONNECTIVITIES = (26, 6)

LEVEL_CHOICES = ("kernel", "end-to-end", "both")
DEFAULT_BATCHES = (1, 8, 32, 64)
DEFAULT_REPEAT = 10


@dataclass(frozen=True)
class Options:
    """The checked options of one bench run."""

    engines: tuple[str, ...]
    explicit_engines: bool
    levels: tuple[str, ...]
    batches: tuple[int, ...]
    repeat: int
    tau: float | None
    connectivities: tuple[int, ...]
    sizes: tuple[tuple[int, int], ...]
    families: tuple[str, ...]
    #: How INPUT images are labeled besides tau and connectivity (gccl label's options).
    base: LabelParams = field(default_factory=LabelParams)
    explicit_sizes: bool = False
    #: The tolerance's growth with the values (--tau-relative, --tau-quadratic): 0 for none.
    tau_relative: float = 0.0
    tau_quadratic: float = 0.0
    #: The generated volumes (families, (width, height, depth) sizes) and the
    #: connectivities of every volume case, generated or read.
    volume_families: tuple[str, ...] = ()
    volume_sizes: tuple[tuple[int, ...], ...] = VOLUME_SIZES
    volume_connectivities: tuple[int, ...] = DEFAULT_VOLUME_CONNECTIVITIES
    #: The --connectivity given (None: the defaults); 6, 18 or 26 need volume cases.
    connectivity: int | None = None


def parse_options(
    engines: str | None,
    level: str,
    batches: str | None,
    repeat: int | None,
    tau: str | None,
    connectivity: str | int | None,
    sizes: str | None,
    cases: str | None,
    invert: bool = False,
    threshold: str | None = None,
    background: str | None = None,
    tau_relative: str | None = None,
    tau_quadratic: str | None = None,
    quick: bool = False,
) -> Options:
    """Options from the command line's text; UsageError names the bad one. The options
    gccl label has too (tau, tau_relative, tau_quadratic, connectivity, invert,
    threshold, background) are checked as it checks them (options.py). quick: the
    QUICK_ suite, where --sizes, --batch and --repeat do not say otherwise (their
    defaults are given as None)."""
    base = LabelParams(
        background=_checked("background", background, 0),
        invert=invert,
        threshold=_checked("threshold", threshold, None),
    )
    relative = float(_checked("tau_relative", tau_relative, 0))
    quadratic = float(_checked("tau_quadratic", tau_quadratic, 0))
    engine_names = _names("--engines", engines, ENGINE_NAMES)
    if level not in LEVEL_CHOICES:
        raise UsageError(f"--level must be one of {', '.join(LEVEL_CHOICES)}, got {level!r}")
    if batches is None:
        batches = ",".join(map(str, QUICK_BATCHES if quick else DEFAULT_BATCHES))
    repeat = (QUICK_REPEAT if quick else DEFAULT_REPEAT) if repeat is None else repeat
    try:
        batch_sizes = {int(b) for b in _split(batches)}
    except ValueError:
        raise UsageError(f"--batch takes whole numbers like 1,8,32,64, got {batches!r}") from None
    if not batch_sizes or min(batch_sizes) < 1:
        raise UsageError(f"--batch sizes must be at least 1, got {batches!r}")
    if repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {repeat}")
    try:
        parsed = [parse_size(s) for s in _split(sizes)]
    except ValueError as error:
        raise UsageError(f"--sizes: {error}") from None
    planes = tuple(s for s in parsed if len(s) == 2)
    cubes = tuple(s for s in parsed if len(s) == 3)
    size_list = planes or (QUICK_SIZES if quick else SIZES)
    volume_sizes = cubes or (CPU_VOLUME_SIZES if quick else VOLUME_SIZES)
    for width, height in size_list:  # (generated before any batch cap could pass them over)
        if width * height > MAX_BATCH_PIXELS:
            raise UsageError(
                f"--sizes: {width}x{height} is over the {MAX_BATCH_PIXELS} pixels a batch "
                "of the bench holds"
            )
    chosen = _checked("connectivity", connectivity, None)
    family_names = _names("--cases", cases, FAMILIES + VOLUME_FAMILIES)
    image_families = tuple(f for f in family_names if f in FAMILIES)
    volume_families = tuple(f for f in family_names if f in VOLUME_FAMILIES)
    if family_names and not image_families:
        size_list = ()  # volumes alone were asked for
    elif not family_names:
        image_families = FAMILIES
    shared = Settings(
        tau=_checked("tau", tau, None),
        connectivity=chosen or 8,
        invert=invert,
        threshold=base.threshold,
        background=base.background,
    )
    check_settings(shared)  # the rules between options every command checks
    return Options(
        engines=engine_names or ENGINE_NAMES,
        explicit_engines=bool(engine_names),
        levels=("kernel", "end-to-end") if level == "both" else (level,),
        batches=tuple(sorted(batch_sizes | {1})),
        repeat=repeat,
        tau=shared.tau if shared.tau is not None else (0 if relative or quadratic else None),
        connectivities=_at_rank(chosen, 2, DEFAULT_CONNECTIVITIES),
        sizes=size_list,
        families=image_families,
        base=base,
        explicit_sizes=sizes is not None or quick,
        tau_relative=relative,
        tau_quadratic=quadratic,
        volume_families=volume_families,
        volume_sizes=volume_sizes,
        volume_connectivities=_at_rank(chosen, 3, DEFAULT_VOLUME_CONNECTIVITIES),
        connectivity=chosen,
    )


def _at_rank(chosen: int | None, rank: int, default: tuple[int, ...]) -> tuple[int, ...]:
    """The connectivities of the cases of `rank` (2 images, 3 volumes): --connectivity taken
    in that rank as gccl label takes it (LabelParams.at_rank), else `default`."""
    if chosen is None:
        return default
    in_rank = (chosen in VOLUME_CONNECTIVITIES) == (rank == 3)
    return (chosen if in_rank else AT_RANK[rank][chosen],)


def _checked(name: str, text: Any, default: Any) -> Any:
    """An option gccl label has too, checked as it checks it (options.py); `default`
    where it is not given."""
    if text is None:
        return default
    option = BY_NAME[name]
    try:
        return option.check(text)
    except ValueError as error:
        raise BadValue(f"{option.flag} must be {error}") from None


def run_bench_command(
    inputs: Sequence[str],
    options: Options,
    json_path: Path | None = None,
    csv_path: Path | None = None,
    plot_path: Path | None = None,
    quiet: bool = False,
    out: Console | None = None,
    err: Console | None = None,
    wide: bool = False,
) -> int:
    """Run the benchmark and write its reports; the exit code (0 or 1).

    wide: the report's full table whatever the width (else the table fits REPORT_COLUMNS
    unless the terminal is wider than the full table)."""
    from .machine import describe_machine
    from .report import (
        add_speedups,
        print_problems,
        print_report,
        problems,
        write_csv,
        write_json,
        write_plot,
    )

    _check_outputs(json_path, csv_path, plot_path)
    out = out or Console(highlight=False, width=_report_width(wide))
    err = err or Console(stderr=True, highlight=False)
    engines, descriptions = _engines(options)
    if not inputs and not options.explicit_sizes and not _gpu_usable():
        options = replace(
            options, sizes=CPU_SIZES if options.sizes else (), volume_sizes=CPU_VOLUME_SIZES
        )
        parts = []
        if options.families:
            parts.append(
                "the suite at 640x480 and 1920x1080 (--quick: 640x480 alone, batch 1); "
                "--sizes 640x480,1920x1080,4000x3000 runs the full one"
            )
        if options.volume_families:
            parts.append("volumes at 128x128x128; --sizes 512x512x512 runs the larger ones")
        if not quiet and parts:
            err.print(
                Text(f"gccl: no usable GPU: {'; '.join(parts)}", style="yellow"), soft_wrap=True
            )
    cases = _cases(inputs, options)
    if options.connectivity in VOLUME_CONNECTIVITIES and not any(c.is_volume for c in cases):
        raise UsageError(
            f"'connectivity' {options.connectivity} labels 3-D volumes; these cases are 2-D "
            "images: take 4 or 8, or add volumes (--cases blobs3d,... or volume files)"
        )
    limits = Limits(repeat=options.repeat)
    planned = []
    if "kernel" in options.levels:
        planned += kernel_plan(cases, engines, options.batches, limits)
    if "end-to-end" in options.levels:
        planned += end_to_end_plan(cases, engines, options.batches, limits)
    progress = ProgressLines(err, planned, limits, quiet)
    records: list[Record] = []
    if "kernel" in options.levels:
        records += run_kernel(cases, engines, options.batches, limits, progress)
    if "end-to-end" in options.levels:
        records += run_end_to_end(cases, engines, options.batches, limits, progress)
    add_speedups(records)
    machine = describe_machine()
    work = {engine.name: engine.work for engine in engines}
    print_report(
        out, records, machine, descriptions, wide or out.width >= WIDE_REPORT_COLUMNS, work
    )
    if json_path:
        _write_report("--json", json_path, lambda path: write_json(path, records))
    if csv_path:
        _write_report("--csv", csv_path, lambda path: write_csv(path, records))
    if plot_path:
        _write_report("--plot", plot_path, lambda path: write_plot(path, records, machine))
    progress.done(len(records))
    bad = problems(records)
    if bad:
        print_problems(err, bad)
        return EXIT_SOME_FAILED
    return EXIT_OK


def _check_outputs(json_path: Path | None, csv_path: Path | None, plot_path: Path | None) -> None:
    """Fail before the run, not after it, when a report cannot be written."""
    if plot_path and importlib.util.find_spec("matplotlib") is None:
        raise UsageError("--plot needs matplotlib: pip install 'gccl[bench]'")
    for option, path in (("--json", json_path), ("--csv", csv_path), ("--plot", plot_path)):
        if path is not None and not path.parent.is_dir():
            raise UsageError(f"{option} {path}: the folder {path.parent} does not exist")


def _write_report(option: str, path: Path, write: Callable[[Path], None]) -> None:
    """Write one report file with `write`: a regular file (or a new one) through a temporary
    beside it renamed into place, so it is whole or as it was; a device or FIFO (/dev/stdout)
    directly. An OS error (a full disk) is a UsageError naming the option and the path."""
    try:
        in_place = path.exists() and not path.is_file()
    except OSError:
        in_place = False
    target = path if in_place else path.with_name(f".gccl-{os.getpid()}-{path.name}")
    try:
        write(target)
        if target != path:
            os.replace(target, path)
    except OSError as error:
        raise UsageError(f"{option} {path}: cannot write ({error.strerror or error})") from None
    finally:
        if target != path:
            with contextlib.suppress(OSError):
                os.unlink(target)


def _report_width(wide: bool) -> int:
    """The report's width: a terminal's own (the full table once it is WIDE_REPORT_COLUMNS
    wide); a file or a pipe gets REPORT_COLUMNS, or WIDE_REPORT_COLUMNS with `wide`, never
    the 80 columns a console assumes there."""
    terminal = Console()
    if terminal.is_terminal:
        return int(terminal.width)
    return WIDE_REPORT_COLUMNS if wide else REPORT_COLUMNS


class ProgressLines:
    """One plain line on stderr per measurement: the time so far, how many of how many,
    the time left (eta.TimeLeft, from the second measurement on) and what is measured.
    Lines are never folded (a log file keeps one per measurement); --quiet prints none."""

    def __init__(self, err: Console, planned: list[Planned], limits: Limits, quiet: bool) -> None:
        self.err, self.quiet = err, quiet
        self.total, self.count = len(planned), 0
        self.started_at = time.perf_counter()
        self.left = TimeLeft(
            planned, limits.repeat, limits.budget_s, limits.max_call_s, self.started_at
        )

    def started(self, planned: Planned) -> None:
        now = time.perf_counter()
        self.left.started(planned.key, now)
        self.count += 1
        estimate = f", about {_duration(self.left.seconds(now))} left" if self.count > 1 else ""
        what = f"{planned.level}  {planned.case}  {planned.engine}  batch {planned.batch}"
        self._line(f"({self.count}/{self.total}{estimate}) {what}", now)

    def finished(self, call_ms: float | None) -> None:
        self.left.finished(call_ms, time.perf_counter())

    def skipped(self, planned: Planned) -> None:
        self.left.skipped(planned.key)
        self.total -= 1

    def done(self, records: int) -> None:
        self._line(f"done: {records} records", time.perf_counter())

    def _line(self, text: str, now: float) -> None:
        if not self.quiet:
            elapsed = now - self.started_at
            self.err.print(Text(f"[{elapsed:7.1f} s] {text}", style="dim"), soft_wrap=True)


def _duration(seconds: float) -> str:
    """0.4 s, 12 s, or 3 min 40 s."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 100:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def _engines(options: Options) -> tuple[list[BenchEngine], dict[str, str]]:
    """The engines to run and, for the report, what each times or why it is unavailable."""
    usable: list[BenchEngine] = []
    descriptions: dict[str, str] = {}
    for engine in make_engines(list(options.engines)):
        why = engine.unavailable()
        if why and options.explicit_engines:
            raise UsageError(f"--engines {engine.name}: not available ({why})")
        if why:
            descriptions[engine.name] = f"not available: {why}"
        else:
            usable.append(engine)
            descriptions[engine.name] = engine.description()
    return usable, descriptions


def _cases(inputs: Sequence[str], options: Options) -> list[Case]:
    """The user's images and volumes as cases, or the generated suite when there are none."""
    if not inputs:
        if options.base != LabelParams():
            raise UsageError("--invert, --threshold and --background apply to INPUT images")
        return generated_cases(
            options.families, options.sizes, options.connectivities, options.tau, growth(options)
        ) + generated_volume_cases(
            options.volume_families,
            options.volume_sizes,
            options.volume_connectivities,
            options.tau,
        )
    if (
        options.sizes != SIZES
        or options.families != FAMILIES
        or options.volume_families
        or options.volume_sizes != VOLUME_SIZES
    ):
        raise UsageError("--sizes and --cases choose generated cases; drop them with INPUT files")
    from ..io.inputs import expand

    items, images = [], []
    for item in expand(inputs, recursive=False):
        if item.empty or item.duplicate:
            continue
        if item.problem:
            raise UsageError(f"{item.display}: {item.problem}")
        images.append(read_input(item))
        items.append(item)
    if not images:
        raise UsageError(
            "no images in the inputs (PNG, TIFF, JPEG, BMP, WebP or NPY files, or volumes: "
            "NIfTI, NRRD, MetaImage, TIFF z-stacks, 3-D NPY)"
        )
    names = short_names([(item.path, item.page) for item in items])
    sources = [str(item.path) for item in items]
    named = list(zip(names, images, sources, strict=True))
    image_inputs = [entry for entry in named if entry[1].ndim == 2]
    volume_inputs = [entry for entry in named if entry[1].ndim == 3]
    base = growth(options, options.base)
    return input_cases(image_inputs, options.connectivities, options.tau, base) + input_cases(
        volume_inputs, options.volume_connectivities, options.tau, base
    )


def growth(options: Options, base: LabelParams | None = None) -> LabelParams:
    """`base` (else the defaults) with the tolerance's growth of tau mode cases."""
    return replace(
        base or LabelParams(),
        tau_relative=options.tau_relative,
        tau_quadratic=options.tau_quadratic,
    )


def _gpu_usable() -> bool:
    """Whether a CUDA device can be used here (the full suite is for GPUs)."""
    from ..backends.cuda.loader import cuda_status

    return cuda_status().usable


def _split(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def _names(option: str, text: str | None, allowed: Sequence[str]) -> tuple[str, ...]:
    """The comma-separated names of `text`, each one of `allowed` (empty when not given)."""
    names = tuple(dict.fromkeys(n.lower() for n in _split(text)))
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise UsageError(
            f"{option}: unknown {', '.join(unknown)}; choose from {', '.join(allowed)}"
        )
    return names
