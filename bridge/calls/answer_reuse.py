"""Answer reuse: a server that no longer accepts a call's stored `requestState` (it restarted with an ephemeral key,
or the state's TTL passed) gets the call run again, and re-asked inputs identical to ones already answered (same key,
same schema or URL) get the answers already given; the rest are asked again, with the card saying why."""

from __future__ import annotations

import json
from collections.abc import Mapping

from mcp import MCPError
from mcp.types import ElicitRequest, ElicitRequestURLParams, InputRequest, InputResponse

from bridge.calls.store_roles import RoundStore
from bridge.door.model import Kind, Status
from bridge.errors import INVALID_PARAMS
from bridge.requests.elicitation import receipted
from bridge.requests.receipting import Receipting
from bridge.storage import StoredInteraction

RERUN_NOTE = "the server had lost this call's state (it restarted, or too much time passed), so the call was run again"
Signature = tuple[str, str]


def invalid_state(exc: MCPError) -> bool:
    """The server refused the `requestState` we echoed (the SDK's boundary answers -32602 with this reason)."""
    data = exc.error.data
    return exc.code == INVALID_PARAMS and (
        (isinstance(data, Mapping) and data.get("reason") == "invalid_request_state")
        or "requeststate" in exc.error.message.casefold())


def signature(request: InputRequest) -> Signature | None:
    """What makes two asks the same question: the form's schema, or the URL; None for other kinds."""
    if not isinstance(request, ElicitRequest):
        return None
    if isinstance(request.params, ElicitRequestURLParams):
        return ("url", request.params.url)
    return ("form", json.dumps(request.params.requested_schema, sort_keys=True))


def stored_signature(stored: StoredInteraction) -> Signature | None:
    interaction = stored.interaction
    if interaction.kind is Kind.URL:
        return ("url", interaction.url)
    if interaction.kind is Kind.FORM:
        return ("form", json.dumps(dict(interaction.form.schema), sort_keys=True))
    return None


async def answers_given(store: RoundStore, receipts: Receipting | None,
                        call_id: str) -> dict[str, tuple[Signature, InputResponse]]:
    """Every answer a person gave to this call's elicitations, latest per input key, with what it answered."""
    given: dict[str, tuple[Signature, InputResponse]] = {}
    for stored in await store.interactions_for_call(call_id):
        sig = stored_signature(stored)
        outcome = stored.outcome
        if stored.input_key is None or sig is None or outcome is None:
            continue
        if outcome.status is Status.ACCEPTED or (outcome.by is not None and outcome.status is not Status.FAILED):
            given[stored.input_key] = (sig, await receipted(receipts, stored.interaction, outcome))
    return given
