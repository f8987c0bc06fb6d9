"""Rendering without a network: escaping, mentions, poll shapes, edits and relations."""

from __future__ import annotations

import time

from adapters.matrix import render
from adapters.matrix.cards import Card, poll_fields
from bridge.forms import Field, FieldKind, Form, Option, form_from_schema
from bridge.model import Actor, ConversationKey, Interaction, Kind, ServerLabel

ADA = Actor("matrix", "@ada:example.org", "Ada")
ROOM = ConversationKey("matrix", "example.org", "!room", "$thread")


def interaction(form: Form, **extra: object) -> Interaction:
    fields: dict[str, object] = {
        "id": "i1", "kind": Kind.FORM, "server": ServerLabel("evil", "<b>Evil</b> @room"), "conversation": ROOM,
        "requester": ADA, "approvers": frozenset({ADA.key}), "message": "Hi @room <script>x</script> "
        "see https://matrix.to/#/@bob:example.org", "form": form, "expires_at": time.time() + 600, **extra}
    return Interaction(**fields)  # type: ignore[arg-type]


def test_card_escapes_server_text_and_mentions_only_the_person() -> None:
    i = interaction(Form())
    text = render.card(i, [render.Mention(ADA.user_id, "Ada")], now=time.time())
    content = render.message(text, msgtype="m.text", mentions=[ADA.user_id])
    assert "<script>" not in content["formatted_body"] and "&lt;script&gt;" in content["formatted_body"]
    assert "<b>Evil</b>" not in content["formatted_body"]
    assert "@room" not in content["body"] and "@room" not in content["formatted_body"]
    assert "matrix.to" not in content["body"]
    # the one link is ours: a pill for the person the card waits for, in HTML only
    assert content["formatted_body"].count('href="https://matrix.to/#/@ada:example.org"') == 1
    assert content["m.mentions"] == {"user_ids": [ADA.user_id]}


def test_plain_messages_carry_empty_mentions_and_a_thread_relation() -> None:
    content = render.message(render.plain("done"), thread="$root", latest="$q")
    assert content["m.mentions"] == {}
    assert content["m.relates_to"] == {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": True,
                                       "m.in_reply_to": {"event_id": "$q"}}


def test_url_card_shows_the_full_url_and_its_host() -> None:
    url = "https://xn--80ak6aa92e.com/login?next=/a&b=<c>"
    i = interaction(Form(), kind=Kind.URL, url=url, quick_accept=True)
    content = render.message(render.card(i, [], now=time.time()))
    assert url in content["body"]
    assert "xn--80ak6aa92e.com (internationalised name" in content["body"]
    assert "&lt;c&gt;" in content["formatted_body"] and "<code>" in content["formatted_body"]


def test_poll_shapes_for_boolean_choice_and_multi() -> None:
    form = form_from_schema({"type": "object", "properties": {
        "ok": {"type": "boolean", "title": "OK?"},
        "pet": {"type": "string", "oneOf": [{"const": "c", "title": "Cat"}, {"const": "d", "title": "Dog"}]},
        "tags": {"type": "array", "maxItems": 2, "items": {"enum": ["a", "b", "c"]}}}})
    ok, pet, tags = form.fields
    start = render.poll_start(ok, thread="$t", latest="$l", mark={"interaction": "i1"})
    poll = start[render.POLL_START]
    assert poll["kind"] == "org.matrix.msc3381.poll.disclosed" and poll["max_selections"] == 1
    assert [a["id"] for a in poll["answers"]] == ["yes", "no"]
    assert start[render.TEXT].startswith("OK?") and "1. Yes" in start["body"]
    assert start["m.relates_to"]["rel_type"] == "m.thread"
    assert render.poll_start(tags, thread=None, latest=None, mark={})[render.POLL_START]["max_selections"] == 2
    assert render.poll_value(ok, ["no"]) is False
    assert render.poll_value(pet, ["2"]) == "d"
    assert render.poll_value(tags, ["3", "1", "2"]) == ["c", "a"]  # truncated to max_selections
    assert render.poll_value(pet, ["9"]) is None  # an unknown answer spoils the vote
    end = render.poll_end("$start", pet, "d")
    assert end["m.relates_to"] == {"rel_type": "m.reference", "event_id": "$start"}
    assert "Dog" in end[render.TEXT] and "org.matrix.msc3381.poll.end" in end


def test_more_than_twenty_options_is_a_question_not_a_poll() -> None:
    many = Field("n", FieldKind.CHOICE, "N", options=tuple(Option(str(i), str(i)) for i in range(21)))
    twenty = Field("t", FieldKind.CHOICE, "T", options=tuple(Option(str(i), str(i)) for i in range(20)))
    assert not render.pollable(many) and render.pollable(twenty)
    assert [f.name for f in poll_fields(interaction(Form(fields=(many, twenty))))] == ["t"]


def test_edit_replaces_without_pinging_again() -> None:
    new = render.message(render.plain("Accepted"), msgtype="m.text", mentions=["@ada:example.org"],
                         thread="$t", mark={"part": "card"})
    edit = render.edit("$card", new)
    assert edit["m.relates_to"] == {"rel_type": "m.replace", "event_id": "$card"}
    assert edit["m.new_content"]["body"] == "Accepted" and "m.relates_to" not in edit["m.new_content"]
    assert edit["m.mentions"] == {} and edit["m.new_content"]["m.mentions"] == {}
    assert edit["body"].startswith("* ")


def test_card_dialog_takes_poll_votes_and_skip() -> None:
    form = form_from_schema({"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string"}, "colour": {"type": "string", "enum": ["red", "blue"], "default": "red"},
        "note": {"type": "string"}}})
    card = Card.new(interaction(form), "!room", "$card", "$thread")
    assert card.dialog.answers["colour"] == "red"
    from adapters.matrix.cards import Poll

    poll = Poll("$poll", form.field("colour"))
    card.polls["$poll"] = poll
    assert card.vote(poll, "@ada:example.org", 10, "blue")
    assert not card.vote(poll, "@ada:example.org", 5, "red")  # an older response does not count
    assert card.reply("Ada").question is not None
    step = card.reply("skip")
    assert card.confirming and step.question is not None
    done = card.reply("accept")
    assert done.action == "accept" and done.content == {"name": "Ada", "colour": "blue"}


def test_polls_and_their_ends_carry_empty_mentions() -> None:
    ok = Field("ok", FieldKind.BOOLEAN, "Tell @room and @Ada")
    assert render.poll_start(ok, thread=None, latest=None, mark={})["m.mentions"] == {}
    assert render.poll_end("$start", ok, True)["m.mentions"] == {}


def test_defang_ignores_case() -> None:
    for text in ("@room", "@Room", "@ROOM", "@rOoM", "matrix.to", "Matrix.To", "MATRIX.TO"):
        defanged = render.defang(f"hi {text}!")
        assert text not in defanged and text.lower() not in defanged.lower()
        assert defanged.replace("\u2060", "") == f"hi {text}!"  # only an invisible joiner is added


def test_links_in_code_stay_intact_in_html() -> None:
    url = "https://matrix.to/#/@bob:example.org?via=a&b=<c>"
    text = render.code(url)
    assert text.html == "<code>https://matrix.to/#/@bob:example.org?via=a&amp;b=&lt;c&gt;</code>"
    assert "matrix.to" not in text.body and text.body.replace("\u2060", "") == url
    i = interaction(Form(), kind=Kind.URL, url=url, quick_accept=True)
    content = render.message(render.card(i, [], now=time.time()))
    assert "<code>https://matrix.to/#/@bob:example.org" in content["formatted_body"]


def test_skip_on_a_poll_withdraws_the_vote() -> None:
    form = form_from_schema({"type": "object", "properties": {
        "colour": {"type": "string", "enum": ["red", "blue"], "default": "red"}}})
    card = Card.new(interaction(form), "!room", "$card", "$thread")
    from adapters.matrix.cards import Poll

    poll = Poll("$poll", form.field("colour"))
    assert card.poll_reply(poll, "@ada:example.org", 10, "2") == "" and card.dialog.answers["colour"] == "blue"
    assert card.poll_reply(poll, "@ada:example.org", 20, "skip") == ""
    assert card.dialog.answers["colour"] == "red"  # back to the default


def test_kept_login_matches_the_configured_user_in_any_case() -> None:
    from adapters.matrix.login import same_user

    assert same_user("@mcp-bot:example.org", "@MCP-Bot:Example.org")
    assert same_user("@mcp-bot:example.org", "mcp-bot")
    assert not same_user("@mcp-bot:example.org", "@mcp-bot:other.org")
    assert not same_user("@mcp-bot:example.org", "@mcp-bot2:example.org")
