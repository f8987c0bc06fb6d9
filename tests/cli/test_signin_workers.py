"""Per-person sign-ins with two `mcp-chat-bridge run` workers on one Postgres, Slack in HTTP mode, each worker with
its own HTTP server (a load balancer may send a sign-in's redirect to either), the real local authorization server
and protected MCP server (`tests/servers/signin.py`):

- the redirect of a sign-in started on one worker lands on the other: the page says "signed in" once the first
  worker exchanged the code, the waiting call finishes as that person, and the same redirect replayed on the first
  worker is refused;
- a worker killed with SIGKILL while a sign-in it started waits: once its lease lapsed, the redirect landing on the
  survivor gets a page saying so plainly, and the person's next call asks them again and completes.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
import yaml

from bridge.storage import open_store
from bridge.storage.signin_rows import SIGNAL_PREFIX
from bridge.storage.watch import DecisionWatch
from tests.harness.fleet import SIGNING_SECRET, Balancer, Output, Worker, free_port, running, spawn
from tests.harness.hosts import patient
from tests.harness.slack import Call, FakeSlack, event_app_mention
from tests.servers.signin import KEY_ENV, Site, site

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the fake Slack is aiohttp


@pytest.fixture
def web(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    with site(tmp_path, monkeypatch) as s:  # the token key is in the environment the workers inherit
        yield s


async def start(folder: Path, name: str, store: str, web: Site, api_url: str, bases: dict[str, str]) -> Worker:
    """A worker, listening; the base URL of its own HTTP server goes into `bases`."""
    slack_port, http_port = free_port(), free_port()
    config = folder / f"{name}.yaml"
    config.write_text(yaml.safe_dump({
        "store": store, "workers": {"lease": "3s"}, "conversation_scope": "channel", "secrets_key_env": KEY_ENV,
        "http": {"listen": f"127.0.0.1:{http_port}"},
        "servers": {"s": {"url": web.url, "auth": {"identity": "per_user"}}},
        "chat": {"slack": {"mode": "http", "bot_token": "xoxb-fleet", "signing_secret": SIGNING_SECRET,
                           "api_url": api_url, "http": {"host": "127.0.0.1", "port": slack_port}}},
    }))
    proc = spawn([sys.executable, "-m", "bridge.cli", "--log-json", "--log-level", "info", "run", "-c", str(config),
                  "--worker-id", name])
    worker = Worker(name, slack_port, proc, Output(proc))
    await worker.output.wait_for("HTTP server listening on")
    await worker.output.wait_for("Slack events, interactivity")
    bases[name] = f"http://127.0.0.1:{http_port}"
    return worker


def link_of(prompt: Call) -> str:
    return next(str(e["url"]) for b in prompt.args.get("blocks") or [] if b.get("type") == "actions"
                for e in b["elements"] if e.get("url"))


async def prompt_for(slack: FakeSlack, user: str, seen: int = 0) -> Call:
    def connect(call: Call) -> bool:
        return call.args["user"] == user and any(
            e.get("url") for b in call.args.get("blocks") or [] if b.get("type") == "actions" for e in b["elements"])

    await slack.wait_for_call("chat.postEphemeral", lambda c: connect(c) and
                              [x for x in slack.calls_to("chat.postEphemeral") if connect(x)].index(c) >= seen)
    return [x for x in slack.calls_to("chat.postEphemeral") if connect(x)][seen]


async def sign_in_via(http: httpx2.AsyncClient, link: str, user: str, base: str) -> tuple[str, httpx2.Response]:
    """Sign in as `user` at the authorization server; its redirect delivered to the worker at `base`."""
    to_login = await http.get(link)
    assert to_login.status_code == 302, to_login.text
    back = await http.get(f"{to_login.headers['location']}&user={user}")
    assert back.status_code == 302, back.text
    callback = urlsplit(back.headers["location"])
    return back.headers["location"], await http.get(f"{base}{callback.path}?{callback.query}")


async def lapsed(url: str, key: str) -> None:
    """Wait until the worker that started sign-in `key` no longer holds a lease (a killed worker's lapses within the
    configured 3 s), looking at each of the watch's polls."""
    observer = await open_store(url, worker_id="observer")
    watch = DecisionWatch(observer, poll=0.2, poll_listening=0.2)

    async def gone() -> bool | None:
        row = await observer.signin(key)
        return True if row is not None and not row.owner_alive else None

    try:
        async with anyio.create_task_group() as tg:
            await tg.start(watch.run)
            await watch.changed(SIGNAL_PREFIX + key, gone)
            tg.cancel_scope.cancel()
    finally:
        await observer.aclose()


async def said(slack: FakeSlack, text: str) -> str:
    call = await slack.wait_for_call("chat.postMessage", lambda c: text in str(c.args.get("text")))
    return str(call.args["text"])


@pytest.mark.timeout(300)
async def test_a_sign_in_finishes_on_any_worker_and_a_killed_worker_s_is_told_plainly(
        tmp_path: Path, pg_url: str, web: Site) -> None:
    async with FakeSlack() as slack, httpx2.AsyncClient(timeout=60) as http:
        slack.users.update({"U1": "Ada", "U2": "Bob"})
        bases: dict[str, str] = {}
        async with running(("w0", "w1"), lambda n: start(tmp_path, n, pg_url, web, slack.api_url, bases)) as workers:
            (w0, base0), (w1, base1) = [(w, bases[w.name]) for w in workers]
            lb = Balancer(workers, http)
            with anyio.fail_after(patient(60)):
                # Ada's call starts on w0; her redirect comes back to w1.
                await lb.send_to(w0, "events_api", event_app_mention("U1", "C1", "<@UBOT> call s whoami",
                                                                      "1700000000.000001"))
                ada_link = link_of(await prompt_for(slack, "U1"))
                assert urlsplit(parse_qs(urlsplit(ada_link).query)["redirect_uri"][0]).port == urlsplit(base0).port
                callback, page = await sign_in_via(http, ada_link, "ada", base1)
                ada = await said(slack, "for ada")
                replayed = await http.get(callback)  # the same redirect, now to w0 (which started the sign-in)

                # Bob's call starts on w0, which is killed while his sign-in waits.
                await lb.send_to(w0, "events_api", event_app_mention("U2", "C1", "<@UBOT> call s whoami",
                                                                      "1700000000.000002"))
                bob_link = link_of(await prompt_for(slack, "U2"))
                w0.kill()
                state = parse_qs(urlsplit(bob_link).query)["state"][0]
                await lapsed(pg_url, hashlib.sha256(state.encode()).hexdigest())
                _, orphaned = await sign_in_via(http, bob_link, "bob", base1)
                # His next call, on the survivor, asks him again; the redirect comes back to w1 itself.
                await lb.send_to(w1, "events_api", event_app_mention("U2", "C1", "<@UBOT> call s whoami",
                                                                      "1700000000.000003"))
                again = link_of(await prompt_for(slack, "U2", seen=1))
                _, second = await sign_in_via(http, again, "bob", base1)
                bob = await said(slack, "for bob")
    assert page.status_code == 200 and "You are signed in to s." in page.text
    assert "s.whoami" in ada and replayed.status_code == 400 and "already used" in replayed.text
    assert orphaned.status_code == 503 and "has stopped, so it cannot be finished" in orphaned.text
    assert "Signed in" not in orphaned.text and "asked to sign in anew" in orphaned.text
    assert second.status_code == 200 and "s.whoami" in bob
    logs = "".join(line for w in workers for line in w.output.lines)
    assert not any(token in logs for token in web.provider.issued) and "Traceback" not in logs
