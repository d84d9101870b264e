"""The settings of one run: defaults < YAML config files < command-line flags.

Every option of `gccl label` (options.py) has a key of the same name in the
YAML file (`min-area` or `min_area`). Values are checked here, once, with the
option's check, so that an unknown key or a wrong type stops the run with
exit 2 naming the key and where it came from; then the rules between options
(check_settings). Settings is made from the OPTIONS table: a field per option.
A config file is small plain
YAML: at most config_files.MAX_CONFIG_BYTES of UTF-8, each key once, no anchors' aliases
(a few lines of aliases can expand to gigabytes).
"""

from __future__ import annotations

import functools
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import Field, field, make_dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from .contract.params import LabelParams
from .contract.stages import MORPHOLOGY_ORDER
from .errors import BadType, BadValue, UsageError
from .options import BY_NAME, OPTIONS, api_type_problem, close_names


class _SettingsMethods:
    """What every Settings can say besides its fields (one field per option of OPTIONS)."""

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any: ...  # the fields, made from OPTIONS below

    @functools.cached_property
    def params(self) -> LabelParams:
        """The part of the settings that decides the labels and statistics, made once per
        Settings (a frozen dataclass: what it is built from never changes)."""
        growing = self.tau_relative is not None or self.tau_quadratic is not None
        return LabelParams(
            background=self.background,
            invert=self.invert,
            threshold=self.threshold,
            tau=0 if self.tau is None and growing else self.tau,
            tau_relative=float(self.tau_relative or 0),
            tau_quadratic=float(self.tau_quadratic or 0),
            connectivity=self.connectivity,
            min_area=self.min_area,
            max_area=self.max_area,
            largest=self.largest,
            fill_holes=self.fill_holes,
            morphology=tuple(
                (name, getattr(self, name)) for name in MORPHOLOGY_ORDER if getattr(self, name)
            ),
            smooth=_smooth_pair(self.smooth) if self.smooth is not None else None,
            polygons=self.polygons,
        )

    def as_yaml(self) -> str:
        """The settings as a config file that gives them back, each key under its help
        (configs/default.yaml is this for the defaults)."""
        from .config_files import dump  # PyYAML loads only where a file is read or written

        lines = [
            "# The settings of a gccl label command line: the defaults, then each --config",
            "# file, then the flags. Every key is an option of gccl label (gccl label --help).",
        ]
        for option in OPTIONS:
            name, value = option.name, getattr(self, option.name)
            if value is None and name == "background":
                shown: Any = "none"
            elif isinstance(value, Path):
                shown = str(value)
            elif option.show is not str and value is not None:
                shown = option.show(value)  # 4GiB, not 4294967296
            else:
                shown = value
            lines.append("")
            lines += textwrap.wrap(option.help, 88, initial_indent="# ", subsequent_indent="# ")
            lines.append(dump({name.replace("_", "-"): shown}).rstrip("\n"))
        return "\n".join(lines) + "\n"


if TYPE_CHECKING:

    class Settings(_SettingsMethods):
        """Everything `gccl label` needs besides the inputs: a field per option of OPTIONS
        (each Any to the type checker), then `sources`, the config files and the command
        line that gave them."""

        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
        sources: tuple[str, ...]

        def __init__(self, **values: Any) -> None: ...

else:
    Settings = make_dataclass(
        "Settings",
        [(option.name, Any, field(default=option.default)) for option in OPTIONS]
        + [("sources", tuple[str, ...], field(default=(), compare=False))],
        bases=(_SettingsMethods,),
        frozen=True,
    )
    Settings.__module__ = __name__  # pickled by name into worker processes
    Settings.__doc__ = "Everything `gccl label` needs besides the inputs; see the README."


def _smooth_pair(text: str) -> tuple[str, int]:
    kind, _, radius = text.partition(":")
    return kind, int(radius)


def spelled(key: str, python: bool) -> str:
    """How messages name an option: min-area in config files and on the command line,
    min_area in the Python API."""
    return key if python else key.replace("_", "-")


def _checked(key: str, value: Any, source: str, python: bool) -> Any:
    option = BY_NAME[key]
    if python:
        expected = api_type_problem(option, value)
        if expected is not None:
            raise BadType(
                f"{source}: '{key}' must be {expected}, not {type(value).__name__} {value!r}"
            )
        if option.api is bool:
            value = bool(value)  # numpy's bool too
    try:
        return option.check(value)
    except ValueError as error:
        raise BadValue(f"{source}: '{spelled(key, python)}' must be {error}") from None


def apply(
    settings: Settings, values: Mapping[str, Any], source: str, python: bool = False
) -> Settings:
    """`settings` with `values` (keys as in the config file) checked and applied over it.

    python: the values are the Python API's keywords (module docstring of options.py):
    each must also have its keyword's type, and messages spell names as Python does.
    """
    updates = {}
    for raw_key, value in values.items():
        key = str(raw_key).replace("-", "_")
        if key not in BY_NAME:
            close = close_names(key, [spelled(name, python) for name in BY_NAME])
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise UsageError(f"{source}: unknown key '{raw_key}'{hint}")
        if key in updates:
            raise UsageError(f"{source}: '{raw_key}' is given twice (as '-' and '_' spellings)")
        updates[key] = _checked(key, value, source, python)
    return replace(settings, **updates, sources=(*settings.sources, source))


def resolve(
    config_files: Iterable[Path],
    flags: Mapping[str, Any],
    source: str = "command line",
    python: bool = False,
) -> Settings:
    """Defaults, then each config file in order, then the flags given on the command line.

    `flags` holds only the options the user typed (None means not given, except in
    the Python API's keywords: `python`, see apply, where None is a value);
    `source` names where they came from in error messages.
    """
    settings = Settings()
    for path in config_files:
        from .config_files import load_file  # PyYAML loads only where a file is read

        settings = apply(settings, load_file(path), str(path))
    given = flags if python else {key: value for key, value in flags.items() if value is not None}
    settings = apply(settings, given, source, python) if given else settings
    check_settings(settings, source, python)
    return settings


def check_settings(settings: Settings, source: str = "command line", python: bool = False) -> None:
    """The rules between options, which no option's own check sees (every command that
    resolves settings checks them: label, --dry-run, watch, config show, bench, the Python
    API). A connectivity of the other rank than an input's is no error: each input takes
    its own rank's (LabelParams.at_rank)."""
    if settings.smooth is not None and settings.params.tau is None:
        where = f"{source}: " if python else ""  # (the API's errors name the function)
        raise BadValue(
            f"{where}'smooth' needs 'tau': smoothing changes values, which only tau mode reads"
        )
    if settings.max_area is not None and settings.max_area < settings.min_area:
        raise BadValue(
            f"{source}: '{spelled('max_area', python)}' ({settings.max_area}) is below "
            f"'{spelled('min_area', python)}' ({settings.min_area}): no component could be kept"
        )
