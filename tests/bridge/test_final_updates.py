"""A card's final update is off the path to the server: once a decision is durable the server hears it, and the card
shows its final state right after, on its own; at shutdown a final update still pending is done, not dropped; one
that fails is logged and changes nothing for the call."""

from __future__ import annotations

import logging

import anyio
import pytest
from mcp.types import CallToolResult

from bench.common import ANSWER, SERVER, TOOL, answered, bench_server
from bridge.cards.final_updates import FinalUpdates
from bridge.cards.held import Waiter
from bridge.door.model import CardRef, DecisionIn, Interaction, Outcome, Status, Verdict
from bridge.errors import PlatformAPIError
from bridge.host import Host
from tests.bridge.test_broker import interaction
from tests.harness.hosts import ALICE, ROOM, FakeChatPort, config_for, host_for, patient

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

ERAS = {
    "legacy": ("legacy", False),  # the SDK's callback waits for the card
    "2026 parked": ("auto", True),  # the `call` command: the card is parked, its end handed on
    "2026 waiting": ("auto", False),  # the agent: the call's task waits for the card
}


class HeldFinishes(FakeChatPort):
    """A chat platform whose card edits hang until `release` is set (a slow chat.update), or fail (`failing`)."""

    def __init__(self, *, failing: bool = False) -> None:
        super().__init__()
        self.release = anyio.Event()
        self.failing = failing
        self.finishing: list[str] = []
        """Cards whose final update has begun (and may be held)."""

    async def finish_card(self, ref: CardRef, interaction: Interaction, outcome: Outcome) -> None:
        self.finishing.append(interaction.id)
        self._notify_change()
        if self.failing:
            raise PlatformAPIError(self.platform, "chat.update", "unavailable")
        await self.release.wait()
        await super().finish_card(ref, interaction, outcome)


async def call_and_accept(host: Host, chat: FakeChatPort, era: str) -> tuple[str, CallToolResult | str | None]:
    """Call the tool, accept its card, and return the card's id and the call's result (a parked call's as the text
    it reported) as soon as it comes. A parked card answered before its posting returned is no longer parked: its
    call goes on in the task that asked, and returns the result."""
    _, park = ERAS[era]
    result: list[CallToolResult | None] = []

    async def call() -> None:
        result.append(await host.calls.run(ROOM, ALICE, SERVER, TOOL, {}, park=park))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        card = await chat.wait_card()
        decided = await host.decide(DecisionIn(card.id, ALICE, "accept", ANSWER))
        assert decided.verdict is Verdict.CLAIMED
    if park and result == [None]:
        return card.id, await chat.wait_message(f"{SERVER}.{TOOL}:")  # parked: its result is reported here
    return card.id, result[0]


def reported(result: CallToolResult | str | None) -> CallToolResult | str | None:
    return result.split("\n", 1)[1] if isinstance(result, str) else result


@pytest.mark.parametrize("era", list(ERAS))
async def test_the_server_hears_the_answer_while_the_card_edit_is_still_held(era: str) -> None:
    chat = HeldFinishes()
    host, _ = await host_for(config_for({SERVER: bench_server()}, server_protocol=ERAS[era][0]), port=chat)
    async with host:
        with anyio.fail_after(patient(20)):
            card, result = await call_and_accept(host, chat, era)
            assert answered(reported(result))  # the tool's result is in: the server had its answer
            await chat.wait_for(lambda: chat.finishing or None)
            assert card not in chat.finished  # while the card's edit still hangs
            chat.release.set()
            outcome = await chat.wait_finished(card)
    assert outcome.status is Status.ACCEPTED
    assert [i for i, _ in chat.finish_calls] == [card]


@pytest.mark.parametrize("cut_short", [False, True], ids=["drained", "cut-short"])
@pytest.mark.parametrize("era", list(ERAS))
async def test_a_card_edit_pending_at_shutdown_is_done_not_dropped(era: str, cut_short: bool) -> None:
    chat = HeldFinishes()
    host, _ = await host_for(config_for({SERVER: bench_server()}, server_protocol=ERAS[era][0]), port=chat)
    held: list[bool] = []

    async def release_once_stuck(card: str) -> None:
        # Released once the stopping host has nothing left to do but wait for the edit, or after a (scaled) second:
        # with a Postgres store some of the store's own waits never look blocked to anyio, and the edit must be
        # released well within the bridge's bound on it (`CLEANUP_TIMEOUT`). Either way the host is still stopping
        # then (this task group ends after it), so the edit is found held, not done and not dropped.
        with anyio.move_on_after(patient(1)):
            await anyio.wait_all_tasks_blocked()
        held.append(card not in chat.finished)
        chat.release.set()

    with anyio.fail_after(patient(20)):
        async with anyio.create_task_group() as tg, host:
            card, result = await call_and_accept(host, chat, era)
            assert answered(reported(result))
            await chat.wait_for(lambda: chat.finishing or None)
            # Stopping (drained, as SIGTERM does, or at once, as Ctrl-C) while the card's edit hangs.
            host.stopping(cut_short=cut_short)
            tg.start_soon(release_once_stuck, card)
    assert held == [True]
    assert chat.finished[card].status is Status.ACCEPTED


@pytest.mark.parametrize("era", list(ERAS))
async def test_a_card_edit_that_fails_is_logged_and_the_call_completes(
        era: str, caplog: pytest.LogCaptureFixture) -> None:
    chat = HeldFinishes(failing=True)
    host, _ = await host_for(config_for({SERVER: bench_server()}, server_protocol=ERAS[era][0]), port=chat)
    async with host:
        with anyio.fail_after(patient(20)):
            card, result = await call_and_accept(host, chat, era)
            await chat.wait_for(lambda: chat.finishing or None)
            await host.broker.stop_handing_on()  # every final update asked for so far is done
    assert answered(reported(result))
    assert card not in chat.finished
    assert any(r.levelno == logging.WARNING and f"could not finish card {card}" in r.getMessage()
               for r in caplog.records)
    assert not any(r.levelno >= logging.ERROR for r in caplog.records)


async def test_at_shutdown_each_worker_finishes_what_is_queued() -> None:
    """Final updates queued behind a held one when the workers are cancelled are still done, in order."""
    release = anyio.Event()
    shown: list[str] = []

    async def show(waiter: Waiter, final: Outcome) -> None:
        if not shown:
            with anyio.CancelScope(shield=True):  # as a card edit is (`CardUpdates.finish`)
                await release.wait()
        shown.append(waiter.interaction.id)

    async def release_once_stuck() -> None:
        await anyio.wait_all_tasks_blocked()
        release.set()

    finals = FinalUpdates(show)
    ids = [f"card{n}" for n in range(3)]
    with anyio.fail_after(patient(10)):
        async with anyio.create_task_group() as outer, anyio.create_task_group() as tg:
            await tg.start(finals.run)  # one worker
            for card in ids:
                await finals.show(Waiter(interaction(60, id=card), durable=False), Outcome(Status.ACCEPTED))
            await anyio.wait_all_tasks_blocked()  # the first is held, the others queued behind it
            outer.start_soon(release_once_stuck)
            tg.cancel_scope.cancel()
    assert shown == ids
