"""Slack payloads into core values (pure): messages, conversation keys, clicks and modal answers.

This is the one place that reads Slack's JSON; what leaves it is `MessageIn`, `ConversationKey`, `Actor` and typed
form content. Widget values are turned into the field's JSON type with `Field.coerce`, so a number input's "42"
becomes 42 and a date-time picker's UNIX seconds an RFC 3339 string; the core validates the whole answer after.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from adapters.slack import ids
from adapters.slack.elements import NO, YES, kept_default, unix_to_rfc3339
from bridge.door.forms import Field, FieldKind, Form
from bridge.door.model import Actor, ConversationKey, ConversationScope, JSONValue, MessageIn, conversation_key

PLATFORM = "slack"
Scope = ConversationScope

_PERSON_SUBTYPES = frozenset({None, "file_share", "thread_broadcast"})
"""Message subtypes a person writes; the rest are edits, joins, topic changes and bot posts."""


def actor(user_id: str, display_name: str = "") -> Actor:
    return Actor(PLATFORM, user_id, display_name)


def conversation(scope: Scope, team: str, channel: str, ts: str, thread_ts: str | None, user: str,
                 is_dm: bool = False) -> ConversationKey:
    """Which conversation a message belongs to.

    With scope `thread` a message in a channel starts a thread (its own ts) or continues one (thread_ts): the bot
    answers there. A DM is one conversation unless the person uses threads in it. Scope `channel` is the whole
    channel, `user` each person's own conversation in it.
    """
    return conversation_key(scope, PLATFORM, team, channel, thread=thread_ts or ("" if is_dm else ts), user=user)


def strip_mention(text: str, bot_user_id: str) -> str:
    """Remove the bot's own mention(s) (`<@UBOT>` or `<@UBOT|name>`) from a message."""
    if not bot_user_id:
        return text.strip()
    return re.sub(rf"<@{re.escape(bot_user_id)}(\|[^>]*)?>", " ", text).strip()


def unescape(text: str) -> str:
    """Slack escapes &, < and > in message text; commands need the characters as typed (JSON arguments)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


_PUBLIC_WORDS = {"call": 3, "prompt": 3, "tools": 2, "prompts": 2, "resources": 2}
"""How many words of a command the channel may see: the command, and the server and tool or prompt it names."""


def public_command(text: str) -> tuple[str, bool]:
    """What of a slash command's text its public line shows (`call everything echo`, not the arguments), and
    whether anything was left out."""
    words = text.split()
    if not words:
        return "", False
    keep = _PUBLIC_WORDS.get(words[0].lower(), 1)
    return " ".join(words[:keep]), len(words) > keep


def is_person_message(event: Mapping[str, Any], bot_user_id: str) -> bool:
    """False for the bot's own messages, other bots, edits and joins: only what a person wrote reaches the core.

    An edited message comes back as a `message_changed` subtype, and an edited mention as a second `app_mention`
    with an `edited` key: neither is a new command."""
    if event.get("bot_id") or event.get("edited") or event.get("subtype") not in _PERSON_SUBTYPES:
        return False
    user = event.get("user")
    return isinstance(user, str) and bool(user) and user != bot_user_id


def message_identity(event: Mapping[str, Any]) -> str:
    """What identifies one message a person sent, across its `message` and `app_mention` events and Slack's
    redeliveries: the client's message id, else the channel and timestamp."""
    client_id = event.get("client_msg_id")
    if isinstance(client_id, str) and client_id:
        return client_id
    return f"{event.get('channel', '')}/{event.get('ts', '')}"


def message_in(event: Mapping[str, Any], team: str, bot_user_id: str, scope: Scope, who: Actor, *,
               addressed: bool, explicit_command: bool = False) -> MessageIn:
    channel = str(event.get("channel", ""))
    is_dm = event.get("channel_type") == "im" or channel.startswith("D")
    key = conversation(scope, team, channel, str(event.get("ts", "")), event.get("thread_ts"), who.user_id, is_dm)
    text = unescape(strip_mention(str(event.get("text", "")), bot_user_id))
    return MessageIn(key, who, text, addressed=addressed, explicit_command=explicit_command)


# -- decisions -----------------------------------------------------------------------------------------------------


def option_value(f: Field, index: str) -> JSONValue:
    """The server's value for an option we rendered with value `index` (see elements.py)."""
    if f.kind is FieldKind.BOOLEAN:
        if index in (YES, NO):
            return index == YES
        raise ValueError("answer yes or no")
    if not index.isdigit() or int(index) >= len(f.options):
        raise ValueError("not one of the options")
    return f.options[int(index)].value


def inline_content(form: Form, action_id: str) -> dict[str, JSONValue] | None:
    """The content of an inline answer button (`mcp.choice.N` on a one-field form), or None if it is not one."""
    index = ids.choice_index(action_id)
    if index is None or len(form.fields) != 1:
        return None
    f = form.fields[0]
    try:
        return {f.name: option_value(f, str(index))}
    except ValueError:
        return None


def widget_value(f: Field, state: Mapping[str, Any]) -> JSONValue:
    """One input's raw answer in the field's terms, before coercion; None when nothing was entered."""
    kind = state.get("type")
    if kind == "datepicker":
        return state.get("selected_date") or None
    if kind == "datetimepicker":
        seconds = state.get("selected_date_time")
        return unix_to_rfc3339(seconds) if isinstance(seconds, int | float) and not isinstance(seconds, bool) \
            else None
    if "selected_options" in state:
        chosen = state.get("selected_options") or []
        values = [option_value(f, str(o.get("value", ""))) for o in chosen if isinstance(o, Mapping)]
        return values or None
    if "selected_option" in state:
        picked = state.get("selected_option")
        return option_value(f, str(picked.get("value", ""))) if isinstance(picked, Mapping) else None
    value = state.get("value")
    return value if isinstance(value, str) and value != "" else None


def page_answers(form: Form, indices: Iterable[int], values: Mapping[str, Any]) -> tuple[dict[str, JSONValue],
                                                                                        dict[str, str]]:
    """Typed answers for the fields of one modal page, and per-field errors (keyed by field name).

    `values` is `view.state.values`: `{block_id: {action_id: state}}`. Unanswered fields are left out; whether
    they may be is the core's call (required fields are also enforced by Slack's non-optional inputs). A text
    default too long to pre-fill (`elements.kept_default`) is the answer when its input is left empty.
    """
    content: dict[str, JSONValue] = {}
    errors: dict[str, str] = {}
    for index in indices:
        f = form.fields[index]
        state = (values.get(ids.field_block(index)) or {}).get(ids.FIELD_ACTION)
        try:
            raw = widget_value(f, state) if isinstance(state, Mapping) else None
            if raw is not None:
                content[f.name] = f.coerce(raw)
            elif (kept := kept_default(f)) is not None:
                content[f.name] = kept
        except ValueError as exc:
            errors[f.name] = str(exc)
    return content, errors


def block_errors(form: Form, indices: Iterable[int], errors: Mapping[str, str]) -> dict[str, str]:
    """Field errors as `response_action: errors` wants them: by block id of this page. Errors about fields on
    other pages (only possible for whole-form checks) are shown on the page's first input, naming the field."""
    on_page = {form.fields[i].name: ids.field_block(i) for i in indices}
    out: dict[str, str] = {}
    others: list[str] = []
    for name, reason in errors.items():
        if name in on_page:
            out[on_page[name]] = reason[:2000]
        else:
            title = form.field(name).title if name in form.names() else name
            others.append(f"{title}: {reason}")
    if others and on_page:
        first = next(iter(on_page.values()))
        out[first] = "; ".join([*([out[first]] if first in out else []), *others])[:2000]
    return out
