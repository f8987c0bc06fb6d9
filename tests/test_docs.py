"""The README's config reference and the shipped example stay in step with the JSON Schema."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bridge.config.file import load, schema

ROOT = Path(__file__).resolve().parent.parent


def schema_paths(node: dict[str, Any], defs: dict[str, Any], prefix: str = "") -> list[str]:
    if "$ref" in node:
        node = defs[node["$ref"].split("/")[-1]]
    out: list[str] = []
    for key, child in node.get("properties", {}).items():
        path = f"{prefix}.{key}" if prefix else key
        out.append(path)
        if isinstance(child, dict) and path.count(".") < 3:
            out.extend(schema_paths(child, defs, path))
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) and "$ref" in extra:
        out.extend(schema_paths(extra, defs, f"{prefix}.<name>"))
    return out


def test_every_config_key_is_in_the_readme_reference() -> None:
    s = schema()
    readme = (ROOT / "README.md").read_text("utf-8")
    reference = readme.split("### Reference", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`([a-z_<>.*]+)`", reference))
    expanded: set[str] = set()
    for item in documented:
        expanded.add(item)
    for row in re.findall(r"^\| (`[^|]+) \|", reference, re.M):
        names = re.findall(r"`([^`]+)`", row)
        base = names[0].rsplit(".", 1)[0]
        expanded.update(f"{base}{n}" if n.startswith(".") else n for n in names)
    missing = []
    for path in schema_paths(s, s["$defs"]):
        if path.startswith(("chat.slack.", "chat.matrix.")) or path in ("servers.<name>.roots.defaults.uri",):
            continue
        parents = [path.rsplit(".", i)[0] + ".*" for i in range(1, path.count(".") + 1)]
        if path not in expanded and not any(p in expanded for p in parents) and not any(
                e.startswith(path + ".") for e in expanded):
            missing.append(path)
    assert missing == []


def test_the_shipped_example_config_is_valid() -> None:
    config = load(ROOT / "deploy/config.example.yaml", env={})
    assert set(config.servers) == {"everything", "remote"}
