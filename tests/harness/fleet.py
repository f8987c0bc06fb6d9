"""Bridge workers as real processes (`mcp-chat-bridge run`) on one Postgres store, behind a round-robin "load
balancer" that delivers signed Slack HTTP requests, plus the shared HTTP MCP server (`tests/servers/fleet_server`).
Used by the multi-worker test and by `bench/workers.py`."""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import yaml

from tests.harness.slack import Call, FakeSlack, check_http_ack, encode_http_body, event_app_mention, sign_request
from tests.harness.slack.server import EnvelopeType

SIGNING_SECRET = "fleet-signing-secret"
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def spawn(command: list[str]) -> subprocess.Popen[bytes]:
    """A child process whose stderr is read by `Output` (it starts at once: nothing here waits)."""
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})


class Output:
    """A process's stderr, read line by line in a thread; `wait_for` blocks a worker thread, not the event loop."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self.reader = threading.Thread(target=self._pump, daemon=True)
        self.reader.start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            with self._changed:
                self.lines.append(raw.decode(errors="replace"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def _wait(self, text: str, timeout: float) -> str:
        with self._changed:
            found = self._changed.wait_for(
                lambda: any(text in line for line in self.lines) or self.proc.poll() is not None, timeout)
            line = next((line for line in self.lines if text in line), None)
        if line is None:
            tail = "".join(self.lines[-20:])
            raise RuntimeError(f"{text!r} never appeared ({'exited' if found else 'timed out'}):\n{tail}")
        return line

    async def wait_for(self, text: str, within: float = 60.0) -> str:
        return await anyio.to_thread.run_sync(self._wait, text, within)

    def json_lines(self) -> list[dict[str, Any]]:
        out = []
        for line in list(self.lines):
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return out


@asynccontextmanager
async def mcp_server() -> AsyncIterator[str]:
    """The shared MCP server; its URL once it listens."""
    async with logged_mcp_server() as (url, _):
        yield url


@asynccontextmanager
async def logged_mcp_server() -> AsyncIterator[tuple[str, Output]]:
    """The shared MCP server: its URL once it listens, and what it says on stderr."""
    port = free_port()
    proc = spawn([sys.executable, "-m", "tests.servers.fleet_server", str(port)])
    output = Output(proc)
    try:
        await output.wait_for("Uvicorn running on")
        yield f"http://127.0.0.1:{port}/mcp", output
    finally:
        proc.terminate()
        await anyio.to_thread.run_sync(proc.wait, 10)
        output.reader.join(timeout=10)
        assert proc.stderr is not None
        proc.stderr.close()


@dataclass
class Worker:
    name: str
    port: int
    proc: subprocess.Popen[bytes]
    output: Output

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/slack/events"

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    async def stop(self) -> None:
        """SIGTERM, and wait (off the event loop: the worker still talks to the fake Slack while it stops)."""
        await anyio.to_thread.run_sync(self._stop)

    def _stop(self) -> None:
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self.output.reader.join(timeout=10)
        assert self.proc.stderr is not None
        self.proc.stderr.close()


def worker_config(folder: Path, name: str, store: str, mcp_url: str, api_url: str, port: int,
                  lease: str = "3s", on_interrupt: str | None = None) -> Path:
    config = folder / f"{name}.yaml"
    new: dict[str, Any] = {"url": mcp_url, "protocol": "2026-07-28", "elicitation": {"timeout": "10m"}}
    if on_interrupt is not None:
        new["on_interrupt"] = on_interrupt
    config.write_text(yaml.safe_dump({
        "store": store, "workers": {"lease": lease},
        "sessions": {"max_sessions": 1000},
        # A few hundred cards from one server within a minute: a load test, not a server flooding the chat.
        "limits": {"server_requests_per_minute": 100_000},
        "servers": {"old": {"url": mcp_url, "protocol": "legacy", "elicitation": {"timeout": "10m"}},
                    "new": new},
        "chat": {"slack": {"mode": "http", "bot_token": "xoxb-fleet", "signing_secret": SIGNING_SECRET,
                           "api_url": api_url, "http": {"host": "127.0.0.1", "port": port}}},
    }))
    return config


async def start_worker(folder: Path, name: str, store: str, mcp_url: str, api_url: str, **extra: str) -> Worker:
    port = free_port()
    config = worker_config(folder, name, store, mcp_url, api_url, port, **extra)
    proc = spawn([sys.executable, "-m", "bridge.cli", "--log-json", "--log-level", "info", "run", "-c", str(config),
                  "--worker-id", name])
    worker = Worker(name, port, proc, Output(proc))
    await worker.output.wait_for("Slack events, interactivity")
    return worker


@asynccontextmanager
async def running(names: Iterable[str], start: Callable[[str], Awaitable[Worker]]) -> AsyncIterator[list[Worker]]:
    """Workers started one after another (each once it listens), all stopped on the way out: also those started
    before one that failed to, and any the caller put into the list meanwhile (a restarted worker)."""
    workers: list[Worker] = []
    try:
        for name in names:
            workers.append(await start(name))
        yield workers
    finally:
        for worker in workers:
            await worker.stop()


@dataclass
class Balancer:
    """Spreads signed Slack requests over the workers, round-robin; one that refuses the connection (dead) is
    skipped, as a load balancer's health check would."""

    workers: list[Worker]
    http: httpx2.AsyncClient
    _turn: Iterator[int] = field(default_factory=itertools.count)
    delivered: dict[str, int] = field(default_factory=dict)

    async def send(self, kind: EnvelopeType, payload: dict[str, Any]) -> str:
        """Deliver one request; the name of the worker that took it."""
        body, content_type = encode_http_body(kind, payload)
        errors: list[str] = []
        start = next(self._turn)
        for k in range(len(self.workers)):  # this request's turn, then the next worker, and so on
            worker = self.workers[(start + k) % len(self.workers)]
            headers = {"Content-Type": content_type, **sign_request(SIGNING_SECRET, body)}
            try:
                response = await self.http.post(worker.url, content=body, headers=headers)
            except httpx2.TransportError as exc:
                errors.append(f"{worker.name}: {exc!r}")
                continue
            if response.status_code != 200:
                raise RuntimeError(f"{worker.name} answered {response.status_code}: {response.text[:200]}")
            check_http_ack(response.text)
            self.delivered[worker.name] = self.delivered.get(worker.name, 0) + 1
            return worker.name
        raise RuntimeError(f"no worker took the request: {errors}")

    async def send_to(self, worker: Worker, kind: EnvelopeType, payload: dict[str, Any]) -> None:
        body, content_type = encode_http_body(kind, payload)
        headers = {"Content-Type": content_type, **sign_request(SIGNING_SECRET, body)}
        response = await self.http.post(worker.url, content=body, headers=headers)
        response.raise_for_status()
        check_http_ack(response.text)


def card_call(call: Call) -> bool:
    blocks = call.args.get("blocks") or []
    return call.ok and any(b.get("type") == "actions" and "stop" not in b.get("block_id", "") for b in blocks)


def posted(thread: str, text: str = "", *, card: bool = False) -> Callable[[Call], bool]:
    """Matches a message posted in `thread`: a card, or one containing `text`."""
    def match(call: Call) -> bool:
        return call.args.get("thread_ts") == thread and (card_call(call) if card else text in str(call.args["text"]))
    return match


def finished(ts: str) -> Callable[[Call], bool]:
    return lambda call: call.args.get("ts") == ts and final(call)


def final(call: Call) -> bool:
    return not any(b.get("type") == "actions" for b in call.args.get("blocks") or [])


async def post_cards(slack: FakeSlack, lb: Balancer, eras: list[str], threads: list[str], tag: str) -> list[Call]:
    """One `pick` call per thread (`old` or `new` server as `eras` says), call i started on worker i mod n, 16
    people at a time (the rest queue at the balancer); the card each posted."""
    limit = anyio.CapacityLimiter(16)

    async def mention(i: int) -> None:
        async with limit:
            text = f'<@UBOT> call {eras[i]} pick {{"tag": "{tag}{i}"}}'
            await lb.send_to(lb.workers[i % len(lb.workers)], "events_api",
                             event_app_mention(f"U{i}", "C1", text, threads[i]))
            await slack.wait_for_call("chat.postMessage", posted(threads[i], card=True))

    async with anyio.create_task_group() as tg:
        for i in range(len(threads)):
            tg.start_soon(mention, i)
    return [await slack.wait_for_call("chat.postMessage", posted(ts, card=True)) for ts in threads]
