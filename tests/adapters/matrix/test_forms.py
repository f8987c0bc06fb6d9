"""Form cards without a network: where each field goes, how answers add up, what the events say and weigh."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from adapters.matrix import formtext, render
from adapters.matrix.cards import Card
from adapters.matrix.ended import Ended, looks_like_answer
from adapters.matrix.formstate import FormState
from adapters.matrix.layout import NO, YES, Route, plan
from adapters.matrix.markup import Mention, content_size
from bridge.door.forms import Field, FieldKind, Form, Option, form_from_schema
from bridge.door.model import Outcome, Status
from tests.adapters.matrix.test_render import ADA, interaction

EVERYTHING = Path(__file__).resolve().parents[2] / "npm/node_modules/@modelcontextprotocol/server-everything/dist/" \
                                                   "tools/trigger-elicitation-request.js"

SCHEMA: dict[str, Any] = {"type": "object", "required": ["name"], "properties": {
    "name": {"type": "string", "title": "Name"},
    "ok": {"type": "boolean", "title": "OK?"},
    "email": {"type": "string", "format": "email", "title": "Email"},
    "tags": {"type": "array", "title": "Tags", "default": ["a"], "maxItems": 2,
             "items": {"type": "string", "enum": ["a", "b", "c"]}},
    "pet": {"type": "string", "title": "Pet",
            "oneOf": [{"const": "c", "title": "Cat"}, {"const": "d", "title": "Dog"}]},
    "size": {"type": "string", "title": "Size", "enum": ["s", "m", "l"], "default": "m"},
    "more": {"type": "array", "title": "More", "items": {"type": "string", "enum": ["x", "y"]}},
    "sure": {"type": "boolean", "title": "Sure?", "default": True},
    "n": {"type": "integer", "title": "N", "minimum": 1, "maximum": 9}}}


def form() -> Form:
    return form_from_schema(SCHEMA)


def test_layout_puts_typed_fields_on_lines_choices_on_polls_and_multi_selects_on_reactions() -> None:
    layout = plan(form())
    assert [(s.number, s.field.name, s.route, s.place) for s in layout.slots] == [
        (1, "name", Route.LINE, 0), (2, "email", Route.LINE, 0), (3, "n", Route.LINE, 0),
        (4, "ok", Route.THUMBS, 0), (5, "tags", Route.KEYCAPS, 0),
        (6, "pet", Route.POLL, 0), (7, "size", Route.POLL, 1), (8, "sure", Route.POLL, 2),
        (9, "more", Route.KEYCAPS, 1)]
    assert layout.slots[5].leave_empty and not layout.slots[6].leave_empty  # optional without / with a default


def test_layout_of_server_everything_costs_twelve_events_at_most() -> None:
    layout = plan(everything_form())
    assert len(layout.lines) == 7 and len(layout.on_card) == 2 and len(layout.polls) == 3 and len(layout.lists) == 1
    # card + polls + lists, the progress edit and ✅, then the final edit, poll ends and list edits
    posted = 1 + len(layout.polls) + len(layout.lists)
    assert posted + 2 + 1 + len(layout.polls) + len(layout.lists) == 12


def test_big_choices_are_typed() -> None:
    many = tuple(Option(str(i), f"o{i}") for i in range(30))
    layout = plan(Form(fields=(Field("one", FieldKind.CHOICE, "One", options=many[:20], required=True),
                               Field("opt", FieldKind.CHOICE, "Opt", options=many[:20]),
                               Field("big", FieldKind.CHOICE, "Big", options=many),
                               Field("multi", FieldKind.MULTI, "Multi", options=many[:11]))))
    assert [s.route for s in layout.slots] == [Route.LINE, Route.LINE, Route.LINE, Route.POLL]
    assert [s.field.name for s in layout.lines] == ["opt", "big", "multi"]  # 20 + "leave empty" > 20 answers


def test_a_reply_answers_the_waiting_questions_line_by_line() -> None:
    f = form()
    state = FormState(plan(f))
    reply = state.reply("Ada\nnot-an-email\n12", 10)
    assert reply.taken == (1,) and set(reply.failed) == {2, 3}
    assert [s.number for s in state.pending()] == [2, 3]
    assert state.reply("ada@example.org\n5", 11).taken == (2, 3)  # only the failed lines take lines now
    assert state.content()["email"] == "ada@example.org" and state.content()["n"] == 5
    assert state.reply("3: 7", 12).taken == (3,)
    assert state.reply("6: Dog\n9: 1, 2", 13).taken == (6, 9)  # any field by its number
    assert state.content()["pet"] == "d" and state.content()["more"] == ["x", "y"]
    assert state.reply("Bea\nbea@example.org\n2", 14).taken == (1, 2, 3)  # all lines again: answered again
    assert "Every typed question is answered" in state.reply("a\nb", 15).problem
    assert state.reply("send", 16).command == "accept" and state.reply("!cancel", 16).command == "cancel"
    fresh = FormState(plan(f))
    assert fresh.reply("ok", 17).taken == (1,) and fresh.reply("ok", 17).command is None  # a name, while one waits
    assert fresh.reply("Ada\n-\n12:30", 17).failed == {3: "'12:30' is not a number."}  # not a number prefix
    assert "4 lines, but 1 question is waiting" in fresh.reply("a\nb\nc\nd", 18).problem


def test_skips_keep_defaults_and_required_fields_stay_required() -> None:
    state = FormState(plan(form()))
    reply = state.reply("-\n-\n-", 1)
    assert reply.failed == {1: "This one is required."} and reply.taken == (2, 3)
    content = state.content()
    assert "email" not in content and content["tags"] == ["a"] and content["size"] == "m"


def test_reactions_toggle_picks_and_picks_replace_the_default() -> None:
    f = form()
    layout = plan(f)
    state = FormState(layout)
    assert state.content()["tags"] == ["a"]
    state.react("$r2", ADA.user_id, 0, "2️⃣", 1)
    state.react("$r3", ADA.user_id, 0, "3️⃣", 2)
    assert state.content()["tags"] == ["b", "c"]  # not a, b, c: the default is replaced, never merged
    state.unreact("$r2", 3)
    assert state.content()["tags"] == ["c"]
    state.unreact("$r3", 4)
    assert state.content()["tags"] == ["a"]  # nothing picked: the default again
    assert state.react("$x", ADA.user_id, 0, "4️⃣", 5) is None  # tags has three options
    assert state.react("$y", ADA.user_id, 1, YES, 5) is None  # 👍 answers only on the card
    state.react("$m1", ADA.user_id, 1, "1️⃣", 6)
    assert state.content()["more"] == ["x"]


def test_yes_no_by_reaction_latest_counts_and_removing_leaves_it_empty() -> None:
    state = FormState(plan(form()))
    state.react("$y", ADA.user_id, 0, YES, 1)
    state.react("$n", ADA.user_id, 0, NO, 2)
    assert state.content()["ok"] is False
    state.unreact("$n", 3)
    assert state.content()["ok"] is True
    state.unreact("$y", 4)
    assert "ok" not in state.content()


def test_poll_votes_latest_wins_and_leave_empty() -> None:
    layout = plan(form())
    state = FormState(layout)
    pet, size, sure = layout.polls
    assert state.vote(pet, 10, ("2",)) and state.content()["pet"] == "d"
    assert not state.vote(pet, 5, ("1",))  # an older response does not count
    state.vote(pet, 11, ("none",))
    assert "pet" not in state.content()
    state.vote(size, 12, ("9",))  # an unknown answer spoils the vote: the default stays
    assert state.content()["size"] == "m"
    state.vote(sure, 13, ("no",))
    assert state.content()["sure"] is False


def test_problems_say_what_stops_sending() -> None:
    f = form()
    state = FormState(plan(f))
    assert state.problems(f) == {1: "This field is required."}
    state.reply("Ada", 1)
    assert state.problems(f) == {}
    for n, key in enumerate(("1️⃣", "2️⃣", "3️⃣")):
        state.react(f"$r{n}", ADA.user_id, 0, key, 2 + n)
    assert 5 in state.problems(f)  # three tags, at most two


def test_polls_are_single_choice_top_level_and_mention_nobody() -> None:
    layout = plan(form())
    pet = layout.polls[0]
    content = formtext.poll(layout, pet, mark={"interaction": "i1"})
    poll = content[render.POLL_START]
    assert poll["max_selections"] == 1 and poll["kind"] == "org.matrix.msc3381.poll.disclosed"
    assert [a["id"] for a in poll["answers"]] == ["1", "2", "none"]
    assert poll["question"][render.TEXT].startswith("6. Pet")
    assert "m.relates_to" not in content and content["m.mentions"] == {}
    end = formtext.poll_end(layout, "$start", pet, Outcome(Status.ACCEPTED), "d")
    assert end["m.relates_to"] == {"rel_type": "m.reference", "event_id": "$start"} and "Dog" in end["body"]
    assert "expired" in formtext.poll_end(layout, "$s", pet, Outcome(Status.EXPIRED), None)["body"]


def test_the_card_says_plainly_how_each_field_is_answered() -> None:
    f = everything_form()
    i = interaction(f)
    layout = plan(f)
    state = FormState(layout)
    text = formtext.card(i, layout, state, [Mention(ADA.user_id, "Ada")], now=time.time(), in_thread=True,
                         problems=state.problems(f)).body
    assert "reply in this thread, one line per question" in text
    assert "8. Boolean — Agree to the terms and conditions: 👍 yes · 👎 no (optional: no reaction leaves it empty)" \
        in text
    assert "1️⃣ Guitar · 2️⃣ Piano" in text and "default: Guitar, used when you pick none" in text
    assert "Vote in the polls for 10-12 (in the room's timeline" in text and "list for 13 below" in text
    state.reply("Ada\n-\nnot-an-email", 1)
    text = formtext.card(i, layout, state, [], now=time.time(), in_thread=True, problems=state.problems(f)).body
    assert "1. String — Your full, legal name: ✓ Ada" in text
    assert "2. String with default — Favorite first line of a story: ✓ It was a dark and stormy night. (default)" \
        in text
    assert "3. String with email format — Your email address (will be verified, and never shared with anyone " \
        "else): ⚠ Enter an email address like name@example.com." in text
    assert "Still needed before sending: 3." in text


def test_thirty_thousand_options_fit_every_event() -> None:
    many = tuple(Option(f"v{n}", f"Option <{n}> & more") for n in range(30_000))
    f = Form(fields=(Field("big", FieldKind.CHOICE, "<" * 50_000, description="\U0001f600" * 30_000,
                           options=many, required=True),
                     Field("multi", FieldKind.MULTI, "Multi", options=many)))
    i = interaction(f, message="&" * 80_000)
    layout = plan(f)
    state = FormState(layout)
    card = render.message(formtext.card(i, layout, state, [], now=time.time(), in_thread=False,
                                        problems=state.problems(f)), msgtype="m.text")
    assert content_size(render.edit("$x", card)) <= render.CONTENT_LIMIT
    assert state.reply("v29999\nv3, Option <29998> & more, 7", 1).taken == (1, 2)
    assert state.content() == {"big": "v29999", "multi": ["v3", "v29998", "v6"]}
    done = formtext.finished(i, layout, Outcome(Status.ACCEPTED), state.content())
    assert content_size(render.edit("$x", render.message(done))) <= render.CONTENT_LIMIT


def test_late_answers_are_recognised_by_shape_only_in_the_thread_of_the_card() -> None:
    f = everything_form()
    card = Card.new(interaction(f), "!room", "$root", "$thread")
    ended = Ended()
    e = ended.add(card, Outcome(Status.EXPIRED))
    assert e.how == "expired" and ended.of("!room", "$root") is e and ended.of("!other", "$root") is None
    assert ended.in_thread("!room", "$thread") is e
    assert looks_like_answer("1: Ada\n3: ada@example.org", e) and looks_like_answer("send", e)
    assert looks_like_answer("\n".join("abcdefg"), e)  # seven lines for seven typed questions
    assert not looks_like_answer("thanks, what else can you do?", e)
    ended.forget_thread("!room", "$thread")
    assert ended.in_thread("!room", "$thread") is None


def everything_form() -> Form:
    """server-everything's own 13-field schema, read from its source."""
    source = EVERYTHING.read_text("utf-8")
    start = source.index("{", source.index("requestedSchema:"))
    depth = 0
    for end in range(start, len(source)):
        depth += {"{": 1, "}": -1}.get(source[end], 0)
        if depth == 0:
            break
    js = source[start:end + 1]
    return form_from_schema(json.loads(_js_to_json(js)))


def _js_to_json(js: str) -> str:
    """The schema literal is plain JS object syntax: quote its keys, drop trailing commas and comments."""
    import re

    js = re.sub(r"//[^\n]*", "", js)
    js = re.sub(r"([{,]\s*)([A-Za-z_][A-Za-z0-9_]*)\s*:", r'\1"\2":', js)
    return re.sub(r",(\s*[}\]])", r"\1", js)


def test_a_default_the_field_refuses_is_suggested_and_a_skip_does_not_take_it() -> None:
    """A date default written as an ISO week date is no answer the form takes: the card suggests it, and `-` leaves
    the field empty (required: still needed) instead of keeping a value that could never be sent."""
    f = form_from_schema({"type": "object", "required": ["week"], "properties": {
        "week": {"type": "string", "format": "date", "title": "Week", "default": "2026-W01-1"},
        "at": {"type": "string", "format": "date-time", "title": "At", "default": "2026-W01-1T10:00:00Z"},
        "landing": {"type": "string", "format": "date-time", "title": "Landing", "default": "1969-07-20T20:17:40Z"}}})
    state = FormState(plan(f))
    assert formtext.hint(f.field("week")) == "a date, YYYY-MM-DD, suggested: 2026-W01-1, required"
    assert formtext.hint(f.field("landing")).endswith("default: 1969-07-20T20:17:40Z")
    assert state.problems(f) == {1: "This field is required."}
    reply = state.reply("-\n-\n-", 1)
    assert reply.failed == {1: "This one is required."} and reply.taken == (2, 3)
    assert state.content() == {"landing": "1969-07-20T20:17:40Z"}
    state.reply("1: 2026-01-05", 2)
    assert state.problems(f) == {} and state.content() == {"week": "2026-01-05", "landing": "1969-07-20T20:17:40Z"}
    card = formtext.card(interaction(f), plan(f), state, [], now=time.time(), in_thread=True, problems={})
    assert "At: ✓ (left empty)" in card.body and "Landing: ✓ 1969-07-20T20:17:40Z (default)" in card.body
