"""Links to an app: signed, expiring, made for one person, and bound to the first browser that opens them.

A token is signed claims (`bridge.web.person_links`, as web-form links are): the view, the person it was made for, a
random nonce and an expiry. An app page stays open and talks to the bridge for as long as the person uses it, so a link
is not spent on first use as a form link is; instead the first browser to open it gets a random secret in a cookie
scoped to the link's own path (`Browsers`), and any other browser that opens the link later (someone it was forwarded
to, or who read it over a shoulder) is refused. That is what "one-time" means here: one browser, one person.
"""

from __future__ import annotations

import enum
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from itsdangerous import BadData, URLSafeSerializer

from bridge.door.model import Actor
from bridge.web.person_links import PersonTokens, new_nonce

SALT = "mcp-chat-bridge app link v1"
SANDBOX_SALT = "mcp-chat-bridge app sandbox v1"
"""The sandbox page's address names its view under another signature: it carries no power over the app."""


class Refusal(enum.StrEnum):
    INVALID = "invalid"
    EXPIRED = "expired"
    OTHER_BROWSER = "other_browser"


@dataclass(frozen=True, slots=True)
class AppClaims:
    view_id: str
    actor: Actor
    nonce: str
    expires_at: float


class AppLinks:
    """Issues and checks app-link tokens, and the sandbox addresses of views."""

    def __init__(self, key: str | bytes | None = None, *, lifetime: float = 3600.0,
                 clock: Callable[[], float] = time.time) -> None:
        key = key or secrets.token_bytes(32)
        self._tokens = PersonTokens(key, salt=SALT, subject_field="v")
        self._sandbox = URLSafeSerializer(key, salt=SANDBOX_SALT)
        self.lifetime = lifetime
        self._clock = clock

    def issue(self, view_id: str, actor: Actor, ends_at: float) -> str:
        expires = min(ends_at, self._clock() + self.lifetime)
        return self.sign(AppClaims(view_id, actor, new_nonce(), expires))

    def sign(self, claims: AppClaims) -> str:
        return self._tokens.dumps(claims.view_id, claims.actor, claims.nonce, claims.expires_at)

    def check(self, token: str) -> AppClaims | Refusal:
        body = self._tokens.loads(token)
        if body is None:
            return Refusal.INVALID
        claims = AppClaims(*body)
        if claims.expires_at <= self._clock():
            return Refusal.EXPIRED
        return claims

    def sandbox_token(self, view_id: str) -> str:
        token: str = self._sandbox.dumps(view_id)
        return token

    def sandbox_view(self, token: str) -> str | None:
        try:
            view_id: Any = self._sandbox.loads(token)
        except BadData:
            return None
        return view_id if isinstance(view_id, str) else None


class Browsers:
    """Which browser holds each link: its nonce mapped to a random secret, kept until the link expires."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._held: dict[str, tuple[str, float]] = {}
        self._clock = clock

    def bind(self, claims: AppClaims, cookie: str | None) -> str | bool:
        """The secret to set in a new cookie (the first browser), True for the browser holding the link, False for
        any other."""
        now = self._clock()
        for old in [n for n, (_, until) in self._held.items() if until < now]:
            del self._held[old]
        held = self._held.get(claims.nonce)
        if held is None:
            secret = secrets.token_urlsafe(24)
            self._held[claims.nonce] = (secret, claims.expires_at)
            return secret
        return cookie is not None and hmac.compare_digest(held[0], cookie)

    def holds(self, claims: AppClaims, cookie: str | None) -> bool:
        held = self._held.get(claims.nonce)
        return held is not None and cookie is not None and hmac.compare_digest(held[0], cookie)

