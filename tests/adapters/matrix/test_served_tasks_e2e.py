"""server-everything's async elicitation (a request the server sends as a task, then polls for) answered in a real
Synapse room the way Element sends it, after the server has polled several times; and declined by reaction."""

from __future__ import annotations

from pathlib import Path

import pytest
from nio import ReactionEvent

from adapters.matrix.layout import YES
from adapters.matrix.render import ACCEPT, DECLINE
from bridge.config.file import Config
from tests.adapters.matrix.harness import ada_with_the_bot, body, content, edit_of, everything, mark, part, raw_result
from tests.harness.synapse import Synapse

pytestmark = pytest.mark.anyio

CALL = "!mcp call everything trigger-elicitation-request-async"
POLLS = 3


async def test_an_async_elicitation_is_answered_after_several_polls(synapse: Synapse, tmp_path: Path) -> None:
    config = Config(servers={"everything": everything()}, store=str(tmp_path / "bridge.db"))
    async with ada_with_the_bot(synapse, tmp_path, config) as (ada, running, bot_id):
        command = await ada.say(CALL)
        root = await ada.wait(part("card"))
        assert "Asked as a task" in body(root)
        poll = await ada.wait(part("poll"))  # favourite colour: the card's last part
        await running.host.served_tasks.wait_polls(POLLS)
        await ada.vote(poll.event_id, ["2"])  # Blue
        await ada.react(root.event_id, YES)  # agrees to the terms
        await ada.say("Ada Lovelace", thread=command, latest=poll.event_id)
        await ada.wait(lambda i, e: isinstance(e, ReactionEvent) and e.sender == bot_id
                       and e.reacts_to == root.event_id and e.key == ACCEPT)  # ready to send: one tap
        await ada.react(root.event_id, ACCEPT)
        result = await ada.wait(lambda i, e: "Raw result:" in body(e))
        await ada.wait(lambda i, e: edit_of(root.event_id)(i, e)
                                and "accepted by" in content(e)["m.new_content"]["body"].lower())
    answer = raw_result(body(result))
    assert (answer["action"], answer["content"]) == (
        "accept", {"name": "Ada Lovelace", "favoriteColor": "Blue", "agreeToTerms": True})
    assert answer["_meta"]["io.modelcontextprotocol/related-task"]["taskId"]
    assert "Poll 1: input_required - waiting for a person to answer" in body(result)


async def test_an_async_elicitation_declined_by_reaction(synapse: Synapse, tmp_path: Path) -> None:
    config = Config(servers={"everything": everything()}, store=str(tmp_path / "bridge.db"))
    async with ada_with_the_bot(synapse, tmp_path, config) as (ada, running, _):
        await ada.say(CALL)
        root = await ada.wait(part("card"))
        await ada.wait(part("poll"))
        await running.host.served_tasks.wait_polls(1)
        await ada.react(root.event_id, DECLINE)
        result = await ada.wait(lambda i, e: "Raw result:" in body(e))
    assert raw_result(body(result))["action"] == "decline"
    assert "[DECLINED]" in body(result) and "completed - declined by a person" in body(result)


async def test_an_async_sampling_request_is_approved_and_written_after_several_polls(synapse: Synapse,
                                                                                    tmp_path: Path) -> None:
    config = Config(servers={"everything": everything()}, store=str(tmp_path / "bridge.db"))
    async with ada_with_the_bot(synapse, tmp_path, config) as (ada, running, bot_id):
        command = await ada.say('!mcp call everything trigger-sampling-request-async {"prompt": "2+2?"}')
        approval = await ada.wait(part("card"))
        await running.host.served_tasks.wait_polls(POLLS)
        await ada.react(approval.event_id, ACCEPT)
        review = await ada.wait(lambda i, e: mark(e).get("part") == "card"
                                and mark(e).get("interaction") != mark(approval).get("interaction"))
        assert "write the answer" in body(review)
        await ada.say("4", thread=command, latest=review.event_id)
        await ada.wait(lambda i, e: isinstance(e, ReactionEvent) and e.sender == bot_id
                       and e.reacts_to == review.event_id and e.key == ACCEPT)
        await ada.react(review.event_id, ACCEPT)
        done = await ada.wait(lambda i, e: "Async sampling completed" in body(e))
    assert "input_required - waiting for a person to answer" in body(done)
    assert "completed - answered" in body(done) and '"text": "4"' in body(done)
