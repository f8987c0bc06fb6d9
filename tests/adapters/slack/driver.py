"""Acting as a person in the fake Slack: mention the bot, find the card, click, fill in and submit a modal."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from adapters.slack import ids
from tests.adapters.slack import limits
from tests.harness.slack import (
    Call,
    FakeSlack,
    block_actions,
    event_app_mention,
    view_closed,
    view_submission,
)

JSON = dict[str, Any]


@dataclass(frozen=True)
class Card:
    interaction_id: str
    channel: str
    ts: str
    blocks: list[JSON]

    def actions(self) -> list[str]:
        return [e["action_id"] for b in self.blocks if b["type"] == "actions" for e in b["elements"]]


async def mention(slack: FakeSlack, text: str, ts: str, user: str = "U1", channel: str = "C1") -> None:
    await slack.send_envelope("events_api", event_app_mention(user, channel, f"<@UBOT> {text}", ts))


def _is_card(call: Call, thread: str | None) -> bool:
    blocks = call.args.get("blocks") or []
    return call.ok and any(b.get("type") == "actions" and "stop" not in b.get("block_id", "") for b in blocks) \
        and (thread is None or call.args.get("thread_ts") == thread)


async def wait_card(slack: FakeSlack, thread: str | None = None) -> Card:
    call = await slack.wait_for_call("chat.postMessage", lambda c: _is_card(c, thread))
    blocks = call.args["blocks"]
    limits.check_message(blocks)
    actions = next(b for b in blocks if b["type"] == "actions")
    return Card(actions["elements"][0]["value"], call.response["channel"], call.response["ts"], blocks)


async def click(slack: FakeSlack, card: Card, action_id: str, user: str = "U1") -> JSON:
    payload = block_actions(user, card.channel, card.ts, action_id, card.interaction_id,
                            block_id=f"{card.interaction_id}.act")
    return await slack.send_envelope("interactive", payload)


async def open_form(slack: FakeSlack, card: Card, user: str = "U1") -> JSON:
    """Click Fill in (or Edit) and return the opened modal as the fake stores it (with its id)."""
    before = len(slack.calls_to("views.open"))
    await click(slack, card, ids.OPEN_FORM, user)
    call = await slack.wait_for_call("views.open", lambda c: slack.calls_to("views.open").index(c) >= before)
    view: JSON = call.response["view"]
    limits.check_modal(view)
    return view


def state(view: JSON, answers: dict[str, Any]) -> JSON:
    """`view.state.values` for answers given by field label: a string/number (typed), a bool (radio Yes/No), an
    option title or a list of titles (select/radio/checkboxes), or a raw state dict. Others keep their defaults."""
    values: JSON = {}
    for block in view["blocks"]:
        if block["type"] != "input":
            continue
        element = block["element"]
        label = block["label"]["text"]
        answer = answers.get(label, _initial(element))
        if answer is None:
            continue
        values[block["block_id"]] = {ids.FIELD_ACTION: _widget(element, answer)}
    return values


def _initial(element: JSON) -> Any:
    """What Slack reports for an untouched input: its initial value."""
    kind = element["type"]
    if "initial_value" in element:
        return {"type": kind, "value": element["initial_value"]}
    if "initial_date" in element:
        return {"type": kind, "selected_date": element["initial_date"]}
    if "initial_date_time" in element:
        return {"type": kind, "selected_date_time": element["initial_date_time"]}
    if "initial_option" in element:
        return {"type": kind, "selected_option": element["initial_option"]}
    if "initial_options" in element:
        return {"type": kind, "selected_options": element["initial_options"]}
    return None


def _widget(element: JSON, answer: Any) -> JSON:
    kind = element["type"]
    if isinstance(answer, dict):
        return answer
    options = {o["text"]["text"]: o for o in element.get("options", [])}
    if isinstance(answer, bool):
        return {"type": kind, "selected_option": options["Yes" if answer else "No"]}
    if isinstance(answer, list):
        return {"type": kind, "selected_options": [options[a] for a in answer]}
    if kind in ("static_select", "radio_buttons"):
        return {"type": kind, "selected_option": options[answer]}
    if kind == "datepicker":
        return {"type": kind, "selected_date": answer}
    return {"type": kind, "value": str(answer)}


async def submit(slack: FakeSlack, view: JSON, values: JSON, user: str = "U1") -> JSON:
    payload = view_submission(user, view["id"], view["callback_id"], view["private_metadata"], values,
                              blocks=view["blocks"])
    return await slack.send_envelope("interactive", payload)


async def close(slack: FakeSlack, view: JSON, user: str = "U1") -> JSON:
    return await slack.send_envelope("interactive",
                                     view_closed(user, view["id"], view["callback_id"], view["private_metadata"]))


async def raw_result(slack: FakeSlack, thread: str) -> JSON:
    """The server-everything tool result posted in the thread: its `Raw result: {...}` JSON."""
    call = await slack.wait_for_call(
        "chat.postMessage", lambda c: c.args.get("thread_ts") == thread and "Raw result" in str(c.args.get("text")))
    text = str(call.args["text"]).replace("&gt;", ">").replace("&lt;", "<").replace("&amp;", "&")
    result: JSON = json.loads(text.split("Raw result:", 1)[1])
    return result
