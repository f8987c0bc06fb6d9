"""Signed claims for a link made for one person, as web-form and app links carry them.

A token is signed claims (itsdangerous), not a lookup key: what the link opens (`subject`), the person it was made
for, a random nonce and an expiry. None of them is a secret; the signature is what makes a token impossible to forge
or alter, and the nonce (128 random bits) what makes it impossible to guess. What a link may do once checked (spent
on first use, bound to one browser) is for its feature to say.
"""

from __future__ import annotations

import secrets
from typing import Any

from itsdangerous import BadData, URLSafeSerializer

from bridge.door.model import Actor

MAX_NAME = 80
"""Display names are carried for the chat's 'accepted by …' lines; a long one is cut rather than bloat the URL."""

Claims = tuple[str, Actor, str, float]
"""What a token says: its subject, the person, the nonce and the expiry (seconds since the epoch)."""


def new_nonce() -> str:
    return secrets.token_urlsafe(16)


class PersonTokens:
    """Signs and reads one feature's claims. `salt` keeps its signatures apart from anything else signed with the same
    key; `subject_field` is the claim's short name in the token (kept, so tokens already issued still read)."""

    def __init__(self, key: str | bytes, *, salt: str, subject_field: str) -> None:
        self._signer = URLSafeSerializer(key, salt=salt)
        self._subject = subject_field

    def dumps(self, subject: str, actor: Actor, nonce: str, expires_at: float) -> str:
        body = {self._subject: subject, "p": actor.platform, "u": actor.user_id, "d": actor.display_name[:MAX_NAME],
                "n": nonce, "e": int(expires_at)}
        token: str = self._signer.dumps(body)
        return token

    def loads(self, token: str) -> Claims | None:
        """The claims of a token we signed, in the expected shape; None for anything else (malformed, altered, signed
        with another key, or from an older format). Signature first: nothing unsigned is read."""
        try:
            body: Any = self._signer.loads(token)
        except BadData:
            return None
        if not isinstance(body, dict):
            return None
        strings = [body.get(k) for k in (self._subject, "p", "u", "d", "n")]
        expires = body.get("e")
        if not all(isinstance(s, str) for s in strings) or isinstance(expires, bool) or not isinstance(expires, int):
            return None
        subject, platform, user_id, name, nonce = (str(s) for s in strings)
        return subject, Actor(platform, user_id, name), nonce, float(expires)
