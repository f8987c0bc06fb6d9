"""Decisions on cards another worker holds (several workers on one Postgres store).

A click reaches whichever worker Slack (or the load balancer) picked. When the card is not waited on here:

- **2026 cards** are claimed here, in the store: the claim is one atomic statement, so it settles every race. The
  worker waiting on the card hears of it (`DecisionWatch`) and carries on; if that worker died, the survivor that
  takes its work over finds the answer stored and finishes the call with it. A *parked* card (nobody waits on it)
  whose claim here answers the last open card of its call's round makes the call this worker's: it continues it
  (`continue_call`), and the worker that held it lets it go.
- **Legacy cards** can only be answered by the worker holding the server's session. The decision is forwarded to
  it (a row in the store, which that worker takes; a notification wakes it, and it also looks after reconnecting
  and every few seconds, so a decision sent while it was not listening is not lost) and that worker claims it as
  if the click had come to it; this one waits for the outcome and tells the person (a final decision the holder
  has not taken within `FORWARD_WAIT` is taken back: the person hears it did not count). A worker that died
  answers nothing: the person hears that the request will end shortly, and the survivor that takes the dead
  worker's work over ends the card as failed and tells the conversation, instead of a decision counted that no
  server will ever receive.

The claim's winner finishes the card.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from bridge.cards.decision_rules import Counted, judge
from bridge.cards.recipients import base_id
from bridge.cards.secret_answers import for_the_record
from bridge.cards.store_roles import ForwardingStore
from bridge.door.model import Actor, ConversationKey, DecisionIn, DecisionResult, Outcome, Verdict
from bridge.errors import StoreError
from bridge.storage import StoredInteraction
from bridge.storage.api import CardStore
from bridge.storage.watch import DecisionWatch
from bridge.text.presentation import NOT_ANSWERING, RESTORING, STORE_FAILED, UNKNOWN_REQUEST, already_ended

logger = logging.getLogger(__name__)

FORWARD_WAIT = 5.0
"""Seconds to wait for the worker holding a legacy card to claim a forwarded decision."""
MAX_FORWARD = 7000
"""Bytes a forwarded decision may take (Postgres notifications carry at most 8000)."""

FinishCard = Callable[[StoredInteraction, Outcome], Awaitable[None]]
ContinueCall = Callable[[str], Awaitable[None]]


def forward_message(decision: DecisionIn) -> str:
    a = decision.actor
    return json.dumps({"id": decision.interaction_id, "actor": [a.platform, a.user_id, a.display_name],
                       "action": decision.action, "content": decision.content, "grant": decision.grant})


def forwarded_decision(message: str) -> DecisionIn | None:
    """The decision in a forwarded message, or None if it is not one (it came through the store, from a worker)."""
    try:
        data: Any = json.loads(message)
        platform, user_id, name = data["actor"]
        if data["action"] not in ("accept", "decline", "cancel"):
            return None
        content = data.get("content")
        return DecisionIn(str(data["id"]), Actor(str(platform), str(user_id), str(name or "")), data["action"],
                          dict(content) if isinstance(content, dict) else None, grant=str(data.get("grant") or ""))
    except (ValueError, KeyError, TypeError):
        return None


class Elsewhere:
    def __init__(self, store: ForwardingStore, watch: DecisionWatch, finish_card: FinishCard,
                 continue_call: ContinueCall) -> None:
        self._store = store
        self._watch = watch
        self._finish_card = finish_card
        self._continue_call = continue_call

    async def decide(self, stored: StoredInteraction, decision: DecisionIn) -> DecisionResult:
        """Decide on an open card nobody waits on here; `Verdict.CLAIMED` if the decision counted."""
        judged = judge(stored.interaction, decision)
        if isinstance(judged, DecisionResult):
            return judged
        message = forward_message(decision)
        if isinstance(judged, Counted):
            # One approval of several: only the worker holding the card knows the others (it counts, records and
            # shows them); it is told, and this one does not wait.
            await self._forward_only(stored, message)
            return DecisionResult(Verdict.COUNTED)
        if stored.pending_call is not None or len(message.encode()) > MAX_FORWARD:
            return await self._claim(stored, judged)
        return await self._forward(stored, decision, judged, message)

    async def _forward_only(self, stored: StoredInteraction, message: str) -> None:
        try:
            await self._store.forward(stored.interaction.id, message)
        except StoreError as exc:
            logger.warning("could not forward a decision on %s: %s", stored.interaction.id, exc)

    async def _claim(self, stored: StoredInteraction, judged: Outcome) -> DecisionResult:
        last = False
        try:
            record = for_the_record(stored.interaction, judged)
            if stored.parked and stored.pending_call is not None:
                won, last = await self._store.claim_parked(stored.interaction, record, "", stored.pending_call)
            else:
                won = await self._store.claim(stored.interaction, record)
        except StoreError as exc:
            logger.warning("could not record a decision on %s: %s", stored.interaction.id, exc)
            return DecisionResult(Verdict.LATE, message=STORE_FAILED)
        if not won:
            return await self._late(stored, judged)
        await self._finish_card(stored, judged)
        if last and stored.pending_call is not None:
            await self._continue_call(stored.pending_call)
        return DecisionResult(Verdict.CLAIMED)

    async def _forward(self, stored: StoredInteraction, decision: DecisionIn, judged: Outcome,
                       message: str) -> DecisionResult:
        interaction_id = stored.interaction.id
        forward_id: int | None = None
        with anyio.move_on_after(FORWARD_WAIT):
            async with anyio.create_task_group() as tg:
                await tg.start(self._watch.wait, interaction_id)  # watching before forwarding: nothing is missed
                try:
                    forward_id = await self._store.forward(interaction_id, message)
                except StoreError as exc:
                    logger.warning("could not forward a decision on %s: %s", interaction_id, exc)
                    tg.cancel_scope.cancel()
        if forward_id is not None:
            # Taken back if its holder has not taken it by now: the person hears it did not count, so it never may.
            try:
                await self._store.withdraw_forward(forward_id)
            except StoreError as exc:
                logger.warning("could not take back a forwarded decision on %s: %s", interaction_id, exc)
        now = await self._store.interaction(interaction_id)
        if now is None or now.outcome is None:
            return DecisionResult(Verdict.LATE, message=NOT_ANSWERING)
        ours = now.outcome.by == decision.actor and now.outcome.status is judged.status \
            and (now.outcome.content or None) == (judged.content or None)
        if ours:
            return DecisionResult(Verdict.CLAIMED)
        return DecisionResult(Verdict.LATE, message=already_ended(now.outcome))

    async def _late(self, stored: StoredInteraction, judged: Outcome) -> DecisionResult:
        now = await self._store.interaction(stored.interaction.id)
        ended = now.outcome if now and now.outcome else judged
        return DecisionResult(Verdict.LATE, message=already_ended(ended))


async def not_waited_here(store: CardStore, elsewhere: Elsewhere | None,
                          decision: DecisionIn) -> tuple[DecisionResult | None, ConversationKey | None]:
    """A decision on an interaction nobody waits on in this process: ended, held by another worker (`elsewhere`,
    on a shared store), or not yet resumed. None: it counted (claimed for the worker that waits on it)."""
    stored = await store.interaction(base_id(decision.interaction_id))
    if stored is None:
        return DecisionResult(Verdict.UNKNOWN, message=UNKNOWN_REQUEST), None
    conversation = stored.interaction.conversation
    if stored.outcome is None and elsewhere is not None:
        result = await elsewhere.decide(stored, decision)
        return (None if result.verdict is Verdict.CLAIMED else result), conversation
    if stored.outcome is None:
        # Open in the store but nobody waits on it yet (a restart is still resuming it).
        return DecisionResult(Verdict.LATE, message=RESTORING), conversation
    return DecisionResult(Verdict.LATE, message=already_ended(stored.outcome)), conversation
