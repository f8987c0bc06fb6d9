"""Translating raw Matrix events into core values, without a network."""

from __future__ import annotations

from typing import Any

from adapters.matrix import translate
from adapters.matrix.outbox import notice_limiter
from adapters.matrix.settings import MatrixSettings
from bridge.door.model import Actor, ConversationKey

BOT = "@bot:example.org"
ADA = Actor("matrix", "@ada:example.org", "Ada")


def text_event(body: str, **content: Any) -> dict[str, Any]:
    return {"type": "m.room.message", "event_id": "$e", "sender": ADA.user_id, "origin_server_ts": 1,
            "content": {"msgtype": "m.text", "body": body, **content}}


def message(body: str, *, direct: bool = False, bot_thread: bool = False, scope: translate.Scope = "thread",
            content: dict[str, Any] | None = None) -> Any:
    text = translate.text_in("!r", text_event(body, **(content or {})), BOT)
    assert text is not None
    return translate.message_in(text, ADA, workspace="example.org", scope=scope, bot_id=BOT, bot_name="MCP Bot",
                                direct=direct, bot_thread=bot_thread)


def test_command_prefix_is_explicit_and_starts_a_thread() -> None:
    m = message("!mcp call everything echo {\"message\": \"hi\"}")
    assert m.explicit_command and m.text == 'call everything echo {"message": "hi"}'
    assert m.conversation == ConversationKey("matrix", "example.org", "!r", "$e")


def test_thread_and_channel_and_user_scopes() -> None:
    thread = {"m.relates_to": {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": True,
                               "m.in_reply_to": {"event_id": "$x"}}}
    assert message("!mcp help", content=thread).conversation.thread == "$root"
    assert message("!mcp help", scope="channel").conversation == ConversationKey("matrix", "example.org", "!r")
    assert message("!mcp help", scope="user").conversation.user == ADA.user_id


def test_mentions_and_dms_address_the_bot_other_talk_does_not() -> None:
    assert message("hello everyone") is None
    assert message("help") is None  # a command word alone in a busy room is people talking
    assert message("MCP Bot: tools").text == "tools"
    assert message("bot, !mcp servers").explicit_command
    assert message("what now?", content={"m.mentions": {"user_ids": [BOT]}}).addressed
    assert message("tools", direct=True).text == "tools"
    assert message("and then?", bot_thread=True).addressed


def test_reply_fallback_is_stripped_and_notices_are_ignored() -> None:
    assert translate.strip_reply_fallback("> <@bot:x> question\n> more\n\n42") == "42"
    notice = text_event("hi")
    notice["content"]["msgtype"] = "m.notice"
    assert translate.text_in("!r", notice, BOT) is None


def test_fallback_reply_of_a_thread_is_not_a_real_reply() -> None:
    rel = translate.relation({"m.relates_to": {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": True,
                                               "m.in_reply_to": {"event_id": "$last"}}})
    assert (rel.thread, rel.reply_to) == ("$root", None)
    rel = translate.relation({"m.relates_to": {"rel_type": "m.thread", "event_id": "$root",
                                               "m.in_reply_to": {"event_id": "$q"}}})
    assert rel.reply_to == "$q"


def test_votes_and_reactions() -> None:
    vote = translate.vote_in("!r", {"type": "org.matrix.msc3381.poll.response", "event_id": "$v", "sender": "@a:x",
                                    "origin_server_ts": 5, "content": {
                                        "m.relates_to": {"rel_type": "m.reference", "event_id": "$poll"},
                                        "org.matrix.msc3381.poll.response": {"answers": ["1", "2"]}}})
    assert vote is not None and (vote.poll_id, vote.answers, vote.timestamp) == ("$poll", ("1", "2"), 5)
    stable = translate.vote_in("!r", {"type": "m.poll.response", "content": {
        "m.relates_to": {"rel_type": "m.reference", "event_id": "$p"}, "m.selections": ["yes"]}})
    assert stable is not None and stable.answers == ("yes",)
    reaction = translate.reaction_in("!r", {"type": "m.reaction", "sender": "@a:x", "content": {
        "m.relates_to": {"rel_type": "m.annotation", "event_id": "$card", "key": "✔️"}}})
    assert reaction is not None and (reaction.target, reaction.key) == ("$card", "✅")
    assert translate.normalise_key("1️⃣") == "1️⃣"


def test_settings_policy() -> None:
    s = MatrixSettings.from_mapping({"homeserver": "https://hs.example.org/", "user_id": "@bot:example.org"})
    assert s.homeserver == "https://hs.example.org" and s.e2ee == "optional" and s.encryption
    assert s.user_allowed("@ada:example.org") and not s.user_allowed("@eve:evil.org")
    s = MatrixSettings.from_mapping({"homeserver": "http://x", "user_id": "@bot:x", "allowed_users": ["@*:evil.org"],
                                     "allowed_rooms": ["!a"], "e2ee": "off"})
    assert s.user_allowed("@eve:evil.org") and not s.user_allowed("@ada:x")
    assert s.room_allowed("!a") and not s.room_allowed("!b") and not s.encryption


def test_throttle() -> None:
    now = [0.0]
    throttle = notice_limiter(clock=lambda: now[0])
    assert throttle.allow("k") and not throttle.allow("k") and throttle.allow("other")
    now[0] = 31
    assert throttle.allow("k")
