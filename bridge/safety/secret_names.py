"""The one secret detector: does a name or title say a value is a password, token, key or card number?

Used for form fields (the spec forbids asking for secrets in form mode, so the card warns) and for tool arguments
(masked on approval cards). It reads names and titles only, never descriptions: prose such as "do not give us your
pin" mentions a secret without asking for one. Names are split into words (snake_case, kebab-case, camelCase, spaces)
so `pin` matches `pin` and `card_pin` but not `spinner`.
"""

from __future__ import annotations

import itertools
import re

WORDS = frozenset({
    "password", "passwd", "passphrase", "pass", "pw", "pwd", "secret", "secrets", "token", "tokens", "apikey",
    "credential", "credentials", "auth", "authorization", "cookie", "cvv", "cvc", "pin", "ssn", "iban", "otp",
})
"""Words that on their own name a secret."""
PHRASES = (("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"), ("card", "number"),
           ("card", "no"), ("credit", "card"), ("social", "security"), ("session", "id"), ("session", "key"))
"""Pairs of consecutive words that name a secret."""

_SPLIT = re.compile(r"[^0-9a-zA-Z]+|(?<=[a-z0-9])(?=[A-Z])")


def words(text: str) -> list[str]:
    """`apiKey`, `api_key`, `API key` -> ['api', 'key']."""
    return [w.lower() for w in _SPLIT.split(text) if w]


def looks_secret(*labels: str) -> bool:
    """True when any label (a field or argument name, a title) names a secret."""
    for label in labels:
        found = words(label)
        if any(w in WORDS for w in found):
            return True
        if any(pair in PHRASES for pair in itertools.pairwise(found)):
            return True
        if "".join(found) in {"apikey", "privatekey", "cardnumber", "accesskey"}:
            return True
    return False
