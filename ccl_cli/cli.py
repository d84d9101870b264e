"""The `gccl` command line: thin commands that parse, build Settings and delegate.

Errors become messages and exit codes here and in the command line's other
modules (cli_parameters.fail, cli_bench.py, exits.py) and nowhere else: a GcclError is
one line on stderr and exit 2; per-input failures are reported by the
pipeline and give exit 1; Ctrl-C gives 130.
"""

from __future__ import annotations

import atexit
import inspect
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

# gccl makes no BLAS calls. Without this, numpy's OpenBLAS starts a thread per core as
# numpy is imported (options.py imports it), and each spins a while: CPU taken from the
# worker processes as they start, more the more cores. A user's own setting stays.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import typer

from . import __version__, exits
from .cli_bench import bench_command
from .cli_parameters import ConfigOption, GcclCommand, fail, schema_parameter
from .console import ConsoleReporter, closing_line, say
from .errors import EXIT_HANGUP, EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_USAGE, GcclError
from .options import NOT_FOR_A_WATCH, OPTIONS

if TYPE_CHECKING:  # the pipeline (numpy, codecs) loads only when a command runs
    from .config import Settings
    from .run.records import RunReport

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
    from .run.command import run_label

    if dry_run:
        _dry_run(inputs, config, flags)
    run = lambda settings, reporter: run_label(inputs, settings, reporter)  # noqa: E731
    _run_command(run, config, flags)


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
                say(f"gccl: {message}")

        code = dry_run(inputs, settings, write, notice)
    except GcclError as error:
        raise fail(str(error), error.exit_code) from None
    except KeyboardInterrupt:
        raise fail("interrupted", EXIT_INTERRUPTED) from None
    raise typer.Exit(code)


def _run_command(
    run: Callable[[Settings, ConsoleReporter], RunReport],
    config: list[Path] | None,
    flags: dict[str, Any],
) -> None:
    """Resolve the settings, run, print the closing line and exit with the run's code."""
    from .config import resolve
    from .run.records import exit_code

    reporter: ConsoleReporter | None = None
    try:
        settings = resolve(config or [], flags)
        reporter = ConsoleReporter(settings.quiet, settings.json)
        report = run(settings, reporter)
    except GcclError as error:
        if reporter is not None:  # before the message, so that it is the last line
            reporter.stop(abandoned=True)
        raise fail(str(error), error.exit_code) from None
    except KeyboardInterrupt:
        raise fail("interrupted", EXIT_INTERRUPTED) from None
    except OSError as error:  # an OS error no step turned into a message of its own
        if reporter is not None:
            reporter.stop(abandoned=True)
        where = f" ({os.fsdecode(error.filename)})" if error.filename else ""
        raise fail(f"{error.strerror or error}{where}") from None
    finally:
        if reporter is not None:
            reporter.stop()
    if not settings.quiet:
        say(f"gccl: {closing_line(report)}")
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
        raise fail(str(error)) from None
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
    atexit.register(exits.end_now)  # before anything else registers: it must run last
    try:
        code = app(standalone_mode=False)
    except typer.Abort:
        say("gccl: error: interrupted", "red")
        sys.exit(EXIT_INTERRUPTED)
    except Exception as error:
        if not hasattr(error, "format_message") or not hasattr(error, "exit_code"):
            raise
        if type(error).__name__ == "NoArgsIsHelpError":
            error.show()  # type: ignore[attr-defined]  # the help text, as for --help
            sys.exit(error.exit_code)
        context = getattr(error, "ctx", None)
        hint = f" (see {context.command_path} --help)" if context is not None else ""
        say(f"gccl: error: {error.format_message()}{hint}", "red")
        exits.end_with(EXIT_USAGE)
    code = code if isinstance(code, int) else 0
    if code in (EXIT_TERMINATED, EXIT_HANGUP):
        exits.end_by(code - 128)
    exits.end_with(code)
