"""YAML config files: read with a strict loader, and settings written back as one.

PyYAML is imported here only, so that a run without --config does without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import UsageError

#: The largest config file read (a real one is a few hundred bytes).
MAX_CONFIG_BYTES = 1 << 20
#: The deepest nesting of lists and mappings read (a config file's values are scalars, at
#: depth 2; PyYAML composes nodes by recursion, which Python's stack bounds).
MAX_CONFIG_DEPTH = 32


def _refused(problem: str, mark: Any) -> yaml.constructor.ConstructorError:
    return yaml.constructor.ConstructorError(None, None, problem, mark)


class _ConfigLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses aliases, keys given twice or that are not scalars,
    and nesting deeper than MAX_CONFIG_DEPTH; integers past what int() reads stay text."""

    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise _refused("aliases (*name) are not allowed in a config file", mark)
        if self.depth >= MAX_CONFIG_DEPTH:
            mark = self.peek_event().start_mark
            raise _refused(f"nested deeper than {MAX_CONFIG_DEPTH} levels", mark)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise _refused(
                    "a key is an option's name, not a list or a mapping", key_node.start_mark
                )
            key = self.construct_object(key_node)
            if isinstance(key, str) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"'{key}' is given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)

    def construct_whole_number(self, node: Any) -> int | str:
        try:
            return int(super().construct_yaml_int(node))
        except ValueError:  # more digits than int() reads: the option's check says its bound
            return str(node.value)


_ConfigLoader.add_constructor("tag:yaml.org,2002:int", _ConfigLoader.construct_whole_number)


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


def dump(values: dict[str, Any]) -> str:
    """`values` as YAML text, in their order."""
    return yaml.safe_dump(values, sort_keys=False)
