"""MCP content blocks as plain text: one description shared by everything that shows or forwards content.

The approver's sampling card, the request the model gets (`bridge.llm.sampling_convert`), tool results and prompts
in chat all describe a block the same way, so what a person approves is what the model reads. Only text passes
through; media becomes a placeholder with its type and size (the model and the reader know something was there).
"""

from __future__ import annotations

from typing import Any


def block_text(block: Any) -> str:
    """By the block's `type` (the protocol's discriminator), so this module needs nothing of the SDK: the CLI's quick
    commands import it without loading the SDK."""
    kind = getattr(block, "type", "content")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{block.mime_type}, {decoded_size(block.data)} bytes]"
    if kind == "resource_link":
        return f"[resource {block.uri}]"
    if kind == "resource":
        resource = block.resource
        if hasattr(resource, "blob"):
            return f"[resource {resource.uri}, {resource.mime_type or 'binary'}, {decoded_size(resource.blob)} bytes]"
        return str(resource.text)
    return f"[{kind}]"


def decoded_size(b64: str) -> int:
    """Bytes behind a base64 string, without decoding a possibly large payload, nor copying it: its whitespace is
    counted, not removed."""
    spaces = sum(b64.count(c) for c in " \t\n\r\f\v")
    tail = "".join(b64[-64:].split())
    return max(0, (len(b64) - spaces) * 3 // 4 - tail[-2:].count("="))
