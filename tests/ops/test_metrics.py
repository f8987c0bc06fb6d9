"""/metrics and /readyz over real HTTP after a scripted conversation: a real host with an in-process MCP server and a
stdio server that cannot start, the real Slack adapter over Socket Mode against the fake Slack (which answers one
call with a 429 and fails another), and the HTTP server wired by `bridge.cli.monitoring.install` as `run` wires it."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import anyio
import httpx2
import pytest
from anyio.abc import TaskGroup
from prometheus_client.parser import text_string_to_metric_families

from adapters.slack import SlackAdapter, create
from bridge.cli import monitoring
from bridge.config.file import ServerConfig
from bridge.errors import AdapterError
from bridge.host import Host
from bridge.observe import hooks as observe
from bridge.storage import open_store
from bridge.web.server import HttpServer
from tests.adapters.slack import driver
from tests.adapters.slack.conftest import slack_settings
from tests.adapters.slack.inline_server import make_server
from tests.harness.hosts import config_for, patient
from tests.harness.slack import FakeSlack

pytestmark = pytest.mark.anyio

WORKER = "worker-7"
THREAD = "1800000000.000100"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # bolt, slack_sdk and aiohttp are asyncio-only


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        fake.users.update({"U1": "Ada Lovelace"})
        yield fake


class Seen(observe.Observer):
    """What the test sees of the hooks, independently of the metrics: the store's commits (to check the histogram
    against), and failed chat calls (to know the adapter has had the answer, not only that the fake sent it)."""

    def __init__(self) -> None:
        self.commits = 0
        self.failed_chat_call = anyio.Event()

    def store_committed(self, seconds: float) -> None:
        self.commits += 1

    @contextmanager
    def chat_call(self, platform: str, method: str) -> Iterator[None]:
        try:
            yield
        except AdapterError:
            self.failed_chat_call.set()
            raise


@dataclass
class Running:
    host: Host
    adapter: SlackAdapter
    http: httpx2.AsyncClient
    store: Path
    seen: Seen
    tg: TaskGroup

    async def scrape(self) -> Samples:
        response = await self.http.get("/metrics")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
        samples: Samples = {}
        for family in text_string_to_metric_families(response.text):
            for sample in family.samples:
                assert sample.labels.get("worker") == WORKER, sample  # every sample names the worker
                labels = frozenset((k, v) for k, v in sample.labels.items() if k != "worker")
                samples[(sample.name, labels)] = sample.value
        return samples


def at(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


@asynccontextmanager
async def bridge(slack: FakeSlack, tmp_path: Path) -> AsyncIterator[Running]:
    broken = ServerConfig(name="broken", command=sys.executable, args=("-c", "import sys; sys.exit(3)"))
    config = replace(config_for({"forms": make_server(), "broken": broken}, server_protocol="legacy"),
                     store=str(tmp_path / "bridge.db"))
    store = await open_store(config.store)
    host = Host(config, store)
    adapter = create(host, slack_settings(slack), config)
    host.attach(adapter)
    server = HttpServer("127.0.0.1:0")
    seen = Seen()
    try:
        with monitoring.install(server, host, [adapter], WORKER), observe.observing(seen):
            async with host, anyio.create_task_group() as tg:
                await tg.start(server.serve)
                async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", timeout=30) as http:
                    yield Running(host, adapter, http, Path(config.store), seen, tg)
                tg.cancel_scope.cancel()
    finally:
        await store.aclose()


async def confirm(slack: FakeSlack) -> driver.Card:
    """Ask the in-process server's one-question form in the thread and wait for its new card."""
    before = {c.response.get("ts") for c in slack.calls_to("chat.postMessage")}
    await driver.mention(slack, "call forms confirm", THREAD)
    call = await slack.wait_for_call("chat.postMessage", lambda c: c.ok and c.response.get("ts") not in before
                                     and any(b.get("type") == "actions" for b in c.args.get("blocks") or []))
    actions = next(b for b in call.args["blocks"] if b["type"] == "actions")
    return driver.Card(actions["elements"][0]["value"], call.response["channel"], call.response["ts"],
                       call.args["blocks"])


async def answered(slack: FakeSlack, count: int) -> None:
    """Wait until the bridge has reported `count` accepted results in the thread."""
    def done(call: object) -> bool:
        return len([c for c in slack.calls_to("chat.postMessage") if c.ok and "accepted" in str(c.args.get("text"))]) \
            >= count
    await slack.wait_for_call("chat.postMessage", done)


async def test_every_metric_has_its_value_after_a_scripted_conversation(slack: FakeSlack, tmp_path: Path) -> None:
    async with bridge(slack, tmp_path) as running:
        with anyio.fail_after(patient(30)):
            # Not connected to Slack yet: not ready, and /readyz says which part.
            early = await running.http.get("/readyz")
            assert early.status_code == 503
            assert early.json()["checks"] == {"chat.slack": "not connected to Slack yet", "store": "ok"}
            running.tg.start_soon(running.adapter.serve)
            await running.adapter.ready.wait()
            assert (await running.http.get("/readyz")).json() == {"ready": True,
                                                                  "checks": {"chat.slack": "ok", "store": "ok"}}

            # Two forms, both accepted; the second card's final update is rate-limited once (Retry-After: 0).
            card = await confirm(slack)
            during = await running.scrape()
            assert at(during, "mcp_bridge_open_interactions", kind="form", platform="slack") == 1
            await driver.click(slack, card, "mcp.choice.0")
            await answered(slack, 1)
            slack.fail_next("chat.update", "ratelimited", retry_after=0)
            card = await confirm(slack)
            await driver.click(slack, card, "mcp.choice.0")
            await answered(slack, 2)
            limited = await slack.wait_for_call("chat.update", lambda c: c.status == 429)
            await slack.wait_for_call("chat.update", lambda c: c.ok and slack.calls.index(c) >
                                      slack.calls.index(limited))

            # A server that cannot start, whose error message Slack then refuses to post.
            slack.fail_next("chat.postMessage", "channel_not_found")
            await driver.mention(slack, "call broken anything", THREAD)
            await running.seen.failed_chat_call.wait()

            commits_before = running.seen.commits
            after = await running.scrape()
            commits_after = running.seen.commits
        assert at(after, "mcp_bridge_open_interactions", kind="form", platform="slack") == 0
        assert at(after, "mcp_bridge_open_interactions", kind="tool", platform="slack") == 0
        assert at(after, "mcp_bridge_interaction_outcomes_total", kind="form", outcome="accepted") == 2
        assert ("mcp_bridge_interaction_outcomes_total", frozenset({("kind", "form"), ("outcome", "declined")})) \
            not in after
        assert at(after, "mcp_bridge_decision_latency_seconds_count", kind="form") == 2
        assert 0 < at(after, "mcp_bridge_decision_latency_seconds_sum", kind="form") < 30
        assert at(after, "mcp_bridge_decision_latency_seconds_bucket", kind="form", le="+Inf") == 2
        assert at(after, "mcp_bridge_sessions", server="forms", state="ready") == 1
        assert at(after, "mcp_bridge_sessions", server="broken", state="ready") == 0
        assert at(after, "mcp_bridge_sessions", server="broken", state="starting") == 0
        assert at(after, "mcp_bridge_server_start_failures_total", server="broken") == 1
        assert ("mcp_bridge_server_start_failures_total", frozenset({("server", "forms")})) not in after
        assert at(after, "mcp_bridge_chat_api_errors_total", platform="slack", method="chat.postMessage") == 1
        assert at(after, "mcp_bridge_chat_rate_limit_waits_total", platform="slack", method="chat.update") == 1
        assert at(after, "mcp_bridge_chat_rate_limit_wait_seconds_total", platform="slack") == 0
        updates = [c for c in slack.calls_to("chat.update") if c.ok]
        assert at(after, "mcp_bridge_chat_api_calls_total", platform="slack", method="chat.update") == len(updates)
        # Every commit of the store is in the histogram (at least: each card saved, its message kept, its end).
        commits = at(after, "mcp_bridge_store_commit_seconds_count")
        assert commits_before <= commits <= commits_after and commits >= 6
        assert at(after, "mcp_bridge_store_commit_seconds_bucket", le="+Inf") == commits


async def test_readyz_fails_while_the_store_cannot_be_written(slack: FakeSlack, tmp_path: Path) -> None:
    async with bridge(slack, tmp_path) as running:
        with anyio.fail_after(patient(30)):
            running.tg.start_soon(running.adapter.serve)
            await running.adapter.ready.wait()
            assert (await running.http.get("/readyz")).status_code == 200
            # Another process holds the store's write lock: nothing the bridge decides could be recorded.
            other = sqlite3.connect(running.store, isolation_level=None)
            try:
                other.execute("BEGIN IMMEDIATE")
                locked = await running.http.get("/readyz")
                assert locked.status_code == 503
                assert locked.json()["checks"] == {"chat.slack": "ok", "store": "not writable: database is locked"}
                other.execute("ROLLBACK")
                assert (await running.http.get("/readyz")).status_code == 200
            finally:
                other.close()
            # A store file that is gone (its volume unmounted, say) is not writable either.
            running.store.rename(running.store.with_suffix(".moved"))
            gone = await running.http.get("/readyz")
            assert gone.status_code == 503
            assert gone.json()["checks"]["store"] == "not writable: unable to open database file"
