"""What the console says, as a newcomer reads it with the demo server: tools with their arguments, server errors in
one sentence, plurals and persons, labels of pre-filled values, the roots card and listing, impossible dates, a
question asked again after a command, tool approvals named in the audit log."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio
import pytest

from adapters.console import ConsoleAdapter
from bridge.cli.demo.server import server as demo
from bridge.config.file import RootsPolicy, ServerConfig
from bridge.door.model import shown_conversation
from bridge.host import Host
from tests.adapters.console.test_console import TRIP, converse
from tests.harness.hosts import config_for, host_store, patient

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

ROOT = Path(__file__).resolve().parents[3]


async def test_tools_show_arguments_and_one_tool_in_full() -> None:
    out, _ = await converse(["!mcp tools demo", "!mcp tools demo count_down", "!mcp tools demo plan_trip",
                             "!mcp tools demo nope"])
    listed = await demo.list_tools()
    assert f"demo: {len(listed)} tools" in out and len(listed) > 1
    assert "  • count_down: Count down, reporting progress at each step.\n      arguments: steps (integer), " \
           "seconds (number)\n" in out
    assert "  • echo: Say something back.\n      arguments: message (string, required)\n" in out
    assert "  • show_roots: Show the folders this server may see" in out and "      no arguments" in out
    # The one-line listing points to the whole description instead of cutting it silently.
    assert "(more: `tools demo plan_trip`)" in out
    assert "demo.count_down\nCount down, reporting progress at each step.\nArguments:\n" \
           "  • steps (integer, optional)\n  • seconds (number, optional)\n" in out
    assert re.search(r"demo\.plan_trip\nPlan a trip: .*\nNo arguments\.", out, re.S)
    assert "demo has no tool named 'nope'. Try `tools demo`." in out


async def test_a_validation_error_is_one_plain_sentence() -> None:
    out, _ = await converse(['!mcp call demo echo {"message": 3}', "!mcp call demo echo {}"])
    assert "demo.echo refused its arguments: message should be a valid string. See `tools demo echo`." in out
    assert "demo.echo refused its arguments: message is required. See `tools demo echo`." in out
    assert "pydantic" not in out and "validation error" not in out


async def test_plurals_and_persons() -> None:
    out, _ = await converse(["!mcp prompts demo", "!mcp resources demo", "!mcp usage", "!mcp call demo cancel_booking",
                             "deny", '!mcp call demo suggest_name {"topic": "a cat"}', "deny"])
    assert "demo: 1 prompt\n" in out
    assert "demo: 1 resource\n" in out
    assert "• Your daily budget: 0 (no limit) tokens" in out
    assert "You want to run demo.cancel_booking." in out
    assert "wants the model to answer 1 message." in out
    for wrong in ("you wants", "you's", "1 prompts", "1 resources", "message(s)"):
        assert wrong not in out


async def test_pre_filled_values_are_not_called_your_answers() -> None:
    out, _ = await converse(['!mcp call demo suggest_name {"topic": "a cat"}', "edit", "", "", "deny"])
    assert "│ What will be sent (edit to change it):\n│ System prompt: You name things." in out
    assert "│ Your answers:\n│ System prompt:" in out  # after going through the fields, they are the person's


async def _roots_conversation(script: Sequence[str]) -> str:
    roots = RootsPolicy(defaults=(("file:///srv/project", "the project"), ("file:///home/ada", "")))
    config = config_for({"demo": ServerConfig(name="demo", inprocess=demo, roots=roots)})
    out = io.StringIO()

    async def lines() -> AsyncIterator[str]:
        for line in script:
            yield line

    async with Host(config, await host_store(config)) as host:
        console = ConsoleAdapter(host, lines(), out)
        host.attach(console)
        with anyio.fail_after(patient(20)):
            await console.serve()
    return out.getvalue()


async def test_the_roots_card_lists_each_folder_once_and_roots_shows_them() -> None:
    out = await _roots_conversation(["!mcp call demo show_roots", "edit", "", "", "share", "!mcp roots"])
    assert "│    1. the project (file:///srv/project)\n│    2. file:///home/ada\n" in out
    assert "(file:///srv/project) (file:///srv/project)" not in out
    assert "No roots here yet" not in out
    assert "Also offered to demo (its configured folders):\n• file:///srv/project (the project)\n" \
           "• file:///home/ada" in out


async def test_a_date_that_does_not_exist_is_called_so() -> None:
    script = [*TRIP[:5], "2026-02-30", *TRIP[5:]]
    out, _ = await converse(script)
    assert "✗ 2026-02-30 is not a date that exists (check the month and the day)." in out


async def test_the_question_is_asked_again_after_a_command_and_help_names_the_demo() -> None:
    out, host = await converse(["!mcp call demo cancel_booking", "!mcp help", "run"])
    assert out.count("└ Run? (answer run, deny or cancel)") == 2
    assert out.index("call demo echo") < out.rindex("└ Run?")
    assert "call everything" not in out
    [row] = [r for r in await host.store.audit_rows() if r.kind == "tool"]
    assert row.detail.startswith("tool cancel_booking")


def test_a_conversation_is_shown_without_its_empty_parts() -> None:
    assert shown_conversation("console/local/terminal//") == "console/local/terminal"
    assert shown_conversation("slack/T1/C1/1700000000.1/") == "slack/T1/C1/1700000000.1"


def test_cancel_typed_during_call_stops_the_call() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bridge.cli", "call", "--stdio", f"{sys.executable} -m bridge.cli.demo.server",
         "count_down", '{"steps": 50, "seconds": 0.2}'], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stderr is not None
    try:
        for line in proc.stderr:  # the progress bar: the call runs
            if "/50" in line:
                break
        proc.stdin.write("cancel\n")
        proc.stdin.flush()
        rest = proc.stderr.read()
        proc.wait(timeout=patient(30))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None and not pipe.closed:
                pipe.close()
    assert "stopped by you" in rest
    assert "done" not in rest


def test_the_banner_says_when_no_server_is_configured() -> None:
    from bridge.cli.entry import _banner

    assert "Servers: none configured." in _banner(config_for({}))
    one = config_for({"demo": ServerConfig(name="demo", inprocess=demo)})
    assert "Servers: demo." in _banner(one)


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_pending_and_show_see_the_card_being_answered(protocol: str) -> None:
    """On both eras: a 2026 call's card is parked (stored, nobody waits on it in memory) and is still waiting."""
    out, _ = await converse(["!mcp call demo cancel_booking", "!mcp pending", "!mcp show", "deny"], protocol)
    assert re.search(r"Waiting:\n• \w+: demo \(mcp-chat-bridge-demo\), tool, waits for you", out)
    assert "Nothing is waiting" not in out
    assert "Usage: show" not in out
    assert "\nTool:\ndemo.cancel_booking: Cancel a booking." in out  # `show` without an id: the card being answered
