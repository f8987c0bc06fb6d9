"""Form-model edges found by fuzzing, through the whole core against real in-process servers on both eras: huge
limits, integers sent as floats, Unicode digits typed for a choice, and options that repeat."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from bridge.door.forms import Field, FieldKind, Option, approval_form
from bridge.door.model import ConversationKey, DecisionIn, Interaction, Kind, MessageIn, ServerLabel, Status, Verdict
from bridge.host import Host
from bridge.storage import AsyncStore, open_store
from tests.harness.hosts import ALICE, ROOM, FakeChatPort, config_for, host_for, patient
from tests.servers.edgy import repeating_server
from tests.servers.inline import form_server

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

ERAS = ["legacy", "auto"]
HUGE = 10**400


@asynccontextmanager
async def bridge(server: MCPServer, protocol: str, store: AsyncStore | None = None,
                 ) -> AsyncIterator[tuple[Host, FakeChatPort]]:
    host, chat = await host_for(config_for({"forms": server}, server_protocol=protocol), store)
    async with host:
        yield host, chat


async def fill(host: Host, schema: dict[str, Any]) -> None:
    text = f"call forms fill {json.dumps({'schema': json.dumps(schema)})}"
    await host.handle_message(MessageIn(ROOM, ALICE, text, explicit_command=True))


def content(message: str) -> Any:
    return json.loads(message.split("\n", 1)[1])["content"]


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_401_digit_maximum_is_shown_and_answered(protocol: str) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": HUGE}},
              "required": ["n"]}
    async with bridge(form_server(), protocol) as (host, chat):
        await fill(host, schema)
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
            field = card.form.field("n")
            assert field.hint() == "a whole number, at least 1"
            assert field.parse_text("12") == 12
            too_big = await host.decide(DecisionIn(card.id, ALICE, "accept", {"n": HUGE * 10}))
            assert too_big.verdict is Verdict.INVALID
            assert too_big.errors == {"n": "must be at most 100000000000000000000000000…"}
            await host.decide(DecisionIn(card.id, ALICE, "accept", {"n": "12"}))
            assert content(await chat.wait_message("forms.fill:")) == {"n": 12}


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_401_digit_minimum_is_refused_with_invalid_params(protocol: str) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "number", "minimum": HUGE}}}
    async with bridge(form_server(), protocol) as (host, chat):
        await fill(host, schema)
        with anyio.fail_after(patient(10)):
            notice = await chat.wait_message("cannot show")
            failure = await chat.wait_message("forms.fill")
    assert "property 'n': minimum is beyond any number a person can enter" in notice
    assert "Unsupported requestedSchema" in failure
    assert not chat.cards


@pytest.mark.parametrize("protocol", ERAS)
async def test_an_integer_field_sends_an_integer_whatever_the_widget_gave(protocol: str) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}}}
    async with bridge(form_server(), protocol) as (host, chat):
        await fill(host, schema)
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
            await host.decide(DecisionIn(card.id, ALICE, "accept", {"n": 3.0, "x": 3.0}))
            message = await chat.wait_message("forms.fill:")
    sent = content(message)
    assert sent == {"n": 3, "x": 3.0}
    assert '"n": 3,' in message and isinstance(sent["n"], int)


def test_unicode_digits_for_a_choice_get_the_bridges_own_message() -> None:
    field = Field("c", FieldKind.CHOICE, "Climate", options=(Option("w", "warm"), Option("m", "mild"),
                                                                 Option("c", "cold")))
    for typed in ("²", "٣", "4", "0", "frost"):
        with pytest.raises(ValueError) as caught:
            field.parse_text(typed)
        assert str(caught.value) == f"{typed!r} is not one of the options: enter a number from 1 to 3, or an " \
                                    "option's value or title"
    assert field.parse_text(" 3 ") == "c"


@pytest.mark.parametrize("protocol", ERAS)
async def test_repeated_completions_make_one_option_each(protocol: str) -> None:
    host, chat = await host_for(config_for({"edgy": repeating_server()}, server_protocol=protocol))
    async with host:
        await host.handle_message(MessageIn(ROOM, ALICE, "prompt edgy greet", explicit_command=True))
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
            assert [o.value for o in card.form.field("person").options] == ["ada", "grace"]
            assert card.form.schema["properties"]["person"]["enum"] == ["ada", "grace"]
            await host.decide(DecisionIn(card.id, ALICE, "accept", {"person": "grace"}))
            shown = await chat.wait_message("Write a greeting")
    assert "Write a greeting for grace." in shown


async def test_a_stored_card_with_repeated_options_does_not_stop_a_start(tmp_path: Path) -> None:
    """A card written by an earlier version, with a repeated option, open when the bridge died."""
    store = await open_store(tmp_path / "bridge.db")
    poison = approval_form([Field("person", FieldKind.CHOICE, "person", required=True,
                                  options=(Option("ada", "ada"), Option("ada", "ada"), Option("grace", "grace")))])
    card = Interaction(id="poison000001", kind=Kind.FORM, server=ServerLabel("edgy"),
                       conversation=ConversationKey("test", "W1", "C1", "T1"), requester=ALICE,
                       approvers=frozenset({ALICE.key}), message="The prompt greet needs person.", form=poison,
                       expires_at=1e12)
    await store.save_interaction(card)
    await store.aclose()  # the bridge died
    store = await open_store(tmp_path / "bridge.db")
    host, _ = await host_for(config_for({"edgy": repeating_server()}), store)
    async with host:
        with anyio.fail_after(patient(10)):
            await host.resumed.wait()
        stored = await store.interaction(card.id)
    # A legacy card of a process that stopped ends failed (its server session is gone), and the start went on.
    assert stored is not None and stored.status is Status.FAILED
    assert [o.value for o in stored.interaction.form.field("person").options] == ["ada", "grace"]
    await store.aclose()
