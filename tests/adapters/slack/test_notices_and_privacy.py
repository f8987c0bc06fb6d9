"""Promises to people, through the fake Slack: notices reach someone who previews a channel without joining it,
slash commands read as typed and keep their arguments to the person who ran them, a modal answered before Slack
told us its id is left alone, a late submission says what happened, and look-alike links get no button."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from adapters.slack import ids
from adapters.slack.gate import NOT_ALLOWED
from bridge.door.model import Kind, Status
from tests.adapters.slack import driver
from tests.adapters.slack.conftest import running_bridge, slack_settings
from tests.adapters.slack.inline_server import make_server
from tests.adapters.slack.interactions import ROOM, interaction, one_field, tool_approval
from tests.adapters.slack.test_adapter import asking
from tests.harness.hosts import patient
from tests.harness.slack import Call, FakeSlack, block_actions, slash_command

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


async def click(slack: FakeSlack, card: driver.Card, action_id: str, user: str) -> None:
    """A click as Slack sends it, with a response_url that reaches the fake."""
    await slack.send_envelope("interactive", block_actions(
        user, card.channel, card.ts, action_id, card.interaction_id, block_id=f"{card.interaction_id}.act",
        response_url=slack.response_url))


def told(user_text: str) -> Callable[[Call], bool]:
    return lambda c: user_text in str(c.args.get("text"))


async def test_notices_reach_someone_previewing_the_channel_through_their_click_s_response_url(
        slack: FakeSlack) -> None:
    settings = slack_settings(slack, allowed_users=["U1", "U2"])
    async with running_bridge(slack, {}, settings=settings) as bridge:
        with anyio.fail_after(patient(10)):
            async with asking(bridge, tool_approval()) as outcomes:
                card = await driver.wait_card(slack, ROOM.thread)
                # U2 previews the channel: Slack refuses an ephemeral message to them.
                slack.fail_next("chat.postEphemeral", "user_not_in_channel")
                await click(slack, card, ids.ACCEPT, "U2")  # not theirs to answer
                refused = await slack.wait_for_call("response_url", told("can answer this request"))
                await click(slack, card, ids.DECLINE, "U1")
            slack.fail_next("chat.postEphemeral", "channel_not_found")
            await click(slack, card, ids.ACCEPT, "U2")  # too late
            late = await slack.wait_for_call("response_url", told("already declined"))
            slack.fail_next("chat.postEphemeral", "user_not_in_channel")
            await click(slack, card, ids.ACCEPT, "U9")  # not allowed at all
            stranger = await slack.wait_for_call("response_url", told(NOT_ALLOWED))
    assert outcomes[0].status is Status.DECLINED
    for notice in (refused, late, stranger):
        assert notice.args["response_type"] == "ephemeral" and notice.args["replace_original"] is False
    failed = [c.response["error"] for c in slack.calls_to("chat.postEphemeral")]
    assert failed == ["user_not_in_channel", "channel_not_found", "user_not_in_channel"]


async def test_slash_command_text_is_read_as_typed(slack: FakeSlack) -> None:
    async with running_bridge(slack, {"inline": make_server()}):
        with anyio.fail_after(patient(10)):
            # The builder escapes &, < and > as Slack does; the server must get what the person typed.
            typed = 'call inline echo {"message": "a <b> & c"}'
            await slack.send_envelope("slash_commands", slash_command("U1", "C1", typed,
                                                                      response_url=slack.response_url))
            echoed = await slack.wait_for_call("chat.postMessage", told("echo: "))
    assert echoed.args["text"].endswith("\necho: a &lt;b&gt; &amp; c")  # escaped once, for mrkdwn


async def test_the_public_line_of_a_slash_command_keeps_the_arguments_to_the_person_who_ran_it(
        slack: FakeSlack) -> None:
    async with running_bridge(slack, {"inline": make_server()}):
        with anyio.fail_after(patient(10)):
            command = slash_command("U1", "C1", 'call inline echo {"message": "merger with acme"}',
                                    response_url=slack.response_url)
            await slack.send_envelope("slash_commands", command)
            line = await slack.wait_for_call("chat.postMessage", told(" ran "))
            private = await slack.wait_for_call("chat.postEphemeral")
            await slack.wait_for_call("chat.postMessage", told("echo: merger with acme"))
            await slack.send_envelope("slash_commands", slash_command("U1", "C1", "tools inline",
                                                                      response_url=slack.response_url))
            plain = await slack.wait_for_call("chat.postMessage", told("ran `/mcp tools inline`"))
    assert line.args["text"] == "<@U1> ran `/mcp call inline echo` (the rest of the command is shown only to them)"
    assert (private.args["user"], private.args["thread_ts"]) == ("U1", line.response["ts"])
    assert "merger with acme" in private.args["text"]
    assert plain.args["text"] == "<@U1> ran `/mcp tools inline`"  # nothing left out, nothing more said
    assert len(slack.calls_to("chat.postEphemeral")) == 1


async def test_a_modal_answered_before_views_open_returns_is_left_alone(slack: FakeSlack) -> None:
    card_in = interaction(form=one_field({"type": "string", "title": "Name"}), id="quick001")
    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(patient(10)):
            async with asking(bridge, card_in) as outcomes:
                card = await driver.wait_card(slack, ROOM.thread)
                release = slack.hold_next("views.open")  # Slack opened the modal; its answer to us is slow
                await driver.click(slack, card, ids.OPEN_FORM)
                view = (await slack.wait_for_call("views.open")).response["view"]
                ack = await driver.submit(slack, view, driver.state(view, {"Name": "Ada"}))
            release.set()
            await bridge.adapter.background.idle()
    assert "payload" not in ack  # the submission closed the modal
    assert outcomes[0].status is Status.ACCEPTED and outcomes[0].content == {"answer": "Ada"}
    assert [c for c in slack.calls_to("views.update") if c.args.get("view_id") == view["id"]] == []


async def test_a_submission_after_the_request_ended_says_what_happened(slack: FakeSlack) -> None:
    card_in = interaction(form=one_field({"type": "string", "title": "Name"}), id="late0001")
    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(patient(10)):
            async with asking(bridge, card_in):
                card = await driver.wait_card(slack, ROOM.thread)
                view = await driver.open_form(slack, card)
                await driver.click(slack, card, ids.DECLINE)
            await slack.wait_for_call("views.update", lambda c: c.args.get("view_id") == view["id"])
            ack = await driver.submit(slack, view, driver.state(view, {"Name": "Ada"}))  # sent before the update
    assert ack["payload"]["response_action"] == "update"
    assert "Declined by <@U1>" in str(ack["payload"]["view"]["blocks"])


async def test_a_look_alike_link_gets_no_button_and_shows_where_it_really_goes(slack: FakeSlack) -> None:
    card_in = interaction(Kind.URL, url="https://\u0430pple.com/signin", message="Sign in to continue.",
                          accept_label="Done", quick_accept=True, id="link0001")
    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(patient(10)):
            async with asking(bridge, card_in):
                posted: Call = await slack.wait_for_call("chat.postMessage", lambda c: "link0001" in str(c.args))
                card = driver.Card("link0001", posted.response["channel"], posted.response["ts"],
                                   posted.args["blocks"])
                await driver.click(slack, card, ids.DECLINE)
    assert ids.OPEN_URL not in card.actions()
    assert "the host \u0430pple.com (really xn--pple-43d.com: mixes scripts" in str(posted.args["blocks"])


async def test_a_two_second_timeout_reads_as_seconds_and_the_card_ends_as_expired(slack: FakeSlack) -> None:
    async with running_bridge(slack, {"inline": make_server()}, server_protocol="legacy",
                              server_elicitation_timeout=2):
        with anyio.fail_after(patient(10)):
            await driver.mention(slack, "call inline confirm", "1800000000.000200")
            card = await driver.wait_card(slack, "1800000000.000200")
            ended = await slack.wait_for_call("chat.update", lambda c: c.args.get("ts") == card.ts)
    waiting = str(card.blocks)
    assert "(in 2s)" in waiting or "(in 1s)" in waiting, waiting
    assert "in 1m" not in waiting
    assert "expired" in str(ended.args).lower()
