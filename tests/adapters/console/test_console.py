"""The console adapter driven the way a shell script drives it: lines in, text out, on both eras."""

from __future__ import annotations

import io
import json
import re
from collections.abc import AsyncIterator, Sequence

import anyio
import pytest

from adapters.console import ConsoleAdapter
from bridge.cli.demo.server import server as demo
from bridge.config.file import ServerConfig
from bridge.host import Host
from tests.harness.hosts import config_for, host_store, patient
from tests.servers.inline import form_server

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


async def lines(items: Sequence[str]) -> AsyncIterator[str]:
    for item in items:
        yield item


async def converse(script: Sequence[str], protocol: str = "auto") -> tuple[str, Host]:
    config = config_for({"demo": ServerConfig(name="demo", inprocess=demo, protocol=protocol)})  # type: ignore[arg-type]
    out = io.StringIO()
    host = Host(config, await host_store(config))
    async with host:
        console = ConsoleAdapter(host, lines(script), out)
        host.attach(console)
        with anyio.fail_after(patient(20)):
            await console.serve()
    return out.getvalue(), host


TRIP = ["!mcp call demo plan_trip", "Ada", "ada@", "ada@example.com", "", "2026-12-01", "", "", "7.5", "y",
        "cold", "2", "", "museums,4", "", "accept"]


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_a_piped_form_is_asked_field_by_field_and_sent_typed(protocol: str) -> None:
    out, host = await converse(TRIP, protocol)
    assert "asks you to fill in a form" in out
    assert "(2/13) Email [an email address]" in out
    assert "✗ Enter an email address like name@example.com." in out
    assert "│    2. Oslo (osl)" in out
    result = json.loads(re.search(r"Trip planned with: (\{.*\})", out).group(1))  # type: ignore[union-attr]
    assert result == {"name": "Ada", "email": "ada@example.com", "start": "2026-12-01", "travellers": 2,
                      "budget": 7.5, "window": True, "climate": "cold", "city": "osl", "room": "d",
                      "activities": ["museums", "beach"]}
    assert [r.outcome for r in await host.store.audit_rows()] == ["accepted"]


async def test_end_of_input_cancels_what_is_pending() -> None:
    out, host = await converse(["!mcp call demo plan_trip", "Ada"])
    assert "No trip planned: you chose cancel." in out
    assert [r.outcome for r in await host.store.audit_rows()] == ["cancelled"]


async def test_escape_words_decline_at_any_question() -> None:
    out, _ = await converse(["!mcp call demo plan_trip", "!decline"])
    assert "No trip planned: you chose decline." in out


async def test_commands_and_bad_input_get_helpful_answers() -> None:
    out, _ = await converse(["!mcp help", "!mcp frobnicate", '!mcp call demo echo {"message": ', "!mcp tools demo",
                             '!mcp call demo echo {"message": "hi"}', "!mcp call nope x", "!mcp pending"])
    assert "call <server> <tool> [json]" in out
    assert "Unknown command 'frobnicate'. Try `help`." in out
    assert "The arguments are not valid JSON" in out
    assert "• plan_trip: Plan a trip" in out
    assert "demo.echo:\nhi" in out
    assert "There is no server named 'nope'" in out
    assert "Nothing is waiting for anyone here." in out


async def test_progress_is_shown_as_a_bar() -> None:
    out, _ = await converse(['!mcp call demo count_down {"steps": 2, "seconds": 0}'])
    assert "… demo.count_down [##########----------] 1/2 1 to go" in out
    assert "Lift-off!" in out


async def test_server_text_cannot_drive_the_terminal() -> None:
    out, _ = await converse(['!mcp call demo echo {"message": "\\u001b[2J\\u001b]0;pwned\\u0007hi\\u202e"}'])
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "[2J]0;pwnedhi" in out


DATES = {"type": "object", "required": ["week"], "properties": {
    "week": {"type": "string", "format": "date", "title": "Week", "default": "2026-W01-1"},
    "at": {"type": "string", "format": "date-time", "title": "At", "default": "2026-W01-1T10:00:00Z"},
    "landing": {"type": "string", "format": "date-time", "title": "Landing", "default": "1969-07-20T20:17:40Z"},
}}


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_a_default_the_field_refuses_is_suggested_not_taken_and_week_dates_are_not_rewritten(
        protocol: str) -> None:
    """An ISO week date (`2026-W01-1`, which Python's `fromisoformat` reads) is no RFC 3339 date: as a server's
    default it is only suggested (Enter does not take it), and typed it is refused, not silently rewritten."""
    server = ServerConfig(name="forms", inprocess=form_server(), protocol=protocol)  # type: ignore[arg-type]
    config = config_for({"forms": server})
    out = io.StringIO()
    script = [f"!mcp call forms fill {json.dumps({'schema': json.dumps(DATES)})}",
              "", "2026-01-05", "2026-W02-1T10:00Z", "", "", "accept"]
    host = Host(config, await host_store(config))
    async with host:
        console = ConsoleAdapter(host, lines(script), out)
        host.attach(console)
        with anyio.fail_after(patient(20)):
            await console.serve()
    text = out.getvalue()
    assert "Week [a date, YYYY-MM-DD, suggested: 2026-W01-1]" in text
    assert "At [a date and time, e.g. 2026-01-31T09:30:00Z, suggested: 2026-W01-1T10:00:00Z, optional]" in text
    assert "Landing [a date and time, e.g. 2026-01-31T09:30:00Z, default: 1969-07-20T20:17:40Z]" in text
    assert "✗ This one is required." in text
    assert "✗ Enter a date and time like 2026-01-31T09:30:00Z." in text
    result = json.loads(re.search(r'(\{"era".*\})', text).group(1))  # type: ignore[union-attr]
    assert result["action"] == "accept"
    assert result["content"] == {"week": "2026-01-05", "landing": "1969-07-20T20:17:40Z"}
