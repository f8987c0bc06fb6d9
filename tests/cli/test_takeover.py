"""A worker killed (SIGKILL) while the server holds the answers it sent: real `run` workers on one Postgres, Slack in
HTTP mode, the shared MCP server over HTTP. The survivor that takes the call over does not send the answers again
(at most once): the conversation is told, with the command that runs the call again; a server whose tools are
idempotent may opt into sending them again (`on_interrupt: resend`)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx2
import pytest

from adapters.slack import ids
from tests.harness.fleet import Balancer, finished, logged_mcp_server, posted, running, start_worker
from tests.harness.hosts import patient
from tests.harness.slack import Call, FakeSlack, block_actions, event_app_mention

pytestmark = pytest.mark.anyio

THREAD = "1700000000.000100"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the fake Slack is aiohttp


def told(call: Call) -> bool:
    """A message in the thread that ends the story: the call's result, or the notice that it was interrupted."""
    text = str(call.args.get("text", ""))
    return call.args.get("thread_ts") == THREAD and ("new.hold:" in text or "was interrupted" in text)


async def kill_while_the_server_holds_the_answer(tmp_path: Path, pg_url: str,
                                                 **on_interrupt: str) -> tuple[str, int]:
    """Worker a posts a `hold` card and takes the click; once the server has the answer, a is killed; b takes over.
    What the thread was told, and how often the tool ran with an answer."""
    async with FakeSlack() as slack, logged_mcp_server() as (mcp_url, server_log), \
            httpx2.AsyncClient(timeout=60) as http:
        slack.users["U1"] = "Person 1"
        async with running(("a", "b"), lambda name: start_worker(tmp_path, name, pg_url, mcp_url, slack.api_url,
                                                                 lease="2s", **on_interrupt)) as workers:
            a, _ = workers
            lb = Balancer(workers, http)
            with anyio.fail_after(patient(60)):
                await lb.send_to(a, "events_api", event_app_mention("U1", "C1", '<@UBOT> call new hold {"tag": "h"}',
                                                                    THREAD))
                card = await slack.wait_for_call("chat.postMessage", posted(THREAD, card=True))
                value = next(b for b in card.args["blocks"] if b["type"] == "actions")["elements"][0]["value"]
                await lb.send_to(a, "interactive", block_actions("U1", "C1", card.response["ts"], ids.ACCEPT, value,
                                                                 block_id=f"{value}.act"))
                await server_log.wait_for("hold h ran 1")
            a.kill()  # the server has the answer and is working on it; nobody will hear its result
            with anyio.fail_after(patient(60)):
                ending = await slack.wait_for_call("chat.postMessage", told)
        runs = sum(1 for line in server_log.lines if line.startswith("hold h ran"))
    return str(ending.args["text"]), runs


@pytest.mark.timeout(180)
async def test_a_round_the_server_had_is_not_sent_again_after_its_worker_dies(tmp_path: Path, pg_url: str) -> None:
    text, runs = await kill_while_the_server_holds_the_answer(tmp_path, pg_url)  # the default
    assert runs == 1
    assert text.startswith("new.hold was interrupted after its answers were sent to the server"), text
    assert '`call new hold {"tag":"h"}`' in text


@pytest.mark.timeout(180)
async def test_a_server_whose_tools_are_idempotent_gets_the_round_again(tmp_path: Path, pg_url: str) -> None:
    text, runs = await kill_while_the_server_holds_the_answer(tmp_path, pg_url, on_interrupt="resend")
    assert runs == 2 and text.startswith("new.hold:") and "h accept 2" in text, (runs, text)



@pytest.mark.timeout(180)
async def test_a_card_whose_decider_was_killed_before_editing_it_is_shown_final_by_a_survivor(
        tmp_path: Path, pg_url: str) -> None:
    async with FakeSlack() as slack, logged_mcp_server() as (mcp_url, _), httpx2.AsyncClient(timeout=60) as http:
        slack.users["U1"] = "Person 1"
        async with running(("a", "b"), lambda name: start_worker(tmp_path, name, pg_url, mcp_url, slack.api_url,
                                                                 lease="2s")) as workers:
            a, b = workers
            lb = Balancer(workers, http)
            with anyio.fail_after(patient(60)):
                await lb.send_to(a, "events_api", event_app_mention("U1", "C1", '<@UBOT> call new pick {"tag": "p"}',
                                                                    THREAD))
                card = await slack.wait_for_call("chat.postMessage", posted(THREAD, card=True))
                ts = card.response["ts"]
                value = next(x for x in card.args["blocks"] if x["type"] == "actions")["elements"][0]["value"]
                # b takes the click on a's card and stores the decision; its edit of the card does not reach Slack,
                # and b is killed once it has posted the call's result.
                slack.fail_next("chat.update", "internal_error")
                await lb.send_to(b, "interactive", block_actions("U1", "C1", ts, ids.ACCEPT, value,
                                                                 block_id=f"{value}.act"))
                await slack.wait_for_call("chat.update", lambda c: c.args.get("ts") == ts and not c.ok)
                await slack.wait_for_call("chat.postMessage", posted(THREAD, "p 2026-07-28 accept"))
            b.kill()
            with anyio.fail_after(patient(60)):
                shown = await slack.wait_for_call("chat.update", lambda c: finished(ts)(c) and c.ok)
    assert "accepted by" in json.dumps(shown.args).lower()  # the decision b stored, shown by a
