"""Matrix events (their raw JSON, as nio keeps it in `event.source`) turned into core values. Pure.

Working on the raw dicts rather than nio's classes keeps this testable without nio and makes plain and decrypted
events look the same (nio copies the cleartext `m.relates_to` of an encrypted event into the decrypted content).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adapters.matrix.render import POLL_RESPONSE, POLL_RESPONSE_STABLE
from bridge.door.model import Actor, ConversationKey, ConversationScope, MessageIn, conversation_key

PLATFORM = "matrix"
PREFIX = "!mcp"
Scope = ConversationScope


@dataclass(frozen=True, slots=True)
class Relation:
    thread: str | None = None
    """The thread root, when the event is in a thread."""
    reply_to: str | None = None
    """The event this one really replies to (a thread's fallback reply is not one)."""
    target: str | None = None
    """For annotations, references and edits: the event they point at."""
    rel_type: str | None = None
    fallback: str | None = None
    """A thread message's reply fallback: the latest event in the thread when it was sent (Element sets it)."""


def relation(content: Mapping[str, Any]) -> Relation:
    rel = content.get("m.relates_to")
    if not isinstance(rel, Mapping):
        return Relation()
    rel_type = rel.get("rel_type") if isinstance(rel.get("rel_type"), str) else None
    event_id = rel.get("event_id") if isinstance(rel.get("event_id"), str) else None
    in_reply = rel.get("m.in_reply_to")
    reply = in_reply.get("event_id") if isinstance(in_reply, Mapping) else None
    reply = reply if isinstance(reply, str) else None
    if rel_type == "m.thread":
        falling_back = bool(rel.get("is_falling_back"))
        return Relation(thread=event_id, reply_to=None if falling_back else reply, rel_type=rel_type,
                        fallback=reply if falling_back else None)
    return Relation(reply_to=reply, target=event_id, rel_type=rel_type)


@dataclass(frozen=True, slots=True)
class TextIn:
    room_id: str
    event_id: str
    sender: str
    body: str
    """Without the reply fallback (`> ` quote lines) older clients still send."""
    relation: Relation
    mentions_bot: bool


@dataclass(frozen=True, slots=True)
class VoteIn:
    room_id: str
    event_id: str
    sender: str
    poll_id: str
    answers: tuple[str, ...]
    timestamp: int


@dataclass(frozen=True, slots=True)
class ReactionIn:
    room_id: str
    event_id: str
    sender: str
    target: str
    key: str


@dataclass(frozen=True, slots=True)
class RedactionIn:
    """An event taken back: how Element removes a reaction (a second tap on it)."""

    room_id: str
    event_id: str
    sender: str
    redacts: str
    timestamp: int


def strip_reply_fallback(body: str) -> str:
    lines = body.split("\n")
    if not lines or not lines[0].startswith("> "):
        return body
    while lines and lines[0].startswith(">"):
        lines.pop(0)
    return "\n".join(lines).lstrip("\n")


def text_in(room_id: str, source: Mapping[str, Any], bot_id: str) -> TextIn | None:
    """An `m.text` (or `m.emote`) message from someone; notices are other bots talking and are ignored."""
    content = source.get("content")
    if not isinstance(content, Mapping) or content.get("msgtype") not in ("m.text", "m.emote"):
        return None
    if isinstance(content.get("m.new_content"), Mapping):
        return None  # an edit: answers are what was sent first; edits are not re-read as new answers
    body = content.get("body")
    if not isinstance(body, str):
        return None
    mentions = content.get("m.mentions")
    ids = mentions.get("user_ids") if isinstance(mentions, Mapping) else None
    html = content.get("formatted_body") if isinstance(content.get("formatted_body"), str) else ""
    mentioned = (isinstance(ids, list) and bot_id in ids) or f"matrix.to/#/{bot_id}" in str(html)
    return TextIn(room_id, str(source.get("event_id", "")), str(source.get("sender", "")),
                  strip_reply_fallback(body), relation(content), bool(mentioned))


def vote_in(room_id: str, source: Mapping[str, Any]) -> VoteIn | None:
    content = source.get("content")
    if source.get("type") not in (POLL_RESPONSE, POLL_RESPONSE_STABLE) or not isinstance(content, Mapping):
        return None
    rel = relation(content)
    if rel.rel_type != "m.reference" or not rel.target:
        return None
    if source.get("type") == POLL_RESPONSE:
        block = content.get(POLL_RESPONSE)
        answers = block.get("answers") if isinstance(block, Mapping) else None
    else:
        answers = content.get("m.selections")
    if not isinstance(answers, list):
        return None
    ts = source.get("origin_server_ts")
    return VoteIn(room_id, str(source.get("event_id", "")), str(source.get("sender", "")), rel.target,
                  tuple(str(a) for a in answers), ts if isinstance(ts, int) else 0)


def reaction_in(room_id: str, source: Mapping[str, Any]) -> ReactionIn | None:
    content = source.get("content")
    if source.get("type") != "m.reaction" or not isinstance(content, Mapping):
        return None
    rel = content.get("m.relates_to")
    if not isinstance(rel, Mapping) or rel.get("rel_type") != "m.annotation":
        return None
    target, key = rel.get("event_id"), rel.get("key")
    if not isinstance(target, str) or not isinstance(key, str):
        return None
    return ReactionIn(room_id, str(source.get("event_id", "")), str(source.get("sender", "")), target,
                      normalise_key(key))


def redaction_in(room_id: str, source: Mapping[str, Any]) -> RedactionIn | None:
    if source.get("type") != "m.room.redaction":
        return None
    content = source.get("content")
    # Room versions 1-10 put `redacts` at the top level; 11 and later in the content (servers send both).
    redacts = source.get("redacts") or (content.get("redacts") if isinstance(content, Mapping) else None)
    if not isinstance(redacts, str):
        return None
    ts = source.get("origin_server_ts")
    return RedactionIn(room_id, str(source.get("event_id", "")), str(source.get("sender", "")), redacts,
                       ts if isinstance(ts, int) else 0)


_KEYCAP = re.compile(r"^([0-9])\ufe0f?\u20e3$")
_SKIN_TONES = re.compile("[\U0001f3fb-\U0001f3ff]")


def normalise_key(key: str) -> str:
    """Reaction keys as clients send them: with or without the emoji variation selector (Element X adds it to 👍),
    keycaps with or without it, any skin tone, ✔️ for ✅."""
    keycap = _KEYCAP.match(key)
    if keycap:
        return keycap.group(1) + "\ufe0f\u20e3"
    key = _SKIN_TONES.sub("", key.replace("\ufe0f", ""))
    return {"✔": "✅", "☑": "✅", "✖": "❌", "❎": "❌", "⛔": "🚫"}.get(key, key)


def command_text(body: str) -> str | None:
    """The command after `!mcp`, or None when the message is not a command."""
    stripped = body.strip()
    head = stripped.split(None, 1)[0].lower() if stripped else ""
    if head != PREFIX:
        return None
    return stripped[len(PREFIX):].strip()


def without_mention(body: str, bot_id: str, bot_name: str) -> tuple[bool, str]:
    """Whether the message starts by naming the bot (`bot: ...`, `@bot:server ...`), and the rest of it."""
    localpart = bot_id[1:].split(":", 1)[0]
    names = [n for n in (bot_id, bot_name, localpart) if n]
    for name in sorted(names, key=len, reverse=True):
        match = re.match(rf"^\s*@?{re.escape(name.lstrip('@'))}\s*[:,]?\s+", body + " ", re.IGNORECASE)
        if match:
            return True, body[match.end():].strip() if match.end() <= len(body) else ""
    return False, body


def conversation(room_id: str, workspace: str, scope: Scope, *, thread: str | None, event_id: str,
                 user: str) -> ConversationKey:
    """The conversation a message belongs to. With `thread` scope a top-level message starts a thread of its own:
    the bot answers there, and that thread is the conversation."""
    return conversation_key(scope, PLATFORM, workspace, room_id, thread=thread or event_id, user=user)


def message_in(text: TextIn, actor: Actor, *, workspace: str, scope: Scope, bot_id: str, bot_name: str,
               direct: bool, bot_thread: bool) -> MessageIn | None:
    """A message for the host, or None when it is not meant for the bot (people talking among themselves)."""
    key = conversation(text.room_id, workspace, scope, thread=text.relation.thread, event_id=text.event_id,
                       user=text.sender)
    command = command_text(text.body)
    if command is not None:
        return MessageIn(key, actor, command, addressed=True, explicit_command=True)
    named, rest = without_mention(text.body, bot_id, bot_name)
    if named:
        command = command_text(rest)
        if command is not None:
            return MessageIn(key, actor, command, addressed=True, explicit_command=True)
    if named or text.mentions_bot or direct or bot_thread:
        return MessageIn(key, actor, rest if named else text.body, addressed=True)
    return None
