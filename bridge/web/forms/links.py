"""One-time web-form links: unguessable, expiring, single-use, bound to one interaction and one person.

A link's token is signed claims (`bridge.web.person_links`), not a lookup key: the interaction id, the person it was
issued to, a random nonce and an expiry. None of them is a secret (the interaction id is in every card's buttons, the
person's id is in the chat); the signature is what makes a token impossible to forge or alter, and the nonce (128 random
bits) what makes it impossible to guess. The expiry is the card's own deadline or the configured lifetime, whichever
comes first. A token is spent when a decision made with it counts; spent nonces are remembered until the token would
have expired anyway (`SpentLinks`, in memory here, in the store once links must survive a restart).

Checking a token gives back the claims or a `Refusal` value: a bad link is an everyday event, not an error.
"""

from __future__ import annotations

import enum
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from itsdangerous import BadData
from itsdangerous.encoding import base64_decode, base64_encode

from bridge.door.model import Actor, Interaction
from bridge.web.person_links import PersonTokens, new_nonce

SALT = "mcp-chat-bridge web form link v1"
"""Keeps these signatures apart from anything else signed with the same key."""


class Refusal(enum.StrEnum):
    """Why a token cannot be used. The routes turn each into a page with its own HTTP status."""

    INVALID = "invalid"
    """Not a token we signed: malformed, altered, or signed with another key (say, before a restart)."""
    EXPIRED = "expired"
    USED = "used"


@dataclass(frozen=True, slots=True)
class LinkClaims:
    interaction_id: str
    actor: Actor
    nonce: str
    expires_at: float


class SpentLinks(Protocol):
    """Nonces of links whose decision counted. Backed by memory now; by the store when links outlive a run."""

    def spent(self, nonce: str) -> bool: ...

    def spend(self, nonce: str, expires_at: float) -> bool:
        """Record a nonce as used; False if it already was (the second of two racing submissions)."""
        ...


class MemorySpentLinks:
    """Spent nonces in a dict, each forgotten once its token has expired (it is refused as expired from then on)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._until: dict[str, float] = {}
        self._clock = clock

    def spent(self, nonce: str) -> bool:
        return nonce in self._until

    def spend(self, nonce: str, expires_at: float) -> bool:
        now = self._clock()
        for old in [n for n, until in self._until.items() if until < now]:
            del self._until[old]
        if nonce in self._until:
            return False
        self._until[nonce] = expires_at
        return True


class FormLinks:
    """Issues and checks link tokens. `key` signs them: from the config (shared by workers, survives restarts) or
    random per run."""

    def __init__(self, key: str | bytes | None = None, *, lifetime: float = 900.0,
                 spent: SpentLinks | None = None, clock: Callable[[], float] = time.time) -> None:
        self._tokens = PersonTokens(key or secrets.token_bytes(32), salt=SALT, subject_field="i")
        self.lifetime = lifetime
        self._clock = clock
        self._spent = spent or MemorySpentLinks(clock)

    def issue(self, interaction: Interaction, actor: Actor) -> str | None:
        """A token for `actor` to answer `interaction`, or None when they may not answer it, it has nothing to fill
        in, or it has already run out of time."""
        now = self._clock()
        if interaction.form.empty or not interaction.may_decide(actor) or interaction.expires_at <= now:
            return None
        expires = min(interaction.expires_at, now + self.lifetime)
        return self.sign(LinkClaims(interaction.id, actor, new_nonce(), expires))

    def sign(self, claims: LinkClaims) -> str:
        """Sign claims as they are. Only `issue` checks who may answer; tests use this to make a stranger's link."""
        return self._tokens.dumps(claims.interaction_id, claims.actor, claims.nonce, claims.expires_at)

    def check(self, token: str) -> LinkClaims | Refusal:
        """The claims of a usable token, or why it cannot be used. Signature first: nothing unsigned is read."""
        if not _canonical(token):
            return Refusal.INVALID
        body = self._tokens.loads(token)
        if body is None:
            return Refusal.INVALID
        claims = LinkClaims(*body)
        if claims.expires_at <= self._clock():
            return Refusal.EXPIRED
        if self._spent.spent(claims.nonce):
            return Refusal.USED
        return claims

    def spend(self, claims: LinkClaims) -> bool:
        """Mark a token used once its decision counted; False if another submission spent it first."""
        return self._spent.spend(claims.nonce, claims.expires_at)


def _canonical(token: str) -> bool:
    """Whether the signature is spelt the one way we spell it. The last base64 character of a 32-byte signature has
    two bits no byte uses, and decoders ignore them, so four spellings of one token would verify: a link changed in
    its last character would still work, and a spent link could look like a new one to anything keyed on its text."""
    signature = token.rpartition(".")[2].encode()
    try:
        return base64_encode(base64_decode(signature)) == signature
    except BadData:
        return False

