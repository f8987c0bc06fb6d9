"""What the Matrix adapter tells /readyz and the metrics: not ready until its first sync against a real Synapse is done,
and nio's rate-limit waits reported to the core's observers."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from aiohttp import web

from adapters.matrix import create
from adapters.matrix.client import Credentials, MatrixClient
from adapters.matrix.settings import MatrixSettings
from bridge.config.file import Config
from bridge.host import Host
from bridge.observe import hooks as observe
from bridge.storage import open_store
from tests.adapters.matrix.harness import WAIT, matrix_block, register
from tests.harness.hosts import patient
from tests.harness.synapse import Synapse

pytestmark = pytest.mark.anyio


async def test_not_ready_until_the_first_sync_is_done(synapse: Synapse, tmp_path: Path) -> None:
    config = Config(chat={"matrix": {}})
    store = await open_store(":memory:")
    adapter = create(Host(config, store), matrix_block(synapse, register(synapse, "bot"), tmp_path / "bot"), config)
    try:
        assert await adapter.readiness() == "not caught up with the homeserver yet (first sync)"
        async with anyio.create_task_group() as tg:
            tg.start_soon(adapter.serve)
            with anyio.fail_after(patient(WAIT)):
                await adapter.ready.wait()
            assert await adapter.readiness() is None
            tg.cancel_scope.cancel()
    finally:
        await store.aclose()


class Waits(observe.Observer):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, float]] = []

    def rate_limit_wait(self, platform: str, method: str, seconds: float) -> None:
        self.seen.append((platform, method, seconds))


async def test_a_rate_limited_call_nio_waits_out_is_reported(tmp_path: Path) -> None:
    """A homeserver that answers the first send with 429 (retry after 50 ms): nio waits and sends again."""
    answers = [web.json_response({"errcode": "M_LIMIT_EXCEEDED", "error": "Too many requests",
                                  "retry_after_ms": 50}, status=429),
               web.json_response({"event_id": "$sent"})]

    async def send(request: web.Request) -> web.Response:
        return answers.pop(0)

    app = web.Application()
    app.router.add_put("/_matrix/client/v3/rooms/{room}/send/{type}/{txn}", send)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    settings = MatrixSettings.from_mapping({"homeserver": f"http://{host}:{port}", "user_id": "@bot:example.org",
                                            "access_token": "t", "store_path": str(tmp_path), "e2ee": "off"})
    client = MatrixClient(settings)
    client.restore_login(Credentials("@bot:example.org", "DEVICE", "t"))
    waits = Waits()
    try:
        with observe.observing(waits), anyio.fail_after(patient(WAIT)):
            assert await client.send("!room:example.org", "m.room.message", {"body": "hi"}) == "$sent"
    finally:
        await client.close()
        await runner.cleanup()
    assert waits.seen == [("matrix", "room_send", 0.05)] and answers == []
