"""A huge tool result at the console, from a real stdio server: the start of it is shown and the rest counted exactly,
built from a bounded prefix (the bridge never writes the whole result out again to shorten it); `show <id>` prints
what was kept and says how much was not."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from mcp.types import CallToolResult, TextContent

from adapters.console import ConsoleAdapter
from bridge.config.file import ServerConfig
from bridge.host import Host
from bridge.safety.limits import Limits
from bridge.text.excerpt import SLICE, json_chunks
from bridge.text.plain import MAX_TEXT, result_excerpt, result_text
from tests.adapters.console.test_promises import Screen, Step, after, typed
from tests.harness.hosts import config_for, host_store, patient
from tests.servers.big_stdio import numbered

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

SERVER = Path(__file__).resolve().parents[2] / "servers" / "big_stdio.py"
KEPT = Limits().tool_result_size


def reported(tool: str, whole: str) -> tuple[str, str]:
    """What chat shows of a result whose text is `whole`, and what `show` prints: the first `KEPT` characters and a
    note, and the start of that with the count of the rest."""
    kept = whole[:KEPT] + (f"\n… [{len(whole) - KEPT} more characters not kept: the bridge keeps at most {KEPT} "
                           "characters of a result (limits.tool_result_size)]")
    cut = MAX_TEXT - 100 - 40
    return f"big.{tool}:\n{kept[:cut].rstrip()}… [{len(kept) - cut} more characters]\n(`show ", kept


async def at_console(steps: list[Step]) -> str:
    config = config_for({"big": ServerConfig(name="big", command=sys.executable, args=(str(SERVER),))})
    screen = Screen()
    host = Host(config, await host_store(config))
    async with host:
        adapter = ConsoleAdapter(host, typed(screen, steps), screen)
        host.attach(adapter)
        with anyio.fail_after(patient(60)):
            await adapter.serve()
    return screen.getvalue()


async def test_a_huge_result_shows_its_start_and_counts_the_rest_and_show_prints_what_was_kept() -> None:
    size = 5_000_000
    out = await at_console([f'!mcp call big logs {{"size": {size}}}', after(r"`show ([0-9a-f]+)`", "!mcp show {0}"),
                            after(r"(more characters not kept: .*\])", "!mcp help")])
    shown, kept = reported("logs", numbered(size))
    assert shown in out
    assert kept in out  # `show`: the first KEPT characters, then how many were not kept
    assert "line 0384614" not in out  # the last line of the result was never printed


async def test_structured_content_after_a_short_text_is_shown_as_json_and_counted_to_its_end() -> None:
    count = 100_000
    out = await at_console([f'!mcp call big rows {{"count": {count}}}', after(r"`show ([0-9a-f]+)`", "!mcp help")])
    rows = {"rows": [{"n": n, "text": f"row \"{n}\"\n"} for n in range(count)]}
    whole = f"{count} rows\nstructured content: " + json.dumps(rows, ensure_ascii=False, indent=1)
    shown, _kept = reported("rows", whole)
    assert shown in out


def test_the_text_of_a_huge_result_is_a_bounded_prefix_with_the_exact_length_of_the_whole() -> None:
    text = numbered(3 * KEPT)
    data = {"result": text, "more": ["x" * (2 * SLICE) + "\n", 1.5, None]}
    result = CallToolResult(content=[TextContent(type="text", text="a"), TextContent(type="text", text=text)],
                            structured_content=data)
    whole = "a\n" + text
    excerpt = result_excerpt(result, 1000)
    assert excerpt.text() == whole[:1000] and excerpt.length == len(whole) and excerpt.left_out == len(whole) - 1000
    assert result_text(result, 1000) == whole[:960].rstrip() + f"… [{len(whole) - 960} more characters]"
    # Short text: the structured content follows, counted to its end; JSON comes in slices, never a string whole.
    short = CallToolResult(content=[TextContent(type="text", text="summary")], structured_content=data)
    dumped = json.dumps(data, ensure_ascii=False, indent=1)
    assert result_excerpt(short, 1000).length == len("summary\nstructured content: ") + len(dumped)
    chunks = list(json_chunks(data))
    assert "".join(chunks) == dumped and max(len(c) for c in chunks) <= 2 * SLICE
