"""One-time links: who gets one, how long it works, and what a forged, altered, expired or spent token gets."""

from __future__ import annotations

import base64
from dataclasses import replace

from itsdangerous import URLSafeSerializer

from bridge.door.forms import form_from_schema
from bridge.door.model import Interaction, Kind, ServerLabel
from bridge.web.forms.links import SALT, FormLinks, LinkClaims, MemorySpentLinks, Refusal
from tests.harness.hosts import ALICE, BOB, ROOM

NOW = 1_800_000_000.0
FORM = form_from_schema({"type": "object", "properties": {"ok": {"type": "boolean"}}})
CARD = Interaction("abc123", Kind.FORM, ServerLabel("forms"), ROOM, ALICE, frozenset({ALICE.key}), "Fill in", FORM,
                   expires_at=NOW + 600)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def test_a_link_is_only_for_a_person_allowed_to_answer_a_form_still_open() -> None:
    links = FormLinks(lifetime=300, clock=Clock())
    assert links.issue(CARD, BOB) is None
    assert links.issue(replace(CARD, form=form_from_schema({"type": "object", "properties": {}})), ALICE) is None
    assert links.issue(replace(CARD, expires_at=NOW - 1), ALICE) is None
    assert links.issue(replace(CARD, approvers=frozenset()), BOB) is not None  # anyone in the conversation may


def test_a_token_carries_the_interaction_the_person_and_the_earlier_of_the_two_deadlines() -> None:
    clock = Clock()
    links = FormLinks(lifetime=300, clock=clock)
    token = links.issue(CARD, ALICE)
    assert token is not None
    claims = links.check(token)
    assert isinstance(claims, LinkClaims)
    assert (claims.interaction_id, claims.actor, claims.expires_at) == ("abc123", ALICE, NOW + 300)
    long_lived = FormLinks(lifetime=3600, clock=clock).issue(CARD, ALICE)
    assert long_lived is not None
    assert FormLinks(lifetime=3600, clock=clock).check(long_lived) is Refusal.INVALID  # another key
    claims2 = FormLinks(b"k" * 32, lifetime=3600, clock=clock)
    token2 = claims2.issue(CARD, ALICE)
    assert token2 is not None
    checked = claims2.check(token2)
    assert isinstance(checked, LinkClaims) and checked.expires_at == CARD.expires_at


def test_two_links_for_the_same_card_and_person_differ_and_hold_no_secret() -> None:
    links = FormLinks(b"s" * 32, clock=Clock())
    first, second = links.issue(CARD, ALICE), links.issue(CARD, ALICE)
    assert first and second and first != second
    _, payload = URLSafeSerializer(b"any", salt=SALT).loads_unsafe(first)  # readable, just not forgeable
    assert set(payload) == {"i", "p", "u", "d", "n", "e"} and payload["p"] + ":" + payload["u"] == ALICE.key
    assert len(base64.urlsafe_b64decode(payload["n"] + "==")) == 16  # 128 random bits
    assert b"s" * 8 not in first.encode()


def test_an_altered_or_truncated_token_is_invalid() -> None:
    links = FormLinks(clock=Clock())
    token = links.issue(CARD, ALICE)
    assert token is not None
    claims = links.check(token)
    assert isinstance(claims, LinkClaims)
    for_bob = FormLinks(b"another key" * 3).sign(replace(claims, actor=BOB))
    assert links.check(for_bob) is Refusal.INVALID
    spliced = for_bob.rsplit(".", 1)[0] + "." + token.rsplit(".", 1)[1]
    assert links.check(spliced) is Refusal.INVALID
    assert links.check(token[:-2]) is Refusal.INVALID
    # The signature's last character also carries two unused bits: a token spelt with them set is refused too.
    head, _, signature = token.rpartition(".")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(signature[-1])
    respelt = [f"{head}.{signature[:-1]}{alphabet[last ^ bits]}" for bits in (1, 2, 3)]
    assert all(base64.urlsafe_b64decode(t.rpartition(".")[2] + "=") == base64.urlsafe_b64decode(signature + "=")
               for t in respelt)
    assert [links.check(t) for t in respelt] == [Refusal.INVALID] * 3
    assert links.check("") is Refusal.INVALID
    assert links.check("not-a-token") is Refusal.INVALID


def test_a_token_expires_and_is_spent_once() -> None:
    clock = Clock()
    links = FormLinks(lifetime=300, clock=clock)
    token = links.issue(CARD, ALICE)
    assert token is not None
    claims = links.check(token)
    assert isinstance(claims, LinkClaims)
    assert links.spend(claims) is True
    assert links.spend(claims) is False
    assert links.check(token) is Refusal.USED
    clock.now += 301
    assert links.check(token) is Refusal.EXPIRED


def test_spent_nonces_are_forgotten_once_their_tokens_have_expired() -> None:
    clock = Clock()
    spent = MemorySpentLinks(clock)
    assert spent.spend("a", NOW + 10) and spent.spend("b", NOW + 100)
    clock.now += 50
    assert spent.spend("c", NOW + 200)
    assert (spent.spent("a"), spent.spent("b"), spent.spent("c")) == (False, True, True)
