"""What a tool and a UI resource say about MCP Apps (SEP-1865, stable 2026-01-26), read defensively: it is server
data, and a malformed value means "no app" rather than an error."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

VISIBILITY_DEFAULT = frozenset({"model", "app"})


_NO_UI: Mapping[str, Any] = {}


def _ui(tool: Any) -> Mapping[str, Any]:
    meta = getattr(tool, "meta", None)
    if not meta:
        return _NO_UI  # most tools: no `_meta`, and no abstract class checks (a tool is looked at on every call)
    ui = meta.get("ui") if isinstance(meta, Mapping) else None
    return ui if isinstance(ui, Mapping) else {}


def resource_uri(tool: Any) -> str | None:
    """The `ui://` resource holding the tool's app, or None. The older flat key `ui/resourceUri` counts too."""
    uri = _ui(tool).get("resourceUri")
    if uri is None:
        meta = getattr(tool, "meta", None)
        uri = meta.get("ui/resourceUri") if isinstance(meta, Mapping) else None
    return uri if isinstance(uri, str) and uri.startswith("ui://") else None


def visibility(tool: Any) -> frozenset[str]:
    """Who may call the tool: the model (the agent and chat), its app, or both (the default)."""
    seen = _ui(tool).get("visibility")
    if not isinstance(seen, list) or not all(isinstance(v, str) for v in seen):
        return VISIBILITY_DEFAULT
    return frozenset(seen)


def for_model(tool: Any) -> bool:
    """Whether the agent and people in chat see and call the tool (not one its app alone uses)."""
    return "model" in visibility(tool)


def for_app(tool: Any) -> bool:
    return "app" in visibility(tool)


def resource_ui(content: Any) -> Mapping[str, Any]:
    """The `_meta.ui` of a resource's content (its `csp`, `permissions`, ...), or empty."""
    meta = getattr(content, "meta", None)
    ui = meta.get("ui") if isinstance(meta, Mapping) else None
    return ui if isinstance(ui, Mapping) else {}
