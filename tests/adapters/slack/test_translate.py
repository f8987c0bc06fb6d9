"""Pure translation: Slack payloads into messages, conversations and typed form content."""

from __future__ import annotations

from adapters.slack import ids, translate
from adapters.slack.elements import rfc3339_to_unix, unix_to_rfc3339
from bridge.door.model import ConversationKey
from tests.adapters.slack.interactions import EVERY_FIELD, form
from tests.harness.slack import event_app_mention, event_message_im


def test_a_mention_is_stripped_and_starts_a_thread_conversation() -> None:
    event = event_app_mention("U1", "C1", "<@UBOT> call everything echo {\"a\": \"&lt;b&gt;\"}", "1.000001")["event"]
    message = translate.message_in(event, "T111", "UBOT", "thread", translate.actor("U1"), addressed=True)
    assert message.text == 'call everything echo {"a": "<b>"}'
    assert message.conversation == ConversationKey("slack", "T111", "C1", "1.000001")
    reply = event_app_mention("U1", "C1", "<@UBOT> pending", "1.000009", thread_ts="1.000001")["event"]
    assert translate.message_in(reply, "T111", "UBOT", "thread", translate.actor("U1"),
                                addressed=True).conversation == message.conversation


def test_scopes_channel_user_and_direct_messages() -> None:
    event = event_app_mention("U1", "C1", "<@UBOT> hi", "1.000001")["event"]
    who = translate.actor("U1")
    assert translate.message_in(event, "T", "UBOT", "channel", who, addressed=True).conversation.thread == ""
    assert translate.message_in(event, "T", "UBOT", "user", who, addressed=True).conversation.user == "U1"
    dm = event_message_im("U1", "D1", "help", "2.000001")["event"]
    assert translate.message_in(dm, "T", "UBOT", "thread", who, addressed=True).conversation.thread == ""


def test_only_people_s_messages_reach_the_core() -> None:
    event = event_message_im("U1", "D1", "help", "2.000001")["event"]
    assert translate.is_person_message(event, "UBOT")
    assert not translate.is_person_message(event | {"bot_id": "BBOT"}, "UBOT")
    assert not translate.is_person_message(event | {"user": "UBOT"}, "UBOT")
    assert not translate.is_person_message(event | {"subtype": "message_changed"}, "UBOT")
    mention = event_app_mention("U1", "C1", "<@UBOT> call x", "2.000002")["event"]
    assert translate.is_person_message(mention, "UBOT")
    assert not translate.is_person_message(mention | {"edited": {"user": "U1", "ts": "2.000009"}}, "UBOT")


def test_a_message_is_identified_by_its_client_id_or_else_where_and_when_it_was_sent() -> None:
    event = event_app_mention("U1", "C1", "<@UBOT> hi", "2.000001")["event"]
    assert translate.message_identity(event) == event["client_msg_id"]
    assert translate.message_identity(event | {"client_msg_id": None}) == "C1/2.000001"


def test_widget_values_become_the_types_the_schema_asks_for() -> None:
    f = form(EVERY_FIELD)
    index = {x.name: i for i, x in enumerate(f.fields)}

    def at(name: str, state: dict[str, object]) -> tuple[str, dict[str, dict[str, object]]]:
        return ids.field_block(index[name]), {ids.FIELD_ACTION: state}

    values = dict([
        at("name", {"type": "plain_text_input", "value": "Ada"}),
        at("bio", {"type": "plain_text_input", "value": None}),
        at("email", {"type": "email_text_input", "value": "ada@example.com"}),
        at("day", {"type": "datepicker", "selected_date": "1815-12-10"}),
        at("when", {"type": "datetimepicker", "selected_date_time": 1769851800}),
        at("count", {"type": "number_input", "value": "7"}),
        at("ratio", {"type": "number_input", "value": "0.5"}),
        at("ok", {"type": "radio_buttons", "selected_option": {"value": "1"}}),
        at("size", {"type": "radio_buttons", "selected_option": {"value": "2"}}),
        at("color", {"type": "static_select", "selected_option": None}),
        at("tags", {"type": "checkboxes", "selected_options": [{"value": "0"}, {"value": "2"}]}),
        at("many", {"type": "multi_static_select", "selected_options": []}),
    ])
    content, errors = translate.page_answers(f, range(len(f.fields)), values)
    assert errors == {}
    assert content == {"name": "Ada", "email": "ada@example.com", "day": "1815-12-10",
                       "when": "2026-01-31T09:30:00Z", "count": 7, "ratio": 0.5, "ok": False, "size": "l",
                       "tags": ["a", "c"]}
    assert isinstance(content["count"], int)


def test_bad_widget_values_come_back_as_errors_keyed_by_block_id() -> None:
    f = form(EVERY_FIELD)
    email = next(i for i, x in enumerate(f.fields) if x.name == "email")
    values = {ids.field_block(email): {ids.FIELD_ACTION: {"type": "email_text_input", "value": "not-an-email"}}}
    _, errors = translate.page_answers(f, range(len(f.fields)), values)
    assert errors == {"email": "enter an email address like name@example.com"}
    assert translate.block_errors(f, [email], errors) == {ids.field_block(email): errors["email"]}
    # an error on a field of another page lands on this page's first input, naming the field
    assert translate.block_errors(f, [email], {"name": "this field is required"}) == {
        ids.field_block(email): "Name: this field is required"}


def test_date_times_round_trip_through_unix_seconds_in_utc() -> None:
    assert unix_to_rfc3339(rfc3339_to_unix("2026-01-31T10:30:00+01:00") or 0) == "2026-01-31T09:30:00Z"


def test_modal_metadata_survives_a_round_trip_and_rejects_junk() -> None:
    meta = ids.ModalMeta("abc", "C1", "1.2", 3)
    assert ids.ModalMeta.load(meta.dump()) == meta
    assert ids.ModalMeta.load("not json") is None and ids.ModalMeta.load("[]") is None


def test_an_empty_answer_keeps_a_default_too_long_to_pre_fill() -> None:
    long = "p" * 3001
    f = form({"type": "object", "properties": {"prompt": {"type": "string", "default": long},
                                               "note": {"type": "string", "default": "short"}}})
    empty = {ids.field_block(0): {ids.FIELD_ACTION: {"type": "plain_text_input", "value": None}},
             ids.field_block(1): {ids.FIELD_ACTION: {"type": "plain_text_input", "value": None}}}
    assert translate.page_answers(f, range(2), empty) == ({"prompt": long}, {})
    assert translate.page_answers(f, range(2), {}) == ({"prompt": long}, {})
    typed = {ids.field_block(0): {ids.FIELD_ACTION: {"type": "plain_text_input", "value": "new"}}}
    assert translate.page_answers(f, range(2), typed) == ({"prompt": "new"}, {})
