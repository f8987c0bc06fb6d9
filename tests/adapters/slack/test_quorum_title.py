"""A card's title names whom it asks: the requester only when the rule lets him decide."""

from __future__ import annotations

from dataclasses import replace

from adapters.slack.render import title
from bridge.door.model import Actor
from bridge.text.plain import card_title
from tests.adapters.slack.interactions import ADA, tool_approval

DAVE = Actor("slack", "U4", "Dave")
PANEL = frozenset({"slack:U1", "slack:U2", "slack:U3"})


def test_a_quorum_card_asks_the_approvers_not_a_requester_outside_the_rule() -> None:
    card = replace(tool_approval(), requester=DAVE, approvers=PANEL, required=2)
    assert card_title(card) == "everything (Everything Server) asks 2 approvers to approve running delete_repo"
    assert "U4" not in title(card) and "Dave" not in title(card)


def test_a_single_approver_card_outside_the_rule_asks_an_approver() -> None:
    card = replace(tool_approval(), requester=DAVE, approvers=PANEL)
    assert card_title(card) == "everything (Everything Server) asks an approver to approve running delete_repo"


def test_a_requester_in_the_rule_is_still_the_one_asked() -> None:
    card = replace(tool_approval(), requester=ADA, approvers=PANEL, required=2)
    assert card_title(card) == "everything (Everything Server) asks Ada Lovelace to approve running delete_repo"
    assert "<@U1>" in title(card)
