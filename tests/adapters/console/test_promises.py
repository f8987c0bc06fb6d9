"""What the README promises a newcomer at the console, checked the way a person meets it: `cancel` stops a running
call, `show <id>` shows everything, `edit` shows and keeps the current answers, a short timeout reads as seconds,
and a one-shot `call` neither hangs on an open input nor promises a restart."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from adapters.console import ConsoleAdapter
from bridge.cli.demo.server import server as demo
from bridge.config.file import ServerConfig
from bridge.host import Host
from bridge.storage import open_store
from tests.harness.hosts import config_for, patient
from tests.servers.inline import form_server

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

ROOT = Path(__file__).resolve().parents[3]
Step = str | tuple[Callable[[str], str | None], Callable[[str], str]]
"""A line, or (wait until this finds something in the output, then make the line from what it found)."""


class Screen(io.StringIO):
    """The console's output, with an event each time something is printed."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = anyio.Event()

    def write(self, text: str) -> int:
        n = super().write(text)
        self.changed.set()
        self.changed = anyio.Event()
        return n

    async def find(self, look: Callable[[str], str | None]) -> str:
        while (found := look(self.getvalue())) is None:
            await self.changed.wait()
        return found


async def typed(screen: Screen, steps: Sequence[Step]) -> AsyncIterator[str]:
    """Lines as a person types them: some only after they have seen something."""
    for step in steps:
        if isinstance(step, str):
            yield step
        else:
            look, make = step
            yield make(await screen.find(look))


def after(pattern: str, line: str = "{0}") -> tuple[Callable[[str], str | None], Callable[[str], str]]:
    def look(text: str) -> str | None:
        match = re.search(pattern, text)
        return match.group(1) if match and match.groups() else (match.group(0) if match else None)
    return look, lambda found: line.format(found)


async def console(steps: Sequence[Step], **overrides: Any) -> tuple[str, Host]:
    config = config_for({"demo": ServerConfig(name="demo", inprocess=demo)}, **overrides)
    screen = Screen()
    host = Host(config, await open_store(":memory:"))
    async with host:
        adapter = ConsoleAdapter(host, typed(screen, steps), screen)
        host.attach(adapter)
        with anyio.fail_after(patient(20)):
            await adapter.serve()
    return screen.getvalue(), host


async def test_cancel_stops_a_running_call() -> None:
    # The countdown would take 250 s; the console's deadline ends the test long before unless cancel stops it.
    out, _ = await console(['!mcp call demo count_down {"steps": 50, "seconds": 5}',
                            after(r"… demo\.count_down .* to go", "!mcp cancel")])
    assert "Stopped demo.count_down." in out
    assert "Lift-off!" not in out


async def test_a_piped_script_still_answers_in_order_while_commands_run() -> None:
    out, _ = await console(['!mcp call demo echo {"message": "one"}', "cancel",
                            '!mcp call demo echo {"message": "two"}'])
    # `cancel` right after a command: it may stop that call or find nothing, but never jumps ahead of a card's answers
    # or loses the next command.
    assert "demo.echo:\ntwo" in out


async def test_show_prints_the_link_of_a_url_request_and_the_fields_of_a_form() -> None:
    out, _ = await console(["!mcp call demo connect_account", after(r"\[id ([0-9a-f]+),", "!mcp show {0}"),
                            # `show`'s own lines (the card has them too, indented): answer only once it printed.
                            after(r"(?m)^(URL: \S+\nHost: auth\.example\.com\n)", "cancel"),
                            "!mcp call demo plan_trip", after(r"\[id ([0-9a-f]+), expires in 10m\]\n│ Where",
                                                              "!mcp show {0}"),
                            after(r"(Fields:)", "!cancel")])
    assert "URL: https://auth.example.com/connect?service=example\nHost: auth.example.com" in out
    assert "(no details)" not in out
    assert "• Your name (name): text, 2-60 characters, required" in out
    assert "• Climate (climate): one of the options (number, value or title), default: mild" in out
    assert "    2. Oslo (osl)" in out


async def test_edit_at_the_summary_shows_and_keeps_the_current_answers() -> None:
    trip = ["!mcp call demo plan_trip", "Ada", "ada@example.com", "", "2026-12-01", "", "", "7.5", "y", "cold", "2",
            "", "museums,4", "", "edit"] + [""] * 13 + ["accept"]
    out, _ = await console(trip)
    edited = out.split("│ Your answers:", 1)[1]
    assert "(9/13) Climate [one of the options (number, value or title), now: cold (empty keeps it)]" in edited
    assert "default: mild" not in edited.split("Climate [", 1)[1].split("\n", 1)[0]
    result = json.loads(re.search(r"Trip planned with: (\{.*\})", out).group(1))  # type: ignore[union-attr]
    assert result["climate"] == "cold" and result["city"] == "osl" and result["activities"] == ["museums", "beach"]


async def test_a_two_second_timeout_reads_as_seconds_on_the_card_and_in_pending() -> None:
    out, _ = await console(["!mcp call demo connect_account", "!mcp pending", after("(Waiting:)", "!cancel")],
                           server_elicitation_timeout=2)
    assert re.search(r"\[id [0-9a-f]+, expires in [12]s\]", out), out
    assert re.search(r"expires in [12]s: Sign in to example", out), out
    assert "expires in 1m" not in out and "0m0" not in out


def run_call(*argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge.cli", "call", *argv], input=stdin, capture_output=True,
                          text=True, timeout=60, check=False, cwd=ROOT)


def test_a_failed_call_does_not_promise_a_restart() -> None:
    crashy = ROOT / "tests" / "servers" / "crashy.py"
    done = run_call("--stdio", f"{sys.executable} {crashy}", "crash")
    assert done.returncode == 2
    assert "fatal: the flux capacitor overheated" in done.stderr
    assert "started again" not in done.stderr


async def test_call_exits_after_the_result_while_its_input_stays_open() -> None:
    process = await anyio.open_process([sys.executable, "-m", "bridge.cli", "call", "--stdio",
                                        f"{sys.executable} -m bridge.cli.demo.server", "connect_account"], cwd=ROOT)
    assert process.stdin is not None and process.stdout is not None
    try:
        await process.stdin.send(b"accept\n")  # and the input stays open, as a terminal's does
        with anyio.fail_after(patient(30)):
            code = await process.wait()
        chunks = []
        with anyio.fail_after(patient(10)):
            async for chunk in process.stdout:  # the whole output, whatever the pipe's chunking
                chunks.append(chunk)
        out = b"".join(chunks).decode()
    finally:
        if process.returncode is None:
            process.kill()
        await process.aclose()
    assert code == 0
    assert "Link flow: accept." in out


async def test_cards_are_printed_through_the_one_cleaner() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "string", "title": "Na\u2060me\u00ad\ufeff\u061c\u202e!",
                                                     "description": "d\u200be\u2066s\u2069c"}}}
    config = config_for({"forms": form_server()})
    screen = Screen()
    host = Host(config, await open_store(":memory:"))
    script = [f"!mcp call forms fill {json.dumps({'schema': json.dumps(schema)})}", "Ada", "accept"]
    async with host:
        adapter = ConsoleAdapter(host, typed(screen, script), screen)
        host.attach(adapter)
        with anyio.fail_after(patient(20)):
            await adapter.serve()
    out = screen.getvalue()
    assert "(1/1) Name! (desc) [text, optional]" in out
    for hidden in "\u2060\u00ad\ufeff\u061c\u202e\u200b\u2066\u2069":
        assert hidden not in out, f"U+{ord(hidden):04X}"
