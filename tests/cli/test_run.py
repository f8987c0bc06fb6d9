"""`mcp-chat-bridge run` as a process: serves the console, and shuts down cleanly on SIGTERM."""

from __future__ import annotations

import json
import queue
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import httpx2
import pytest
import yaml

from bridge.door.forms import Field, FieldKind, Option, approval_form
from bridge.door.model import Actor, ConversationKey, Kind, ServerLabel
from bridge.requests.request_context import RequestContext, new_interaction
from bridge.storage import AuditRow, open_store
from bridge.storage.driver import Row
from tests.harness.console_run import finish, launch, type_line, wait_line
from tests.harness.hosts import patient
from tests.harness.legacy_store import Store as LegacyStore


def start(tmp_path: Path, protocol: str, **extra: object) -> tuple[subprocess.Popen[str], queue.Queue[str], Path,
                                                                  threading.Thread]:
    db = tmp_path / "bridge.db"
    config = tmp_path / "bridge.yaml"
    config.write_text(yaml.safe_dump({
        "store": str(db),
        # The demo server keeps its requestState key in its state folder: a temporary one here.
        "servers": {"demo": {"command": sys.executable, "args": ["-m", "bridge.cli.demo.server"], "protocol": protocol,
                             "env": {"XDG_STATE_HOME": str(tmp_path / "state")}}},
        "chat": {"console": {}}, **extra}))
    proc, lines, reader = launch(config, "--log-json", "--log-level", "info")
    return proc, lines, db, reader


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
def test_sigterm_finishes_open_cards_and_keeps_2026_requests(tmp_path: Path, protocol: str) -> None:
    proc, lines, db, reader = start(tmp_path, protocol)
    assert proc.stdin is not None
    proc.stdin.write("!mcp call demo plan_trip\n")
    proc.stdin.flush()
    wait_line(lines, "asks you to fill in a form")
    proc.send_signal(signal.SIGTERM)
    # Wait with stdin still open: closing it is end of input, which (by the console's rules) cancels the card.
    proc.wait(timeout=30)
    assert proc.stderr is not None and proc.stdout is not None
    err = proc.stderr.read()
    reader.join(timeout=10)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        pipe.close()
    assert proc.returncode == 0, err
    logs = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert any("received SIGTERM" in entry["message"] for entry in logs)
    anyio.run(check_stored, db, protocol)


async def check_stored(db: Path, protocol: str) -> None:
    store = await open_store(db)
    try:
        if protocol == "legacy":
            # The call dies with the bridge: its card ends as cancelled, and the audit log says why.
            [row] = await store.audit_rows()
            assert (row.outcome, row.detail) == ("cancelled", "tool plan_trip: the bridge is shutting down")
            assert await store.pending_calls() == []
        else:
            # A 2026 request is stored and stays open, to be answered after the restart.
            assert await store.audit_rows() == []
            assert [(p.server, p.tool) for p in await store.pending_calls()] == [("demo", "plan_trip")]
            assert len(await store.open_interactions()) == 1
    finally:
        await store.aclose()


# A whole form answered from a pipe; the input ends right after its last answer.
TRIP = ["!mcp call demo plan_trip", "Ada", "ada@example.com", "", "2026-12-01", "", "", "", "", "", "2", "", "", "",
        "submit"]


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
def test_a_piped_script_ends_after_the_result_of_its_last_answer(tmp_path: Path, protocol: str) -> None:
    # A 2026 call goes on after its card in a task of its own: the end of the input must not cut it off.
    proc, lines, _db, reader = start(tmp_path, protocol)
    assert proc.stdin is not None and proc.stderr is not None
    type_line(proc, *TRIP)
    proc.stdin.close()
    proc.wait(timeout=patient(60))
    reader.join(timeout=patient(10))
    err = proc.stderr.read()
    for pipe in (proc.stdout, proc.stderr):
        assert pipe is not None
        pipe.close()
    out = "".join(lines.queue)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    [result] = [line for line in out.splitlines() if line.startswith("Trip planned with: ")]
    assert json.loads(result.removeprefix("Trip planned with: "))["name"] == "Ada"


def test_version_and_help() -> None:
    done = subprocess.run([sys.executable, "-m", "bridge.cli", "--version"], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0 and done.stdout.startswith("mcp-chat-bridge 0.1.0")


def test_run_serves_health_on_the_configured_port(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a free port, released for the bridge to take
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc, lines, _db, reader = start(tmp_path, "auto", http={"listen": f"127.0.0.1:{port}"})
    try:
        wait_line(lines, "mcp-chat-bridge")  # the banner: the bridge is up
        assert httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=10).text == "ok\n"
        assert httpx2.get(f"http://127.0.0.1:{port}/readyz", timeout=10).json()["ready"] is True
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        reader.join(timeout=10)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            assert pipe is not None
            pipe.close()
    assert proc.returncode == 0


def test_a_second_run_on_the_same_store_is_refused_in_one_line(tmp_path: Path) -> None:
    proc, lines, _db, reader = start(tmp_path, "auto")
    try:
        wait_line(lines, "mcp-chat-bridge")  # the first bridge is up and holds the store
        second = subprocess.run([sys.executable, "-m", "bridge.cli", "run", "-c", str(tmp_path / "bridge.yaml")],
                                capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        reader.join(timeout=10)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            assert pipe is not None
            pipe.close()
    assert second.returncode == 2
    assert "Traceback" not in second.stderr and len(second.stderr.strip().splitlines()) == 1
    assert f"is in use by process {proc.pid}" in second.stderr


def test_after_kill_9_the_console_shows_the_2026_card_again_and_its_answer_reaches_the_server(tmp_path: Path) -> None:
    proc, lines, db, reader = start(tmp_path, "auto")
    type_line(proc, "!mcp call demo plan_trip")
    wait_line(lines, "asks you to fill in a form")
    finish(proc, reader, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL

    again, lines, _db, reader = start(tmp_path, "auto")
    try:
        wait_line(lines, "asks you to fill in a form")  # the resumed card, shown again on the console
        type_line(again, "Ada", "ada@example.com", "", "2026-12-01", "", "", "", "", "", "2", "", "", "", "accept")
        done = wait_line(lines, "Trip planned with:")
    finally:
        err = finish(again, reader)
    assert '"name": "Ada"' in done and "Traceback" not in err
    assert anyio.run(count, db, "pending_calls") == anyio.run(count, db, "interactions WHERE status = 'open'") == 0
    assert [row.outcome for row in anyio.run(audit_rows, db, None)] == ["accepted"]


def test_a_legacy_call_running_when_the_bridge_is_killed_is_reported_as_interrupted(tmp_path: Path) -> None:
    proc, lines, db, reader = start(tmp_path, "legacy")
    type_line(proc, '!mcp call demo count_down {"steps": 50, "seconds": 5}')
    wait_line(lines, "to go")  # running at the server, with no card open
    finish(proc, reader, signal.SIGKILL)

    again, lines, _db, reader = start(tmp_path, "legacy")
    try:
        told = wait_line(lines, "demo.count_down was interrupted")
    finally:
        finish(again, reader)
    assert "run it again" in told
    assert anyio.run(count, db, "running_calls") == 0


def test_a_second_run_touches_nothing_of_the_first_s_open_legacy_card(tmp_path: Path) -> None:
    proc, lines, db, reader = start(tmp_path, "legacy")
    try:
        type_line(proc, "!mcp call demo plan_trip")
        wait_line(lines, "asks you to fill in a form")
        second = subprocess.run([sys.executable, "-m", "bridge.cli", "run", "-c", str(tmp_path / "bridge.yaml")],
                                capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
        assert second.returncode == 2 and f"is in use by process {proc.pid}" in second.stderr
        type_line(proc, "Ada", "ada@example.com", "", "2026-12-01", "", "", "", "", "", "2", "", "", "", "accept")
        wait_line(lines, "Trip planned with:")  # the first bridge's card was still open, and its answer counted
    finally:
        finish(proc, reader)
    assert [row.outcome for row in anyio.run(audit_rows, db, None)] == ["accepted"]  # never also "cancelled"


def test_a_stored_card_this_bridge_cannot_rebuild_is_closed_and_the_start_goes_on(tmp_path: Path) -> None:
    """What a poison card left by a crash (an older bridge's, or one built from duplicate options) does to `run`."""
    console = ConversationKey("console", "local", "terminal")
    me = Actor("console", "me", "me")
    field = Field("name", FieldKind.CHOICE, "name", required=True, options=(Option("ada", "ada"),))
    card = new_interaction(RequestContext(console, ServerLabel("demo"), me, frozenset({me.key})), Kind.FORM,
                           "The prompt greet needs name.", form=approval_form([field]), timeout=600)
    # Written by the synchronous store of the release before (a file the bridge adopts in place).
    store = LegacyStore(tmp_path / "bridge.db")
    store.save_interaction(card)
    # As stored by a bridge whose form model took what this one refuses.
    store._db.execute("UPDATE interactions SET body = json_set(body, '$.schema.properties.name', json(?))"
                      " WHERE id = ?", ('{"type": "array"}', card.id))
    store.close()
    proc, lines, db, reader = start(tmp_path, "auto")
    try:
        told = wait_line(lines, "could not be restored after the restart")
        type_line(proc, "!mcp call demo echo {\"message\": \"still here\"}")
        wait_line(lines, "still here")
    finally:
        err = finish(proc, reader)
    assert proc.returncode == 0 and "Traceback" not in err and card.id in told
    [row] = anyio.run(audit_rows, db, card.id)
    assert row.outcome == "failed" and anyio.run(count, db, "interactions WHERE status = 'open'") == 0


async def audit_rows(db: Path, interaction_id: str | None) -> list[AuditRow]:
    store = await open_store(db)
    try:
        return await store.audit_rows(interaction_id)
    finally:
        await store.aclose()


async def count(db: Path, where: str) -> int:
    """Rows of a table (whoever's: the store's own reads are this worker's only)."""
    store = await open_store(db)
    try:
        rows: list[Row] = await store.driver.fetch(f"SELECT count(*) FROM {where}")
        return int(rows[0][0])
    finally:
        await store.aclose()
