"""The pieces every gccl command is built of: the command class, the --config option, one
option of the schema as a Typer parameter, and the one-line error exit."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any

import typer

from .console import say
from .errors import EXIT_USAGE
from .options import Option, close_names


def _as_typed(name: str, args: list[str]) -> str:
    """The unknown option `name` as the user typed it: click reads `-threshold` as the
    short options -t -h -r ..., and names -t; the word it came from says more."""
    if len(name) == 2 and not name.startswith("--"):
        for arg in args:
            if arg.startswith(name) and len(arg) > 2 and arg[1] != "-":
                return arg.split("=", 1)[0]
    return name


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
        typed = list(args)  # (click's parser takes the words off `args` as it reads them)
        try:
            return super().parse_args(ctx, args)
        except Exception as error:
            # Typer raises the exceptions of the click it bundles: recognized by name.
            if type(error).__name__ == "NoSuchOption":
                name = _as_typed(error.option_name, typed)  # type: ignore[attr-defined]
                flags = [flag for param in self.get_params(ctx) for flag in param.opts]
                close = close_names(name, flags)
                hint = f" (did you mean {' or '.join(close)}?)" if close else ""
                error.message = f"No such option: {name}{hint}"  # type: ignore[attr-defined]
                error.possibilities = None  # type: ignore[attr-defined]
            raise


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


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    say(f"gccl: error: {message}", "red")
    return typer.Exit(code)


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
