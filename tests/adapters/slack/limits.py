"""Block Kit's limits as assertions, applied to everything the renderer produces in these tests.

Numbers from Slack's Block Kit reference (and slack_sdk's model constants): 50 blocks a message, 100 a modal or
Home tab, 3000 characters a section text, 150 a header, 2000 an input label or hint, 24 a modal title/submit/close,
3000 private_metadata, 25 elements an actions block, 75/2000 a button's text/value, 100 options in a select and 10
in radio buttons or checkboxes, 75/150 an option's text/value, 150 a placeholder; email, URL and number inputs
only in modals; and about 12 000 characters of text in all a message's blocks (Slack answers `msg_blocks_too_long`
beyond it; slackapi/bolt-js#2509). Beyond sizes, what Slack is known to reject a whole view or message for
(`invalid_blocks`): a button URL that is not http(s) with a host or holds spaces, an `initial_value` longer than the
input's `max_length`, number strings in exponent form, decimals in an integer input, an initial number outside its
bounds, an `initial_date` not written YYYY-MM-DD, an `initial_date_time` outside 0 to 9999999999.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any
from urllib.parse import urlsplit

JSON = dict[str, Any]

MODAL_ONLY = {"email_text_input", "url_text_input", "number_input"}


MESSAGE_TEXT = 12_000


def check_message(blocks: list[JSON]) -> None:
    assert 0 < len(blocks) <= 50, f"{len(blocks)} blocks in a message"
    total = text_length(blocks)
    assert total <= MESSAGE_TEXT, f"{total} characters of text in a message's blocks"
    _check_blocks(blocks, "message")


def text_length(value: Any) -> int:
    """Characters in every text object (mrkdwn or plain_text) within `value`."""
    if isinstance(value, dict):
        if value.get("type") in ("mrkdwn", "plain_text") and isinstance(value.get("text"), str):
            return len(value["text"])
        return sum(text_length(v) for v in value.values())
    if isinstance(value, list):
        return sum(text_length(v) for v in value)
    return 0


def check_modal(view: JSON) -> None:
    assert view["type"] == "modal"
    blocks = view["blocks"]
    assert 0 < len(blocks) <= 100, f"{len(blocks)} blocks in a modal"
    for key in ("title", "submit", "close"):
        if key in view:
            _plain(view[key], 24)
    assert len(view.get("private_metadata", "")) <= 3000
    assert len(view.get("callback_id", "")) <= 255
    if any(b["type"] == "input" for b in blocks):
        assert "submit" in view, "a modal with inputs needs submit"
    _check_blocks(blocks, "modal")


def check_home(view: JSON) -> None:
    assert view["type"] == "home"
    assert 0 < len(view["blocks"]) <= 100
    _check_blocks(view["blocks"], "home")


def _check_blocks(blocks: list[JSON], surface: str) -> None:
    block_ids = [b["block_id"] for b in blocks if "block_id" in b]
    assert len(block_ids) == len(set(block_ids)), "block ids must be unique"
    for block in blocks:
        assert len(block.get("block_id", "")) <= 255
        kind = block["type"]
        if kind == "section":
            _text(block["text"], 3000)
            assert len(block.get("fields", [])) <= 10
        elif kind == "context":
            assert 0 < len(block["elements"]) <= 10
            for element in block["elements"]:
                _text(element, 3000)
        elif kind == "header":
            _plain(block["text"], 150)
        elif kind == "actions":
            assert 0 < len(block["elements"]) <= 25
            action_ids = [e["action_id"] for e in block["elements"]]
            assert len(action_ids) == len(set(action_ids)), "action ids must be unique within a block"
            for element in block["elements"]:
                _element(element, surface)
        elif kind == "input":
            assert surface != "message" or block["element"]["type"] not in MODAL_ONLY
            _plain(block["label"], 2000)
            if "hint" in block:
                _plain(block["hint"], 2000)
            _element(block["element"], surface)
        elif kind != "divider":
            raise AssertionError(f"unexpected block type {kind}")


def _element(element: JSON, surface: str) -> None:
    kind = element["type"]
    assert len(element["action_id"]) <= 255
    if kind in MODAL_ONLY:
        assert surface == "modal", f"{kind} is only allowed in modals"
    if "placeholder" in element:
        _plain(element["placeholder"], 150)
    if kind == "button":
        _plain(element["text"], 75)
        assert len(element.get("value", "")) <= 2000
        if "url" in element:
            url = element["url"]
            assert len(url) <= 3000
            assert urlsplit(url).scheme in ("http", "https") and urlsplit(url).hostname, f"bad button url {url!r}"
            assert url.isprintable() and not any(c.isspace() for c in url), f"bad button url {url!r}"
    elif kind == "plain_text_input":
        assert 0 <= element.get("min_length", 0) <= 3000
        assert 1 <= element.get("max_length", 3000) <= 3000
        assert len(element.get("initial_value", "")) <= element.get("max_length", 3000)
    elif kind == "number_input":
        assert isinstance(element["is_decimal_allowed"], bool)
        number = r"-?\d+(\.\d+)?" if element["is_decimal_allowed"] else r"-?\d+"
        for key in ("min_value", "max_value", "initial_value"):
            if key in element:
                assert isinstance(element[key], str), f"{key} must be a string"
                assert re.fullmatch(number, element[key]), f"{key} {element[key]!r} for this input"
        low, high = float(element.get("min_value", "-inf")), float(element.get("max_value", "inf"))
        assert low <= high
        if "initial_value" in element:
            assert low <= float(element["initial_value"]) <= high, "initial value outside the bounds"
    elif kind in ("static_select", "multi_static_select", "radio_buttons", "checkboxes"):
        options = element["options"]
        limit = 100 if "select" in kind else 10
        assert 0 < len(options) <= limit, f"{len(options)} options in {kind}"
        for option in options:
            _plain(option["text"], 75)
            assert len(option["value"]) <= 150
        for initial in ([element["initial_option"]] if "initial_option" in element else []) \
                + element.get("initial_options", []):
            assert initial in options, "initial options must be among the options"
    elif kind in ("external_select", "multi_external_select"):
        assert "options" not in element
    elif kind == "datepicker":
        if "initial_date" in element:
            assert re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", element["initial_date"]), element["initial_date"]
            dt.date.fromisoformat(element["initial_date"])  # a real date
    elif kind == "datetimepicker":
        if "initial_date_time" in element:
            seconds = element["initial_date_time"]
            assert isinstance(seconds, int) and 0 <= seconds <= 9_999_999_999, f"initial_date_time {seconds}"
    else:
        assert kind in ("email_text_input", "url_text_input"), f"unexpected element {kind}"
        assert len(element.get("initial_value", "")) <= 3000


def _text(obj: JSON, limit: int) -> None:
    assert obj["type"] in ("mrkdwn", "plain_text")
    assert 0 < len(obj["text"]) <= limit, f"text of {len(obj['text'])} characters (limit {limit})"


def _plain(obj: JSON, limit: int) -> None:
    assert obj["type"] == "plain_text"
    assert 0 < len(obj["text"]) <= limit, f"plain text of {len(obj['text'])} characters (limit {limit})"
