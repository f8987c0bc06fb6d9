"""`import-servers --into FILE`: new servers added to a config file's own `servers:` block, as text.

Appending a second `servers:` block loses the first (YAML keeps one of two equal keys), so the new entries go into
the existing block, after its last entry, indented like its entries; everything else of the file (comments, order,
`${VAR}` references) stays as written. A name already configured is refused, never overwritten, and the merged text
is read back before it is written: a file that would lose a server is not written at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from bridge.config import yaml_text
from bridge.errors import ConfigError


def merged(text: str, servers: Mapping[str, Mapping[str, Any]], where: str) -> str:
    """`text` (a config file's YAML) with `servers` added to its `servers:` block; ConfigError on a clash."""
    try:
        data = yaml_text.loads(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise ConfigError([f"{where}: not valid YAML: {yaml_text.problem(exc)}"]) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError([f"{where}: the config must be a mapping"])
    existing = data.get("servers") or {}
    if not isinstance(existing, dict):
        raise ConfigError([f"{where}: servers: must be a mapping of servers"])
    clashes = [name for name in servers if name in existing]
    if clashes:
        raise ConfigError([f"{where}: servers.{name}: already configured; rename one of the two (in the imported "
                           "file or in the config) and import again" for name in clashes])
    result = _insert(text, yaml.compose(text, Loader=yaml.SafeLoader) if text.strip() else None, servers)
    after = yaml_text.loads(result) or {}
    kept = set(after.get("servers") or {})
    if kept != set(existing) | set(servers) or {k: v for k, v in after.items() if k != "servers"} != {
            k: v for k, v in data.items() if k != "servers"}:
        raise ConfigError([f"{where}: cannot add the servers without rewriting the file; paste the block printed "
                           "without --into under servers: by hand"])
    return result


def _insert(text: str, root: yaml.Node | None, servers: Mapping[str, Mapping[str, Any]]) -> str:
    block = yaml.safe_dump(dict(servers), sort_keys=False, allow_unicode=True, default_flow_style=False)
    value = _servers_node(root)
    if value is None:  # no servers: key at all: a new block at the end
        return text + ("" if not text or text.endswith("\n") else "\n") + "servers:\n" + _indented(block, 2)
    if isinstance(value, yaml.MappingNode) and value.value and not value.flow_style:
        indent = value.value[0][0].start_mark.column
        at = _line_end(text, _last(value).end_mark.index)
        return text[:at] + ("" if text[:at].endswith("\n") else "\n") + _indented(block, indent) + text[at:]
    # `servers:` empty, `servers: {}` or a flow mapping: the value becomes a block of the old entries and the new.
    old = yaml_text.loads(text[value.start_mark.index:value.end_mark.index]) or {}
    both = yaml.safe_dump({**old, **servers}, sort_keys=False, allow_unicode=True, default_flow_style=False)
    at = _line_end(text, value.end_mark.index)
    return text[:value.start_mark.index].rstrip(" ") + "\n" + _indented(both, 2) + text[at:]


def _servers_node(root: yaml.Node | None) -> yaml.Node | None:
    if not isinstance(root, yaml.MappingNode):
        return None
    for key, value in root.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "servers" and isinstance(value, yaml.Node):
            return value
    return None


def _last(node: yaml.Node) -> yaml.Node:
    """The node written last inside `node` (a block mapping's end mark lies past the comments that follow it)."""
    while isinstance(node, yaml.MappingNode | yaml.SequenceNode) and node.value and not node.flow_style:
        last = node.value[-1]
        node = last[1] if isinstance(last, tuple) else last
    return node


def _line_end(text: str, index: int) -> int:
    """The start of the line after `index` (or `index` itself when it already starts a line)."""
    if index == 0 or text[index - 1] == "\n":
        return index
    newline = text.find("\n", index)
    return len(text) if newline < 0 else newline + 1


def _indented(block: str, indent: int) -> str:
    pad = " " * indent
    return "".join(pad + line if line.strip() else line for line in block.splitlines(keepends=True))
