"""The broker: posts interaction cards, waits for a person, and turns the first valid decision into an outcome.

It is the only owner of interaction deadlines (anyio cancel scopes). A decision is claimed in two steps: first in
memory, without awaiting anything (the first writer wins, so two clicks racing on one card in this process cannot
both win, and an adapter can answer within its platform's ack), then durably with `AsyncStore.claim`, one atomic
statement that also settles races with other workers and expiry. A card shows a decision as final only once that
claim has returned: if it lost, the stored outcome (another worker's) is what counts and the decision is late.
A claim the store refuses (a full disk, an unreachable database) is undone in memory too: nothing reaches the
server, the person is told, the card stays open and its wait goes on, so the same click counts once the store works
(an expiry the store refuses is tried again a little later). People who may not decide are refused privately and the
card stays open. Whatever happens (a decision, expiry, the
request being withdrawn, shutdown) the card is brought to a final state in a shielded scope and the outcome is
written to the audit log, except for durable (2026-era) interactions at shutdown: those stay open in the store and
are answered after a restart. Once the card shows its final state the store is told (`mark_shown`): a worker that
dies between the claim and the chat edit leaves the card to whoever takes its work over (`Reaped.decided`).

Cards that need several approvers (`Interaction.required`) count each person's approval once, as its own audit row,
and show the progress on every copy of the card; one decline or cancel by an approver ends them
(`bridge.cards.decision_rules`). Who may decide and who is asked privately is `bridge.cards.recipients`'s; the broker
posts those private copies and finishes them with the card.

A durable interaction may also be *parked* (`ask(..., park=True)`): its card (and copies) posted, `ask` raises
`Parked`, and no task waits for it. The broker's one timer (`bridge.cards.deadlines`) keeps its deadline, and on a
shared store the one `DecisionWatch` of this worker tells it (by id, without a task per card) of a claim made elsewhere.
Once its decision is claimed in memory, a task of the broker's own (`run`) makes the claim durable first
(`AsyncStore.claim_parked`), then finishes its cards and hands the outcome on (`ParkedEnded`, over the `handoff`
stream the calls layer reads in its own tasks: it continues the call, if the store says this claim answered the
round's last card). A claim made here that answered the last card of a round not parked here is handed on too
(`RoundClaimed`): the call is this worker's to continue.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectSendStream

from bridge.cards.card_updates import CardUpdates, as_copy
from bridge.cards.deadlines import Deadlines
from bridge.cards.decision_rules import Counted, approval_row, approvals_in, end_detail, judge
from bridge.cards.forwarding import Elsewhere, not_waited_here
from bridge.cards.held import Handoff, Parked, ParkedEnded, RoundClaimed, Waiter
from bridge.cards.recipients import Routing, base_id
from bridge.cards.secret_answers import for_the_record
from bridge.cards.store_roles import BrokerStore
from bridge.door.model import (
    Actor,
    CardRef,
    ConversationKey,
    DecisionIn,
    DecisionResult,
    Interaction,
    Outcome,
    Status,
    Verdict,
)
from bridge.door.ports import ChatPort
from bridge.errors import AdapterError, StoreError
from bridge.observe import hooks as observe
from bridge.storage import StoredInteraction
from bridge.storage.watch import DecisionWatch
from bridge.text.presentation import NO_LONGER_OPEN, STORE_FAILED, already_ended, describe_status

logger = logging.getLogger(__name__)

STORE_RETRY = (1.0, 30.0)
"""Seconds before trying again to record an expiry the store refused: the first wait, and the longest (doubling)."""


def same_record(a: Outcome, b: Outcome) -> bool:
    """Whether two outcomes are the same decision as the store keeps it (content read back from JSON)."""
    return (a.status, a.by, a.reason, dict(a.content or {})) == (b.status, b.by, b.reason, dict(b.content or {}))


class Broker:
    """Posts cards through the chat port of each conversation's platform and collects decisions."""

    def __init__(self, store: BrokerStore, port_for: Callable[[ConversationKey], ChatPort],
                 routing: Routing | None = None, watch: DecisionWatch | None = None) -> None:
        """`watch`: on a store shared by several workers, how this one hears decisions the others claim (whoever
        runs the bridge runs the watch)."""
        self._store = store
        self._port_for = port_for
        self._cards = CardUpdates(port_for)
        self._routing = routing
        self._watch = watch
        self._elsewhere = Elsewhere(store, watch, self._finish_stored, self._continue_elsewhere) \
            if watch is not None else None
        self._waiters: dict[str, Waiter] = {}
        self._closing = False
        self._registered: anyio.Event | None = None  # made by `wait_open`, set by `_opened`
        self._deadlines = Deadlines(self._expire_parked)
        self._tg: TaskGroup | None = None
        self._handoff: MemoryObjectSendStream[Handoff] | None = None
        self._busy = 0  # the broker's own tasks running now (`_start`): each may hand a call on
        self._idle = anyio.Event()

    async def run(self, handoff: MemoryObjectSendStream[Handoff] | None = None, *,
                  task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep the deadlines of parked interactions and run what follows their decisions, until cancelled.
        `handoff`: where ended parked cards go (`handoff_stream`), to the calls layer that continues their calls
        (the stream is its runner's to close)."""
        async with anyio.create_task_group() as tg:
            self._tg, self._handoff = tg, handoff
            task_status.started()
            try:
                await self._deadlines.run()
            finally:
                self._tg = self._handoff = None

    # -- asking --------------------------------------------------------------------------------------------------

    async def ask(self, interaction: Interaction, *, pending_call: str | None = None,
                  input_key: str | None = None, park: bool = False) -> Outcome:
        """Post `interaction` and wait for its outcome. Durable interactions (part of a stored 2026 call) survive
        shutdown; the rest are cancelled by it. With `park` (durable ones only), raise `Parked` once posted."""
        if self._routing is not None:
            interaction = await self._routing.prepare(interaction)
        park = park and pending_call is not None and input_key is not None
        waiter = Waiter(interaction, durable=pending_call is not None)
        # Registered before the first await: a server may end the request (a completion notice) at once.
        self._waiters[interaction.id] = waiter
        try:
            await self._store.save_interaction(interaction, pending_call=pending_call, input_key=input_key,
                                               parked=park)
        except BaseException:
            self._waiters.pop(interaction.id, None)
            raise
        if interaction.required > 1 and len(interaction.approvers) < interaction.required:
            self._waiters.pop(interaction.id, None)
            reason = f"it needs {interaction.required} approvers and only {len(interaction.approvers)} could be found"
            return await self._end(waiter, Outcome(Status.FAILED, reason=reason))
        try:
            waiter.card = await self._port_for(interaction.conversation).post_card(interaction)
        except AdapterError as exc:
            logger.warning("could not post card %s: %s", interaction.id, exc)
            self._waiters.pop(interaction.id, None)
            return await self._end(waiter, Outcome(Status.FAILED, reason=f"the card could not be posted: {exc}"))
        except BaseException:
            # Cancelled (or broken) while posting: the interaction ends here, never half-open.
            self._waiters.pop(interaction.id, None)
            if waiter.outcome is not None or not (self._closing and waiter.durable):
                await self._end(waiter, Outcome(Status.CANCELLED, reason="the request was withdrawn"))
            raise
        if park and pending_call is not None and input_key is not None and waiter.outcome is None:
            # Parked as soon as the card is out (nothing waits on it from here); its end waits for the copies.
            waiter.posting = anyio.Event()
            self._park(waiter, pending_call, input_key)
            observe.card_posted(interaction)
            try:
                await self._store.set_card(interaction.id, waiter.card)
                await self._post_copies(waiter)
            except BaseException:
                if not self._closing:
                    self.withdraw(interaction.id, "the request was withdrawn")
                raise
            finally:
                posting, waiter.posting = waiter.posting, None  # whoever waits holds it; a parked card keeps none
                posting.set()
            raise Parked(interaction.id)
        await self._store.set_card(interaction.id, waiter.card)
        observe.card_posted(interaction)
        return await self._wait(waiter, post_copies=not park)

    async def retire(self, stored: StoredInteraction, reason: str, status: Status = Status.CANCELLED, *,
                     continuing: bool = False) -> bool:
        """End an interaction left open by an earlier run (or a worker that died) that nobody will wait on again:
        record it as `status` and bring its card (if it was posted) to that final state, so nothing dangles in chat.
        False if it had ended meanwhile (then whoever ended it finished the card). `continuing`: a parked card's end
        is an answer, and if it was its round's last, the call continues here."""
        waiter = Waiter(stored.interaction, durable=False, card=stored.card)
        if stored.parked and stored.pending_call is not None and stored.input_key is not None:
            waiter.parked = (stored.pending_call, stored.input_key)  # not `_park`ed: nothing here follows it
        waiter.outcome = Outcome(status, reason=reason)
        await self._end(waiter, waiter.outcome)
        if not waiter.lost:
            await self._finish_card(waiter, waiter.final or Outcome(status, reason=reason))
        if continuing and waiter.last and waiter.parked is not None:
            await self._continue_elsewhere(waiter.parked[0])  # it answered the last card of a parked round
        return not waiter.lost

    async def repark(self, interaction: Interaction, card: CardRef | None, pending_call: str, input_key: str) -> None:
        """Take up again, parked, an interaction whose card was posted before a restart or by a worker that stopped
        (posting it if it was not), with the approvals counted then."""
        approved = approvals_in(await self._store.audit_rows(interaction.id))
        waiter = Waiter(replace(interaction, approvals=approved), durable=True, card=card)
        self._waiters[interaction.id] = waiter
        if card is None:
            try:
                waiter.card = await self._port_for(interaction.conversation).post_card(interaction)
                await self._store.set_card(interaction.id, waiter.card)
                observe.card_posted(interaction)
            except AdapterError as exc:
                logger.warning("could not re-post card %s: %s", interaction.id, exc)
        if waiter.outcome is None:
            self._park(waiter, pending_call, input_key)

    def _park(self, waiter: Waiter, pending_call: str, input_key: str) -> None:
        waiter.parked = (pending_call, input_key)
        self._deadlines.add(waiter.interaction.id, waiter.interaction.expires_at)
        if self._watch is not None:
            self._watch.follow(waiter.interaction.id, self._heard_parked)
        self._opened()

    def _opened(self) -> None:
        # Made by whoever waits (`wait_open`, tests and the door's callers): most cards open with nobody waiting.
        if self._registered is not None:
            self._registered.set()
            self._registered = None

    def _expire_parked(self, interaction_id: str) -> None:
        waiter = self._waiters.get(interaction_id)
        if waiter is not None and waiter.parked is not None and waiter.outcome is None:
            self._settle(waiter, Outcome(Status.EXPIRED, reason="nobody answered in time"))

    def _heard_parked(self, interaction_id: str) -> None:
        """Another worker claimed a parked card held here (a click it received, or expiry)."""
        waiter = self._waiters.get(interaction_id)
        if waiter is not None and waiter.parked is not None and waiter.outcome is None:
            self._start(self._take_stored_outcome, waiter)

    async def _take_stored_outcome(self, waiter: Waiter) -> None:
        stored = await self._store.interaction(waiter.interaction.id)
        if stored is None or stored.outcome is None or waiter.outcome is not None \
                or self._waiters.get(waiter.interaction.id) is not waiter:
            return  # ended here meanwhile, or let go (its call continues elsewhere)
        waiter.final, waiter.lost = stored.outcome, True
        waiter.mark_recorded()
        self._settle(waiter, stored.outcome)

    def _start(self, fn: Callable[[Waiter], Coroutine[Any, Any, None]], waiter: Waiter) -> None:
        if self._tg is None:
            logger.warning("parked interaction %s changed while the broker is not running", waiter.interaction.id)
        else:
            self._busy += 1
            self._tg.start_soon(self._counted, fn, waiter)

    async def _counted(self, fn: Callable[[Waiter], Coroutine[Any, Any, None]], waiter: Waiter) -> None:
        try:
            await fn(waiter)
        finally:
            self._busy -= 1
            if self._busy == 0:
                self._idle.set()
                self._idle = anyio.Event()

    async def stop_handing_on(self) -> None:
        """Shutdown: let the decisions being recorded now be handed on (their person was told they counted), then
        close the hand-off, so the calls layer can finish what it holds. What ends after this is continued after the
        restart, from the store."""
        while self._busy:
            await self._idle.wait()
        if self._handoff is not None:
            self._handoff.close()

    async def _after_parked(self, waiter: Waiter) -> None:
        """A parked interaction's outcome was claimed in memory: make the claim durable (the decision's one synced
        commit), then finish its cards and hand it on; only then may its call continue."""
        interaction = waiter.interaction
        assert waiter.parked is not None and waiter.outcome is not None
        expired = waiter.outcome.status is Status.EXPIRED
        try:
            final = await self._end(waiter, waiter.outcome)
        except StoreError as exc:
            await self._unrecorded(waiter, exc)
            if expired:  # its timer fired once: it is due again a little later
                self._deadlines.add(interaction.id, time.time() + STORE_RETRY[0])
            return
        self._waiters.pop(interaction.id, None)
        if self._watch is not None:
            self._watch.unfollow(interaction.id)
        try:
            if waiter.posting is not None:
                await waiter.posting.wait()  # its private copies are out: they end with the card
            if waiter.lost and waiter.answered_early is not None:
                await self._cards.notify(interaction.conversation, waiter.answered_early, already_ended(final))
            if not waiter.lost:
                await self._finish_card(waiter, final)
            self._hand_on(ParkedEnded(*waiter.parked, final, waiter.last, interaction))
        except Exception:
            # The top of a broker task: one call failing after its decision must not stop every card.
            logger.exception("continuing after interaction %s failed", interaction.id)

    async def _show_progress(self, waiter: Waiter) -> None:
        """An approval counted on a parked card (nobody waits on it): record it and show it now."""
        await self._record_approvals(waiter)
        await self._cards.progress(waiter.interaction, waiter.card, waiter.copies)

    async def _continue_elsewhere(self, pending_call: str) -> None:
        self._hand_on(RoundClaimed(pending_call))

    def _hand_on(self, item: Handoff) -> None:
        if self._handoff is None:
            return
        try:
            self._handoff.send_nowait(item)  # unbounded: never blocks
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            # Stopping: the claim is durable, so the call is continued from the store after the restart.
            logger.info("stopping: %s is left for the restart", item)

    async def _post_copies(self, waiter: Waiter) -> None:
        if self._routing is not None and waiter.interaction.asked:
            waiter.copies = await self._routing.post_copies(waiter.interaction)

    async def _wait(self, waiter: Waiter, post_copies: bool = False) -> Outcome:
        interaction = waiter.interaction
        self._opened()
        final: Outcome | None = None
        until, retry = interaction.expires_at, STORE_RETRY[0]
        try:
            while True:
                with anyio.move_on_after(max(0.0, until - time.time())):
                    if self._watch is None:
                        await self._watch_card(waiter, post_copies)
                    else:
                        async with anyio.create_task_group() as tg:
                            tg.start_soon(self._hear, waiter, self._watch)
                            await self._watch_card(waiter, post_copies)
                            tg.cancel_scope.cancel()
                post_copies = False
                # The decision claimed in memory, or (if none came in time) expiry: recorded either way.
                try:
                    final = await self._end(waiter, Outcome(Status.EXPIRED, reason="nobody answered in time"))
                    return final
                except StoreError as exc:
                    # Nothing reaches the server before it is stored: the card stays open and the call waits.
                    await self._unrecorded(waiter, exc)
                    if time.time() >= interaction.expires_at:  # expiry itself was refused: try it again later
                        until, retry = time.time() + retry, min(retry * 2, STORE_RETRY[1])
        finally:
            self._waiters.pop(interaction.id, None)
            if final is None:
                # Cancelled from outside: the request was withdrawn, the call stopped, or the bridge is stopping. A
                # decision already claimed in memory is still recorded: its person was told it counted.
                if self._closing and waiter.durable and waiter.outcome is None:
                    logger.info("leaving durable interaction %s open for after the restart", interaction.id)
                    waiter.mark_recorded()
                else:
                    reason = "the bridge is shutting down" if self._closing else "the request was withdrawn"
                    try:
                        final = await self._end(waiter, Outcome(Status.CANCELLED, reason=reason))
                    except StoreError as exc:
                        # The call is gone either way (nothing is answered): the card must not look open.
                        logger.warning("could not record that interaction %s ended: %s", interaction.id, exc)
                        final = Outcome(Status.CANCELLED, reason=reason)
            if final is not None:
                if waiter.lost and waiter.answered_early is not None:
                    await self._cards.notify(interaction.conversation, waiter.answered_early, already_ended(final))
                if not waiter.lost:
                    # Whoever's claim won finishes the card: this worker, or the one that decided or expired it.
                    await self._finish_card(waiter, final)

    async def _watch_card(self, waiter: Waiter, post_copies: bool) -> None:
        """Until an outcome is claimed: post the private copies, record approvals and show them as they come."""
        if post_copies:
            await self._post_copies(waiter)
        while True:
            if waiter.outcome is not None:
                return
            wake = waiter.wake = anyio.Event()  # made before looking at approvals: a change from here on sets it
            if waiter.approvals:
                try:
                    await self._record_approvals(waiter)
                except StoreError as exc:
                    # Kept and written before the end (`_end`), or with the next approval.
                    logger.warning("could not record an approval of %s yet: %s", waiter.interaction.id, exc)
                    await wake.wait()
                    continue
                await self._cards.progress(waiter.interaction, waiter.card, waiter.copies)
            else:
                await wake.wait()

    async def _record_approvals(self, waiter: Waiter) -> None:
        rows, waiter.approvals = waiter.approvals, []
        with anyio.CancelScope(shield=True):
            for done, row in enumerate(rows):
                try:
                    await self._store.record(row)
                except StoreError:
                    waiter.approvals[:0] = rows[done:]  # not lost: written on the next try
                    raise

    async def _hear(self, waiter: Waiter, watch: DecisionWatch) -> None:
        """Take the outcome another worker claimed for this interaction (a click it received, or expiry)."""
        while True:
            try:
                await watch.wait(waiter.interaction.id)
                stored = await self._store.interaction(waiter.interaction.id)
                break
            except StoreError as exc:
                # The store is unreachable: nobody can claim it elsewhere meanwhile; the card waits on.
                logger.warning("could not look whether %s was decided elsewhere: %s", waiter.interaction.id, exc)
                await anyio.sleep(STORE_RETRY[0])
        if stored is None or stored.outcome is None or waiter.outcome is not None:
            return
        waiter.final, waiter.lost = stored.outcome, True
        waiter.mark_recorded()
        self._settle(waiter, stored.outcome)

    def _settle(self, waiter: Waiter, outcome: Outcome) -> bool:
        """Claim in memory; the first writer wins. Whoever waits on the interaction records it (`_end`)."""
        if waiter.outcome is not None:
            return False
        if not outcome.approvals and waiter.interaction.approvals:
            outcome = replace(outcome, approvals=waiter.interaction.approvals)  # an end nobody chose: who approved
        waiter.outcome = outcome
        waiter.woken()
        if waiter.parked is not None:
            self._start(self._after_parked, waiter)
        return True

    async def _end(self, waiter: Waiter, outcome: Outcome) -> Outcome:
        """Settle `outcome` unless something was claimed first, and make the claim durable. The result is what the
        store holds: another worker's outcome if its claim came first."""
        self._settle(waiter, outcome)
        if waiter.recorded and waiter.final is not None:
            return waiter.final
        claimed = waiter.outcome
        assert claimed is not None
        interaction = waiter.interaction
        with anyio.CancelScope(shield=True):
            try:
                if waiter.approvals:  # counted before the end: their rows come first in the log
                    await self._record_approvals(waiter)
                try:
                    won = await self._claim_durably(waiter, claimed)
                except StoreError:
                    waiter.unrecorded.append(claimed)
                    raise
                if won:
                    waiter.final = claimed
                    observe.interaction_ended(interaction, claimed)
                else:
                    stored = await self._store.interaction(interaction.id)
                    waiter.final = stored.outcome if stored and stored.outcome else claimed
                    # A claim that raised may still have committed (a connection dropped after the commit): then
                    # the stored outcome is that earlier try of ours, and it is what the server gets.
                    earlier = next((tried for tried in waiter.unrecorded
                                    if same_record(for_the_record(interaction, tried), waiter.final)), None)
                    if earlier is not None and waiter.parked is None:
                        waiter.final = earlier
                        observe.interaction_ended(interaction, earlier)
                    else:
                        waiter.lost = True
                        logger.info("interaction %s was already %s elsewhere", interaction.id,
                                    describe_status(waiter.final))
            finally:
                waiter.mark_recorded()
        assert waiter.final is not None  # set unless the claim raised
        return waiter.final

    async def _claim_durably(self, waiter: Waiter, claimed: Outcome) -> bool:
        interaction = waiter.interaction
        record, detail = for_the_record(interaction, claimed), end_detail(interaction, claimed)
        if waiter.parked is None:
            return await self._store.claim(interaction, record, detail)
        won, waiter.last = await self._store.claim_parked(interaction, record, detail, waiter.parked[0])
        return won

    async def _unrecorded(self, waiter: Waiter, exc: StoreError) -> None:
        """The store refused the claim: open the card again (in memory too), so the same click counts once the store
        works. Whoever decided is told (`_durable`, or here for a claim answered at once)."""
        logger.warning("could not record the end of interaction %s, it stays open: %s", waiter.interaction.id, exc)
        early, waiter.answered_early = waiter.answered_early, None
        waiter.outcome = None
        waiter.reopen()
        if early is not None:
            await self._cards.notify(waiter.interaction.conversation, early, STORE_FAILED)

    async def show_final(self, stored: StoredInteraction) -> None:
        """Bring a decided card to its final state again (its worker may have died before it could)."""
        if stored.outcome is not None:
            await self._finish_stored(stored, stored.outcome)

    async def _finish_stored(self, stored: StoredInteraction, outcome: Outcome) -> None:
        await self._finish_card(Waiter(stored.interaction, durable=False, card=stored.card), outcome)

    async def _finish_card(self, waiter: Waiter, outcome: Outcome) -> None:
        # Marked once shown: a worker that dies before this leaves the card to whoever takes its work over.
        if await self._cards.finish(waiter.interaction, waiter.card, waiter.copies, outcome) \
                and waiter.card is not None:
            with anyio.CancelScope(shield=True):
                await self._store.mark_shown(waiter.interaction.id)

    # -- deciding ------------------------------------------------------------------------------------------------

    async def decide(self, decision: DecisionIn) -> DecisionResult:
        """Apply a person's decision: claimed in memory at once, then durably; anyone whose decision does not count
        is told why."""
        result, waiter = self._claim(decision)
        if result is None:
            result, conversation = await not_waited_here(self._store, self._elsewhere, decision)
            if result is None:
                return DecisionResult(Verdict.CLAIMED)
        else:
            copy = waiter.copy(decision.interaction_id) if waiter else None
            conversation = (copy.interaction if copy else waiter.interaction).conversation if waiter else None
            if result.verdict is Verdict.CLAIMED and waiter is not None:
                result = await self._durable(waiter)
        if result.verdict not in (Verdict.CLAIMED, Verdict.COUNTED, Verdict.INVALID) and result.message \
                and conversation is not None:
            await self._cards.notify(conversation, decision.actor, result.message)
        return result

    async def decide_forwarded(self, decision: DecisionIn) -> DecisionResult | None:
        """A decision another worker received for a card waited on here (a legacy one): claimed as if it had come
        here, without notices (the receiving worker tells the person). None if the card is not waited on here."""
        result, waiter = self._claim(decision)
        if result is None or waiter is None:
            return None
        return await self._durable(waiter) if result.verdict is Verdict.CLAIMED else result

    def decide_nowait(self, decision: DecisionIn) -> DecisionResult:
        """Claim a decision in memory, without awaiting or any notice (for adapters that answer at once and show the
        verdict themselves). The durable claim follows; if it loses, the person is told as for a late click."""
        result, waiter = self._claim(decision)
        if result is None:
            return DecisionResult(Verdict.LATE, message=NO_LONGER_OPEN)
        if result.verdict is Verdict.CLAIMED and waiter is not None:
            waiter.answered_early = decision.actor  # the task waiting on it records it, and tells them if it lost
        return result

    async def _durable(self, waiter: Waiter) -> DecisionResult:
        """Wait for the claim this decision won in memory to be recorded."""
        claimed = waiter.outcome
        await waiter.wait_recorded()
        if waiter.final is None or any(claimed is tried for tried in waiter.unrecorded):
            return DecisionResult(Verdict.LATE, message=STORE_FAILED)
        if waiter.lost:
            return DecisionResult(Verdict.LATE, message=already_ended(waiter.final))
        return DecisionResult(Verdict.CLAIMED)

    async def expire(self, stored: StoredInteraction) -> bool:
        """Expire an interaction past its deadline (leased to this worker by the store): the waiter here, if any,
        ends it as usual; otherwise it is claimed here and its card finished. False if it had ended already."""
        outcome = Outcome(Status.EXPIRED, reason="nobody answered in time")
        waiter = self._waiters.get(stored.interaction.id)
        if waiter is not None:
            return self._settle(waiter, outcome)
        return await self.retire(stored, outcome.reason, Status.EXPIRED, continuing=True)

    def _claim(self, decision: DecisionIn) -> tuple[DecisionResult | None, Waiter | None]:
        """The in-memory claim; None when the interaction is not open in this process (the store knows more)."""
        waiter = self._waiters.get(base_id(decision.interaction_id))
        if waiter is None:
            return None, None
        if waiter.outcome is not None:
            return DecisionResult(Verdict.LATE, message=already_ended(waiter.final or waiter.outcome)), waiter
        judged = judge(waiter.interaction, decision)
        if isinstance(judged, DecisionResult):
            return judged, waiter
        if isinstance(judged, Counted):
            # One approval of several: its own audit row and the cards updated, by the waiting task.
            waiter.interaction = replace(waiter.interaction, approvals=judged.approvals)
            waiter.approvals.append(approval_row(waiter.interaction, decision.actor, judged.approvals))
            waiter.woken()
            if waiter.parked is not None:
                self._start(self._show_progress, waiter)  # nobody waits on a parked card: shown now
            return DecisionResult(Verdict.COUNTED), waiter
        self._settle(waiter, judged)
        return DecisionResult(Verdict.CLAIMED), waiter

    async def check(self, interaction_id: str, actor: Actor) -> DecisionResult:
        """Whether `actor` could decide now, without deciding (before opening a dialog, say). Refusals and late
        clicks get the usual notice."""
        waiter = self._waiters.get(base_id(interaction_id))
        if waiter is not None:
            if waiter.outcome is None and waiter.interaction.may_decide(actor):
                return DecisionResult(Verdict.CLAIMED)
            return await self.decide(DecisionIn(interaction_id, actor, "cancel"))  # refused or late: changes nothing
        stored = await self._store.interaction(base_id(interaction_id))
        if stored is not None and stored.outcome is None and self._elsewhere is not None:
            # Open on another worker: never decide here (a cancel would count).
            if stored.interaction.may_decide(actor):
                return DecisionResult(Verdict.CLAIMED)
            result = judge(stored.interaction, DecisionIn(interaction_id, actor, "cancel"))
            assert isinstance(result, DecisionResult)  # refused: they may not decide
            await self._cards.notify(stored.interaction.conversation, actor, result.message)
            return result
        return await self.decide(DecisionIn(interaction_id, actor, "cancel"))  # unknown, ended or being restored

    async def cancel(self, interaction_id: str, actor: Actor) -> DecisionResult:
        """The `cancel` command: same rules as a Cancel button."""
        return await self.decide(DecisionIn(interaction_id, actor, "cancel"))

    def complete(self, interaction_id: str, reason: str) -> bool:
        """Accept an open URL interaction because the server reports its flow done. False if it is not open."""
        waiter = self._waiters.get(interaction_id)
        if waiter is None or waiter.outcome is not None:
            return False
        self._settle(waiter, Outcome(Status.ACCEPTED, reason=reason))
        return True

    def fail(self, interaction_id: str, reason: str) -> None:
        """End an interaction because the request behind it is gone (the server crashed, the call ended)."""
        waiter = self._waiters.get(interaction_id)
        if waiter is not None:
            self._settle(waiter, Outcome(Status.FAILED, reason=reason))

    def withdraw(self, interaction_id: str, reason: str) -> None:
        """End an open interaction as cancelled because its call was stopped or ended without it."""
        if (waiter := self._waiters.get(interaction_id)) is not None:
            self._settle(waiter, Outcome(Status.CANCELLED, reason=reason))

    def drop_parked(self, interaction_id: str) -> None:
        """Stop holding a parked interaction without ending it: its call is continued by another worker, which
        holds it now."""
        waiter = self._waiters.get(interaction_id)
        if waiter is not None and waiter.parked is not None and waiter.outcome is None:
            del self._waiters[interaction_id]
            if self._watch is not None:
                self._watch.unfollow(interaction_id)

    # -- introspection -------------------------------------------------------------------------------------------

    def open_interactions(self, conversation: ConversationKey | None = None) -> list[Interaction]:
        return [w.interaction for w in self._waiters.values()
                if w.outcome is None and (conversation is None or w.interaction.conversation == conversation)]

    def waiting_for(self, actor: Actor) -> list[tuple[Interaction, CardRef | None]]:
        """Open interactions that wait for this person by name (for a home screen listing what needs them).

        Requests anyone in a conversation may answer are left out: a list outside that conversation would show
        them to people who cannot see it.
        """
        return [(w.interaction, w.card) for w in self._waiters.values()
                if w.outcome is None and actor.key in w.interaction.approvers]

    async def wait_open(self, interaction_id: str) -> Interaction:
        """Wait until an interaction is open here (posted, or resumed after a restart)."""
        while (waiter := self._waiters.get(base_id(interaction_id))) is None or waiter.outcome is not None:
            if self._registered is None:
                self._registered = anyio.Event()
            await self._registered.wait()
        return waiter.interaction

    def waiting(self, interaction_id: str) -> bool:
        """Whether the interaction (or the private copy a card id names) is waited on here and has no answer yet."""
        waiter = self._waiters.get(base_id(interaction_id))
        return waiter is not None and waiter.outcome is None

    def card_of(self, interaction_id: str) -> CardRef | None:
        waiter = self._waiters.get(base_id(interaction_id))
        copy = waiter.copy(interaction_id) if waiter else None
        return copy.card if copy else (waiter.card if waiter else None)

    def interaction(self, interaction_id: str) -> Interaction | None:
        """The open interaction, or the private copy a card id names."""
        waiter = self._waiters.get(base_id(interaction_id))
        copy = waiter.copy(interaction_id) if waiter else None
        return as_copy(waiter.interaction, copy) if waiter and copy else (waiter.interaction if waiter else None)

    def statistics(self) -> dict[str, int]:
        return {"open": sum(1 for w in self._waiters.values() if w.outcome is None),
                "parked": sum(1 for w in self._waiters.values() if w.outcome is None and w.parked is not None)}

    @property
    def closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """Mark the broker as shutting down: what is cancelled from now on ends as 'shut down', or stays open
        (durable interactions)."""
        self._closing = True
