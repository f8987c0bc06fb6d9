"""Company sign-in on Slack (the real bolt app against the fake Slack; the test's company identity provider and two
protected MCP servers that take its ID-JAGs; the bridge's HTTP server receiving the redirect): each person gets one
ephemeral "Connect Acme SSO" prompt, signs in once, and then uses both servers as themselves with no prompt for the
second; someone the company has not assigned is told plainly; no token reaches Slack, the logs, or the token file in
the clear."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.adapters.slack import driver
from tests.adapters.slack.conftest import running_bridge
from tests.harness.hosts import patient
from tests.harness.slack import Call, FakeSlack
from tests.servers.enterprise import Company, company
from tests.servers.signin import redirects, sign_in

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


@pytest.fixture
def acme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Company]:
    with company(tmp_path, monkeypatch) as c:
        yield c


def link_of(call: Call) -> dict[str, Any]:
    return next(e for b in call.args.get("blocks") or [] if b.get("type") == "actions" for e in b["elements"]
                if e.get("url"))


async def prompt_for(slack: FakeSlack, user: str) -> Call:
    return await slack.wait_for_call("chat.postEphemeral", lambda c: c.args["user"] == user
                                     and any(e.get("url") for b in c.args.get("blocks") or []
                                             if b.get("type") == "actions" for e in b["elements"]))


async def answer(slack: FakeSlack, *contains: str) -> str:
    call = await slack.wait_for_call("chat.postMessage", lambda c: all(s in str(c.args.get("text")) for s in contains))
    return str(call.args["text"])


async def test_each_person_signs_in_once_and_uses_both_servers_as_themselves(
        slack: FakeSlack, acme: Company, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    slack.users.update({"U3": "Cy"})
    async with running_bridge(slack, acme.server_configs(), scope="channel", **acme.settings()) as bridge, \
            redirects(bridge.host):
        with anyio.fail_after(patient(30)):
            await driver.mention(slack, "call crm whoami", "1800000000.000100", user="U1")
            ada = link_of(await prompt_for(slack, "U1"))
            await sign_in(ada["url"], "ada")
            first = await answer(slack, "crm.whoami", "ada@example.com")
            await driver.mention(slack, "call wiki whoami", "1800000000.000200", user="U1")
            second = await answer(slack, "wiki.whoami", "ada@example.com")
            await driver.mention(slack, "call wiki whoami", "1800000000.000300", user="U2")
            bob = link_of(await prompt_for(slack, "U2"))
            await sign_in(bob["url"], "bob")
            bobs = [await answer(slack, "wiki.whoami", "bob@example.com")]
            await driver.mention(slack, "call crm whoami", "1800000000.000400", user="U2")
            bobs.append(await answer(slack, "crm.whoami", "bob@example.com"))
            await driver.mention(slack, "call crm whoami", "1800000000.000500", user="U3")
            cy = link_of(await prompt_for(slack, "U3"))
            refused = await sign_in(cy["url"], "cy")
            told = await answer(slack, "refused the sign-in to Acme SSO")
    assert first.startswith("crm.whoami:") and second.startswith("wiki.whoami:") and len(bobs) == 2
    assert ada["text"]["text"] == "Connect Acme SSO" and ada["url"].startswith(f"{acme.idp.issuer}/authorize?")
    # One prompt per person, none for the second server; no consent screen at either server.
    prompts = [c for c in slack.calls_to("chat.postEphemeral") if "Connect Acme SSO" in json.dumps(c.args)]
    assert sorted(c.args["user"] for c in prompts) == ["U1", "U2", "U3"]
    assert acme.idp.counts["authorize"] == 3 and acme.idp.counts["exchange"] == 4
    assert all(p.counts["authorize"] == 0 for p in acme.servers.values())
    assert refused.status == 400 and "not assigned" in told and "access was declined" in told
    # No token in anything Slack was sent, in the logs, or in the token file in the clear.
    sent = json.dumps([c.args for c in slack.calls]) + caplog.text
    assert acme.issued() and not any(token in sent for token in acme.issued())
    stored = acme.tokens.read_bytes()
    assert not any(token.encode() in stored for token in acme.issued())
