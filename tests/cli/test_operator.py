"""The operator's commands, `pending`, `grants`, `revoke`, `accounts` and `usage` as real `mcp-chat-bridge`
processes on a store the bridge's own parts filled, on both engines: they show what the chat commands show, across
every conversation, and `revoke` ends a grant for the chat's `grants` too."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
import yaml

from bridge.auth.oauth import NoConsent, OAuthClients
from bridge.auth.tokens import TOKENS
from bridge.config.file import load
from bridge.config.team import GrantScope
from bridge.door.model import ConversationKey
from bridge.requests.grants import Grants
from bridge.storage import open_store
from tests.harness.hosts import ALICE, BOB, ROOM, patient
from tests.storage.support import interaction

pytestmark = pytest.mark.parametrize("store_engine", ["sqlite", "postgres"], indirect=True)

OTHER = ConversationKey("slack", "T1", "C2", "")
KEY = base64.b64encode(b"k" * 32).decode()


async def _no_chat(conversation: ConversationKey, text: str) -> None:
    raise AssertionError(text)


def _fill(config: Path, target: str) -> dict[str, str]:
    """Rows as the running bridge writes them: a waiting form, two grants, a day's tokens, one person's account."""

    async def fill() -> dict[str, str]:
        store = await open_store(target, worker_id="filler")
        try:
            waiting = interaction(conversation=OTHER, message="How many seats?")
            await store.save_interaction(waiting)
            grants = Grants(store, _no_chat)
            kept = await grants.give("tool", "demo", "cancel_booking", GrantScope("channel", None), ROOM, ALICE)
            ended = await grants.give("sampling", "demo", "", GrantScope("conversation", 3600.0), OTHER, BOB)
            day = time.strftime("%Y-%m-%d", time.gmtime())
            await store.add_usage(day, [f"user:{ALICE.key}", f"conversation:{ROOM.id()}"], 1234)
        finally:
            await store.aclose()
        loaded = load(config, env={**os.environ, "TOKEN_KEY": KEY})
        clients = OAuthClients(loaded, NoConsent(), env={"TOKEN_KEY": KEY})
        try:
            server = loaded.servers["remote"]
            await clients.vault(server).put(str(server.url), ALICE.key, TOKENS, {"access_token": "never-shown"})
        finally:
            await clients.aclose()
        return {"waiting": waiting.id, "kept": kept.id, "ended": ended.id}

    return anyio.run(fill)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge.cli", *args], capture_output=True, text=True,
                          timeout=patient(60), check=False, stdin=subprocess.DEVNULL,
                          env={**os.environ, "TOKEN_KEY": KEY})


def test_operator_commands_read_and_revoke_what_chat_shows(tmp_path: Path, store_target: str) -> None:
    config = tmp_path / "bridge.yaml"
    tokens = store_target if store_target.startswith("postgresql") else str(tmp_path / "tokens.db")
    config.write_text(yaml.safe_dump({
        "store": store_target, "token_store": tokens, "secrets_key_env": "TOKEN_KEY",
        "servers": {"remote": {"url": "https://remote.example/mcp", "auth": {"identity": "per_user"}}},
        "budgets": {"per_user": {"tokens_per_day": 5000}}, "chat": {"console": {}}}))
    ids = _fill(config, store_target)
    c = str(config)

    pending = cli("pending", "-c", c)
    assert pending.returncode == 0, pending.stderr
    assert f"{OTHER.id()}:" in pending.stdout
    assert f"• {ids['waiting']}: srv (Server), form, waits for" in pending.stdout
    assert "How many seats?" in pending.stdout
    [row] = json.loads(cli("pending", "-c", c, "--json").stdout)
    assert (row["id"], row["conversation"], row["kind"]) == (ids["waiting"], OTHER.id(), "form")

    grants = cli("grants", "-c", c)
    assert grants.returncode == 0, grants.stderr
    assert f"• {ids['kept']}: demo.cancel_booking in this channel until revoked, given by" in grants.stdout
    assert f"{ids['ended']}: demo using the model in this conversation for 1 h" in grants.stdout
    listed = json.loads(cli("grants", "-c", c, "--json").stdout)
    assert [(g["id"], g["server"], g["given_by"]) for g in listed] == [
        (ids["kept"], "demo", ALICE.key), (ids["ended"], "demo", BOB.key)]

    revoked = cli("revoke", ids["kept"], "-c", c)
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout.startswith(f"Revoked {ids['kept']}: demo.cancel_booking")
    assert [g["id"] for g in json.loads(cli("grants", "-c", c, "--json").stdout)] == [ids["ended"]]
    again = cli("revoke", ids["kept"], "-c", c)
    assert again.returncode == 1
    assert again.stderr.strip() == f"No grant {ids['kept']!r} holds now; see `grants`."

    async def chat_grants() -> list[str]:  # the chat's own `grants` no longer sees it either
        store = await open_store(store_target, worker_id="reader")
        try:
            return [g.id for g in await Grants(store, _no_chat).here(ROOM)]
        finally:
            await store.aclose()

    assert anyio.run(chat_grants) == []

    usage = cli("usage", "-c", c)
    assert usage.returncode == 0, usage.stderr
    assert f"• {ALICE.key} (person): 1,234 of 5,000 tokens" in usage.stdout
    assert f"• {ROOM.id()} (conversation): 1,234 (no limit) tokens" in usage.stdout
    assert {(u["subject"], u["tokens"], u["limit"]) for u in json.loads(cli("usage", "-c", c, "--json").stdout)} \
        == {("user", 1234, 5000), ("conversation", 1234, None)}

    accounts = cli("accounts", "-c", c)
    assert accounts.returncode == 0, accounts.stderr
    assert accounts.stdout.strip() == f"• {ALICE.key}: remote"
    assert json.loads(cli("accounts", "-c", c, "--json").stdout) == [{"server": "remote", "person": ALICE.key}]
    assert "never-shown" not in accounts.stdout + pending.stdout + grants.stdout


def test_operator_commands_on_an_empty_store(tmp_path: Path, store_target: str) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text(yaml.safe_dump({"store": store_target, "chat": {"console": {}}}))
    assert cli("pending", "-c", str(config)).stdout == "Nothing is waiting for anyone.\n"
    assert cli("grants", "-c", str(config)).stdout == "No grants hold anywhere.\n"
    assert cli("usage", "-c", str(config)).stdout == "Nobody has used the model today (UTC).\n"
    assert cli("accounts", "-c", str(config)).stdout == "Nobody has connected their own account to a server.\n"
    assert json.loads(cli("grants", "-c", str(config), "--json").stdout) == []
