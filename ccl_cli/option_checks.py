"""The checks of the options' values (options.py's table names one per option): each takes a
YAML scalar, a command-line string or an API value and returns the value, or raises ValueError
with the text that follows "'key' must be ..."."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .contract.params import IMAGE_CONNECTIVITIES, VOLUME_CONNECTIVITIES
from .contract.stages import MAX_MORPHOLOGY_STEPS, MAX_SMOOTH_RADIUS, SMOOTH_KINDS

#: What --device names: the CPU, CUDA's first device, or device N.
DEVICE_PATTERN = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")
#: A Dask scheduler's TCP address: tcp://host:port or host:port (IPv6 hosts in brackets).
_SCHEDULER_PATTERN = re.compile(r"^(tcp://)?([^\s/:\[\]]+|\[[0-9a-fA-F:.]+\]):\d+$")
#: The most threads (--workers) and worker processes (--processes) a run may ask for: more
#: than any machine has cores, fewer than a system's thread and process limits.
MAX_WORKERS = 1024
#: The largest whole number an option takes (areas, counts, bytes): what the engines' 64-bit
#: signed counts hold. A larger one would fail every input at the first engine call.
MAX_COUNT = 2**63 - 1
#: The largest magnitude of a number option (tau, background, threshold): a 64-bit float's.
MAX_NUMBER = sys.float_info.max
#: The longest --batch-window, in milliseconds (a minute).
MAX_BATCH_WINDOW_MS = 60_000
#: Multiples of --max-image-bytes's suffixes (K, M, G, T; with or without "iB", all 1024-based).
_BYTE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
#: The most characters of a value quoted back in a message.
_QUOTE_CHARS = 40


def quoted(value: Any) -> str:
    """`value` as a message quotes it: its repr, cut short where it is long."""
    text = repr(value)
    return text if len(text) <= _QUOTE_CHARS else f"{text[: _QUOTE_CHARS - 5]}...{text[-4:]}"


def any_number(value: Any) -> int | float:
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
                raise ValueError(f"a number, got {quoted(value)}") from None
    if abs(number) > MAX_NUMBER and not spelled_infinite:
        raise ValueError(
            f"a number within a 64-bit float's range (+-{MAX_NUMBER:.4g}), got {quoted(value)}"
        )
    return number


def finite_number(value: Any) -> int | float:
    number = any_number(value)
    if number != number:
        raise ValueError("a number, got nan")
    return number


def non_negative(value: Any) -> int | float:
    number = finite_number(value)
    if number < 0:
        raise ValueError(f"a number >= 0, got {value!r}")
    return number


def coefficient(value: Any) -> int | float:
    """A coefficient of the tolerance: finite and >= 0."""
    number = non_negative(value)
    if number == float("inf"):
        raise ValueError(f"a finite number >= 0, got {value!r}")
    return number


def milliseconds(value: Any) -> int | float:
    """A --batch-window: 0..MAX_BATCH_WINDOW_MS."""
    number = non_negative(value)
    if number > MAX_BATCH_WINDOW_MS:
        raise ValueError(f"at most {MAX_BATCH_WINDOW_MS} (a minute), got {value!r}")
    return number


def spacing(value: Any) -> tuple[float, float, float]:
    """A --spacing: three finite numbers > 0, "SX,SY,SZ" (or a list of three)."""
    parts = value.split(",") if isinstance(value, str) else value
    try:
        numbers = tuple(float(part) for part in parts)
    except (TypeError, ValueError):
        numbers = ()
    if len(numbers) != 3 or not all(0 < n < float("inf") for n in numbers):
        raise ValueError(f"three numbers > 0, SX,SY,SZ, got {value!r}")
    return numbers


def optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else check(value)


def background(value: Any) -> int | float | None:
    if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
        return None
    return finite_number(value)


def int_at_least(minimum: int, maximum: int = MAX_COUNT) -> Callable[[Any], int]:
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
                raise ValueError(f"a whole number, got {quoted(value)}") from None
            # more digits than int() reads: past any bound
            number = -MAX_COUNT - 1 if text.startswith("-") else MAX_COUNT + 1
        if number < minimum:
            raise ValueError(f"a whole number >= {minimum}, got {quoted(value)}")
        if number > maximum:
            raise ValueError(f"a whole number <= {most}, got {quoted(value)}")
        return number

    return check


def steps(value: Any) -> int:
    """A morphology count: 0..MAX_MORPHOLOGY_STEPS (each step is a pass over the image)."""
    number = int_at_least(0)(value)
    if number > MAX_MORPHOLOGY_STEPS:
        raise ValueError(
            f"at most {MAX_MORPHOLOGY_STEPS} (each step is a pass over every image, and "
            f"{MAX_MORPHOLOGY_STEPS} steps already cross a {2 * MAX_MORPHOLOGY_STEPS}-pixel "
            f"image), got {value!r}"
        )
    return number


def choice(*allowed: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        normalized = str(value).strip().lower() if isinstance(value, str) else value
        if normalized not in allowed:
            raise ValueError(f"one of {', '.join(allowed)}, got {value!r}")
        return normalized

    return check


def connectivity(value: Any) -> int:
    allowed = tuple(str(c) for c in (*IMAGE_CONNECTIVITIES, *VOLUME_CONNECTIVITIES))
    if isinstance(value, bool) or str(value).strip() not in allowed:
        raise ValueError(f"4 or 8 (images), or 6, 18 or 26 (volumes), got {value!r}")
    return int(str(value).strip())


#: The words YAML 1.1 reads as booleans, which a config file may also quote ("false").
_BOOLEAN_WORDS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}


def flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _BOOLEAN_WORDS:
        return _BOOLEAN_WORDS[value.strip().lower()]
    raise ValueError(f"true or false, got {value!r}")


def count_or_auto(value: Any) -> int | str:
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    return int_at_least(1)(value)


def processes(value: Any) -> int | str:
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    return int_at_least(1, MAX_WORKERS)(value)


def check_device(value: Any) -> str:
    """A --device value (auto, cpu, cuda or cuda:N), lower-cased."""
    text = str(value).strip().lower()
    if not DEVICE_PATTERN.match(text):
        raise ValueError(f"auto, cpu, cuda or cuda:N, got {value!r}")
    return text


def devices(value: Any) -> str:
    text = str(value).strip().lower().replace(" ", "")
    if text != "all" and not re.fullmatch(r"\d+(,\d+)*", text):
        raise ValueError(f"all or GPU numbers like 0,1, got {value!r}")
    if text != "all" and len(set(text.split(","))) != len(text.split(",")):
        raise ValueError(f"each GPU once, got {value!r}")
    return text


def scheduler(value: Any) -> str:
    text = value.strip() if isinstance(value, str) else ""
    if not _SCHEDULER_PATTERN.match(text):
        raise ValueError(f"a Dask scheduler address tcp://host:port, got {value!r}")
    return text


def byte_count(value: Any) -> int:
    """A number of bytes: 4294967296, 4G, 4GiB or 512M (K, M, G, T are powers of 1024)."""
    if isinstance(value, bool):
        raise ValueError("a number of bytes, not true/false")
    text = str(value).strip().lower().replace(" ", "")
    match = re.fullmatch(r"(\d+)(([kmgt])(i?b)?|b)?", text)
    if match is None:
        raise ValueError(f"a number of bytes like 4G or 512MiB, got {value!r}")
    digits = match.group(1).lstrip("0") or "0"
    if len(digits) > len(str(MAX_COUNT)):  # past int()'s digits, and past any bound
        raise ValueError(f"at most 2**63 - 1 bytes (8EiB), got {quoted(value)}")
    number = int(digits) * _BYTE_UNITS[match.group(3) or ""]
    if number < 1:
        raise ValueError(f"at least 1 byte, got {value!r}")
    if number > MAX_COUNT:
        raise ValueError(f"at most 2**63 - 1 bytes (8EiB), got {quoted(value)}")
    return number


def bytes_text(count: int) -> str:
    """A number of bytes as a user writes it: 4GiB, 512MiB, or plain bytes."""
    for suffix, unit in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count % unit == 0:
            return f"{count // unit}{suffix}"
    return str(count)


def smooth(value: Any) -> str | None:
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


def path(value: Any) -> Path:
    if not isinstance(value, (str, Path)) or not str(value):
        raise ValueError(f"a path, got {value!r}")
    if "\0" in str(value):
        raise ValueError(f"a path without NUL bytes, got {value!r}")
    return Path(value)
