"""Pure decisions: which tool calls need a person's approval, and how arguments are shown on a card."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from mcp.types import ToolAnnotations

from bridge.secret_names import looks_secret
from bridge.text import shorten

MASK = "••••••"
MAX_VALUE = 300


def needs_approval(rules: Sequence[tuple[str, Literal["always", "never"]]], tool: str,
                   annotations: ToolAnnotations | None) -> bool:
    """The first rule whose glob matches the tool name decides; with none, a tool that declares itself destructive
    (and not read-only) asks. Annotations are the server's claims: rules are how a team overrides them."""
    by_rule = rule_verdict(rules, tool)
    if by_rule is not None:
        return by_rule
    if annotations is None:
        return False
    return annotations.destructive_hint is True and annotations.read_only_hint is not True


def rule_verdict(rules: Sequence[tuple[str, Literal["always", "never"]]], tool: str) -> bool | None:
    """Whether the configured rules alone decide that `tool` needs approval (True/False), or None when none matches
    and the tool's own annotations decide."""
    for pattern, verdict in rules:
        if fnmatch.fnmatchcase(tool, pattern):
            return verdict == "always"
    return None


def mask_arguments(arguments: Mapping[str, Any]) -> str:
    """Arguments as readable JSON for a card: secret-looking values masked, long values shortened."""
    return json.dumps(_mask(arguments), ensure_ascii=False, indent=1)


def _mask(value: Any, key: str = "") -> Any:
    if key and looks_secret(key) and not isinstance(value, dict | list):
        return MASK
    if isinstance(value, Mapping):
        return {str(k): _mask(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v, key) for v in value[:50]] + (["…"] if len(value) > 50 else [])
    if isinstance(value, str):
        return shorten(value, MAX_VALUE)
    return value
