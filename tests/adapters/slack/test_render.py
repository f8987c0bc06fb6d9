"""Pure rendering: every card, modal and view within Block Kit's limits, with server text escaped."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from adapters.slack import ids, modal_pages, render
from adapters.slack.elements import element, matching_options
from adapters.slack.escape import mrkdwn, plain
from bridge.door.model import (
    Actor,
    ConversationKey,
    Detail,
    GrantOption,
    Interaction,
    Kind,
    Outcome,
    ServerLabel,
    Status,
    StatusView,
)
from tests.adapters.slack import limits
from tests.adapters.slack.interactions import (
    ADA,
    EVERY_FIELD,
    ROOM,
    form,
    interaction,
    one_field,
    roots,
    sampling,
    tool_approval,
)

JSON = dict[str, Any]


def buttons(blocks: list[JSON]) -> list[tuple[str, str]]:
    return [(e["action_id"], e["text"]["text"]) for b in blocks if b["type"] == "actions" for e in b["elements"]]


def texts(blocks: list[JSON]) -> str:
    return json.dumps(blocks, ensure_ascii=False)


def mrkdwn_texts(value: Any) -> str:
    """Every mrkdwn text in a payload: what Slack parses for mentions and links (plain_text it shows as is)."""
    if isinstance(value, dict):
        if value.get("type") == "mrkdwn":
            return str(value["text"]) + "\n"
        return "".join(mrkdwn_texts(v) for v in value.values())
    if isinstance(value, list):
        return "".join(mrkdwn_texts(v) for v in value)
    return ""


def all_cards() -> list[Interaction]:
    return [
        interaction(form=form(EVERY_FIELD)),
        interaction(form=one_field({"type": "boolean", "title": "Proceed?"})),
        interaction(kind=Kind.URL, url="https://example.com/connect?x=1", details=(Detail("Host", "example.com"),),
                    accept_label="Done", quick_accept=True),
        sampling(),
        interaction(Kind.SAMPLING_REVIEW, form=sampling().form, accept_label="Send", decline_label="Reject",
                    quick_accept=True),
        roots(),
        tool_approval(),
    ]


@pytest.mark.parametrize("card", all_cards(), ids=lambda i: i.kind.value)
def test_every_card_and_its_final_state_stay_within_block_kit_limits(card: Interaction) -> None:
    open_blocks = render.card(card)
    limits.check_message(open_blocks)
    assert "<@U1>" in open_blocks[0]["text"]["text"]  # the person it waits for, mentioned
    assert "everything (Everything Server)" in open_blocks[0]["text"]["text"]
    for status in (Status.ACCEPTED, Status.DECLINED, Status.CANCELLED, Status.EXPIRED, Status.FAILED):
        final = render.finished_card(card, Outcome(status, by=ADA if status is Status.ACCEPTED else None))
        limits.check_message(final)
        assert buttons(final) == []


def test_a_form_card_offers_fill_in_decline_and_cancel() -> None:
    blocks = render.card(interaction(form=form(EVERY_FIELD)))
    assert buttons(blocks) == [(ids.OPEN_FORM, "Fill in…"), (ids.DECLINE, "Decline"), (ids.CANCEL, "Cancel")]


def test_with_web_forms_on_form_cards_offer_the_web_but_approvals_do_not() -> None:
    blocks = render.card(interaction(form=form(EVERY_FIELD)), web=True)
    assert buttons(blocks) == [(ids.OPEN_FORM, "Fill in…"), (ids.WEB_FORM, "Fill in on the web"),
                               (ids.DECLINE, "Decline"), (ids.CANCEL, "Cancel")]
    assert "url" not in blocks[-1]["elements"][1]  # the card is public: the link is made for whoever clicks
    for approval in (sampling(), tool_approval(), roots()):
        assert ids.WEB_FORM not in [a for a, _ in buttons(render.card(approval, web=True))]
    text = render.web_link_text("https://bridge.example.org/form/abc.def")
    assert text.startswith(":globe_with_meridians: <https://bridge.example.org/form/abc.def|Open the form>")
    assert "<" not in render.web_link_text("https://bridge.example.org/a|b/form/x")  # shown as text, not a link


def test_a_single_boolean_or_small_choice_is_answered_inline() -> None:
    boolean = render.card(interaction(form=one_field({"type": "boolean", "title": "Proceed?"})))
    assert buttons(boolean) == [("mcp.choice.0", "Yes"), ("mcp.choice.1", "No"), (ids.DECLINE, "Decline"),
                                (ids.CANCEL, "Cancel")]
    small = render.card(interaction(form=one_field({"type": "string", "enum": ["a", "b", "c"],
                                                    "enumNames": ["Apple", "Banana", "Cherry"]})))
    assert [label for _, label in buttons(small)][:3] == ["Apple", "Banana", "Cherry"]
    six = render.card(interaction(form=one_field({"type": "string", "enum": list("abcdef")})))
    assert buttons(six)[0] == (ids.OPEN_FORM, "Fill in…")


def test_a_url_card_shows_the_full_url_and_host_and_links_without_fetching() -> None:
    url = "https://example.com/connect?state=" + "x" * 200
    card = interaction(kind=Kind.URL, url=url, details=(Detail("Host", "example.com"),), accept_label="Done",
                       quick_accept=True)
    blocks = render.card(card)
    text = texts(blocks)
    assert url in text and "*Host:* example.com" in text
    assert [b for b in blocks if b.get("text", {}).get("verbatim")]  # server text is never auto-linked
    link = blocks[-1]["elements"][0]
    assert (link["action_id"], link["url"]) == (ids.OPEN_URL, url)
    assert buttons(blocks)[1:] == [(ids.ACCEPT, "Done"), (ids.DECLINE, "Decline")]


def test_the_open_button_carries_the_url_as_the_browser_opens_it() -> None:
    card = interaction(kind=Kind.URL, url="HTTPS://Example.COM:443/caf\u00e9?q=1", accept_label="Done",
                       quick_accept=True)
    link = render.card(card)[-1]["elements"][0]
    assert (link["action_id"], link["url"]) == (ids.OPEN_URL, "https://example.com/caf%C3%A9?q=1")


def test_approvals_offer_approve_edit_deny_or_a_picker_when_nothing_can_be_approved_as_shown() -> None:
    assert buttons(render.card(sampling())) == [(ids.ACCEPT, "Approve"), (ids.OPEN_FORM, "Edit…"),
                                                (ids.DECLINE, "Deny")]
    assert buttons(render.card(tool_approval())) == [(ids.ACCEPT, "Approve"), (ids.DECLINE, "Deny")]
    assert "delete_repo" in texts(render.card(tool_approval()))
    assert buttons(render.card(roots())) == [(ids.OPEN_FORM, "Share…"), (ids.DECLINE, "Deny")]


def test_hostile_server_text_cannot_mention_broadcast_or_disguise_links() -> None:
    hostile = "<!channel> pay <@U123> now: <http://evil.example|click here> &amp; @here"
    card = interaction(form=one_field({"type": "string", "title": hostile, "description": hostile}),
                       message=hostile, server=ServerLabel("evil", hostile),
                       details=(Detail(hostile, hostile),), tool=hostile)
    for blocks in (render.card(card), render.finished_card(card, Outcome(Status.ACCEPTED, by=ADA)),
                   modal_pages.form_view(card, ids.ModalMeta(card.id))["blocks"]):
        text = mrkdwn_texts(blocks)
        for bad in ("<!channel>", "<@U123>", "<http", "|click here>", "@here"):
            assert bad not in text
        assert "&lt;!channel&gt;" in text and "&amp;amp;" in text
        assert "<@U1>" in text  # our own mention of the requester is kept
    home = render.home([(card, "https://fake.invalid/archives/C1/p1")])
    assert "<!channel>" not in mrkdwn_texts(home["blocks"])
    label = modal_pages.form_view(card, ids.ModalMeta(card.id))["blocks"][-1]["label"]
    assert label["type"] == "plain_text"  # shown verbatim by Slack, never parsed for mentions


def test_a_20000_character_message_is_capped_on_cards_modals_and_home() -> None:
    long = "word & " * 3000  # 21 000 characters, longer still once & is escaped
    card = interaction(form=form(EVERY_FIELD), message=long, details=(Detail("Arguments", long, 50_000),))
    limits.check_message(render.card(card))
    limits.check_message(render.finished_card(card, Outcome(Status.EXPIRED)))
    view = modal_pages.form_view(card, ids.ModalMeta(card.id))
    limits.check_modal(view)
    limits.check_home(render.home([(card, None)] * 60))
    message = render.card(card)[1]["text"]["text"]
    assert message.endswith("more characters not shown]") and "&amp" in message


def test_many_details_are_summarised_to_stay_under_50_blocks() -> None:
    card = interaction(Kind.ROOTS, details=tuple(Detail(f"root {i}", f"file:///r/{i}") for i in range(80)),
                       quick_accept=True)
    blocks = render.card(card)
    limits.check_message(blocks)
    assert "50 more details are not shown" in texts(blocks)


def test_a_form_with_more_fields_than_a_modal_holds_is_split_into_pages_without_losing_a_field() -> None:
    kinds = list(EVERY_FIELD["properties"].values())
    schema = {"type": "object", "properties": {f"f{i}": kinds[i % len(kinds)] for i in range(250)}}
    card = interaction(form=form(schema), message="m" * 5000)
    pages = modal_pages.pages(card)
    assert len(pages) == 3
    seen: list[str] = []
    for number in range(len(pages)):
        view = modal_pages.form_view(card, ids.ModalMeta(card.id, "C1", "1.2", number))
        limits.check_modal(view)
        assert ids.ModalMeta.load(view["private_metadata"]) == ids.ModalMeta(card.id, "C1", "1.2", number)
        assert view["submit"]["text"] == ("Accept" if number == 2 else "Next")
        seen += [b["block_id"] for b in view["blocks"] if b["type"] == "input"]
    assert seen == [ids.field_block(i) for i in range(250)]


def test_options_longer_than_slack_allows_are_mapped_to_indices_and_long_lists_use_external_selects() -> None:
    values = [f"value-{i}-" + "v" * 200 for i in range(150)]
    choice = one_field({"type": "string", "oneOf": [{"const": v, "title": "t" * 100 + v} for v in values],
                        "default": values[3]}).fields[0]
    big = element(choice)
    assert big["type"] == "external_select" and big["initial_option"]["value"] == "3"
    assert len(big["initial_option"]["text"]["text"]) <= 75
    found = matching_options(choice, "")
    assert len(found) == 100 and all(len(o["value"]) <= 150 and len(o["text"]["text"]) <= 75 for o in found)
    assert [o["value"] for o in matching_options(choice, "value-149")] == ["149"]
    medium = one_field({"type": "string", "enum": values[:30]}).fields[0]
    assert element(medium)["type"] == "static_select"
    assert [o["value"] for o in element(medium)["options"]][:3] == ["0", "1", "2"]
    many = one_field({"type": "array", "items": {"type": "string", "enum": values}}).fields[0]
    assert element(many)["type"] == "multi_external_select"


def test_each_field_kind_gets_its_native_input_with_defaults_pre_filled() -> None:
    f = {x.name: x for x in form(EVERY_FIELD).fields}
    assert element(f["name"]) == {"type": "plain_text_input", "multiline": False, "min_length": 2, "max_length": 50,
                                  "action_id": "v"}
    assert element(f["bio"])["multiline"] is True and "max_length" not in element(f["bio"])  # 5000: core checks
    assert element(f["email"]) == {"type": "email_text_input", "initial_value": "a@example.com", "action_id": "v"}
    assert element(f["site"])["type"] == "url_text_input"
    assert element(f["day"]) == {"type": "datepicker", "initial_date": "2026-01-31", "action_id": "v"}
    assert element(f["when"]) == {"type": "datetimepicker", "initial_date_time": 1769851800, "action_id": "v"}
    assert element(f["count"]) == {"type": "number_input", "is_decimal_allowed": False, "min_value": "1",
                                   "max_value": "100", "initial_value": "42", "action_id": "v"}
    assert element(f["ratio"]) == {"type": "number_input", "is_decimal_allowed": True, "min_value": "0",
                                   "max_value": "1.5", "initial_value": "0.25", "action_id": "v"}
    assert element(f["ok"])["type"] == "radio_buttons" and element(f["ok"])["initial_option"]["value"] == "0"
    assert element(f["size"])["type"] == "radio_buttons" and element(f["size"])["initial_option"]["value"] == "1"
    assert element(f["color"])["type"] == "static_select"
    assert element(f["tags"])["type"] == "checkboxes" and element(f["tags"])["initial_options"][0]["value"] == "1"
    assert element(f["many"])["type"] == "multi_static_select" and element(f["many"])["max_selected_items"] == 3
    view = modal_pages.form_view(interaction(form=form(EVERY_FIELD)), ids.ModalMeta("abc12345"))
    inputs = [b for b in view["blocks"] if b["type"] == "input"]
    assert [b["optional"] for b in inputs][:3] == [False, True, True]
    assert view["notify_on_close"] is True and view["callback_id"] == ids.FORM_CALLBACK


def test_a_secret_looking_field_warns_on_the_card_and_in_the_modal() -> None:
    card = interaction(form=one_field({"type": "string", "title": "API token"}))
    assert "looks like a password" in texts(render.card(card))
    assert "looks like a password" in texts(modal_pages.form_view(card, ids.ModalMeta(card.id))["blocks"])


def test_final_states_say_what_happened_and_who_decided() -> None:
    card = interaction(form=form(EVERY_FIELD))
    accepted = texts(render.finished_card(card, Outcome(Status.ACCEPTED, {"name": "x"}, ADA)))
    assert "Accepted by <@U1>" in accepted
    assert "Expired" in texts(render.finished_card(card, Outcome(Status.EXPIRED)))
    other = Actor("matrix", "@eve:example.org", "<!channel> Eve")
    declined = texts(render.finished_card(card, Outcome(Status.DECLINED, by=other)))
    assert "Declined by &lt;!channel&gt; Eve" in declined
    closed = modal_pages.closed_view(card, render.outcome_text(Outcome(Status.EXPIRED)))
    limits.check_modal(closed)
    assert "submit" not in closed


def test_status_lines_have_a_stop_button_until_done() -> None:
    running = StatusView("call1", ServerLabel("everything"), "slow <tool>", "step 2/5", 2, 5)
    blocks = render.status_blocks(running)
    limits.check_message(blocks)
    assert "40% (2/5)" in blocks[0]["text"]["text"] and "&lt;tool&gt;" in blocks[0]["text"]["text"]
    assert buttons(blocks) == [(ids.STOP, "Stop")]
    done = render.status_blocks(StatusView("call1", ServerLabel("everything"), "slow", "done", done=True,
                                           stoppable=False))
    assert buttons(done) == []


def test_the_app_home_lists_waiting_requests_with_links_to_their_cards() -> None:
    view = render.home([(tool_approval(), "https://fake.invalid/archives/C1/p1700000000000100"),
                        (sampling(), None)])
    limits.check_home(view)
    text = texts(view["blocks"])
    assert "<https://fake.invalid/archives/C1/p1700000000000100|Open the card>" in text
    assert "to approve running delete_repo" in text
    assert "Nothing is waiting" in texts(render.home([])["blocks"])


@pytest.mark.parametrize(("url", "reason"), [
    ("javascript:alert(1)", "only http and https"),
    ("https://example.com/a b", "spaces, control or invisible"),
    (" https://example.com/", "spaces, control or invisible"),
    ("https://exa\u200bmple.com/", "spaces, control or invisible"),
    ("https://example.com/\u202egnp.exe", "spaces, control or invisible"),
    ("https:///path-only", "the host path-only (a browser opens this host, though the link reads as having none)"),
    ("https://evil.example\\@good.example/login", "the host evil.example (a browser opens this host, not good.example"),
    ("https://evil.example:443\\@good.example/", "the host evil.example (a browser opens this host, not good.example"),
    ("https://good.example@evil.example/", "the host evil.example (the link carries a user name or password"),
    ("https://bank.example\u200b.evil.example/", "the host bank.example.evil.example (a browser opens this host"),
    ("http://0x7f.1/", "the host 127.0.0.1 (a browser opens this host, not 0x7f.1 as written)"),
    ("https://[::1/", "not a valid web address"),
    ("https://example.com/" + "x" * 3000, "longer than Slack allows"),
])
def test_a_url_slack_would_refuse_or_that_hides_characters_gets_no_button_and_says_why(url: str,
                                                                                        reason: str) -> None:
    card = interaction(kind=Kind.URL, url=url, accept_label="Done", quick_accept=True)
    blocks = render.card(card)
    limits.check_message(blocks)  # which also checks any button url is one Slack takes
    assert ids.OPEN_URL not in [action for action, _ in buttons(blocks)]
    assert "No *Open link* button" in texts(blocks) and reason in texts(blocks)
    assert buttons(blocks) == [(ids.ACCEPT, "Done"), (ids.DECLINE, "Decline")]


def test_invisible_characters_in_a_url_are_shown_as_code_points() -> None:
    card = interaction(kind=Kind.URL, url="https://example.com/\u202egnp.exe", quick_accept=True)
    assert "*Link:* https://example.com/[U+202E]gnp.exe" in texts(render.card(card))


def test_unicode_format_characters_are_removed_from_server_text_but_emoji_sequences_kept() -> None:
    tricky = "pay\u200b pal\u202e.com\ufeff \u2066x\u2069 \U0001f469\u200d\U0001f4bb"
    assert mrkdwn(tricky) == "pay pal.com x \U0001f469\u200d\U0001f4bb"
    assert plain(tricky, 100) == "pay pal.com x \U0001f469\u200d\U0001f4bb"
    card = interaction(message=tricky, form=one_field({"type": "string", "title": tricky}))
    view = modal_pages.form_view(card, ids.ModalMeta(card.id))
    for text in (texts(render.card(card)), texts(view["blocks"])):
        assert not any(c in text for c in "\u200b\u202e\ufeff\u2066\u2069")


def test_number_inputs_are_ones_slack_accepts() -> None:
    def number(prop: dict[str, Any]) -> JSON:
        return element(one_field(prop).fields[0])

    assert number({"type": "integer", "minimum": 0.5, "maximum": 9.5}) == {
        "type": "number_input", "is_decimal_allowed": False, "min_value": "1", "max_value": "9", "action_id": "v"}
    tiny = number({"type": "number", "minimum": 1e-07, "maximum": 2.5e20, "default": 1.5e-05})
    assert (tiny["min_value"], tiny["max_value"], tiny["initial_value"]) == ("0.0000001", "250000000000000000000",
                                                                               "0.000015")
    assert "initial_value" not in number({"type": "integer", "minimum": 1, "maximum": 10, "default": 50})
    assert "initial_value" not in number({"type": "number", "minimum": 1, "default": 0.5})
    assert "initial_value" not in number({"type": "integer", "default": 2.5})
    assert number({"type": "integer", "minimum": 0.2, "maximum": 0.8}) == {
        "type": "number_input", "is_decimal_allowed": False, "action_id": "v"}  # no whole number fits: core says
    for prop in ({"type": "integer", "minimum": 0.5, "default": 3}, {"type": "number", "maximum": -1e-9}):
        view = modal_pages.form_view(interaction(form=one_field(prop)), ids.ModalMeta("abc12345"))
        limits.check_modal(view)


def test_a_text_default_too_long_to_pre_fill_is_left_out_with_a_hint_that_empty_keeps_it() -> None:
    long = "p" * 3001
    card = interaction(form=form({"type": "object", "required": ["prompt", "short"], "properties": {
        "prompt": {"type": "string", "default": long, "description": "The prompt."},
        "short": {"type": "string", "maxLength": 10, "default": "eleven chars"},
        "fits": {"type": "string", "maxLength": 10, "default": "ten chars!"}}}))
    view = modal_pages.form_view(card, ids.ModalMeta(card.id))
    limits.check_modal(view)
    prompt, short, fits = [b for b in view["blocks"] if b["type"] == "input"]
    assert "initial_value" not in prompt["element"] and "initial_value" not in short["element"]
    assert prompt["optional"] is True and short["optional"] is True  # empty is allowed: it keeps the original
    assert prompt["hint"]["text"] == ("Leave this empty to keep the original (3001 characters, too long to show "
                                      "here). The prompt.")
    assert fits["element"]["initial_value"] == "ten chars!" and "hint" not in fits


@pytest.mark.parametrize(("fmt", "default", "initial"), [
    ("date", "2026-01-31", "2026-01-31"),
    ("date", "2026-W01-1", None),  # an ISO week date: Python reads it, Slack takes only YYYY-MM-DD
    ("date", "2026-02-30", None),
    ("date", "20260131", None),
    ("date", "2026-01-31T00:00:00Z", None),
    ("date-time", "1970-01-01T00:00:00Z", 0),
    ("date-time", "2286-11-20T17:46:39Z", 9_999_999_999),
    ("date-time", "2286-11-20T17:46:40Z", None),  # eleven digits of UNIX seconds
    ("date-time", "1969-12-31T23:59:59Z", None),
    ("date-time", "2026-W01-1T10:00:00Z", None),
    ("date-time", "2026-01-31T10:30:00+01:00", 1769851800),
])
def test_a_date_default_is_pre_filled_only_when_the_picker_takes_it_else_suggested_in_the_hint(
        fmt: str, default: str, initial: str | int | None) -> None:
    card = interaction(form=one_field({"type": "string", "format": fmt, "default": default, "description": "Hi."}))
    view = modal_pages.form_view(card, ids.ModalMeta(card.id))
    limits.check_modal(view)
    [block] = [b for b in view["blocks"] if b["type"] == "input"]
    key = "initial_date" if fmt == "date" else "initial_date_time"
    assert block["element"].get(key) == initial
    assert block["hint"]["text"] == ("Hi." if initial is not None else f"Suggested: {default}. Hi.")


def test_each_status_update_gets_fresh_block_ids() -> None:
    running = StatusView("call1", ServerLabel("everything"), "slow", "step 1", 1, 5)
    first, second = render.status_blocks(running), render.status_blocks(running)
    assert first[1]["block_id"] != second[1]["block_id"]
    assert all(b["block_id"].startswith("call1.") for b in (first[1], second[1]))


def test_a_quorum_card_shows_progress_with_mentions_only_for_well_formed_ids() -> None:
    card = replace(tool_approval(), required=2, approvals=(ADA,), asked=("slack:U3",),
                   approvers=frozenset({ADA.key, "slack:U3", "slack:U4> <!channel"}),
                   grants=(GrantOption("channel", "Allow in this channel until revoked"),))
    blocks = render.card(card)
    limits.check_message(blocks)
    text = json.dumps(blocks)
    assert "1 so far (<@U1>)" in text and "<@U3>" in text
    assert "<!channel" not in text and "U4&gt; &lt;!channel" in text  # a bad id in the config is text, not markup
    assert ids.OPEN_FORM not in [a for a, _ in buttons(blocks)]
    assert render.outcome_text(Outcome(Status.ACCEPTED, by=ADA, approvals=(ADA, Actor("slack", "U3", "Grace")))) \
        == ":white_check_mark: Accepted by <@U1> and <@U3>"


def test_grant_choices_are_buttons_and_a_private_copy_says_where_it_was_asked() -> None:
    options = (GrantOption("conversation", "Allow in this conversation for 1 h"),)
    card = replace(tool_approval(), grants=options, id="abc12345~1", origin=ROOM,
                   conversation=ConversationKey("slack", "", "DU3"))
    blocks = render.card(card)
    assert buttons(blocks) == [(ids.ACCEPT, "Approve"), (ids.grant_action("conversation"),
                                                         "Allow in this conversation for 1 h"), (ids.DECLINE, "Deny")]
    assert "Asked in <#C1>; your decision here is the decision there." in json.dumps(blocks)


def test_a_card_with_many_long_details_stays_within_slack_s_total_for_a_message() -> None:
    # A sampling request with a long conversation: every message a detail, each near a section's 3000 characters.
    long = "say <this> & that " * 200  # 3 600 characters, more once escaped
    card = sampling()
    card = interaction(Kind.SAMPLING, form=card.form, message="The server wants the model to answer.",
                       details=tuple(Detail(f"Message {i}", long) for i in range(30)), accept_label="Approve",
                       decline_label="Deny", quick_accept=True)
    for blocks in (render.card(card), render.finished_card(card, Outcome(Status.ACCEPTED, by=ADA))):
        limits.check_message(blocks)  # 12 000 characters of text in all, counted escaped
        assert "*Message 0:* say &lt;this&gt; &amp; that" in texts(blocks)
        assert f"more details are not shown (`show {card.id}` lists everything)" in texts(blocks)


@pytest.mark.parametrize(("url", "shown"), [
    ("https://\u0430pple.com/login", "xn--pple-43d.com"),  # Cyrillic а: reads as apple.com
    ("https://xn--pple-43d.com/login", "xn--pple-43d.com"),
    ("https://b\u00fccher.example/", "xn--bcher-kva.example"),
])
def test_a_look_alike_or_internationalised_host_gets_no_button_and_shows_its_punycode(url: str, shown: str) -> None:
    card = interaction(kind=Kind.URL, url=url, accept_label="Done", quick_accept=True)
    blocks = render.card(card)
    limits.check_message(blocks)
    assert ids.OPEN_URL not in [action for action, _ in buttons(blocks)]
    warning = texts([b for b in blocks if b["type"] == "context"])
    assert "No *Open link* button: the host" in warning and f"really {shown}" in warning


def test_server_text_goes_through_the_core_s_cleaner() -> None:
    # C1 controls (a CSI that would colour a terminal), a line separator and a bidi isolate:
    # bridge.safety.sanitize.clean
    hostile = "red\x9b31m text\u2028next \u2067line\u2069 \r\nend"
    assert mrkdwn(hostile) == "red31m textnext line \nend"
    assert plain(hostile, 100) == "red31m textnext line \nend"
    assert "\x9b" not in texts(render.card(interaction(message=hostile)))


def test_a_card_long_in_every_part_stays_within_slack_s_total_for_a_message() -> None:
    long = "x<>&" * 1000
    question = one_field({"type": "boolean", "title": long, "description": long})
    for card in (interaction(form=question, message=long, server=ServerLabel(long[:200], long),
                             details=(Detail("Arguments", long),), tool=long),
                 interaction(kind=Kind.URL, url="https://\u0430pple.com/" + "y" * 4000, message=long,
                             details=(Detail("Host", long),), accept_label="Done", quick_accept=True)):
        limits.check_message(render.card(card))
        limits.check_message(render.finished_card(card, Outcome(Status.DECLINED, by=ADA)))
