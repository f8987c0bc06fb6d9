"""What goes wrong in real use, through the fake Slack: edited and redelivered events, restarts, rate limits,
dropped connections, a bot missing from the channel, long defaults, and App Home tabs kept current."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

import anyio
import pytest

from adapters.slack import client as slack_client
from adapters.slack import ids, modal_pages
from adapters.slack import port as slack_port
from bridge.door.forms import Field, FieldKind, approval_form
from bridge.door.model import Status
from bridge.storage import open_store
from tests.adapters.slack import driver, limits
from tests.adapters.slack.conftest import running_bridge
from tests.adapters.slack.inline_server import make_server
from tests.adapters.slack.interactions import ROOM, form, interaction, sampling, tool_approval
from tests.adapters.slack.test_adapter import asking
from tests.harness.hosts import patient
from tests.harness.slack import Call, FakeSlack, event_app_mention, event_callback, event_message_im, slash_command

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


def _texts(slack: FakeSlack, needle: str) -> list[str]:
    return [str(c.args.get("text")) for c in slack.calls_to("chat.postMessage") if needle in str(c.args.get("text"))]


async def test_an_edited_or_redelivered_mention_runs_its_command_once(slack: FakeSlack) -> None:
    async with running_bridge(slack, {"inline": make_server()}):
        with anyio.fail_after(patient(10)):
            first = event_app_mention("U1", "C1", '<@UBOT> call inline echo {"message": "once"}', "1800000000.000100")
            await slack.send_envelope("events_api", first)
            await slack.wait_for_call("chat.postMessage", lambda c: "echo: once" in str(c.args.get("text")))
            # Slack re-sends app_mention when the message is edited, and redelivers events it thinks were lost.
            edited = first["event"] | {"text": '<@UBOT> call inline echo {"message": "edited"}',
                                       "edited": {"user": "U1", "ts": "1800000000.000200"}}
            await slack.send_envelope("events_api", event_callback(edited))
            await slack.send_envelope("events_api", first)
            await driver.mention(slack, 'call inline echo {"message": "after"}', "1800000000.000300")
            await slack.wait_for_call("chat.postMessage", lambda c: "echo: after" in str(c.args.get("text")))
    assert len(_texts(slack, "echo: once")) == 1
    assert _texts(slack, "echo: edited") == []


async def test_replies_in_the_bot_s_thread_need_no_mention_after_a_restart(slack: FakeSlack, store_target: str) -> None:
    thread = "1800000000.000100"
    first = await open_store(store_target)
    async with running_bridge(slack, {"inline": make_server()}, store=first):
        with anyio.fail_after(patient(10)):
            await driver.mention(slack, 'call inline echo {"message": "before"}', thread)
            await slack.wait_for_call("chat.postMessage", lambda c: "echo: before" in str(c.args.get("text")))
    await first.aclose()
    second = await open_store(store_target)
    try:
        async with running_bridge(slack, {"inline": make_server()}, store=second):
            with anyio.fail_after(patient(10)):
                reply = event_message_im("U1", "C1", 'call inline echo {"message": "after the restart"}',
                                         "1800000000.000500", thread_ts=thread)
                reply["event"]["channel_type"] = "channel"
                await slack.send_envelope("events_api", reply)
                answer = await slack.wait_for_call(
                    "chat.postMessage", lambda c: "echo: after the restart" in str(c.args.get("text")))
    finally:
        await second.aclose()
    assert answer.args["thread_ts"] == thread


async def test_a_default_too_long_to_pre_fill_is_kept_when_its_input_is_left_empty(slack: FakeSlack) -> None:
    long = "Summarise this: " + "lorem ipsum " * 400  # over Slack's 3000 characters for initial_value
    edit = approval_form([Field("prompt", FieldKind.TEXT, "Prompt", default=long, has_default=True, multiline=True,
                                required=True)])
    card_in = replace(sampling(), form=edit, id="long0002")
    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(patient(10)):
            async with asking(bridge, card_in) as outcomes:
                card = await driver.wait_card(slack, ROOM.thread)
                view = await driver.open_form(slack, card)  # the fake opened it: Slack would have, too
                block = next(b for b in view["blocks"] if b["type"] == "input")
                assert "initial_value" not in block["element"] and "keep the original" in block["hint"]["text"]
                empty = {block["block_id"]: {ids.FIELD_ACTION: {"type": "plain_text_input", "value": None}}}
                await driver.submit(slack, view, empty)
    assert outcomes[0].status is Status.ACCEPTED and outcomes[0].content == {"prompt": long}


async def test_a_later_page_submitted_after_a_restart_goes_back_to_the_first_page(slack: FakeSlack) -> None:
    schema = {"type": "object", "properties": {f"q{i}": {"type": "string", "title": f"Question {i}"}
                                               for i in range(120)}, "required": ["q0"]}
    card_in = interaction(form=form(schema), id="paged002")
    answers = {f"Question {i}": f"answer {i}" for i in range(120)}
    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(patient(10)):
            async with asking(bridge, card_in) as outcomes:
                card = await driver.wait_card(slack, ROOM.thread)
                # Page 2 of a modal this run never saw: its page-1 answers were only in the old process's memory.
                meta = ids.ModalMeta(card.interaction_id, card.channel, card.ts, page=1)
                page_two = modal_pages.form_view(card_in, meta) | {"id": "V00000099"}
                ack = await driver.submit(slack, page_two, driver.state(page_two, answers))
                back = ack["payload"]
                assert back["response_action"] == "update"
                limits.check_modal(back["view"])
                assert ids.ModalMeta.load(back["view"]["private_metadata"]) == replace(meta, page=0)
                assert "answers from the earlier pages were lost" in str(back["view"]["blocks"])
                page_one = back["view"] | {"id": page_two["id"]}
                ack = await driver.submit(slack, page_one, driver.state(page_one, answers))
                page_two = ack["payload"]["view"] | {"id": page_two["id"]}
                await driver.submit(slack, page_two, driver.state(page_two, answers))
    assert outcomes[0].content == {f"q{i}": f"answer {i}" for i in range(120)}


async def test_a_rate_limited_final_update_closes_the_modal_first_and_is_rescheduled(
        slack: FakeSlack, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(slack_client, "FINAL_RATE_LIMIT_WAIT", 0.0)  # any Retry-After is too long to wait out
    caplog.set_level(logging.INFO, logger=slack_port.__name__)
    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(patient(10)):
            async with asking(bridge, sampling()) as outcomes:
                card = await driver.wait_card(slack, ROOM.thread)
                view = await driver.open_form(slack, card)
                slack.fail_next("chat.update", "ratelimited", retry_after=1)
                await driver.click(slack, card, ids.DECLINE)
            # The broker's cleanup is over: the modal is already replaced, the card update comes later.
            assert outcomes[0].status is Status.DECLINED
            closed = await slack.wait_for_call("views.update", lambda c: c.args.get("view_id") == view["id"])
            finished = await slack.wait_for_call("chat.update", lambda c: c.ok and c.args["ts"] == card.ts)
    assert "no longer open" in str(closed.args["view"]["blocks"])
    assert "Declined by <@U1>" in str(finished.args["blocks"])
    assert [c.status for c in slack.calls_to("chat.update")] == [429, 200]
    assert any("trying again in 1s" in r.getMessage() for r in caplog.records)


async def test_a_slash_command_where_the_bot_is_not_a_member_is_answered_privately(slack: FakeSlack) -> None:
    async with running_bridge(slack, {"inline": make_server()}):
        with anyio.fail_after(patient(10)):
            slack.fail_next("chat.postMessage", "not_in_channel")
            command = slash_command("U1", "C7", "tools", response_url=slack.response_url)
            await slack.send_envelope("slash_commands", command)
            answer = await slack.wait_for_call("response_url")
    assert answer.args["response_type"] == "ephemeral"
    assert "Invite me first (`/invite <@UBOT>`)" in answer.args["text"]


async def test_a_post_whose_connection_dropped_is_not_repeated_but_other_calls_are_retried(
        slack: FakeSlack) -> None:
    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(patient(10)):
            slack.drop_next("chat.postMessage")  # Slack posted it; the answer was lost
            async with asking(bridge, tool_approval()) as dropped:
                pass
            async with asking(bridge, replace(tool_approval(), id="second01")) as outcomes:
                posted = await slack.wait_for_call("chat.postMessage", lambda c: "second01" in str(c.args))
                card = driver.Card("second01", posted.response["channel"], posted.response["ts"], posted.args["blocks"])
                slack.drop_next("chat.update")
                await driver.click(slack, card, ids.ACCEPT)
            # The card's final update follows the outcome: its dropped try, then the retry.
            first = await slack.wait_for_call("chat.update", lambda c: "Accepted" in str(c.args.get("blocks")))
            updated = await slack.wait_for_call("chat.update", lambda c: c is not first and c.args == first.args)
    assert dropped[0].status is Status.FAILED
    cards = [c for c in slack.calls_to("chat.postMessage") if "abc12345" in str(c.args.get("blocks"))]
    assert len(cards) == 1  # never posted twice
    assert outcomes[0].status is Status.ACCEPTED and updated.args["ts"] == card.ts
    assert len(slack.calls_to("chat.update")) == 2  # chat.update is idempotent: retried after the drop


async def test_the_app_home_of_an_approver_is_republished_when_a_card_opens_and_ends(slack: FakeSlack) -> None:
    def home_of(user: str, needle: str) -> Callable[[Call], bool]:
        return lambda c: c.args.get("user_id") == user and needle in str(c.args.get("view"))

    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(patient(10)):
            async with asking(bridge, tool_approval()):
                card = await driver.wait_card(slack, ROOM.thread)
                listed = await slack.wait_for_call("views.publish", home_of("U1", "Open the card"))
                await driver.click(slack, card, ids.DECLINE)
            emptied = await slack.wait_for_call("views.publish", home_of("U1", "Nothing is waiting"))
    limits.check_home(listed.args["view"])
    limits.check_home(emptied.args["view"])
    assert f"p{card.ts.replace('.', '')}" in str(listed.args["view"])
