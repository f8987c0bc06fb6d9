"""Per-person accounts on Slack (the real bolt app against the fake Slack; the real protected MCP server and its
authorization server; the bridge's HTTP server receiving the redirect): the Connect prompt is an ephemeral message
with a link button, the redirect finishes the waiting call as that person, two people in one channel each use their
own account, and a third person's click on someone else's prompt is refused. Clicks arrive as Slack sends them for an
ephemeral message (no `message`, the container marked ephemeral), including the click Slack reports for a link button,
and a "Done" pressed before the sign-in came back leaves the call waiting for the redirect."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from adapters.slack import ids
from tests.adapters.slack import driver
from tests.adapters.slack.conftest import running_bridge
from tests.harness.hosts import patient
from tests.harness.slack import Call, FakeSlack, block_actions
from tests.servers.signin import Site, redirects, sign_in, site

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


@pytest.fixture
def web(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    with site(tmp_path, monkeypatch) as s:
        yield s


def buttons(call: Call) -> list[dict[str, Any]]:
    return [e for b in call.args.get("blocks") or [] if b.get("type") == "actions" for e in b["elements"]]


async def connect_prompt(slack: FakeSlack, user: str) -> Call:
    return await slack.wait_for_call("chat.postEphemeral", lambda c: c.args["user"] == user
                                     and any(b.get("url") for b in buttons(c)))


def ephemeral_click(user: str, prompt: Call, button: dict[str, Any]) -> dict[str, Any]:
    """What Slack sends when a button of an ephemeral message is clicked: the container says it is ephemeral, and
    there is no `message` (an ephemeral message cannot be fetched or edited)."""
    value = str(button.get("value", ""))
    payload = block_actions(user, "C1", str(prompt.response["message_ts"]), str(button["action_id"]), value,
                            block_id=f"{value}.act")
    payload["container"]["is_ephemeral"] = True
    del payload["message"]
    return payload


async def result(slack: FakeSlack, contains: str) -> str:
    call = await slack.wait_for_call("chat.postMessage", lambda c: contains in str(c.args.get("text")))
    return str(call.args["text"])


async def test_ephemeral_connect_button_then_the_call_completes_as_each_person(slack: FakeSlack, web: Site) -> None:
    slack.users.update({"U9": "Stranger"})
    async with running_bridge(slack, {"s": web.server()}, scope="channel", **web.settings()) as bridge, \
            redirects(bridge.host):
        with anyio.fail_after(patient(30)):
            await driver.mention(slack, "call s whoami", "1800000000.000100", user="U1")
            ada = await connect_prompt(slack, "U1")
            [link, done, not_now] = buttons(ada)
            await slack.send_envelope("interactive", ephemeral_click("U1", ada, link))  # Slack reports link clicks
            # Someone else's click on her prompt (a forged payload: Slack shows an ephemeral message to her only).
            await slack.send_envelope("interactive", ephemeral_click("U9", ada, not_now))
            await slack.wait_for_call("chat.postEphemeral", lambda c: c.args["user"] == "U9"
                                      and "Only ada.lovelace can answer this request." in c.args["text"])
            visit = await sign_in(link["url"], "ada")
            ada_result = await result(slack, "for ada")
            connected = await slack.wait_for_call("chat.postEphemeral", lambda c: c.args["user"] == "U1"
                                                  and "connected" in str(c.args["text"]))
            await driver.mention(slack, "call s whoami", "1800000000.000200", user="U2")
            bob = await connect_prompt(slack, "U2")
            [bob_link, bob_done, _] = buttons(bob)
            # He presses the link, then "Done" before the sign-in came back: the call still waits for the redirect.
            await slack.send_envelope("interactive", ephemeral_click("U2", bob, bob_link))
            await slack.send_envelope("interactive", ephemeral_click("U2", bob, bob_done))
            await slack.wait_for_call("chat.postEphemeral", lambda c: c.args["user"] == "U2"
                                      and "Accepted by <@U2>" in str(c.args["text"]))
            await sign_in(bob_link["url"], "bob")
            bob_result = await result(slack, "for bob")
    assert visit.status == 200 and ada_result.startswith("s.whoami:") and "for bob" in bob_result
    assert link["text"]["text"] == "Connect s" and link["action_id"] == ids.OPEN_URL
    assert done["action_id"] == ids.ACCEPT and not_now["action_id"] == ids.DECLINE
    assert ada.args["channel"] == "C1" and "127.0.0.1" in json.dumps(ada.args["blocks"])
    assert connected.args["channel"] == "C1"
    # Her own click on the link was only acknowledged: nothing was posted back to her about it.
    assert not any(c.args["user"] == "U1" and "can answer" in str(c.args["text"])
                   for c in slack.calls_to("chat.postEphemeral"))
    # The link was only ever sent to her, ephemerally: never in a message the channel sees.
    assert not any("authorize?" in json.dumps(c.args) for c in slack.calls_to("chat.postMessage"))
    assert not any("authorize?" in json.dumps(c.args) for c in slack.calls_to("chat.update"))

