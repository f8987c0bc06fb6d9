"""Every card kind the demo server asks for, answered on the console, on both protocol eras.

The demo is the bundled server `mcp-chat-bridge demo` runs; these are the lines a person would type.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Sequence

import anyio
import pytest

from adapters.console import ConsoleAdapter
from bridge.cli.demo.server import build
from bridge.config.file import RootsPolicy, ServerConfig
from bridge.host import Host
from bridge.storage import open_store
from tests.harness.hosts import config_for, patient

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

ROOTS = RootsPolicy(defaults=(("file:///srv/trips", "trips"), ("file:///srv/photos", "photos")))


async def lines(items: Sequence[str]) -> AsyncIterator[str]:
    for item in items:
        yield item


async def converse(script: Sequence[str], protocol: str) -> tuple[str, list[tuple[str, str]]]:
    server = ServerConfig(name="demo", inprocess=build(), protocol=protocol, roots=ROOTS)  # type: ignore[arg-type]
    out = io.StringIO()
    store = await open_store(":memory:")
    async with Host(config_for({"demo": server}), store) as host:
        console = ConsoleAdapter(host, lines(script), out)
        host.attach(console)
        with anyio.fail_after(patient(30)):
            await console.serve()
    audit = [(row.kind, row.outcome) for row in await store.audit_rows()]
    await store.aclose()
    return out.getvalue(), audit


# `auto` negotiates 2026-07-28 with the in-process demo (checked below); `legacy` pins 2025-11-25.
ERAS = pytest.mark.parametrize("protocol", ["legacy", "auto"])


@ERAS
async def test_sampling_is_approved_then_the_answer_reviewed(protocol: str) -> None:
    out, audit = await converse(['!mcp call demo suggest_name {"topic": "a cat"}', "approve", "Whiskers", "send"],
                                protocol)
    assert "asks you to let it use the model" in out
    assert "Message 1 (user): Suggest a short, friendly name for this: a cat" in out
    assert "Suggested name for a cat: Whiskers (model: human)" in out
    assert audit == [("sampling", "accepted"), ("sampling_review", "accepted")]


@ERAS
async def test_roots_are_shared_as_picked_or_denied(protocol: str) -> None:
    out, audit = await converse(["!mcp call demo show_roots", "edit", "2", "", "share",
                                 "!mcp call demo show_roots", "deny"], protocol)
    assert "asks you which folders it may see" in out
    assert "I may see: photos (file:///srv/photos)" in out
    assert "No folders were shared with me." in out
    assert audit == [("roots", "accepted"), ("roots", "declined")]


@ERAS
async def test_a_destructive_tool_waits_for_approval(protocol: str) -> None:
    out, audit = await converse(["!mcp call demo cancel_booking", "deny",
                                 '!mcp call demo cancel_booking {"booking": "Oslo"}', "run"], protocol)
    assert "asks you to approve running cancel_booking" in out
    assert "The call to cancel_booking was not run: declined by you." in out
    assert "Cancelled the booking 'Oslo' (not really: this is a demo)." in out
    assert audit == [("tool", "declined"), ("tool", "accepted")]


@ERAS
async def test_prompt_arguments_come_with_completions_narrowed_by_earlier_ones(protocol: str) -> None:
    out, _ = await converse(["!mcp prompts demo", "!mcp servers", "!mcp prompt demo packing_list", "Kyoto", "submit",
                             "2", "submit"], protocol)
    assert f"protocol {'2025-11-25' if protocol == 'legacy' else '2026-07-28'}" in out
    assert "• packing_list: A packing list" in out and "(arguments: city*, season*)" in out
    assert "1. Lisbon\n│    2. Oslo\n│    3. Kyoto\n│    4. Reykjavik" in out
    # Kyoto has no summer in the demo's notes: the server's completion for the season depends on the city.
    assert "1. spring\n│    2. autumn\n│    3. winter" in out
    assert "user: Write a short packing list for autumn in Kyoto." in out


@ERAS
async def test_resources_are_listed_and_read(protocol: str) -> None:
    out, _ = await converse(["!mcp resources demo", "!mcp read demo demo://guide",
                             "!mcp read demo demo://cities/Oslo"], protocol)
    assert "• demo://guide: guide, text/markdown" in out
    assert "Lisbon is hilly: bring good shoes." in out
    assert "Seasons to visit: summer, winter." in out
