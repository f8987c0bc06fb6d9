"""The claim that answers a 2026 round's last card takes the round's sending in its own synced commit: what a process
that stops between that claim and the send leaves behind. Killed: the round is taken by a process that is gone, and
whoever takes the call over tells the conversation (or sends it once, for `on_interrupt: resend`); never sent twice,
never silent. Stopped cleanly first (Ctrl-C): the round is given back and sent after the restart.

A "killed" worker here is a store of its own that makes the claim and whose connection then closes with nothing after
it (not even the clean stop's giving back): what a SIGKILL right after the claim's commit leaves in the store (real
kills under load: `bench.fleet_soak`, tests/cli/test_takeover.py).
"""

from __future__ import annotations

import anyio
import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult

from bridge.config.file import ServerConfig
from bridge.door.model import ConversationKey, DecisionIn, MessageIn, Outcome, Status, Verdict
from bridge.storage import open_store
from tests.harness.hosts import ALICE, ROOM, config_for, host_for, patient

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

ELSEWHERE = ConversationKey("test", "W1", "C1", "T2")
SCHEMA = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}


class Counted:
    """A 2026 server whose `say` asks for a word and says it back, counting the runs that had it; `hold` holds a
    session until `release` is set."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.holding = anyio.Event()
        self.release = anyio.Event()
        self.server = MCPServer("counted")

        @self.server.tool()
        async def say(ctx: Context) -> str | InputRequiredResult:
            """Ask for a word and say it back."""
            answer = (ctx.input_responses or {}).get("word")
            if not isinstance(answer, ElicitResult):
                return InputRequiredResult(input_requests={"word": ElicitRequest(params=ElicitRequestFormParams(
                    message="A word?", requested_schema=SCHEMA))}, request_state="word")
            word = str((answer.content or {}).get("word"))
            self.runs.append(word)
            return f"said: {word}"

        @self.server.tool()
        async def hold() -> str:
            """Hold its session until let go."""
            self.holding.set()
            await self.release.wait()
            return "held"


def config(counted: Counted, **server: object) -> ServerConfig:
    return ServerConfig(name="counted", inprocess=counted.server, protocol="auto", **server)  # type: ignore[arg-type]


@pytest.mark.parametrize("on_interrupt", ["tell", "resend"])
async def test_a_round_whose_claimer_died_before_sending_it_is_told_or_sent_once(
        store_target: str, on_interrupt: str) -> None:
    counted = Counted()
    servers = {"counted": config(counted, on_interrupt=on_interrupt)}
    first = await open_store(store_target)
    host, chat = await host_for(config_for(servers), first)
    with anyio.fail_after(patient(20)):
        async with host:
            await host.handle_message(MessageIn(ROOM, ALICE, "call counted say", explicit_command=True))
            card = await chat.wait_card()
            await host.broker.wait_open(card.id)
    stored = await first.interaction(card.id)
    await first.aclose()
    assert stored is not None and stored.pending_call is not None

    # The worker that takes the click: its claim answers the round (and takes its sending), then it is killed.
    dying = await open_store(store_target)
    assert await dying.claim_parked(stored.interaction, Outcome(Status.ACCEPTED, {"word": "once"}, ALICE), "",
                                    stored.pending_call) == (True, True)
    await dying.driver.aclose()  # killed: no clean stop (which would give the round back)

    third = await open_store(store_target)
    host3, chat3 = await host_for(config_for(servers), third)
    with anyio.fail_after(patient(20)):
        async with host3:
            if on_interrupt == "tell":
                told = await chat3.wait_message("counted.say was interrupted")
            else:
                told = await chat3.wait_message("counted.say:")
    assert await third.pending_calls() == []
    await third.aclose()
    if on_interrupt == "tell":
        assert "It was not sent again" in told and counted.runs == []
    else:
        assert told == "counted.say:\nsaid: once" and counted.runs == ["once"]


async def test_a_round_claimed_and_not_yet_sent_at_ctrl_c_is_sent_after_the_restart(store_target: str) -> None:
    counted = Counted()
    # One session in all: while `hold` runs in another conversation, the continued call waits for room, its round
    # taken and not sent.
    servers = {"counted": config(counted, scope="conversation")}
    first = await open_store(store_target)
    host, chat = await host_for(config_for(servers, max_sessions=1), first)
    with anyio.fail_after(patient(20)):
        async with anyio.create_task_group() as tg, host:
            await host.handle_message(MessageIn(ROOM, ALICE, "call counted say", explicit_command=True))
            card = await chat.wait_card()
            tg.start_soon(host.handle_message, MessageIn(ELSEWHERE, ALICE, "call counted hold",
                                                         explicit_command=True))
            await counted.holding.wait()
            assert (await host.decide(DecisionIn(card.id, ALICE, "accept", {"word": "later"}))).verdict \
                is Verdict.CLAIMED
            # Stopped at once, wherever the continuation is (it cannot get past the pool): the round never went out.
            host.stopping(cut_short=True)
    assert counted.runs == []
    # Given back as the host stopped, before its lease ended: a survivor reaping at once would send it too.
    [kept] = await first.pending_calls()
    assert kept.sent_by is None
    await first.aclose()

    counted.release.set()
    second = await open_store(store_target)
    host2, chat2 = await host_for(config_for(servers), second)
    with anyio.fail_after(patient(20)):
        async with host2:
            assert await chat2.wait_message("counted.say:") == "counted.say:\nsaid: later"
    assert counted.runs == ["later"] and await second.pending_calls() == []
    await second.aclose()


@pytest.mark.parametrize("park", [True, False], ids=["parked", "waiting"])
async def test_a_2026_decision_is_one_synced_commit_which_also_says_the_round_goes_out(
        store_target: str, park: bool) -> None:
    counted = Counted()
    store = await open_store(store_target)
    host, chat = await host_for(config_for({"counted": config(counted)}), store)
    returned = anyio.Event()
    with anyio.fail_after(patient(20)):
        async with host, anyio.create_task_group() as tg:

            async def run() -> None:
                await host.calls.run(ROOM, ALICE, "counted", "say", {}, park=park)
                returned.set()

            tg.start_soon(run)
            card = await chat.wait_card()
            await host.broker.wait_open(card.id)
            before = store.durable_commits
            assert (await host.decide(DecisionIn(card.id, ALICE, "accept", {"word": "one"}))).verdict \
                is Verdict.CLAIMED
            if park:
                await chat.wait_message("counted.say:")
            else:
                await returned.wait()
            synced = store.durable_commits - before
    await store.aclose()
    assert counted.runs == ["one"]
    assert synced == 1  # the claim, its audit row, and the round taken for sending: one sync
