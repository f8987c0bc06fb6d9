"""What a worker does beside the others on a shared store (Postgres), and the store upkeep every bridge does.

- **Alive on record**: a heartbeat renews this worker's lease (`keep_alive`); a clean stop ends it at once
  (`stopped`), so survivors take over the 2026 calls it leaves without waiting for the lease to lapse.
- **Taking over**: every beat, the open work of workers whose lease lapsed is reaped (exactly one survivor gets
  each) and handed to the `Resumer`: their legacy cards end as failed, their 2026 calls continue here (a round they
  had already sent is told interrupted, not sent again), and the cards they decided without showing them final are
  shown.
- **Expiry**: deadlines are stored; due cards are leased to one worker at a time (`take_expired`) and expired with a
  claim, so a card nobody here waits on (its worker died, or is slow) still expires, and never twice.
- **Hearing**: the `DecisionWatch` the broker waits on, for decisions other workers claim; and decisions on legacy
  cards held here that other workers received and forwarded (`bridge.cards.forwarding`), claimed here.
- **Retention** (every store): finished cards older than the retention are pruned now and then; the audit log
  keeps the record. **Upkeep** (every store): the store's own background work (`AsyncStore.upkeep`).
"""

from __future__ import annotations

import logging
import time

import anyio
from anyio.abc import TaskGroup, TaskStatus

from bridge.calls.resume import Resumer
from bridge.calls.store_roles import FleetStore
from bridge.cards.broker import Broker
from bridge.cards.forwarding import forwarded_decision
from bridge.errors import StoreError
from bridge.storage.watch import DecisionWatch, keep_alive

logger = logging.getLogger(__name__)

EXPIRY_POLL = 5.0
"""Seconds between looks for due cards when none is due sooner (new cards may arrive from other workers)."""
PRUNE_EVERY = 3600.0
FORWARD_POLL = 5.0
"""Seconds between looks for forwarded decisions the notification did not announce (its connection died unseen)."""


class Fleet:
    """Run with `await tg.start(fleet.run)` in the host's task group."""

    def __init__(self, store: FleetStore, broker: Broker, resumer: Resumer, watch: DecisionWatch | None, *,
                 lease: float, retention: float | None) -> None:
        self._store = store
        self._broker = broker
        self._resumer = resumer
        self._watch = watch
        self._lease = lease
        self._retention = retention

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._store.upkeep)
            if self._retention:
                tg.start_soon(self._prune_loop, self._retention)
            # Also alone on SQLite: the next start then knows when this process was last alive (what it decided in
            # its last moments is shown final again, not everything it ever decided).
            tg.start_soon(keep_alive, self._store, self._lease)
            if self._store.shared:
                if self._watch is not None:
                    await tg.start(self._watch.run)
                tg.start_soon(self._reap_loop, tg)
                tg.start_soon(self._expiry_loop)
                await tg.start(self._forwarded_loop, tg)  # listening before this worker says it has started
            task_status.started()

    async def stopped(self) -> None:
        """This worker is stopping: the rounds it took and did not send go back, then its lease ends."""
        with anyio.CancelScope(shield=True):
            await self._store.give_back_rounds()
            try:
                await self._store.heartbeat(0)
            except StoreError as exc:
                logger.warning("could not end this worker's lease: %s", exc)

    async def _reap_loop(self, tg: TaskGroup) -> None:
        await self._resumer.resumed.wait()  # the start's own take-over comes first
        while True:
            await anyio.sleep(self._lease / 3)
            try:
                reaped = await self._store.reap_workers()
            except StoreError as exc:
                logger.warning("could not look for stopped workers: %s", exc)
                continue
            if reaped.workers or reaped.interactions or reaped.pending_calls:
                await self._resumer.take_over(reaped, tg)

    async def _expiry_loop(self) -> None:
        while True:
            try:
                due = await self._store.take_expired()
                for stored in due:
                    await self._broker.expire(stored)
                deadline = await self._store.next_deadline() if not due else time.time()
            except StoreError as exc:
                logger.warning("could not expire cards: %s", exc)
                due, deadline = [], None
            if due:
                continue  # there may be more
            # A deadline already past is leased to another worker: look again soon, not at once.
            wait = EXPIRY_POLL if deadline is None else min(EXPIRY_POLL, max(0.5, deadline - time.time()))
            await anyio.sleep(wait)

    async def _forwarded_loop(self, tg: TaskGroup, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
                              ) -> None:
        """Take and claim here the decisions other workers forward for cards waited on here (each claim in its own
        task: it waits for its durable commit). A forward is stored until taken; the notification only wakes this
        loop, so what was sent while it was not listening (before it started, or while reconnecting) is taken once
        it listens again, and a poll every `FORWARD_POLL` seconds covers a connection that died silently. Started
        once listening (or once the first try failed)."""
        started = False
        async with anyio.create_task_group() as polling:
            polling.start_soon(self._poll_forwarded, tg)
            while True:
                try:
                    async with self._store.forwarded() as heard:
                        if not started:
                            task_status.started()
                            started = True
                        await self._take_forwarded(tg, self._held())  # sent while not listening
                        async for interaction_id in heard:
                            if self._broker.interaction(interaction_id) is not None:
                                await self._take_forwarded(tg, [interaction_id])
                except StoreError as exc:
                    logger.warning("not hearing decisions forwarded by other workers (%s); listening again", exc)
                if not started:
                    task_status.started()
                    started = True
                await anyio.sleep(1.0)

    async def _poll_forwarded(self, tg: TaskGroup) -> None:
        while True:
            await anyio.sleep(FORWARD_POLL)
            try:
                await self._take_forwarded(tg, self._held())
            except StoreError as exc:
                logger.warning("could not look for forwarded decisions: %s", exc)

    def _held(self) -> list[str]:
        return [i.id for i in self._broker.open_interactions()]

    async def _take_forwarded(self, tg: TaskGroup, interaction_ids: list[str]) -> None:
        # Started in the order forwarded: the in-memory claim is the first step of each, so approvals count in order.
        for message in await self._store.take_forwarded(interaction_ids):
            decision = forwarded_decision(message)
            if decision is not None:
                tg.start_soon(self._broker.decide_forwarded, decision)

    async def _prune_loop(self, retention: float) -> None:
        while True:
            try:
                pruned = await self._store.prune(retention)
            except StoreError as exc:
                logger.warning("could not prune old cards: %s", exc)
            else:
                if pruned:
                    logger.info("pruned %d finished cards older than the retention", pruned)
            await anyio.sleep(PRUNE_EVERY)
