"""The small parts of the Slack adapter on their own: people lookup against the fake Slack, the bot's threads in
the adapter's state, the redelivery filter, and background work."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import pytest

from adapters.slack import threads as threads_module
from adapters.slack.background import Background
from adapters.slack.client import web_client
from adapters.slack.directory import Directory
from adapters.slack.intake import SeenMessages
from adapters.slack.people import People
from adapters.slack.threads import BotThreads
from bridge.door.model import ConversationKey
from bridge.errors import PlatformAPIError
from tests.harness.hosts import patient
from tests.harness.slack import FakeSlack, event_app_mention

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


class MemoryState(dict[str, str]):
    """An adapter state in memory (`bridge.door.ports.AdapterState`)."""

    async def get(self, key: str) -> str | None:  # type: ignore[override]
        return super().get(key)

    async def set(self, key: str, value: str) -> None:
        self[key] = value


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        fake.users.update({"U1": "Ada Lovelace"})
        yield fake


async def test_people_are_looked_up_once_and_a_failed_lookup_keeps_the_payload_s_name(slack: FakeSlack) -> None:
    people = People(web_client("xoxb-test", slack.api_url))
    with anyio.fail_after(patient(10)):
        first = await people.actor("U1", "ada")
        again = await people.of({"id": "U1", "name": "someone else"})
        slack.fail_next("users.info", "internal_error")
        unknown = await people.actor("U7", "grace")
        later = await people.actor("U7")
    assert (first.key, first.display_name) == ("slack:U1", "ada.lovelace")  # the profile's display name
    assert again.display_name == "ada.lovelace"
    assert (unknown.display_name, later.display_name) == ("grace", "grace")  # remembered, not asked again
    assert [c.args["user"] for c in slack.calls_to("users.info")] == ["U1", "U7"]


async def test_a_cached_person_needs_no_lookup(slack: FakeSlack) -> None:
    people = People(web_client("xoxb-test", slack.api_url))
    assert people.cached({"id": "U1", "name": "ada"}).display_name == "ada"
    with anyio.fail_after(patient(10)):
        await people.actor("U1")
    assert people.cached({"id": "U1", "name": "ada"}).display_name == "ada.lovelace"
    assert len(slack.calls_to("users.info")) == 1


async def test_the_bot_s_threads_outlive_the_process_in_the_adapter_s_state() -> None:
    state = MemoryState()
    await BotThreads(state).remember("T1", "C1", "1.0")
    after_restart = BotThreads(state)
    assert await after_restart.includes("T1", "C1", "1.0")
    assert not await after_restart.includes("T1", "C1", "2.0")
    assert not await after_restart.includes("T1", "C1", "")  # not in a thread at all
    assert list(state) == ["bot_thread/T1/C1/1.0"]


def test_a_redelivered_message_is_seen_once_and_the_oldest_are_forgotten() -> None:
    seen = SeenMessages(size=2)
    first, second, third = (event_app_mention("U1", "C1", "hi", ts)["event"] for ts in ("1.1", "1.2", "1.3"))
    assert [seen.first_time(e) for e in (first, first, second, third)] == [True, False, True, True]
    assert seen.first_time(first)  # forgotten after two newer ones


async def test_background_work_runs_only_while_running_and_a_failure_ends_nothing_else(
        caplog: pytest.LogCaptureFixture) -> None:
    background = Background()
    done = anyio.Event()

    async def fail() -> None:
        raise RuntimeError("boom")

    assert not background.spawn("too early", done.wait)
    with anyio.fail_after(patient(10)):
        async with background.running():
            assert background.spawn("failing", fail)
            assert background.spawn("finishing", _set(done))
            await done.wait()
    assert not background.spawn("too late", done.wait)
    failures = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in failures] == ["Slack background work failed: failing"]


def _set(event: anyio.Event) -> Callable[[], Awaitable[None]]:
    async def work() -> None:
        event.set()
    return work


async def test_the_directory_pages_members_caches_groups_and_reuses_a_dm(slack: FakeSlack) -> None:
    directory = Directory(web_client("xoxb-test", slack.api_url))
    slack.members["C1"] = ["U1", "U2", "U3", "U4", "U5"]  # three pages of two
    slack.usergroups["S0ONCALL"] = ["U2", "U3"]
    here = ConversationKey("slack", "T111", "C1", "1.2")
    assert await directory.members(here) == frozenset({"U1", "U2", "U3", "U4", "U5"})
    assert await directory.group_members("S0ONCALL") == {"U2", "U3"}
    slack.usergroups["S0ONCALL"] = ["U9"]
    assert await directory.group_members("S0ONCALL") == {"U2", "U3"}  # cached for a while
    assert await directory.direct("U1") == ConversationKey("slack", "", "DU1")
    assert await directory.direct("U1") == ConversationKey("slack", "", "DU1")
    counts = [len(slack.calls_to(m)) for m in ("conversations.members", "usergroups.users.list", "conversations.open")]
    assert counts == [3, 1, 1]
    with pytest.raises(PlatformAPIError, match="no_such_subteam"):
        await directory.group_members("S0NOPE")


class CountingState:
    """An adapter state that counts its reads."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.reads = 0

    async def get(self, key: str) -> str | None:
        self.reads += 1
        return self.values.get(key)

    async def set(self, key: str, value: str) -> None:
        self.values[key] = value


async def test_a_thread_found_not_to_be_the_bot_s_is_not_read_again_until_the_bot_joins_it() -> None:
    state = CountingState()
    threads = BotThreads(state)
    assert not any([await threads.includes("T1", "C1", "5.0") for _ in range(100)])  # a busy thread of others
    assert state.reads == 1
    await threads.remember("T1", "C1", "5.0")  # the bot answers there
    assert await threads.includes("T1", "C1", "5.0") and state.reads == 1


async def test_a_thread_another_worker_joined_is_found_once_the_memory_of_it_lapses() -> None:
    state, clock = CountingState(), [1000.0]
    threads = BotThreads(state, clock=lambda: clock[0])
    assert not await threads.includes("T1", "C1", "5.0")
    await state.set("bot_thread/T1/C1/5.0", "1")  # another worker on the same store answered in the thread
    assert not await threads.includes("T1", "C1", "5.0") and state.reads == 1
    clock[0] += threads_module.NOT_OURS_FOR
    assert await threads.includes("T1", "C1", "5.0") and state.reads == 2
