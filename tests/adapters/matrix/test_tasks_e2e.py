"""Tool calls running as tasks in a real Synapse room, against server-everything's `simulate-research-query`: one
status message per task, edited (`m.replace`) once per status change; the clarifying question tied to the task is a
card answered with a poll vote and the accept reaction; `!mcp stop` cancels the task at the server."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.matrix.render import ACCEPT
from bridge.config.file import Config
from tests.adapters.matrix.harness import ada_with_the_bot, body, content, everything, mark, part
from tests.adapters.matrix.test_forms_e2e import bot_reaction, fields_of
from tests.harness.synapse import Synapse

pytestmark = pytest.mark.anyio

CALL = '!mcp call everything simulate-research-query {"topic": "%s"%s}'


def status_and_edits(seen: list[object], bot_id: str) -> tuple[str, list[str]]:
    """The task's status message (its event id) and the bodies of its edits, in order."""
    status = next(e for e in seen if getattr(e, "sender", "") == bot_id
                  and "simulate-research-query: task " in body(e)
                  and (content(e).get("m.relates_to") or {}).get("rel_type") != "m.replace")
    edits = [str((content(e).get("m.new_content") or {}).get("body", "")) for e in seen
             if (content(e).get("m.relates_to") or {}).get("rel_type") == "m.replace"
             and (content(e).get("m.relates_to") or {}).get("event_id") == getattr(status, "event_id", "")]
    return str(getattr(status, "event_id", "")), edits


async def test_a_research_task_is_one_status_message_edited_per_change_then_its_result(
        synapse: Synapse, tmp_path: Path) -> None:
    config = Config(servers={"everything": everything()}, store=str(tmp_path / "bridge.db"))
    async with ada_with_the_bot(synapse, tmp_path, config) as (ada, _, bot_id):
        await ada.say(CALL % ("tides", ""))
        await ada.wait(lambda i, e: "# Research Report: tides" in body(e))
        await ada.wait(lambda i, e: "task completed · " in str((content(e).get("m.new_content") or {}).get("body")))
        _, edits = status_and_edits(ada.seen, bot_id)
    assert edits[-1].endswith(tuple(f"task completed · {n}s" for n in range(4, 30))), edits
    assert len(edits) == len(set(edits)) and 3 <= len(edits) <= 6, edits  # one edit per change
    assert sum("task working: " in e for e in edits) >= 2


async def test_the_clarifying_question_is_a_poll_on_a_card_of_the_task(synapse: Synapse, tmp_path: Path) -> None:
    config = Config(servers={"everything": everything()}, store=str(tmp_path / "bridge.db"))
    async with ada_with_the_bot(synapse, tmp_path, config) as (ada, _, bot_id):
        await ada.say(CALL % ("python", ', "ambiguous": true'))
        root = await ada.wait(part("card"))
        card_id = mark(root)["interaction"]
        poll = await ada.wait(part("poll"))
        await ada.wait(lambda i, e: "task waiting for an answer from " in str(
            (content(e).get("m.new_content") or {}).get("body")))
        await ada.vote(fields_of(ada, card_id, "poll")["interpretation"], ["2"])
        await ada.wait(bot_reaction(bot_id, root.event_id, ACCEPT))
        await ada.react(root.event_id, ACCEPT)
        report = await ada.wait(lambda i, e: "# Research Report" in body(e))
    assert "Task" in body(root) and "simulate-research-query (task " in body(root)
    assert "Python snake species" in body(poll) or "snake" in str(content(poll))
    assert "python (snake)" in body(report)


async def test_stop_cancels_the_task_at_the_server(synapse: Synapse, tmp_path: Path) -> None:
    config = Config(servers={"everything": everything()}, store=str(tmp_path / "bridge.db"))
    async with ada_with_the_bot(synapse, tmp_path, config) as (ada, _, _bot_id):
        # Ambiguous, so the task waits for its question's answer: it is still running whatever the sync's pace.
        command = await ada.say(CALL % ("python", ', "ambiguous": true'))
        await ada.wait(part("card"))
        await ada.say("!mcp stop", thread=command)  # in the call's thread: its conversation
        said = await ada.wait(lambda i, e: "Stopped everything.simulate-research-query" in body(e))
    assert "the server reports the task cancelled (Client cancelled task execution.)" in body(said)
