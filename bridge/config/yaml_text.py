"""The one YAML reader for everything the bridge reads as YAML: safe, strict about duplicate keys, and without dates.

PyYAML keeps the last of two equal keys silently, so a second `servers:` appended to a file (as `import-servers >>`
once did) dropped every server above it while `check-config` said OK: a duplicate key is refused, naming the key and
both lines. An unquoted `2026-07-28` is a date to YAML 1.1; no value of the config is a date (the protocol era is
written that way in the README), so timestamps stay the text they were written as.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bridge.errors import ConfigError


class _Loader(yaml.SafeLoader):
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor` may repeat: it merges, it does not set a key
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark.line)
            except TypeError:  # an unhashable key: SafeLoader's own error says so
                break
            if first != key_node.start_mark.line:
                raise DuplicateKey(key, first + 1, key_node.start_mark.line + 1)
        return super().construct_mapping(node, deep)


# Timestamps stay strings: drop the resolver that turns `2026-07-28` into a date (the class copies the table first).
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}


class DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, first: int, second: int) -> None:
        super().__init__(f"key {key!r} appears twice (lines {first} and {second}); YAML would keep only the "
                         "second: merge the two into one")
        self.key, self.first, self.second = key, first, second


def loads(text: str) -> Any:
    """The document's data; raises yaml.YAMLError (DuplicateKey included)."""
    return yaml.load(text, Loader=_Loader)  # _Loader is a SafeLoader


def read(path: str | Path) -> Any:
    """A YAML file's data, or ConfigError naming the file and where it is wrong (never the line's text: it may hold
    a secret)."""
    try:
        text = Path(path).read_text("utf-8")
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read: {exc.strerror}"]) from None
    try:
        return loads(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"{path}: not valid YAML: {problem(exc)}"]) from None


def problem(exc: yaml.YAMLError) -> str:
    """Where and what, in one line; never the offending line itself (it may hold a secret)."""
    if isinstance(exc, DuplicateKey):
        return str(exc)
    mark = getattr(exc, "problem_mark", None)
    what = getattr(exc, "problem", None) or "cannot parse"
    context = getattr(exc, "context", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + what + (f" ({context})" if context else "")
