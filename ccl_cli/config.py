"""The settings of one run: defaults < YAML config files < command-line flags.

Every option of `gccl label` (options.py) has a key of the same name in the
YAML file (`min-area` or `min_area`). Values are checked here, once, with the
option's check, so that an unknown key or a wrong type stops the run with
exit 2 naming the key and where it came from. A config file is small plain
YAML: at most config_files.MAX_CONFIG_BYTES of UTF-8, each key once, no anchors' aliases
(a few lines of aliases can expand to gigabytes).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from .contract.params import VOLUME_CONNECTIVITIES, LabelParams
from .contract.stages import MORPHOLOGY_ORDER
from .errors import BadType, BadValue, UsageError
from .options import BY_NAME, MAX_IMAGE_BYTES, api_type_problem, close_names


@dataclass(frozen=True)
class Settings:
    """Everything `gccl label` needs besides the inputs; see the README for each option."""

    out: Path | None = None
    recursive: bool = False
    relative_to: Path | None = None
    keep_extension: bool = False
    null_separated: bool = False
    background: int | float | None = 0
    invert: bool = False
    threshold: int | float | None = None
    tau: int | float | None = None
    tau_relative: int | float | None = None
    tau_quadratic: int | float | None = None
    connectivity: int = 8
    min_area: int = 0
    max_area: int | None = None
    largest: int | None = None
    fill_holes: bool = False
    erode: int = 0
    dilate: int = 0
    open: int = 0
    close: int = 0
    smooth: str | None = None
    color_to_gray: str | None = None
    label_format: str = "auto"
    tiff_compression: str = "deflate"
    preview: bool = False
    polygons: bool = False
    skip_existing: bool = False
    fail_fast: bool = False
    fsync: bool = True
    batch_size: int | str = "auto"
    batch_window: int | float = 0.0
    device: str = "auto"
    devices: str | None = None
    workers: int | None = None
    processes: int | str = "auto"
    scheduler: str | None = None
    max_image_bytes: int = MAX_IMAGE_BYTES
    json: bool = False
    quiet: bool = False
    sources: tuple[str, ...] = field(default=(), compare=False)

    def label_params(self) -> LabelParams:
        """The part of the settings that decides the labels and statistics."""
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
        for name, value in asdict(self).items():
            if name == "sources":
                continue
            option = BY_NAME[name]
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
    if settings.smooth is not None and settings.label_params().tau is None:
        where = f"{source}: " if python else ""  # (the API's errors name the function)
        raise BadValue(
            f"{where}'smooth' needs 'tau': smoothing changes values, which only tau mode reads"
        )
    if settings.max_area is not None and settings.max_area < settings.min_area:
        raise BadValue(
            f"{source}: '{spelled('max_area', python)}' ({settings.max_area}) is below "
            f"'{spelled('min_area', python)}' ({settings.min_area}): no component could be kept"
        )
    return settings


def check_images_only(connectivity: int) -> None:
    """Refuse the volume connectivities in the commands that read image files: they label
    3-D volumes, which only the Python API takes."""
    if connectivity in VOLUME_CONNECTIVITIES:
        raise UsageError(
            f"'connectivity' {connectivity} labels 3-D volumes, which only the Python API "
            f"reads (ccl_cli.label(volume, connectivity={connectivity})); images take 4 or 8"
        )
