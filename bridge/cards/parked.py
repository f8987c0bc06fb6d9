"""Parked cards: durable interactions posted with no task waiting on them. Each is held (`OpenCards`), its deadline
kept by the broker's one timer, and on a shared store the one `DecisionWatch` of this worker tells it (by id, without a
task per card) of a claim made elsewhere. Their end runs in the broker's own tasks (`Ending`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from bridge.cards.broker_tasks import BrokerTasks
from bridge.cards.decision_rules import approvals_in
from bridge.cards.ending import Ending
from bridge.cards.held import Waiter
from bridge.cards.open_cards import OpenCards
from bridge.cards.store_roles import BrokerStore
from bridge.door.model import CardRef, ConversationKey, Interaction
from bridge.door.ports import ChatPort
from bridge.errors import AdapterError
from bridge.observe import hooks as observe
from bridge.storage.watch import DecisionWatch

logger = logging.getLogger(__name__)


class ParkedCards:
    def __init__(self, store: BrokerStore, port_for: Callable[[ConversationKey], ChatPort], held: OpenCards,
                 ending: Ending, tasks: BrokerTasks, watch: DecisionWatch | None) -> None:
        self._store = store
        self._port_for = port_for
        self._held = held
        self._ending = ending
        self._tasks = tasks
        self._watch = watch

    async def repark(self, interaction: Interaction, card: CardRef | None, pending_call: str, input_key: str) -> None:
        """Take up again, parked, an interaction whose card was posted before a restart or by a worker that stopped
        (posting it if it was not), with the approvals counted then."""
        approved = approvals_in(await self._store.audit_rows(interaction.id))
        waiter = Waiter(replace(interaction, approvals=approved), durable=True, card=card)
        self._held.waiters[interaction.id] = waiter
        if card is None:
            try:
                waiter.card = await self._port_for(interaction.conversation).post_card(interaction)
                await self._store.set_card(interaction.id, waiter.card)
                observe.card_posted(interaction)
            except AdapterError as exc:
                logger.warning("could not re-post card %s: %s", interaction.id, exc)
        if waiter.outcome is None:
            self.park(waiter, pending_call, input_key)

    def park(self, waiter: Waiter, pending_call: str, input_key: str) -> None:
        waiter.parked = (pending_call, input_key)
        self._ending.deadlines.add(waiter.interaction.id, waiter.interaction.expires_at)
        if self._watch is not None:
            self._watch.follow(waiter.interaction.id, self._heard_parked)
        self._held.opened()

    def _heard_parked(self, interaction_id: str) -> None:
        """Another worker claimed a parked card held here (a click it received, or expiry)."""
        waiter = self._held.waiters.get(interaction_id)
        if waiter is not None and waiter.parked is not None and waiter.outcome is None:
            self._tasks.start(self._take_stored_outcome, waiter)

    async def _take_stored_outcome(self, waiter: Waiter) -> None:
        stored = await self._store.interaction(waiter.interaction.id)
        if stored is None or stored.outcome is None or waiter.outcome is not None \
                or self._held.waiters.get(waiter.interaction.id) is not waiter:
            return  # ended here meanwhile, or let go (its call continues elsewhere)
        waiter.final, waiter.lost = stored.outcome, True
        waiter.mark_recorded()
        self._ending.settle(waiter, stored.outcome)

    def drop_parked(self, interaction_id: str) -> None:
        """Stop holding a parked interaction without ending it: its call is continued by another worker, which
        holds it now."""
        waiter = self._held.waiters.get(interaction_id)
        if waiter is not None and waiter.parked is not None and waiter.outcome is None:
            del self._held.waiters[interaction_id]
            if self._watch is not None:
                self._watch.unfollow(interaction_id)
