"""The bridge's one HTTP server: health and readiness over real HTTP on loopback, and clean start failures."""

from __future__ import annotations

import socket

import anyio
import httpx2
import pytest

from bridge.http_server import HttpServer, HttpServerError, Listen

pytestmark = pytest.mark.anyio


async def test_health_and_readiness_over_http() -> None:
    server = HttpServer("127.0.0.1:0")
    state = {"store": "not writable"}

    async def store_ready() -> str | None:
        return state["store"] or None

    async def broken() -> str | None:
        raise RuntimeError("boom: secret-ish detail")

    server.readiness("store", store_ready)
    async with anyio.create_task_group() as tg:
        await tg.start(server.serve)
        async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client:
            health = await client.get("/healthz")
            assert health.status_code == 200 and health.text == "ok\n"
            assert health.headers["x-content-type-options"] == "nosniff"
            not_ready = await client.get("/readyz")
            assert not_ready.status_code == 503
            assert not_ready.json() == {"ready": False, "checks": {"store": "not writable"}}
            state["store"] = ""
            ready = await client.get("/readyz")
            assert ready.status_code == 200 and ready.json()["ready"] is True
            server.readiness("broken", broken)
            failing = await client.get("/readyz")
            assert failing.status_code == 503
            assert failing.json()["checks"]["broken"] == "check failed (RuntimeError)"
            assert (await client.get("/nope")).status_code == 404
        tg.cancel_scope.cancel()


async def test_port_in_use_is_a_clean_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        server = HttpServer(f"127.0.0.1:{port}")
        with pytest.raises(HttpServerError, match=f"cannot listen on 127.0.0.1:{port}"):
            await server.serve()


@pytest.mark.parametrize("text", ["8080", "host:", "host:99999", "a:b"])
def test_bad_listen_addresses(text: str) -> None:
    with pytest.raises(HttpServerError, match="is not host:port"):
        Listen.parse(text)


def test_listen_forms_and_public_links() -> None:
    assert Listen.parse(":8780") == Listen("127.0.0.1", 8780)
    assert Listen.parse("[::1]:8780") == Listen("::1", 8780)
    assert HttpServer("0.0.0.0:8780", "https://bridge.example.org/").url("/oauth/callback") == \
        "https://bridge.example.org/oauth/callback"
    assert HttpServer("127.0.0.1:8780").url("/healthz") == "http://127.0.0.1:8780/healthz"
