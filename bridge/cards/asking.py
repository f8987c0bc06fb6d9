"""Asking: a card posted through the chat port of its conversation's platform, and waited on until a person decides
it, it expires, or it is withdrawn. Whatever happens the card is brought to a final state (`FinalUpdates`: once the
outcome is durable, and without holding up its return), except for durable (2026-era) interactions at shutdown:
those stay open in the store and are answered after a restart. With `park` a durable card is posted and left to
`ParkedCards` (`Parked` is raised): no task waits on it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio

from bridge.cards.card_updates import CardUpdates
from bridge.cards.ending import STORE_RETRY, Ending
from bridge.cards.final_updates import FinalUpdates
from bridge.cards.held import Parked, Waiter
from bridge.cards.open_cards import OpenCards
from bridge.cards.parked import ParkedCards
from bridge.cards.recipients import Routing
from bridge.cards.store_roles import BrokerStore
from bridge.door.model import ConversationKey, Interaction, Outcome, Status
from bridge.door.ports import ChatPort
from bridge.errors import AdapterError, StoreError
from bridge.observe import hooks as observe
from bridge.storage.watch import DecisionWatch

logger = logging.getLogger(__name__)


class Asking:
    def __init__(self, store: BrokerStore, port_for: Callable[[ConversationKey], ChatPort], cards: CardUpdates,
                 routing: Routing | None, watch: DecisionWatch | None, held: OpenCards, ending: Ending,
                 parked: ParkedCards, finals: FinalUpdates) -> None:
        self._store = store
        self._port_for = port_for
        self._cards = cards
        self._routing = routing
        self._watch = watch
        self._held = held
        self._ending = ending
        self._parked = parked
        self._finals = finals

    async def ask(self, interaction: Interaction, *, pending_call: str | None = None,
                  input_key: str | None = None, park: bool = False) -> Outcome:
        """Post `interaction` and wait for its outcome. Durable interactions (part of a stored 2026 call) survive
        shutdown; the rest are cancelled by it. With `park` (durable ones only), raise `Parked` once posted."""
        if self._routing is not None:
            interaction = await self._routing.prepare(interaction)
        park = park and pending_call is not None and input_key is not None
        waiter = Waiter(interaction, durable=pending_call is not None,
                        round_of=pending_call if input_key is not None else None)
        # Registered before the first await: a server may end the request (a completion notice) at once.
        self._held.waiters[interaction.id] = waiter
        try:
            await self._store.save_interaction(interaction, pending_call=pending_call, input_key=input_key,
                                               parked=park)
        except BaseException:
            self._held.waiters.pop(interaction.id, None)
            raise
        if interaction.required > 1 and len(interaction.approvers) < interaction.required:
            self._held.waiters.pop(interaction.id, None)
            reason = f"it needs {interaction.required} approvers and only {len(interaction.approvers)} could be found"
            return await self._ending.end(waiter, Outcome(Status.FAILED, reason=reason))
        try:
            waiter.card = await self._port_for(interaction.conversation).post_card(interaction)
        except AdapterError as exc:
            logger.warning("could not post card %s: %s", interaction.id, exc)
            self._held.waiters.pop(interaction.id, None)
            return await self._ending.end(waiter, Outcome(Status.FAILED, reason=f"the card could not be posted: {exc}"))
        except BaseException:
            # Cancelled (or broken) while posting: the interaction ends here, never half-open.
            self._held.waiters.pop(interaction.id, None)
            if waiter.outcome is not None or not (self._held.closing and waiter.durable):
                await self._ending.end(waiter, Outcome(Status.CANCELLED, reason="the request was withdrawn"))
            raise
        if park and pending_call is not None and input_key is not None and waiter.outcome is None:
            # Parked as soon as the card is out (nothing waits on it from here); its end waits for the copies.
            waiter.posting = anyio.Event()
            self._parked.park(waiter, pending_call, input_key)
            observe.card_posted(interaction)
            try:
                await self._store.set_card(interaction.id, waiter.card)
                await self._post_copies(waiter)
            except BaseException:
                if not self._held.closing:
                    self._ending.withdraw(interaction.id, "the request was withdrawn")
                raise
            finally:
                posting, waiter.posting = waiter.posting, None  # whoever waits holds it; a parked card keeps none
                posting.set()
            raise Parked(interaction.id)
        await self._store.set_card(interaction.id, waiter.card)
        observe.card_posted(interaction)
        return await self._wait(waiter, post_copies=not park)

    async def _post_copies(self, waiter: Waiter) -> None:
        if self._routing is not None and waiter.interaction.asked:
            waiter.copies = await self._routing.post_copies(waiter.interaction)

    async def _wait(self, waiter: Waiter, post_copies: bool = False) -> Outcome:
        interaction = waiter.interaction
        self._held.opened()
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
                    final = await self._ending.end(waiter, Outcome(Status.EXPIRED, reason="nobody answered in time"))
                    return final
                except StoreError as exc:
                    # Nothing reaches the server before it is stored: the card stays open and the call waits.
                    await self._ending.unrecorded(waiter, exc)
                    if time.time() >= interaction.expires_at:  # expiry itself was refused: try it again later
                        until, retry = time.time() + retry, min(retry * 2, STORE_RETRY[1])
        finally:
            self._held.waiters.pop(interaction.id, None)
            if final is None:
                # Cancelled from outside: the request was withdrawn, the call stopped, or the bridge is stopping. A
                # decision already claimed in memory is still recorded: its person was told it counted.
                if self._held.closing and waiter.durable and waiter.outcome is None:
                    logger.info("leaving durable interaction %s open for after the restart", interaction.id)
                    waiter.mark_recorded()
                else:
                    reason = "the bridge is shutting down" if self._held.closing else "the request was withdrawn"
                    try:
                        final = await self._ending.end(waiter, Outcome(Status.CANCELLED, reason=reason))
                    except StoreError as exc:
                        # The call is gone either way (nothing is answered): the card must not look open.
                        logger.warning("could not record that interaction %s ended: %s", interaction.id, exc)
                        final = Outcome(Status.CANCELLED, reason=reason)
            if final is not None:
                # Durable: the outcome goes back now, and the card shows it right after (off this path).
                await self._finals.show(waiter, final)

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
                    await self._ending.record_approvals(waiter)
                except StoreError as exc:
                    # Kept and written before the end (`_end`), or with the next approval.
                    logger.warning("could not record an approval of %s yet: %s", waiter.interaction.id, exc)
                    await wake.wait()
                    continue
                await self._cards.progress(waiter.interaction, waiter.card, waiter.copies)
            else:
                await wake.wait()

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
        self._ending.settle(waiter, stored.outcome)
