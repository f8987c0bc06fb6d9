"""Prompts and resources: listing (every page), reading, and turning results into chat text."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from mcp import Client
from mcp.types import (
    BlobResourceContents,
    GetPromptResult,
    Prompt,
    PromptReference,
    Resource,
    TextResourceContents,
    Tool,
)

from bridge.door.forms import Field, FieldKind, Option
from bridge.text.plain import block_text, shorten

MAX_PAGES = 100
"""A server that keeps handing out cursors is cut off here rather than looping forever."""


T = TypeVar("T")


async def paginate(fetch: Callable[[str | None], Awaitable[tuple[Sequence[T], str | None]]]) -> list[T]:
    """Follow `nextCursor` to the end: `fetch(cursor)` returns one page's items and the next cursor."""
    items: list[T] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page, cursor = await fetch(cursor)
        items.extend(page)
        if not cursor:
            break
    return items


def task_flag(tool: Tool) -> str:
    """How a listing marks a tool the server runs only as a task (it runs with a status card)."""
    return " [runs as a task]" if tool.execution is not None and tool.execution.task_support == "required" else ""


async def all_tools(client: Client) -> list[Tool]:
    async def fetch(cursor: str | None) -> tuple[Sequence[Tool], str | None]:
        page = await client.list_tools(cursor=cursor)
        return page.tools, page.next_cursor
    return await paginate(fetch)


async def all_prompts(client: Client) -> list[Prompt]:
    async def fetch(cursor: str | None) -> tuple[Sequence[Prompt], str | None]:
        page = await client.list_prompts(cursor=cursor)
        return page.prompts, page.next_cursor
    return await paginate(fetch)


async def all_resources(client: Client) -> list[Resource]:
    async def fetch(cursor: str | None) -> tuple[Sequence[Resource], str | None]:
        page = await client.list_resources(cursor=cursor)
        return page.resources, page.next_cursor
    return await paginate(fetch)


def argument_list(tool: Tool) -> list[tuple[str, str, bool, str]]:
    """A tool's arguments from its input schema: (name, type, required, description), in the schema's order."""
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    found, listed = schema.get("properties"), schema.get("required")
    properties: dict[str, Any] = found if isinstance(found, dict) else {}
    required = set(listed) if isinstance(listed, list) else set()
    out = []
    for name, prop in properties.items():
        prop = prop if isinstance(prop, dict) else {}
        kind = prop.get("type") or ("one of several" if "anyOf" in prop or "oneOf" in prop else "any")
        kind = " or ".join(str(k) for k in kind) if isinstance(kind, list) else str(kind)
        out.append((str(name), kind, name in required, str(prop.get("description") or "")))
    return out


def tool_line(tool: Tool, flag: str = "") -> list[str]:
    """`tools SERVER`: the name, the description's first line, the arguments (name, type, required)."""
    desc = (tool.description or "").strip().splitlines()
    more = " (more: `tools SERVER TOOL`)" if desc and (len(desc) > 1 or len(desc[0]) > 160) else ""
    lines = [f"  • {tool.name}{flag}" + (f": {shorten(desc[0], 160)}{more}" if desc else "")]
    args = [f"{name} ({kind}{', required' if needed else ''})" for name, kind, needed, _ in argument_list(tool)]
    lines.append(f"      arguments: {', '.join(args)}" if args else "      no arguments")
    return lines


def tool_detail(server: str, tool: Tool) -> str:
    """`tools SERVER TOOL`: the whole description and each argument with its own description."""
    lines = [f"{server}.{tool.name}"]
    lines.extend((tool.description or "(no description)").strip().splitlines())
    args = argument_list(tool)
    lines.append("Arguments:" if args else "No arguments.")
    for name, kind, needed, desc in args:
        lines.append(f"  • {name} ({kind}, {'required' if needed else 'optional'})" + (f": {desc}" if desc else ""))
    if args:
        example = ", ".join(f'"{name}": …' for name, _, needed, _ in args if needed)
        lines.append(f"Call it: call {server} {tool.name}" + (f" {{{example}}}" if example else ""))
    return "\n".join(lines)


def prompt_line(prompt: Prompt) -> str:
    args = ", ".join(a.name + ("*" if a.required else "") for a in prompt.arguments or [])
    desc = f": {shorten(prompt.description, 160)}" if prompt.description else ""
    return f"  • {prompt.name}{desc}" + (f" (arguments: {args})" if args else "")


def resource_line(resource: Resource) -> str:
    mime = f", {resource.mime_type}" if resource.mime_type else ""
    return f"  • {resource.uri}: {shorten(resource.name, 100)}{mime}"


def prompt_text(result: GetPromptResult) -> str:
    lines = [f"Prompt: {result.description}"] if result.description else []
    for message in result.messages:
        lines.append(f"{message.role}: {block_text(message.content)}")
    return shorten("\n".join(lines))


def contents_text(contents: list[Any]) -> str:
    """Text shown in full up to the chat limit; binary described by type and size, never dumped."""
    parts: list[str] = []
    for item in contents:
        if isinstance(item, TextResourceContents):
            parts.append(f"{item.uri} ({item.mime_type or 'text'}):\n{item.text}")
        elif isinstance(item, BlobResourceContents):
            size = len(base64.b64decode(item.blob, validate=False))
            parts.append(f"{item.uri}: binary, {item.mime_type or 'unknown type'}, {size} bytes")
    return shorten("\n".join(parts) or "(empty)")


async def argument_field(client: Client, prompt: Prompt, name: str, description: str | None,
                         known: dict[str, str]) -> Field:
    """A form field for a missing prompt argument; the server's completions become options when it has some."""
    options: tuple[Option, ...] = ()
    if client.server_capabilities.completions is not None:
        try:
            result = await client.complete(PromptReference(type="ref/prompt", name=prompt.name),
                                           {"name": name, "value": ""}, context_arguments=known or None)
            # Without repeats: servers repeat completions, and a card with two equal options is invalid everywhere.
            options = tuple(Option(v, v) for v in dict.fromkeys(v for v in result.completion.values[:100] if v))
        except Exception:  # noqa: BLE001 - completions are a convenience; without them the field is free text
            options = ()
    kind = FieldKind.CHOICE if options else FieldKind.TEXT
    return Field(name, kind, name, description=description or "", required=True, options=options)
