"""What the store tests share: rows to store, and opening a store on either engine."""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from bridge.door.forms import form_from_schema
from bridge.door.model import Actor, ConversationKey, Interaction, Kind, Outcome, ServerLabel, Status
from bridge.storage import PendingCall, SqlStore, open_store
from tests.harness.hosts import ALICE, ROOM

_ids = itertools.count()
FORM = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 9}}, "required": ["n"]}


def interaction(timeout: float = 600.0, *, conversation: ConversationKey = ROOM, expires_at: float | None = None,
                **fields: Any) -> Interaction:
    base: dict[str, Any] = dict(
        id=f"i{next(_ids)}-{time.monotonic_ns()}", kind=Kind.FORM, server=ServerLabel("srv", "Server"),
        conversation=conversation, requester=ALICE, approvers=frozenset({ALICE.key}), message="How many?",
        form=form_from_schema(FORM), expires_at=time.time() + timeout if expires_at is None else expires_at)
    base.update(fields)
    return Interaction(**base)


def accepted(by: Actor = ALICE, n: int = 3) -> Outcome:
    return Outcome(Status.ACCEPTED, {"n": n}, by)


def pending(call_id: str = "call-1", conversation: ConversationKey = ROOM) -> PendingCall:
    return PendingCall(id=call_id, conversation=conversation, server="srv", tool="book", arguments={"tag": "x"},
                       request_state="state-1", input_requests={"k": {"method": "elicitation/create"}},
                       requester=ALICE)


@asynccontextmanager
async def worker(target: str, worker_id: str = "w2") -> AsyncIterator[SqlStore]:
    """Another worker on the same store (its own pool)."""
    store = await open_store(target, worker_id=worker_id)
    try:
        yield store
    finally:
        await store.aclose()
