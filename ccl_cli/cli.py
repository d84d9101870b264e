"""The `gccl` command line: thin commands that parse, build Settings and delegate.

Errors become messages and exit codes here and nowhere else: a GcclError is
one line on stderr and exit 2; per-input failures are reported by the
pipeline and give exit 1; Ctrl-C gives 130.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import inspect
import json
import os
import signal
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

# gccl makes no BLAS calls. Without this, numpy's OpenBLAS starts a thread per core as
# numpy is imported (options.py imports it), and each spins a while: CPU taken from the
# worker processes as they start, more the more cores. A user's own setting stays.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import typer

from . import __version__
from .errors import EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_USAGE, GcclError
from .options import BY_NAME, NOT_FOR_A_WATCH, OPTIONS, Option, close_names

if TYPE_CHECKING:  # the pipeline (numpy, codecs) loads only when a command runs
    from rich.console import Console
    from rich.progress import Progress

    from .config import Settings
    from .run.records import Record, RunReport

app = typer.Typer(
    help="Label connected components in batches of images, on an NVIDIA GPU or the CPU.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help (click's): it wraps cleanly at 80 columns, where rich's tables cut words.
    rich_markup_mode=None,
)
config_app = typer.Typer(help="Inspect configuration.", no_args_is_help=True)
app.add_typer(config_app, name="config")


class GcclCommand(typer.core.TyperCommand):
    """A gccl command as click renders and parses it, with two changes of Typer's.

    The usage line names arguments as click does (`INPUT...`, `[INPUT]...` when
    optional), not as Typer's `{INPUT}`; and an unknown option suggests only
    options it is close to (options.close_names), not click's loose matches
    (--verbose -> --close, --erode, --processes).
    """

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name != "argument":
                pieces.extend(param.get_usage_pieces(ctx))
                continue
            name = (param.metavar or param.name or "").upper()
            name += "..." if param.nargs != 1 else ""
            pieces.append(name if param.required else f"[{name}]")
        return pieces

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except Exception as error:
            # Typer raises the exceptions of the click it bundles: recognized by name.
            if type(error).__name__ == "NoSuchOption":
                name = error.option_name  # type: ignore[attr-defined]
                flags = [flag for param in self.get_params(ctx) for flag in param.opts]
                close = close_names(name, flags)
                hint = f" (did you mean {' or '.join(close)}?)" if close else ""
                error.message = f"No such option: {name}{hint}"  # type: ignore[attr-defined]
                error.possibilities = None  # type: ignore[attr-defined]
            raise


@functools.cache
def _stderr() -> Console:
    """rich's console on stderr, made at the first message: a quiet run that goes well
    never imports rich."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)  # one line per message


def _say(message: str, style: str = "") -> None:
    """One line on stderr (above the progress display, which shares the console); a closed
    stderr loses it and nothing else."""
    from rich.text import Text

    with contextlib.suppress(OSError, ValueError):
        _stderr().print(Text(message, style=style))


ConfigOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--config",
        metavar="FILE",
        help="YAML file with the same keys as the options (repeatable; later files and "
        "then command-line flags win).",
        show_default=False,
    ),
]


def _fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    _say(f"gccl: error: {message}", "red")
    return typer.Exit(code)


def _progress() -> Progress:
    """The progress display: a bar, images done of all, images per second, times."""
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

    class ImagesPerSecond(ProgressColumn):
        """Images labeled per second over the whole run so far (rich's own speed is too
        jumpy); inputs skipped or failed are not images labeled."""

        def render(self, task: Task) -> Text:
            elapsed = task.finished_time or task.elapsed
            labeled = task.fields.get("labeled", 0)
            if not elapsed or not labeled:
                return Text("")
            return Text(f"{labeled / elapsed:.1f} img/s")

    return Progress(
        TextColumn("labeling"),
        BarColumn(),
        MofNCompleteColumn(),
        ImagesPerSecond(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=_stderr(),
        transient=False,
    )


class ConsoleReporter:
    """Progress and messages on stderr; with --json one object per input on stdout.

    --quiet leaves only the errors: no progress, no notices (the closing line is
    the caller's to leave out).
    """

    def __init__(self, quiet: bool, as_json: bool) -> None:
        self.as_json = as_json
        self.quiet = quiet
        self.progress = None if quiet else _progress()
        self.task: Any = None
        self.labeled = 0
        #: How many --json lines went out before stdout was closed (None while it is open).
        self.stdout_closed_after: int | None = None
        self._lines = 0

    def start(self, total: int | None) -> None:
        if self.progress is not None:
            self.progress.start()
            self.task = self.progress.add_task("label", total=total)

    def finished(self, record: Record) -> None:
        if record.status == "failed":
            _say(f"gccl: {record.item.display}: {record.message}", "red")
        if self.as_json and self.stdout_closed_after is None:
            self._json_line(record)
        if self.progress is not None and self.task is not None:
            self.labeled += record.status == "ok"
            self.progress.update(self.task, advance=1, labeled=self.labeled)

    def _json_line(self, record: Record) -> None:
        """Print the record's --json line; a closed stdout (`--json | head`) stops the lines
        and nothing else: the run finishes its outputs and summary.csv."""
        from .run.interrupts import interruptible

        try:
            with interruptible():  # a reader that stalls does not hold up a stop request
                sys.stdout.write(json.dumps(record.as_json()) + "\n")
                sys.stdout.flush()
        except (OSError, ValueError):  # EPIPE, or stdout closed in this process
            self.stdout_closed_after = self._lines
            self.notice(f"stdout was closed after {self._lines} --json line(s); the run goes on")
            return
        self._lines += 1

    def notice(self, message: str) -> None:
        if not self.quiet:
            _say(f"gccl: {message}", "yellow")

    def stop(self, abandoned: bool = False) -> None:
        """End the progress display; an abandoned run (exit 2) leaves no bar behind."""
        if self.progress is None:
            return
        if abandoned and self.task is not None:
            self.progress.remove_task(self.task)
        self.progress.stop()


def _closing_line(report: RunReport) -> str:
    done, failed, skipped = report.count("ok"), report.count("failed"), report.count("skipped")
    ending = f"in {report.seconds:.2f} s; summary: {report.summary}"
    if skipped and skipped == report.total:
        return f"nothing new: {skipped} skipped {ending}"
    parts = [f"labeled {done} of {report.total} input(s)"]
    if skipped:
        parts.append(f"{skipped} skipped")
    if failed:
        parts.append(f"{failed} failed")
    not_run = report.count("not-run")
    if not_run:
        parts.append(f"{not_run} not run")
    empty = report.count("no-images")
    if empty:
        parts.append(f"{empty} without images (folders or patterns)")
    return f"{', '.join(parts)} {ending}"


LABEL_EXAMPLES = """Examples:

\b
  gccl label scans/ -r --invert --min-area 4 --out labels/
  gccl label frames/ --tau 20 --min-area 50 --out segments/ --preview
  find /data -name '*.png' | gccl label - --out labels/ --json -q
"""
WATCH_EXAMPLES = """Examples:

\b
  gccl watch incoming/ --out labels/ --tau 20 --min-area 50 --json
  gccl watch /mnt/share/scans --poll --poll-interval 2 --invert --out labels/
"""


def with_default(help: str, default: str | None) -> str:
    """An option's help with its default, in the one form every command shows it."""
    return f"{help}  [default: {default}]" if default else help


def schema_parameter(
    option: Option, help: str | None = None, default: str | None = None
) -> inspect.Parameter:
    """The Typer parameter of one option of the schema (options.py), None when not given.

    A switch is --name/--no-name; an option that takes a value arrives as text,
    checked later with the option's own check (config.resolve, or the bench's
    parse_options). help and default: a command's own wording (gccl bench's),
    else the schema's help and the default as the user writes it.
    """
    names = [option.flag if not option.is_switch else f"{option.flag}/--no-{option.flag[2:]}"]
    names += [option.short] if option.short else []
    text = option.help if help is None else help
    if option.is_switch:
        declared = typer.Option(*names, help=text, show_default=False)
        kind: Any = bool | None
    else:
        shown = option.default_text if default is None else default
        declared = typer.Option(
            *names, help=with_default(text, shown), metavar=option.metavar, show_default=False
        )
        kind = str | None
    return inspect.Parameter(
        option.name,
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[kind, declared],
    )


def _label_parameters() -> list[inspect.Parameter]:
    """The Typer parameters of `gccl label`: the inputs, one per option of OPTIONS, --config.

    Options that take a value arrive as text and are checked by config.resolve
    with the option's own check, like a config file's values, so that every
    bad value gets the same one-line message.
    """
    inputs = inspect.Parameter(
        "inputs",
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        annotation=Annotated[
            list[str],
            typer.Argument(
                help="Image files, folders, glob patterns, or - to read one path per line "
                "from stdin.",
                metavar="INPUT",
                show_default=False,
            ),
        ],
    )
    parameters = [inputs]
    parameters += [schema_parameter(option) for option in OPTIONS]
    parameters.append(
        inspect.Parameter(
            "config", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ConfigOption
        )
    )
    return parameters


DryRunOption = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="List what would be labeled and where each output would go, what would be "
        "skipped or fail and why; write nothing (exit 3 when nothing would be labeled, 1 "
        "when an input would fail).",
        show_default=False,
    ),
]


def label_command(
    inputs: list[str], config: list[Path] | None = None, dry_run: bool = False, **flags: Any
) -> None:
    """Label every input image and write label images, statistics CSVs and a summary."""
    from .run.chunked import has_zarr
    from .run.command import run_label

    if dry_run:
        _dry_run(inputs, config, flags)
    run = lambda settings, reporter: run_label(inputs, settings, reporter)  # noqa: E731
    _run_command(run, config, flags, volumes=has_zarr(inputs))


def _dry_run(inputs: list[str], config: list[Path] | None, flags: dict[str, Any]) -> NoReturn:
    """gccl label --dry-run: the listing on stdout, notices on stderr, the run's exit code."""
    from .config import resolve
    from .run.dry_run import dry_run

    def write(line: str) -> None:
        sys.stdout.write(line + "\n")

    try:
        settings = resolve(config or [], flags)

        def notice(message: str) -> None:
            if not settings.quiet:
                _say(f"gccl: {message}")

        code = dry_run(inputs, settings, write, notice)
    except GcclError as error:
        raise _fail(str(error), error.exit_code) from None
    except KeyboardInterrupt:
        raise _fail("interrupted", EXIT_INTERRUPTED) from None
    raise typer.Exit(code)


def _run_command(
    run: Callable[[Settings, ConsoleReporter], RunReport],
    config: list[Path] | None,
    flags: dict[str, Any],
    volumes: bool = False,
) -> None:
    """Resolve the settings, run, print the closing line and exit with the run's code
    (`volumes`: the inputs are Zarr volumes, which take the volume connectivities)."""
    from .config import check_images_only, resolve
    from .run.records import exit_code

    reporter: ConsoleReporter | None = None
    try:
        settings = resolve(config or [], flags)
        if not volumes:
            check_images_only(settings.connectivity)
        reporter = ConsoleReporter(settings.quiet, settings.json)
        report = run(settings, reporter)
    except GcclError as error:
        if reporter is not None:  # before the message, so that it is the last line
            reporter.stop(abandoned=True)
        raise _fail(str(error), error.exit_code) from None
    except KeyboardInterrupt:
        raise _fail("interrupted", EXIT_INTERRUPTED) from None
    except OSError as error:  # an OS error no step turned into a message of its own
        if reporter is not None:
            reporter.stop(abandoned=True)
        where = f" ({os.fsdecode(error.filename)})" if error.filename else ""
        raise _fail(f"{error.strerror or error}{where}") from None
    finally:
        if reporter is not None:
            reporter.stop()
    if not settings.quiet:
        _say(f"gccl: {_closing_line(report)}")
    raise typer.Exit(exit_code(report))


label_command.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [
        *_label_parameters(),
        inspect.Parameter(
            "dry_run", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=DryRunOption
        ),
    ]
)
app.command("label", epilog=LABEL_EXAMPLES, cls=GcclCommand)(label_command)


def watch_command(
    folders: list[str],
    config: list[Path] | None = None,
    poll: bool = False,
    poll_interval: float = 1.0,
    **flags: Any,
) -> None:
    """Label the images in folders, then each new one once it is complete, until stopped."""
    from .run.watch import run_watch

    def run(settings: Settings, reporter: ConsoleReporter) -> RunReport:
        return run_watch(folders, settings, reporter, poll, poll_interval)

    _run_command(run, config, flags)


def _watch_parameters() -> list[inspect.Parameter]:
    """watch's parameters: the folders, every option of `gccl label`, --poll, --poll-interval."""
    folders = inspect.Parameter(
        "folders",
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        annotation=Annotated[
            list[str],
            typer.Argument(help="Folders to watch.", metavar="DIR", show_default=False),
        ],
    )
    poll = inspect.Parameter(
        "poll",
        inspect.Parameter.KEYWORD_ONLY,
        default=False,
        annotation=Annotated[
            bool,
            typer.Option(
                "--poll",
                help="Poll the folders instead of waiting for file events (network shares): "
                "a file is taken once two looks --poll-interval apart find the same size, "
                "mtime and inode.",
            ),
        ],
    )
    interval = inspect.Parameter(
        "poll_interval",
        inspect.Parameter.KEYWORD_ONLY,
        default=1.0,
        annotation=Annotated[
            float,
            typer.Option(
                "--poll-interval",
                min=0.01,
                max=3600,
                metavar="SECONDS",
                help="Seconds between polls (0.01 to 3600).",
            ),
        ],
    )
    label_options = [p for p in _label_parameters()[1:] if p.name not in NOT_FOR_A_WATCH]
    return [folders, *label_options, poll, interval]


watch_command.__signature__ = inspect.Signature(_watch_parameters())  # type: ignore[attr-defined]
app.command("watch", epilog=WATCH_EXAMPLES, cls=GcclCommand)(watch_command)


def config_show(config: list[Path] | None = None, **flags: Any) -> None:
    """Print the settings a gccl label command line would use, as a config file: the
    defaults, overridden by each --config file, then by the flags given here."""
    from .config import resolve

    try:
        settings = resolve(config or [], flags)
    except GcclError as error:
        raise _fail(str(error)) from None
    sys.stdout.write(settings.as_yaml())


config_show.__signature__ = inspect.Signature(_label_parameters()[1:])  # type: ignore[attr-defined]
config_app.command(
    "show",
    cls=GcclCommand,
    epilog="Example:\n\n\b\n  gccl config show --config configs/depth-maps.yaml --min-area 100\n",
)(config_show)


@app.command("info", cls=GcclCommand)
def info_command() -> None:
    """Version, backends, CUDA devices (or why none is usable), where the kernels come from."""
    from .info import collect_info

    sys.stdout.write(collect_info())


#: gccl bench's options shared with gccl label (the schema's names, metavars and checks),
#: with the bench's own wording: (help, default shown).
BENCH_SHARED: dict[str, tuple[str, str | None]] = {
    "tau": (
        "Tau mode with this tau for the INPUT images, and the tau of the generated depth "
        "images (else 8); without it INPUT images run in binary mode.",
        None,
    ),
    "connectivity": ("Neighbours: 4 (edges) or 8 (and corners).", "both, 8 first"),
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
            help="Image files, folders or glob patterns to measure on; without any, a built-in "
            "generated suite (random, document-like and depth-like images).",
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
                "opencv-contours (with cv2.findContours), cupyx, cc3d, skimage.",
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
        str,
        typer.Option(
            metavar="N,N,..",
            help=with_default(
                "Comma-separated batch sizes (images per call); 1 always runs, as the "
                "cross-check and the estimate that skips calls over 1 s.",
                "1,8,32,64",
            ),
            show_default=False,
        ),
    ] = "1,8,32,64",
    repeat: Annotated[
        int,
        typer.Option(
            metavar="N",
            help=with_default("Timed calls per measurement (fewer once they take 0.5 s).", "10"),
            show_default=False,
        ),
    ] = 10,
    sizes: Annotated[
        str | None,
        typer.Option(
            metavar="WxH,WxH,..",
            help=with_default(
                "Sizes of the generated suite, e.g. 640x480,1920x1080.",
                "640x480,1920x1080,4000x3000; without a usable GPU 640x480,1920x1080",
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
                "document, depth.",
                "all",
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
            shared.get("background"),
        )  # fmt: skip
        code = run_bench_command(
            inputs or [], options, json_path, csv_path, plot_path, quiet, wide=wide
        )
    except GcclError as error:
        raise _fail(str(error)) from None
    except KeyboardInterrupt:
        raise _fail("interrupted", EXIT_INTERRUPTED) from None
    raise typer.Exit(code)


def _with_shared(function: Callable[..., Any], shared: dict[str, tuple[str, str | None]]) -> None:
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


_with_shared(bench_command, BENCH_SHARED)
app.command("bench", cls=GcclCommand)(bench_command)


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
    """Console-script entry point: click's own usage errors get gccl's one-line form too.

    Typer raises the exceptions of the click it bundles (its own copy in recent
    releases), so they are recognized by what they offer, not by class.
    """
    atexit.register(_end_now)  # before anything else registers: it must run last
    try:
        code = app(standalone_mode=False)
    except typer.Abort:
        _say("gccl: error: interrupted", "red")
        sys.exit(EXIT_INTERRUPTED)
    except Exception as error:
        if not hasattr(error, "format_message") or not hasattr(error, "exit_code"):
            raise
        if type(error).__name__ == "NoArgsIsHelpError":
            error.show()  # type: ignore[attr-defined]  # the help text, as for --help
            sys.exit(error.exit_code)
        context = getattr(error, "ctx", None)
        hint = f" (see {context.command_path} --help)" if context is not None else ""
        _say(f"gccl: error: {error.format_message()}{hint}", "red")
        _exit(EXIT_USAGE)
    code = code if isinstance(code, int) else 0
    if code == EXIT_TERMINATED:
        _end_by(signal.SIGTERM)
    _exit(code)


def _end_by(signum: int) -> NoReturn:
    """End the process by the signal that stopped its run, as a service manager expects of
    a program it stopped (systemd counts that as a clean stop; a shell reports 128 + signum).

    The run has written its outputs and summary and ended its worker processes; the
    standard streams are flushed first.
    """
    with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say there
        sys.stdout.flush()
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    signal.raise_signal(signum)
    os._exit(128 + signum)  # (where the signal is blocked)


#: The exit code of the finished command, for _end_now; None: exit the usual way.
_exit_code: int | None = None


def _exit(code: int) -> NoReturn:
    """End the command with `code`; the process then ends without the interpreter's
    teardown (_end_now), except under a profiler or tracer (cProfile, coverage), whose
    results are written in that teardown."""
    global _exit_code
    if sys.getprofile() is None and sys.gettrace() is None:
        _exit_code = code
    sys.exit(code)


def _end_now() -> None:
    """The last exit handler (main registers it first): end the process with the command's
    code once every other handler has run (multiprocessing's ends its helper processes).

    A command that returns has closed its outputs, renamed them into place, released
    --out and ended its worker processes. What is left of a normal exit is Python freeing
    every module and the native libraries' teardown (CuPy's), a good part of a short run.
    """
    if _exit_code is None:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: what normal exit would also lose
        pass
    os._exit(_exit_code)
