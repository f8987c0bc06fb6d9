"""Secrets stay out of chat, logs and the store: a real stdio server that leaks its configured token, a form answered
with a password, and the log records of the bridge and of libraries."""

from __future__ import annotations

import io
import json
import logging
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from bridge.cards.secret_answers import GIVEN, withheld
from bridge.config.file import from_mapping
from bridge.door.model import DecisionIn, MessageIn
from bridge.safety import redaction
from bridge.storage import open_store
from tests.harness.hosts import ALICE, ROOM, config_for, host_for, patient
from tests.servers.inline import form_server

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

TOKEN = "tok-5ecr3t-4f9a1c2e"
LEAKY = Path(__file__).resolve().parents[1] / "servers" / "leaky.py"


def leaky_config(store: str = ":memory:") -> Any:
    return from_mapping({
        "store": store,
        "servers": {"leaky": {"command": sys.executable, "args": [str(LEAKY)], "env": {"API_TOKEN": "${LEAKY_TOKEN}"}}},
    }, env={"LEAKY_TOKEN": TOKEN})


async def test_a_stderr_tail_and_a_result_holding_the_token_reach_chat_redacted(debug_logs: io.StringIO) -> None:
    config = leaky_config()
    redaction.install(config.redactor)
    host, chat = await host_for(config)
    async with host:
        await host.run_message(MessageIn(ROOM, ALICE, "call leaky whoami", explicit_command=True))
        await host.run_message(MessageIn(ROOM, ALICE, "call leaky crash", explicit_command=True))
    whoami, crash = (m.text for m in chat.messages)
    assert whoami == "leaky.whoami:\nyou are authenticated as [redacted]"
    assert "Its last output:\nfatal: cannot authenticate with token=[redacted]" in crash
    logging.getLogger("bridge.test").error("a library said %s", f"Authorization: Bearer {TOKEN}")
    try:
        raise RuntimeError(f"connect failed for {TOKEN}")
    except RuntimeError:
        logging.getLogger("some.library").exception("oops")
    written = debug_logs.getvalue()
    assert "a library said Authorization: Bearer [redacted]" in written
    assert "RuntimeError: connect failed for [redacted]" in written
    assert TOKEN not in written


def test_the_redactor_knows_env_values_headers_and_tokens_but_not_short_values() -> None:
    config = from_mapping({
        "servers": {
            "a": {"command": "x", "env": {"MODE": "debug", "KEY": "literal-key-1"}, "args": ["${WORKDIR}"]},
            "b": {"url": "https://example.org/mcp", "headers": {"Authorization": "Bearer literal-bearer-2"}}},
        "llm": {"provider": "openai", "api_key": "sk-literal-3"},
        "http": {"form_link_secret": "${LINK_SECRET}"},
    }, env={"WORKDIR": "/srv/work", "LINK_SECRET": "k" * 32})
    text = "MODE=debug KEY=literal-key-1 in /srv/work, Bearer literal-bearer-2, sk-literal-3, " + "k" * 32
    assert config.redactor.redact(text) == "MODE=debug KEY=[redacted] in [redacted], [redacted], [redacted], " \
                                           "[redacted]"
    assert "literal" not in repr(config) and "literal" not in repr(config.redactor)


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_a_secret_looking_answer_reaches_the_server_and_is_stored_as_given(protocol: str,
                                                                                 tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "password": {"type": "string"}}}
    store = await open_store(tmp_path / "bridge.db")
    host, chat = await host_for(config_for({"forms": form_server()}, server_protocol=protocol), store)
    async with host:
        text = f"call forms fill {json.dumps({'schema': json.dumps(schema)})}"
        await host.handle_message(MessageIn(ROOM, ALICE, text, explicit_command=True))
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
            await host.decide(DecisionIn(card.id, ALICE, "accept", {"name": "Ada", "password": "hunter2-horse"}))
            result = await chat.wait_message("forms.fill:")
    assert json.loads(result.split("\n", 1)[1])["content"] == {"name": "Ada", "password": "hunter2-horse"}
    stored = await store.interaction(card.id)
    assert stored is not None and stored.outcome is not None
    assert stored.outcome.content == {"name": "Ada", "password": GIVEN}
    assert withheld(stored.interaction, stored.outcome)
    await store.aclose()
    files = _files(tmp_path)
    assert "bridge.db" in files
    assert not [name for name, data in files.items() if b"hunter2-horse" in data]


def _files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in folder.iterdir()}
