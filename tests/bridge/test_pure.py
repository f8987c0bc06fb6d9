"""Direct tests of the core's pure modules: commands, policy, secrets, rate limiting, conversation keys, dialog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp.types import ToolAnnotations

from bridge.commands import parsing as commands
from bridge.config.file import RootsPolicy, SamplingPolicy, ServerConfig
from bridge.config.policy import MASK, approver_rule, mask_arguments, needs_approval
from bridge.config.team import ApproverRule, duration_text
from bridge.door.forms import Field, FieldKind, Option, approval_form
from bridge.door.forms.schema import form_from_schema
from bridge.door.model import (
    Actor,
    ConversationKey,
    GrantOption,
    Interaction,
    Kind,
    Outcome,
    ServerLabel,
    Status,
    conversation_key,
)
from bridge.safety.ratelimit import RateLimiter
from bridge.safety.secret_names import looks_secret
from bridge.text.presentation import already_ended, describe_outcome, describe_progress
from bridge.text.questions import Dialog, StepKind, option_lines
from tests.harness.hosts import ALICE, ROOM

# -- commands ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "name", "args", "arguments"), [
    ("", "help", (), {}),
    ("TOOLS srv", "tools", ("srv",), {}),
    ('call everything echo {"message": "hi there"}', "call", ("everything", "echo"), {"message": "hi there"}),
    ("call s t", "call", ("s", "t"), {}),
    ("prompt s p city='New York' n=2", "prompt", ("s", "p"), {"city": "New York", "n": "2"}),
    ('roots add file:///srv/x "My project"', "roots", ("add", "file:///srv/x", "My project"), {}),
    ("cancel 3f9a", "cancel", ("3f9a",), {}),
])
def test_commands_parse_into_name_args_and_arguments(text: str, name: str, args: tuple[str, ...],
                                                      arguments: dict[str, str]) -> None:
    command = commands.parse(text)
    assert (command.name, command.args, command.arguments, command.error) == (name, args, arguments, "")


@pytest.mark.parametrize(("text", "error"), [
    ("frobnicate", "Unknown command 'frobnicate'"),
    ("call onlyserver", "Usage: call <server> <tool>"),
    ("call s t {not json", "not valid JSON"),
    ("call s t [1, 2]", "must be a JSON object"),
    ("prompt s p novalue", "key=value"),
    ('tools "unclosed', "Could not read the arguments"),
    ("read s", "Usage: read <server> <uri>"),
    ("roots list", "Usage: roots |"),
    ("roots add", "Usage: roots add <uri> [name]"),
])
def test_bad_commands_say_what_to_type_instead(text: str, error: str) -> None:
    assert error in commands.parse(text).error


def test_every_command_name_is_in_the_help() -> None:
    assert all(f"  {name}" in commands.HELP or f"| {name}" in commands.HELP for name in commands.NAMES)


# -- policy --------------------------------------------------------------------------------------------------------

DESTRUCTIVE = ToolAnnotations(destructive_hint=True)


@pytest.mark.parametrize(("rules", "tool", "annotations", "expected"), [
    ((), "delete", DESTRUCTIVE, True),
    ((), "delete", ToolAnnotations(destructive_hint=True, read_only_hint=True), False),
    ((), "read", None, False),
    ((), "read", ToolAnnotations(), False),
    ((("del*", "never"),), "delete", DESTRUCTIVE, False),
    ((("*", "always"),), "read", None, True),
    ((("read", "never"), ("*", "always")), "read", None, False),  # the first matching rule decides
])
def test_needs_approval_first_rule_wins_then_annotations(rules: tuple[tuple[str, str], ...], tool: str,
                                                         annotations: ToolAnnotations | None, expected: bool) -> None:
    assert needs_approval(rules, tool, annotations) is expected  # type: ignore[arg-type]


def test_mask_arguments_hides_secret_keys_and_shortens_long_values() -> None:
    shown = json.loads(mask_arguments({"apiKey": "sk-1", "nested": {"password": "x", "city": "Oslo"},
                                       "note": "y" * 1000, "items": list(range(60))}))
    assert shown["apiKey"] == MASK and shown["nested"] == {"password": MASK, "city": "Oslo"}
    assert len(shown["note"]) <= 300 and shown["note"].endswith("more characters]")
    assert shown["items"][-1] == "…" and len(shown["items"]) == 51


# -- the secret detector -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("label", ["password", "api_key", "apiKey", "API key", "Card number", "pin", "card-pin",
                                   "pw", "client_secret", "accessToken", "IBAN", "Private key"])
def test_secret_names_and_titles_are_recognised(label: str) -> None:
    assert looks_secret(label)


@pytest.mark.parametrize("label", ["city", "spinner", "pinnacle", "Integer", "passenger", "tokenizer_kind", "card"])
def test_ordinary_names_are_not_secrets(label: str) -> None:
    assert not looks_secret(label)


def test_prose_in_a_description_does_not_make_a_field_secret() -> None:
    # server-everything's elicitation form: its integer field's description warns against giving a pin.
    form = form_from_schema({"type": "object", "properties": {
        "integer": {"type": "integer", "title": "Integer", "description": "Do not give us your pin"},
        "pin": {"type": "string", "title": "Your PIN"}}})
    assert [f.name for f in form.secret_fields] == ["pin"]


# -- rate limiting -------------------------------------------------------------------------------------------------


def test_rate_limiter_counts_per_key_within_a_sliding_window() -> None:
    now = [0.0]
    limiter = RateLimiter(2, window=60, clock=lambda: now[0])
    assert [limiter.allow("a"), limiter.allow("a"), limiter.allow("a"), limiter.allow("b")] == [True, True, False, True]
    now[0] = 59.9
    assert not limiter.allow("a")  # refused events are not counted, but the first two still are
    now[0] = 60.0
    assert limiter.allow("a") and limiter.allow("a") and not limiter.allow("a")


# -- conversation keys ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("scope", "expected"), [
    ("thread", ConversationKey("slack", "T1", "C1", "171.1")),
    ("channel", ConversationKey("slack", "T1", "C1")),
    ("user", ConversationKey("slack", "T1", "C1", "", "U7")),
])
def test_conversation_key_follows_the_scope(scope: str, expected: ConversationKey) -> None:
    key = conversation_key(scope, "slack", "T1", "C1", thread="171.1", user="U7")  # type: ignore[arg-type]
    assert key == expected
    assert ConversationKey.from_id(key.id()) == key


# -- dialog --------------------------------------------------------------------------------------------------------


def card(kind: Kind = Kind.FORM, quick: bool = False, *fields: Field) -> Interaction:
    return Interaction(id="i1", kind=kind, server=ServerLabel("s"), conversation=ROOM, requester=ALICE,
                       approvers=frozenset({ALICE.key}), message="?", form=approval_form(fields), expires_at=0,
                       accept_label="Submit", quick_accept=quick)


CITY = Field("city", FieldKind.CHOICE, "City", required=True, options=(Option("osl", "Oslo"), Option("ber", "Berlin")))
COUNT = Field("n", FieldKind.INTEGER, "How many", default=2, has_default=True, minimum=1, maximum=5)


def test_dialog_asks_each_field_reasks_a_wrong_answer_then_confirms() -> None:
    dialog = Dialog(card(Kind.FORM, False, CITY, COUNT))
    first = dialog.start()
    assert first.kind is StepKind.ASK and first.question is not None and first.question.field == CITY
    assert option_lines(CITY.options) == ["1. Oslo (osl)", "2. Berlin (ber)"]
    wrong = dialog.answer("Paris")
    assert wrong.kind is StepKind.REASK and "not one of the options" in wrong.message
    assert dialog.answer("2").question.field == COUNT  # type: ignore[union-attr]
    assert dialog.answer("").question.field is None  # type: ignore[union-attr]  # the default, then the summary
    assert dialog.summary_lines() == ["City: Berlin", "How many: 2"]
    done = dialog.answer("yes")
    assert (done.kind, done.action, done.content) == (StepKind.DONE, "accept", {"city": "ber", "n": 2})


def test_dialog_edit_starts_over_and_bang_commands_end_at_once() -> None:
    dialog = Dialog(card(Kind.FORM, False, CITY))
    dialog.answer("osl")
    assert dialog.answer("edit").question.field == CITY  # type: ignore[union-attr]
    assert dialog.answer("!decline").action == "decline"


def test_quick_accept_dialog_starts_at_the_summary_with_defaults_and_presets_are_not_asked() -> None:
    dialog = Dialog(card(Kind.TOOL, True, COUNT))
    assert dialog.start().question.field is None  # type: ignore[union-attr]
    assert dialog.answer("accept").content == {"n": 2}
    preset = Dialog(card(Kind.FORM, False, CITY, COUNT), preset={"city": "osl"})
    assert preset.start().question.field == COUNT  # type: ignore[union-attr]


def test_dialog_goes_back_to_the_field_the_core_rejected() -> None:
    dialog = Dialog(card(Kind.FORM, False, CITY, COUNT))
    dialog.answer("osl")
    dialog.answer("3")
    step = dialog.rejected({"n": "must be at most 2"})
    assert step.kind is StepKind.REASK and step.question.field == COUNT and "n: must be at most 2" in step.message  # type: ignore[union-attr]


# -- team decisions ------------------------------------------------------------------------------------------------


def test_outcomes_and_progress_name_everyone_who_decided() -> None:
    bob, cy = Actor("test", "U-bob", "Bob"), Actor("test", "U-cy", "Cy")
    assert describe_outcome(Outcome(Status.ACCEPTED, by=bob, approvals=(ALICE, bob))) == "accepted by Alice and Bob"
    assert describe_outcome(Outcome(Status.DECLINED, by=cy, approvals=(ALICE, bob))) == \
        "declined by Cy (after approvals by Alice and Bob)"
    assert describe_outcome(Outcome(Status.ACCEPTED, by=bob)) == "accepted by Bob"
    card = Interaction("i", Kind.TOOL, ServerLabel("s"), ROOM, ALICE, frozenset({ALICE.key, bob.key, cy.key}), "?",
                       approval_form([]), 0, required=2, approvals=(bob,), asked=(cy.key,))
    assert describe_progress(card) == ["Needs 2 approvals from different people; 1 so far (Bob).",
                                       "May approve: U-alice and U-cy. One decline ends it.",
                                       "Also asked privately: U-cy."]
    assert describe_progress(card, lambda key, label: f"<{key}>")[1] == \
        "May approve: <test:U-alice> and <test:U-cy>. One decline ends it."


def test_a_late_decision_is_told_how_the_request_ended_in_one_wording() -> None:
    bob = Actor("test", "U-bob", "Bob")
    assert already_ended(Outcome(Status.DECLINED, by=bob)) == "That request was already declined by Bob."
    assert already_ended(Outcome(Status.ACCEPTED, by=bob, approvals=(ALICE, bob))) == \
        "That request was already accepted by Alice and Bob."
    assert already_ended(Outcome(Status.EXPIRED, reason="nobody answered")) == "That request was already expired."
    # The sentence is written once, in bridge/text: the cards and forwarding ask for it rather than spell it.
    root = Path(__file__).resolve().parents[2] / "bridge"
    spelled = [str(p.relative_to(root)) for p in root.rglob("*.py") if "That request was already" in p.read_text()]
    assert spelled == ["text/presentation.py"]


def test_dialog_offers_and_takes_the_wider_grants() -> None:
    grants = (GrantOption("conversation", "Allow in this conversation for 1 h"),
              GrantOption("channel", "Allow in this channel until revoked"))
    card = Interaction("i", Kind.TOOL, ServerLabel("s"), ROOM, ALICE, frozenset(), "?", approval_form([]), 0,
                       accept_label="Run", decline_label="Deny", quick_accept=True, grants=grants)
    dialog = Dialog(card)
    assert dialog.question().hint == ("answer run, deny, allow conversation (in this conversation for 1 h), allow "
                                      "channel (in this channel until revoked) or cancel")
    step = dialog.answer("Allow channel")
    assert (step.kind, step.action, step.grant) == (StepKind.DONE, "accept", "channel")
    assert Dialog(card).answer("run").grant == ""


@pytest.mark.parametrize(("seconds", "text"), [(3600, "1 h"), (1800, "30 min"), (172800, "2 d"), (45, "45 s"),
                                               (5400, "90 min"), (5430, "1.5 h")])
def test_durations_read_as_people_say_them(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


def test_each_kind_of_request_takes_its_own_approver_rule_else_the_server_s() -> None:
    rules = {name: ApproverRule(people=(f"test:{name}",)) for name in
             ("server", "forms", "tools", "deploy", "sampling", "roots")}
    server = ServerConfig(name="s", approvers=rules["server"], elicitation_approvers=rules["forms"],
                          tools_approvers=rules["tools"], tool_approvers=(("deploy_*", rules["deploy"]),),
                          sampling=SamplingPolicy(approvers=rules["sampling"]),
                          roots=RootsPolicy(approvers=rules["roots"]))
    assert approver_rule(server, Kind.FORM) is rules["forms"] and approver_rule(server, Kind.URL) is rules["forms"]
    assert approver_rule(server, Kind.TOOL, "deploy_prod") is rules["deploy"]
    assert approver_rule(server, Kind.TOOL, "list") is rules["tools"]
    assert approver_rule(server, Kind.SAMPLING) is rules["sampling"]
    assert approver_rule(server, Kind.SAMPLING_REVIEW) is rules["sampling"]
    assert approver_rule(server, Kind.ROOTS) is rules["roots"]
    bare = ServerConfig(name="s", approvers=rules["server"])
    assert {approver_rule(bare, kind, "deploy_prod") for kind in Kind} == {rules["server"]}
