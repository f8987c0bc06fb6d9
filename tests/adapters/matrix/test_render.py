"""Rendering without a network: escaping, mentions, edits, relations, clean text and sizes."""

from __future__ import annotations

import time

from adapters.matrix import render
from adapters.matrix.markup import Mention, code, content_size, defang, fit, plain
from bridge.door.forms import Form
from bridge.door.model import Actor, ConversationKey, Detail, Interaction, Kind, ServerLabel

ADA = Actor("matrix", "@ada:example.org", "Ada")
ROOM = ConversationKey("matrix", "example.org", "!room", "$thread")


def interaction(form: Form, **extra: object) -> Interaction:
    fields: dict[str, object] = {
        "id": "i1", "kind": Kind.FORM, "server": ServerLabel("evil", "<b>Evil</b> @room"), "conversation": ROOM,
        "requester": ADA, "approvers": frozenset({ADA.key}), "message": "Hi @room <script>x</script> "
        "see https://matrix.to/#/@bob:example.org", "form": form, "expires_at": time.time() + 600, **extra}
    return Interaction(**fields)  # type: ignore[arg-type]


def test_card_escapes_server_text_and_mentions_only_the_person() -> None:
    i = interaction(Form(), kind=Kind.TOOL, quick_accept=True)
    text = render.card(i, [Mention(ADA.user_id, "Ada")], now=time.time())
    content = render.message(text, msgtype="m.text", mentions=[ADA.user_id])
    assert "<script>" not in content["formatted_body"] and "&lt;script&gt;" in content["formatted_body"]
    assert "<b>Evil</b>" not in content["formatted_body"]
    assert "@room" not in content["body"] and "@room" not in content["formatted_body"]
    assert "matrix.to" not in content["body"]
    # the one link is ours: a pill for the person the card waits for, in HTML only
    assert content["formatted_body"].count('href="https://matrix.to/#/@ada:example.org"') == 1
    assert content["m.mentions"] == {"user_ids": [ADA.user_id]}


def test_plain_messages_carry_empty_mentions_and_a_thread_relation() -> None:
    content = render.message(plain("done"), thread="$root", latest="$q")
    assert content["m.mentions"] == {}
    assert content["m.relates_to"] == {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": True,
                                       "m.in_reply_to": {"event_id": "$q"}}


def test_url_card_shows_the_url_and_flags_a_look_alike_host() -> None:
    url = "https://аpple.com/login?next=/a&b=<c>"  # a Cyrillic а
    i = interaction(Form(), kind=Kind.URL, url=url, quick_accept=True)
    content = render.message(render.card(i, [], now=time.time()))
    assert url in content["body"]
    assert "аpple.com (really xn--pple-43d.com: " in content["body"]
    assert "&lt;c&gt;" in content["formatted_body"] and "<code>" in content["formatted_body"]
    hidden = interaction(Form(), kind=Kind.URL, url="https://example.org/\u202egnp.exe", quick_accept=True)
    assert "/[U+202E]gnp.exe" in render.message(render.card(hidden, [], now=time.time()))["body"]


def test_edit_replaces_without_pinging_again() -> None:
    new = render.message(plain("Accepted"), msgtype="m.text", mentions=["@ada:example.org"],
                         thread="$t", mark={"part": "card"})
    edit = render.edit("$card", new)
    assert edit["m.relates_to"] == {"rel_type": "m.replace", "event_id": "$card"}
    assert edit["m.new_content"]["body"] == "Accepted" and "m.relates_to" not in edit["m.new_content"]
    assert edit["m.mentions"] == {} and edit["m.new_content"]["m.mentions"] == {}
    assert edit["body"].startswith("* ")


def test_defang_ignores_case_and_adds_nothing_invisible() -> None:
    for text in ("@room", "@Room", "@ROOM", "@rOoM", "matrix.to", "Matrix.To", "MATRIX.TO"):
        defanged = defang(f"hi {text}!")
        assert text not in defanged and text.lower() not in defanged.lower()
        assert defanged.isprintable()
    assert defang("@room matrix.to") == "@ room matrix[.]to"


def test_links_in_code_stay_intact_in_html() -> None:
    url = "https://matrix.to/#/@bob:example.org?via=a&b=<c>"
    text = code(url)
    assert text.html == "<code>https://matrix.to/#/@bob:example.org?via=a&amp;b=&lt;c&gt;</code>"
    assert "matrix.to" not in text.body and text.body == url.replace("matrix.to", "matrix[.]to")
    i = interaction(Form(), kind=Kind.URL, url=url, quick_accept=True)
    content = render.message(render.card(i, [], now=time.time()))
    assert "<code>https://matrix.to/#/@bob:example.org" in content["formatted_body"]


def test_server_text_loses_control_bidi_and_invisible_characters() -> None:
    hostile = "a\x1b[2Jb\u202ec\u200bd\ufeffe\u00adf\u061cg\u2060h\x07\x9bi"
    text = plain(hostile)
    assert text.body == "a[2Jbcdefghi" and text.html == "a[2Jbcdefghi"
    assert plain("👩\u200d💻").body == "👩\u200d💻"  # the joiner of emoji sequences stays


def test_every_part_is_cut_to_its_budget_in_bytes_after_escaping() -> None:
    for raw in ("<" * 50_000, "é" * 50_000, "\U0001f600" * 50_000, "x" * 50_000):
        cut = fit(raw, 4_000)
        assert cut.cost <= 4_000 and "more characters]" in cut.body
    i = interaction(Form(), kind=Kind.TOOL, quick_accept=True, message="<&>\"" * 30_000,
                    details=tuple(Detail(f"d{n}", "<" * 30_000) for n in range(50)))
    content = render.message(render.card(i, [Mention(ADA.user_id, "Ada")], now=time.time()), msgtype="m.text")
    assert content_size(render.edit("$x", content)) <= render.CONTENT_LIMIT
    long = render.message(plain("<" * 100_000))
    assert content_size(render.edit("$x", long)) <= render.CONTENT_LIMIT


def test_kept_login_matches_the_configured_user_in_any_case() -> None:
    from adapters.matrix.login import same_user

    assert same_user("@mcp-bot:example.org", "@MCP-Bot:Example.org")
    assert same_user("@mcp-bot:example.org", "mcp-bot")
    assert not same_user("@mcp-bot:example.org", "@mcp-bot:other.org")
    assert not same_user("@mcp-bot:example.org", "@mcp-bot2:example.org")
