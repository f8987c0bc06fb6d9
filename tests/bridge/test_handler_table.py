"""One handler table for both eras: the same handler objects answer legacy callbacks and 2026 input requests."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp.types import ElicitRequestParams, ElicitResult, ErrorData

from bridge.config.file import SamplingPolicy, ServerConfig
from bridge.door.model import DecisionIn, MessageIn
from bridge.requests.request_context import RequestContext
from tests.harness.hosts import ALICE, ROOM, config_for, host_for, patient
from tests.servers.inline import form_server

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

SCHEMA = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}})


async def test_the_same_elicitation_handler_answers_a_legacy_callback_and_a_2026_input_request() -> None:
    config = config_for({"old": ServerConfig("old", inprocess=form_server("old"), protocol="legacy"),
                         "new": ServerConfig("new", inprocess=form_server("new"), protocol="auto")})
    host, chat = await host_for(config)
    handler = host.handlers.elicitation
    seen: list[tuple[int, str, str | None]] = []
    original = handler.answer

    async def spy(ctx: RequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        seen.append((id(handler), ctx.server.name, ctx.pending_call))
        return await original(ctx, params)

    handler.answer = spy  # type: ignore[method-assign]
    async with host:
        for n, server in enumerate(("old", "new")):
            await host.handle_message(MessageIn(ROOM, ALICE, f"call {server} fill {json.dumps({'schema': SCHEMA})}",
                                                explicit_command=True))
            with anyio.fail_after(patient(10)):
                card = await chat.wait_card(index=n)
                await host.decide(DecisionIn(card.id, ALICE, "accept", {"n": 7}))
                result = await chat.wait_message(f"{server}.fill:")
            assert json.loads(result.split("\n", 1)[1])["content"] == {"n": 7}
        # The SDK was given this very object (inside the bounds) as its elicitation callback, for both sessions.
        for session in host.pool.sessions():
            assert session.client is not None
            callback: Any = session.client.session._elicitation_callback
            assert callback.handler is handler
    [(legacy_handler, legacy_server, legacy_call), (modern_handler, modern_server, modern_call)] = seen
    assert legacy_handler == modern_handler == id(handler)
    assert (legacy_server, legacy_call) == ("old", None)  # a legacy callback: no stored call
    assert modern_server == "new" and modern_call is not None  # a 2026 input request of a stored call


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_a_denied_capability_is_not_registered_for_either_era(protocol: str) -> None:
    config = config_for({"forms": form_server()}, server_protocol=protocol,
                        server_sampling=SamplingPolicy(approval="deny"))
    host, chat = await host_for(config)
    async with host:
        await host.handle_message(MessageIn(ROOM, ALICE, 'call forms echo {"message": "hi"}', explicit_command=True))
        with anyio.fail_after(patient(10)):
            await chat.wait_message("forms.echo:")
        [session] = host.pool.sessions()
        assert session.client is not None
        callbacks: Any = host.handlers.callbacks(session)
        assert callbacks.sampling is None and callbacks.sampling_capabilities is None
        assert callbacks.elicitation.handler is host.handlers.elicitation
        assert callbacks.list_roots.handler is host.handlers.roots
