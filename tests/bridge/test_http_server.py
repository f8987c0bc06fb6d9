"""The bridge's one HTTP server: health and readiness over real HTTP on loopback, and clean start failures."""

from __future__ import annotations

import contextlib
import socket

import anyio
import anyio.abc
import httpx2
import pytest

from bridge.config.file import from_mapping
from bridge.web.guard import ConnectionLimits
from bridge.web.server import HttpServer, HttpServerError, Listen
from tests.harness.hosts import patient

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


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


async def closed_by_server(stream: anyio.abc.SocketStream) -> None:
    """Returns once the server has closed the connection (anything it answered is read and dropped)."""
    with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
        while await stream.receive():
            pass


async def test_a_request_trickled_a_byte_at_a_time_is_cut_at_the_read_deadline() -> None:
    server = HttpServer("127.0.0.1:0", limits=ConnectionLimits(idle_timeout=30, read_timeout=1))
    async with anyio.create_task_group() as tg:
        await tg.start(server.serve)
        async with await anyio.connect_tcp("127.0.0.1", server.port) as stream:

            async def trickle() -> None:
                with contextlib.suppress(anyio.BrokenResourceError, OSError):
                    for byte in b"GET /healthz HTTP/1.1\r\nHost: bridge\r\nX-Padding: " + b"x" * 500:
                        await stream.send(bytes([byte]))
                        await anyio.sleep(0.05)  # the pace of a slow client, not a wait for anything

            async with anyio.create_task_group() as sender:
                sender.start_soon(trickle)
                # The head never ends; only the read deadline (1 s after its first byte) closes the connection.
                with anyio.fail_after(patient(20)):
                    await closed_by_server(stream)
                sender.cancel_scope.cancel()
        assert server.guard is not None and server.guard.expired == 1
        tg.cancel_scope.cancel()


async def test_one_address_past_its_cap_sheds_its_oldest_waiting_connection_and_healthz_still_answers() -> None:
    limits = ConnectionLimits(idle_timeout=60, read_timeout=60, max_connections=100, max_per_client=5)
    server = HttpServer("127.0.0.1:0", limits=limits)
    async with anyio.create_task_group() as tg:
        await tg.start(server.serve)
        streams = [await anyio.connect_tcp("127.0.0.1", server.port) for _ in range(8)]
        await streams[-1].send(b"GET /healthz HTTP/1.1\r\nHost: bridge\r\nX-Half: ")
        with anyio.fail_after(patient(20)):
            for oldest in streams[:3]:  # 8 from one address, 5 at most: the three oldest go
                await closed_by_server(oldest)
            async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client:
                assert (await client.get("/healthz")).text == "ok\n"  # it takes the place of the oldest left
            await closed_by_server(streams[3])
        assert server.guard is not None and server.guard.shed == 4 and server.guard.open <= 5
        for stream in streams:
            await stream.aclose()
        tg.cancel_scope.cancel()


async def test_a_keep_alive_connection_is_closed_once_idle_after_its_answer() -> None:
    server = HttpServer("127.0.0.1:0", limits=ConnectionLimits(idle_timeout=1, read_timeout=30))
    async with anyio.create_task_group() as tg:
        await tg.start(server.serve)
        async with await anyio.connect_tcp("127.0.0.1", server.port) as stream:
            await stream.send(b"GET /healthz HTTP/1.1\r\nHost: bridge\r\n\r\n")
            with anyio.fail_after(patient(20)):
                assert (await stream.receive()).startswith(b"HTTP/1.1 200 OK")
                await closed_by_server(stream)
        tg.cancel_scope.cancel()


def test_the_limits_come_from_the_config() -> None:
    config = from_mapping({"http": {"listen": ":8780", "idle_timeout": "2s", "read_timeout": "1m",
                                    "max_connections": 10, "max_connections_per_client": 3}})
    assert config.http.connections == ConnectionLimits(idle_timeout=2, read_timeout=60, max_connections=10,
                                                       max_per_client=3)
    assert from_mapping({}).http.connections == ConnectionLimits()
