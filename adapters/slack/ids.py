"""The identifiers the Slack adapter puts into Block Kit and reads back: action ids, callback ids, block ids, the
values carried by buttons and the modal's `private_metadata`.

Kept in one place because rendering writes them and translation parses them; both sides must agree. Action ids are
constant per kind of button (listeners match on them); which interaction a click is about travels in the value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

ACCEPT = "mcp.accept"
DECLINE = "mcp.decline"
CANCEL = "mcp.cancel"
OPEN_FORM = "mcp.open_form"
WEB_FORM = "mcp.web_form"
OPEN_APP = "mcp.open_app"
"""Open a tool result's app (MCP Apps): the clicker gets their own link privately; the value is the view id."""
"""Fill in on the web: the click asks the core for the clicker's own one-time link, sent to them privately."""
OPEN_URL = "mcp.open_url"
"""A link button: Slack opens the URL in the person's browser and still sends us a click, which we only ack."""
CHOICE_PREFIX = "mcp.choice."
"""Inline answer buttons (`mcp.choice.0`, `mcp.choice.1`…): action ids must be unique within a block."""
STOP = "mcp.stop"
GRANT_PREFIX = "mcp.grant."
"""Accept and allow wider (`mcp.grant.conversation`, `mcp.grant.channel`): the scope travels in the action id."""
HOME_LINK = "mcp.home_link"

FORM_CALLBACK = "mcp.form"
CLOSED_CALLBACK = "mcp.closed"
"""The view that replaces a modal whose request has ended; closing it means nothing."""

FIELD_ACTION = "v"
"""The action id of every input element; the block id says which field it is."""


def field_block(index: int) -> str:
    """The block id of a form field's input: its position in the form (names may be long or odd)."""
    return f"f{index}"


def field_index(block_id: str) -> int | None:
    if block_id.startswith("f") and block_id[1:].isdigit():
        return int(block_id[1:])
    return None


def choice_action(index: int) -> str:
    return f"{CHOICE_PREFIX}{index}"


def grant_action(scope: str) -> str:
    return f"{GRANT_PREFIX}{scope}"


def grant_scope(action_id: str) -> str:
    return action_id.removeprefix(GRANT_PREFIX)


def choice_index(action_id: str) -> int | None:
    rest = action_id.removeprefix(CHOICE_PREFIX)
    return int(rest) if rest != action_id and rest.isdigit() else None


@dataclass(frozen=True, slots=True)
class ModalMeta:
    """What a modal remembers in `private_metadata` (≤3000 characters): which request, where its card is, which
    page, and the answers from earlier pages when they fit (`draft`), so that any worker can take the next page;
    the adapter keeps them too, for a draft that does not fit."""

    interaction_id: str
    channel: str = ""
    ts: str = ""
    page: int = 0
    draft: dict[str, Any] | None = None

    def dump(self) -> str:
        data: dict[str, Any] = {"i": self.interaction_id, "c": self.channel, "t": self.ts, "p": self.page}
        if self.draft is not None:
            data["d"] = self.draft
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def load(cls, text: str) -> ModalMeta | None:
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("i"), str):
            return None
        page = data.get("p", 0)
        draft = data.get("d")
        return cls(data["i"], str(data.get("c", "")), str(data.get("t", "")), page if isinstance(page, int) else 0,
                   draft if isinstance(draft, dict) else None)
