"""The settings of one run: defaults < YAML config files < command-line flags.

Every option of `gccl label` (options.py) has a key of the same name in the
YAML file (`min-area` or `min_area`). Values are checked here, once, with the
option's check, so that an unknown key or a wrong type stops the run with
exit 2 naming the key and where it came from. A config file is small plain
YAML: at most MAX_CONFIG_BYTES of UTF-8, each key once, no anchors' aliases
(a few lines of aliases can expand to gigabytes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from .contract.params import LabelParams
from .contract.stages import MORPHOLOGY_ORDER
from .errors import UsageError
from .options import BY_NAME, MAX_IMAGE_BYTES

#: The largest config file read (a real one is a few hundred bytes).
MAX_CONFIG_BYTES = 1 << 20


@dataclass(frozen=True)
class Settings:
    """Everything `gccl label` needs besides the inputs; see the README for each option."""

    out: Path | None = None
    recursive: bool = False
    relative_to: Path | None = None
    null_separated: bool = False
    background: int | float | None = 0
    invert: bool = False
    threshold: int | float | None = None
    tau: int | float | None = None
    connectivity: int = 8
    min_area: int = 0
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
    batch_window: int | float = 5.0
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
        return LabelParams(
            background=self.background,
            invert=self.invert,
            threshold=self.threshold,
            tau=self.tau,
            connectivity=self.connectivity,
            min_area=self.min_area,
            morphology=tuple(
                (name, getattr(self, name)) for name in MORPHOLOGY_ORDER if getattr(self, name)
            ),
            smooth=_smooth_pair(self.smooth) if self.smooth is not None else None,
            polygons=self.polygons,
        )

    def as_yaml(self) -> str:
        """The effective settings as a config file that gives them back."""
        values = {
            key.replace("_", "-"): (str(value) if isinstance(value, Path) else value)
            for key, value in asdict(self).items()
            if key != "sources"
        }
        if values["background"] is None:
            values["background"] = "none"
        return yaml.safe_dump(values, sort_keys=False)


def _smooth_pair(text: str) -> tuple[str, int]:
    kind, _, radius = text.partition(":")
    return kind, int(radius)


def _checked(key: str, value: Any, source: str) -> Any:
    try:
        return BY_NAME[key].check(value)
    except ValueError as error:
        raise UsageError(f"{source}: '{key.replace('_', '-')}' must be {error}") from None


def apply(settings: Settings, values: Mapping[str, Any], source: str) -> Settings:
    """`settings` with `values` (keys as in the config file) checked and applied over it."""
    updates = {}
    for raw_key, value in values.items():
        key = str(raw_key).replace("-", "_")
        if key not in BY_NAME:
            raise UsageError(f"{source}: unknown key '{raw_key}'")
        if key in updates:
            raise UsageError(f"{source}: '{raw_key}' is given twice (as '-' and '_' spellings)")
        updates[key] = _checked(key, value, source)
    return replace(settings, **updates, sources=(*settings.sources, source))


class _ConfigLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses aliases and keys given twice."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.constructor.ConstructorError(
                None, None, "aliases (*name) are not allowed in a config file", mark
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node)
            if isinstance(key, str) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"'{key}' is given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def load_file(path: Path) -> dict[str, Any]:
    """The mapping in one YAML config file (an empty file is an empty mapping)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as error:
        raise UsageError(f"{path}: cannot read config file ({error.strerror or error})") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise UsageError(f"{path}: a config file holds at most {MAX_CONFIG_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(f"{path}: not UTF-8 text (byte {error.start})") from None
    try:
        data = yaml.load(text, Loader=_ConfigLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = f": {error.problem}" if error.problem else ""
        raise UsageError(f"{path}: not valid YAML{where}{problem}") from None
    except yaml.YAMLError:
        raise UsageError(f"{path}: not valid YAML") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{path}: a config file holds 'key: value' lines")
    return data


def resolve(
    config_files: Iterable[Path], flags: Mapping[str, Any], source: str = "command line"
) -> Settings:
    """Defaults, then each config file in order, then the flags given on the command line.

    `flags` holds only the options the user typed (None means not given);
    `source` names where they came from in error messages.
    """
    settings = Settings()
    for path in config_files:
        settings = apply(settings, load_file(path), str(path))
    given = {key: value for key, value in flags.items() if value is not None}
    settings = apply(settings, given, source) if given else settings
    if settings.smooth is not None and settings.tau is None:
        raise UsageError(
            "'smooth' needs 'tau': smoothing changes values, which only tau mode reads"
        )
    return settings
