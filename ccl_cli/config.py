"""The settings of one run: defaults < YAML config files < command-line flags.

Every option of `gccl label` has a key of the same name in the YAML file
(`min-area` or `min_area`). Values are checked here, once, so that an unknown
key or a wrong type stops the run with exit 2 naming the key and the file.
A config file is small plain YAML: at most MAX_CONFIG_BYTES of UTF-8, each
key once, no anchors or aliases (a few lines of aliases can expand to
gigabytes).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from .contract.params import LabelParams
from .contract.stages import MAX_SMOOTH_RADIUS, MORPHOLOGY_ORDER, SMOOTH_KINDS
from .errors import UsageError
from .io.images import COLOR_TO_GRAY_CHOICES, MAX_IMAGE_BYTES, TIFF_COMPRESSIONS

LABEL_FORMATS = ("auto", "png", "tiff")
_DEVICE_PATTERN = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")
#: A Dask scheduler's TCP address: tcp://host:port or host:port (IPv6 hosts in brackets).
_SCHEDULER_PATTERN = re.compile(r"^(tcp://)?([^\s/:\[\]]+|\[[0-9a-fA-F:.]+\]):\d+$")
#: The largest config file read (a real one is a few hundred bytes).
MAX_CONFIG_BYTES = 1 << 20
#: Multiples of --max-image-bytes's suffixes (K, M, G, T; with or without "iB", all 1024-based).
_BYTE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


@dataclass(frozen=True)
class Settings:
    """Everything `gccl label` needs besides the inputs; see the README for each option."""

    out: Path | None = None
    recursive: bool = False
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
    batch_size: int | str = "auto"
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


def _number(value: Any) -> int | float:
    """An int or float from a YAML scalar or a command-line string."""
    if isinstance(value, bool):
        raise ValueError("a number, not true/false")
    if isinstance(value, (int, float)):
        return value
    text = str(value).strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"a number, got {value!r}") from None


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


def _optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else check(value)


def _background(value: Any) -> int | float | None:
    if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
        return None
    return _finite_number(value)


def _int_at_least(minimum: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError("a whole number, not true/false")
        try:
            number = int(str(value).strip())
        except ValueError:
            raise ValueError(f"a whole number, got {value!r}") from None
        if number < minimum:
            raise ValueError(f"a whole number >= {minimum}, got {value!r}")
        return number

    return check


def _choice(*allowed: Any) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        normalized = str(value).strip().lower() if isinstance(value, str) else value
        if normalized not in allowed:
            raise ValueError(f"one of {', '.join(map(str, allowed))}, got {value!r}")
        return normalized

    return check


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"true or false, got {value!r}")
    return value


def _count_or_auto(value: Any) -> int | str:
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    return _int_at_least(1)(value)


def _device(value: Any) -> str:
    text = str(value).strip().lower()
    if not _DEVICE_PATTERN.match(text):
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
    match = re.fullmatch(r"(\d+)([kmgt]?)(i?b)?", text)
    if match is None or (match.group(3) and not match.group(2) and match.group(3) != "b"):
        raise ValueError(f"a number of bytes like 4G or 512MiB, got {value!r}")
    number = int(match.group(1)) * _BYTE_UNITS[match.group(2)]
    if number < 1:
        raise ValueError(f"at least 1 byte, got {value!r}")
    return number


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


def _smooth_pair(text: str) -> tuple[str, int]:
    kind, _, radius = text.partition(":")
    return kind, int(radius)


def _path(value: Any) -> Path:
    if not isinstance(value, (str, Path)) or not str(value):
        raise ValueError(f"a path, got {value!r}")
    return Path(value)


_CHECKS: dict[str, Callable[[Any], Any]] = {
    "out": _optional(_path),
    "recursive": _flag,
    "background": _background,
    "invert": _flag,
    "threshold": _optional(_finite_number),
    "tau": _optional(_non_negative),
    "connectivity": _choice(4, 8, "4", "8"),
    "min_area": _int_at_least(0),
    "erode": _int_at_least(0),
    "dilate": _int_at_least(0),
    "open": _int_at_least(0),
    "close": _int_at_least(0),
    "smooth": _optional(_smooth),
    "color_to_gray": _optional(_choice(*COLOR_TO_GRAY_CHOICES)),
    "label_format": _choice(*LABEL_FORMATS),
    "tiff_compression": _choice(*TIFF_COMPRESSIONS),
    "preview": _flag,
    "polygons": _flag,
    "skip_existing": _flag,
    "fail_fast": _flag,
    "batch_size": _count_or_auto,
    "device": _device,
    "devices": _optional(_devices),
    "workers": _optional(_int_at_least(1)),
    "processes": _count_or_auto,
    "scheduler": _optional(_scheduler),
    "max_image_bytes": _byte_count,
    "json": _flag,
    "quiet": _flag,
}


def _checked(key: str, value: Any, source: str) -> Any:
    try:
        checked = _CHECKS[key](value)
    except ValueError as error:
        raise UsageError(f"{source}: '{key.replace('_', '-')}' must be {error}") from None
    return int(checked) if key == "connectivity" else checked


def apply(settings: Settings, values: Mapping[str, Any], source: str) -> Settings:
    """`settings` with `values` (keys as in the config file) checked and applied over it."""
    updates = {}
    for raw_key, value in values.items():
        key = str(raw_key).replace("-", "_")
        if key not in _CHECKS:
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
