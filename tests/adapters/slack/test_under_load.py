"""What keeps the adapter fast under a team's load, through the fake Slack: one HTTP session for every Web API call
while serving, the bot's identity asked once before the first event, the App Home published at most once per
interval however many cards change, card links built without `chat.getPermalink`, one `users.info` per person however
many of their clicks arrive together, and names that expire. (How fast is `bench/slack_ack.py`'s to measure.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace

import anyio
import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack import home as slack_home
from adapters.slack import ids, permalinks
from adapters.slack.client import clients
from adapters.slack.people import NAME_TTL, People
from adapters.slack.settings import SlackSettings
from bridge.door.model import CardRef, Interaction, Outcome, Status
from tests.adapters.slack import driver
from tests.adapters.slack.conftest import Bridge, running_bridge
from tests.adapters.slack.interactions import tool_approval
from tests.harness.hosts import patient
from tests.harness.slack import Call, FakeSlack

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


@asynccontextmanager
async def asking_all(bridge: Bridge, cards: list[Interaction]) -> AsyncIterator[list[Outcome]]:
    """Ask every card through the broker at once; the list holds their outcomes once the block exits."""
    outcomes: list[Outcome] = []

    async def ask(card: Interaction) -> None:
        outcomes.append(await bridge.host.broker.ask(card))

    async with anyio.create_task_group() as tg:
        for card in cards:
            tg.start_soon(ask, card)
        yield outcomes


def all_posted(bridge: Bridge, n: int) -> anyio.Event:
    """Set once the adapter has returned the references of `n` cards to the core (a card the fake has recorded may
    still be on its way back)."""
    done = anyio.Event()
    post_card = bridge.adapter.post_card
    count = [0]

    async def counting(interaction: Interaction) -> CardRef:
        ref = await post_card(interaction)
        count[0] += 1
        if count[0] == n:
            done.set()
        return ref

    bridge.adapter.post_card = counting  # type: ignore[method-assign]
    return done


def approvals(n: int, prefix: str = "load") -> list[Interaction]:
    return [replace(tool_approval(), id=f"{prefix}{i:04d}") for i in range(n)]


async def cards_posted(slack: FakeSlack, n: int) -> list[driver.Card]:
    await slack.wait_for_call("chat.postMessage", lambda c: len([x for x in slack.calls_to("chat.postMessage")
                                                                 if driver._is_card(x, None)]) >= n)
    return [driver.Card(c.args["blocks"][-1]["elements"][0]["value"], c.response["channel"], c.response["ts"],
                        c.args["blocks"]) for c in slack.calls_to("chat.postMessage") if driver._is_card(c, None)]


async def posted(slack: FakeSlack, interaction_id: str) -> driver.Card:
    call = await slack.wait_for_call("chat.postMessage", lambda c: interaction_id in str(c.args.get("blocks")))
    return driver.Card(interaction_id, call.response["channel"], call.response["ts"], call.args["blocks"])


class Cue:
    """Stands in for the wait between two publishes of a Home tab: it is over when the test says so."""

    def __init__(self) -> None:
        self._over = anyio.Event()

    async def sleep(self, delay: float) -> None:
        await self._over.wait()

    def give(self) -> None:
        """End the interval everyone waits on now; later waits wait for the next cue."""
        over, self._over = self._over, anyio.Event()
        over.set()


def bot_calls(slack: FakeSlack) -> list[Call]:
    return [c for c in slack.calls if c.token == "xoxb-test"]


async def test_every_web_api_call_shares_one_session_while_serving_which_is_closed_after(slack: FakeSlack) -> None:
    async with running_bridge(slack, {}) as bridge:
        session = bridge.adapter.clients.session
        assert session is not None and not session.closed
        with anyio.fail_after(patient(10)):
            for card_in in approvals(5):
                async with asking_all(bridge, [card_in]):
                    await driver.click(slack, await posted(slack, card_in.id), ids.DECLINE)
            await bridge.adapter.background.idle()
    calls = bot_calls(slack)
    assert len(calls) >= 12  # 5 cards posted and finished, App Homes published, a name looked up
    # Kept-alive connections are reused: without a shared session each call opens its own.
    assert len({c.connection for c in calls}) <= len(calls) // 3
    assert bridge.adapter.clients.session is None and session.closed


async def test_the_bot_s_identity_is_asked_once_before_the_first_event(slack: FakeSlack) -> None:
    async with running_bridge(slack, {}) as bridge:
        assert len(slack.calls_to("auth.test")) == 1  # at start: no ack waits for it
        with anyio.fail_after(patient(10)):
            async with asking_all(bridge, approvals(3)):
                for card in await cards_posted(slack, 3):
                    await driver.click(slack, card, ids.DECLINE)
    assert len(slack.calls_to("auth.test")) == 1


async def test_concurrent_identity_lookups_wait_on_one_auth_test(slack: FakeSlack) -> None:
    made = clients(SlackSettings(bot_token="xoxb-test", app_token="xapp-test", api_url=slack.api_url))
    release = slack.hold_next("auth.test")
    users: list[str] = []

    async def who() -> None:
        users.append(str((await made.authorizer()()).bot_user_id))

    with anyio.fail_after(patient(10)):
        async with anyio.create_task_group() as tg:
            for _ in range(10):
                tg.start_soon(who)
            await slack.wait_for_call("auth.test")
            release.set()
        await made.auth()
    assert users == ["UBOT"] * 10
    assert len(slack.calls_to("auth.test")) == 1


async def test_a_burst_of_card_events_publishes_a_home_tab_once_and_again_with_the_newest_state(
        slack: FakeSlack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slack_home, "REFRESH_INTERVAL", 60.0)
    cue = Cue()

    def publishes() -> list[Call]:
        return [c for c in slack.calls_to("views.publish") if c.args["user_id"] == "U1"]

    async with running_bridge(slack, {}) as bridge:
        bridge.adapter.home.sleep = cue.sleep
        posted_all = all_posted(bridge, 20)
        with anyio.fail_after(patient(10)):
            async with asking_all(bridge, approvals(20)) as outcomes:
                await posted_all.wait()  # twenty card events for U1 ...
                cards = await cards_posted(slack, 20)
                await slack.wait_for_call("views.publish")
                during_burst = len(publishes())  # ... one publish at once, the rest wait for the interval
                cue.give()
                listed = await slack.wait_for_call("views.publish", lambda c: c is not publishes()[0])
                for card in cards:
                    await driver.click(slack, card, ids.DECLINE)
            after_decisions = len(publishes())  # twenty more events: they wait for the next interval
            cue.give()
            emptied = await slack.wait_for_call("views.publish", lambda c: "Nothing is waiting" in str(c.args))
            await bridge.adapter.background.idle()
    assert (during_burst, after_decisions, len(publishes())) == (1, 2, 3)
    assert len(outcomes) == 20 and all(o.status is Status.DECLINED for o in outcomes)
    assert str(listed.args["view"]).count("Open the card") == 20 and emptied is publishes()[-1]
    assert slack.calls_to("chat.getPermalink") == []


async def test_card_links_are_built_at_post_time_as_chat_get_permalink_would_answer(slack: FakeSlack) -> None:
    async with running_bridge(slack, {}) as bridge:
        posted_all = all_posted(bridge, 2)
        with anyio.fail_after(patient(10)):
            async with asking_all(bridge, approvals(2)):
                await posted_all.wait()
                cards = await cards_posted(slack, 2)
                refs = [bridge.host.broker.card_of(card.interaction_id) for card in cards]
                oracle = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
                answers = [await oracle.chat_getPermalink(channel=c.channel, message_ts=c.ts) for c in cards]
                for card in cards:
                    await driver.click(slack, card, ids.DECLINE)
    built = [ref.data[permalinks.PERMALINK] for ref in refs if ref is not None]
    assert built == [a["permalink"] for a in answers]
    assert "?thread_ts=" in built[-1]  # a reply in the conversation's thread (the first card's ts is the thread's)
    assert len(slack.calls_to("chat.getPermalink")) == 2  # the test's own, none from the bridge


async def test_clicks_arriving_together_from_someone_new_look_them_up_once(slack: FakeSlack) -> None:
    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(patient(10)):
            async with asking_all(bridge, approvals(5)) as outcomes:
                cards = await cards_posted(slack, 5)
                release = slack.hold_next("users.info")
                acks = [await driver.click(slack, card, ids.DECLINE) for card in cards]  # acked while Slack is slow
                await slack.wait_for_call("users.info")
                release.set()
    assert all(set(ack) == {"envelope_id"} for ack in acks)
    assert [c.args["user"] for c in slack.calls_to("users.info")] == ["U1"]
    assert {o.by.display_name for o in outcomes if o.by} == {"ada.lovelace"}


async def test_names_expire_and_are_looked_up_again(slack: FakeSlack) -> None:
    now = [1000.0]
    people = People(AsyncWebClient(token="xoxb-test", base_url=slack.api_url), clock=lambda: now[0])
    with anyio.fail_after(patient(10)):
        first = await people.actor("U1")
        slack.users["U1"] = "Ada King"  # renamed
        now[0] += NAME_TTL - 1
        cached = await people.actor("U1")
        now[0] += 2
        renamed = await people.actor("U1")
    assert (first.display_name, cached.display_name, renamed.display_name) == ("ada.lovelace", "ada.lovelace",
                                                                               "ada.king")
    assert len(slack.calls_to("users.info")) == 2
