"""The allow-list middleware alone, on a real bolt `AsyncApp` served over Socket Mode by the fake Slack: strangers
are acked and refused before any listener runs, allowed people pass, link clicks are open to all."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp

from adapters.slack import ids, translate
from adapters.slack.background import Background
from adapters.slack.client import clients
from adapters.slack.gate import NOT_ALLOWED, AllowList
from adapters.slack.intake import SeenMessages
from adapters.slack.port import SlackPort
from adapters.slack.responses import ResponseUrls
from adapters.slack.settings import SlackSettings
from adapters.slack.threads import BotThreads
from bridge.door.model import Interaction
from tests.harness.hosts import patient
from tests.harness.slack import FakeSlack, block_actions, event_app_mention, slash_command

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]
JSON = dict[str, Any]


class MemoryState(dict[str, str]):
    """An adapter state in memory (`bridge.door.ports.AdapterState`)."""

    async def get(self, key: str) -> str | None:  # type: ignore[override]
        return super().get(key)

    async def set(self, key: str, value: str) -> None:
        self[key] = value


@dataclass
class Gated:
    slack: FakeSlack
    reached: list[str] = field(default_factory=list)
    """What got past the middleware: event text, command text or action id, in order."""
    told: list[tuple[str, str, str, str | None]] = field(default_factory=list)
    """Refusals the middleware asked for: (channel, user, text, thread)."""
    changed: anyio.Event = field(default_factory=anyio.Event)

    def got(self, what: str) -> None:
        self.reached.append(what)
        self.changed.set()
        self.changed = anyio.Event()

    async def reach(self, what: str) -> None:
        """Wait until a listener got `what` (listeners run as tasks after the ack, in the order sent)."""
        while what not in self.reached:
            await self.changed.wait()


@asynccontextmanager
async def gated(slack: FakeSlack, users: set[str], channels: frozenset[str] = frozenset()) -> AsyncIterator[Gated]:
    settings = SlackSettings(bot_token="xoxb-test", app_token="xapp-test", api_url=slack.api_url,
                             allowed_users=frozenset(users), allowed_channels=channels)
    made = clients(settings)
    background = Background()

    async def nothing(interaction: Interaction, what: str) -> None: ...

    urls = ResponseUrls()
    port = SlackPort(made, BotThreads(MemoryState()), background, nothing, lambda interaction: None, urls)
    seen = SeenMessages()
    gate = Gated(slack)

    async def wanted(event: Mapping[str, Any], team: str, bot: str) -> bool:
        return translate.is_person_message(event, bot) and seen.first_time(event)

    async def tell(channel: str, user: str, text: str, thread: str | None) -> None:
        gate.told.append((channel, user, text, thread))
        await port.tell(channel, user, text, thread)

    app = AsyncApp(client=made.bot, request_verification_enabled=False)
    app.use(AllowList(settings, wanted, tell, background, urls).middleware)

    @app.event("app_mention")
    async def mention(event: JSON) -> None:
        gate.got(str(event["text"]))

    @app.command("/mcp")
    async def command(ack: AsyncAck, command: JSON) -> None:
        await ack()
        gate.got(str(command["text"]))

    @app.action(re.compile(".*"))
    async def click(ack: AsyncAck, action: JSON) -> None:
        await ack()
        gate.got(str(action["action_id"]))

    handler = AsyncSocketModeHandler(app, app_token="xapp-test", web_client=made.socket_mode())
    async with background.running():
        await handler.connect_async()  # type: ignore[no-untyped-call]
        try:
            yield gate
        finally:
            await handler.close_async()  # type: ignore[no-untyped-call]


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


async def test_a_slash_command_from_a_stranger_or_another_channel_is_refused_in_its_ack(slack: FakeSlack) -> None:
    async with gated(slack, {"U1"}, frozenset({"C1"})) as gate:
        with anyio.fail_after(patient(10)):
            stranger = await slack.send_envelope("slash_commands", slash_command("U2", "C1", "from a stranger"))
            elsewhere = await slack.send_envelope("slash_commands", slash_command("U1", "C9", "from elsewhere"))
            allowed = await slack.send_envelope("slash_commands", slash_command("U1", "C1", "allowed"))
            await gate.reach("allowed")
    assert stranger["payload"] == {"text": NOT_ALLOWED}
    assert elsewhere["payload"] == {"text": NOT_ALLOWED}
    assert "payload" not in allowed
    assert gate.reached == ["allowed"]
    assert gate.told == []  # the ack said it


async def test_a_stranger_s_click_is_acked_and_refused_privately_but_links_are_open(slack: FakeSlack) -> None:
    async with gated(slack, {"slack:U1"}) as gate:
        with anyio.fail_after(patient(10)):
            refused = await slack.send_envelope("interactive", block_actions("U2", "C1", "1.1", ids.ACCEPT, "i1"))
            await slack.send_envelope("interactive", block_actions("U2", "C1", "1.1", ids.OPEN_URL, "i1"))
            await slack.send_envelope("interactive", block_actions("U1", "C1", "1.1", ids.DECLINE, "i1"))
            await gate.reach(ids.DECLINE)
            ephemeral = await slack.wait_for_call("chat.postEphemeral")
    assert set(refused) == {"envelope_id"}  # acked, with nothing to show
    assert gate.reached == [ids.OPEN_URL, ids.DECLINE]
    assert gate.told == [("C1", "U2", NOT_ALLOWED, None)]
    assert (ephemeral.args["channel"], ephemeral.args["user"], ephemeral.args["text"]) == ("C1", "U2", NOT_ALLOWED)


async def test_a_stranger_s_mention_is_refused_once_and_other_channels_stay_quiet(slack: FakeSlack) -> None:
    async with gated(slack, {"U1"}, frozenset({"C1"})) as gate:
        with anyio.fail_after(patient(10)):
            mention = event_app_mention("U2", "C1", "<@UBOT> hello", "1.1", thread_ts="1.0")
            await slack.send_envelope("events_api", mention)
            await slack.send_envelope("events_api", mention)  # Slack redelivers
            await slack.send_envelope("events_api", event_app_mention("U1", "C9", "<@UBOT> elsewhere", "1.2"))
            await slack.send_envelope("events_api", event_app_mention("U2", "C9", "<@UBOT> both", "1.3"))
            await slack.send_envelope("events_api", event_app_mention("U1", "C1", "<@UBOT> allowed", "1.4"))
            await gate.reach("<@UBOT> allowed")
            # A last refusal as a barrier: refusals start in order, so any wrong one would be listed before it.
            await slack.send_envelope("events_api", event_app_mention("U2", "C1", "<@UBOT> again", "1.5"))
            await slack.wait_for_call("chat.postEphemeral", lambda c: c.args.get("thread_ts") is None)
    assert gate.reached == ["<@UBOT> allowed"]
    assert gate.told == [("C1", "U2", NOT_ALLOWED, "1.0"), ("C1", "U2", NOT_ALLOWED, None)]
