"""Block Kit payloads checked with Slack's own models (`slack_sdk.models`), as the fake receives them.

Slack refuses a whole message or view over one value it cannot take (`invalid_blocks`); the fake does the same, so
every test that drives the adapter through it also checks every payload. The models are parsed from the JSON the
app sent, and `to_dict()` runs `validate_json()` on every object in the tree (blocks, elements, text and option
objects). Parsing drops keys a model does not know, so a round trip that loses a key is a problem too: Slack
refuses unknown fields in blocks (the message names the JSON pointer, as Slack's own `[ERROR]` messages do).

Where the models are looser than Slack, `tests/adapters/slack/limits.py` checks the rest on what the renderer
produces: slack_sdk does not compare a `plain_text_input`'s `initial_value` with its `max_length`, nor a
`number_input`'s numbers with its bounds, nor a datepicker's `initial_date` beyond its pattern (`2026-02-31` passes;
the renderer sends only real dates). Its datetimepicker check allows 0 to 9999999999 (Slack's ten digits) although
its message says 99999999.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

JSON = dict[str, Any]

VIEW_METHODS = frozenset({"views.open", "views.update", "views.push", "views.publish"})
MESSAGE_METHODS = frozenset({"chat.postMessage", "chat.update", "chat.postEphemeral", "response_url"})

_SLACK_ADDS = frozenset({"id", "team_id", "bot_id", "app_id", "root_view_id", "previous_view_id", "hash", "state"})
"""View fields Slack fills in; an app sends none of them, and the model need not see them back."""


def payload_problems(method: str, args: JSON) -> list[str]:
    """Why Slack would refuse the Block Kit in one Web API call (or `response_url` post), or [] when it fits."""
    problems: list[str] = []
    if method in VIEW_METHODS and "view" in args:
        problems += view_problems(args["view"], "/view")
    if method in MESSAGE_METHODS and "blocks" in args:
        problems += blocks_problems(args["blocks"], "/blocks")
    return problems


def ack_problems(payload: JSON) -> list[str]:
    """A listener's ack body: `response_action` `update` or `push` carries a view, and it is checked the same."""
    if payload.get("response_action") in ("update", "push") and "view" in payload:
        return view_problems(payload["view"], "/view")
    return []


def view_problems(view: Any, where: str) -> list[str]:
    if not isinstance(view, dict):
        return [f"must be an object [json-pointer:{where}]"]
    if not isinstance(view.get("blocks"), list):
        return [f"missing required field: blocks [json-pointer:{where}/blocks]"]
    problems = _blocks_each(view["blocks"], f"{where}/blocks")
    if problems:
        return problems
    sent = {k: v for k, v in view.items() if k not in _SLACK_ADDS}
    return _model_problems(lambda d: View(**d), sent, where, nested=("blocks",))


def blocks_problems(blocks: Any, where: str) -> list[str]:
    """A message's blocks. An empty list is allowed: `chat.update` takes it to remove the blocks."""
    if not isinstance(blocks, list):
        return [f"must be a list [json-pointer:{where}]"]
    if len(blocks) > 50:  # Slack's limit for a message; slack_sdk has no message model that checks it
        return [f"no more than 50 items allowed [json-pointer:{where}]"]
    return _blocks_each(blocks, where)


def _blocks_each(blocks: list[Any], where: str) -> list[str]:
    problems: list[str] = []
    for i, block in enumerate(blocks):
        problems += _model_problems(Block.parse, block, f"{where}/{i}")
    return problems


def _model_problems(build: Callable[[JSON], Any], data: Any, where: str, nested: tuple[str, ...] = ()) -> list[str]:
    """Build the model from `data`, validate every object in it, and report keys the model dropped."""
    if not isinstance(data, dict):
        return [f"must be an object [json-pointer:{where}]"]
    try:
        parsed = build(data)
        if parsed is None:  # Block.parse's answer to a type it does not know
            return [f"unsupported type: {data.get('type')!r} [json-pointer:{where}]"]
        again = parsed.to_dict()
    except (SlackObjectFormationError, TypeError, ValueError, AttributeError, KeyError) as e:
        return [f"{e} [json-pointer:{where}]"]
    return [f"unknown or empty field [json-pointer:{where}{path}]" for path in _lost(data, again, skip=nested)]


def _lost(sent: Any, kept: Any, path: str = "", skip: tuple[str, ...] = ()) -> list[str]:
    """JSON pointers of what was sent but is not in the model's round trip (an unknown key, an empty list)."""
    if isinstance(sent, dict):
        if not isinstance(kept, dict):
            return [path]
        lost: list[str] = []
        for key, value in sent.items():
            if key in skip:
                continue
            if key not in kept:
                lost.append(f"{path}/{key}")
            else:
                lost += _lost(value, kept[key], f"{path}/{key}")
        return lost
    if isinstance(sent, list):
        if not isinstance(kept, list) or len(kept) != len(sent):
            return [path]
        return [p for i, (a, b) in enumerate(zip(sent, kept, strict=True)) for p in _lost(a, b, f"{path}/{i}")]
    return []


def check_http_ack(text: str) -> None:
    """In HTTP mode a listener's ack is the HTTP response, which goes to the test rather than through the fake: the
    test's sender checks it here, and a view Slack would refuse fails the test."""
    try:
        payload = json.loads(text) if text.strip() else None
    except ValueError:
        return  # plain text acks carry no Block Kit
    problems = ack_problems(payload) if isinstance(payload, dict) else []
    if problems:
        raise AssertionError(f"Slack would have refused the ack's view: {' | '.join(problems)}")
