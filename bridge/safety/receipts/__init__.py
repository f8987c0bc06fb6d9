"""Receipts: signed proof of a decision the bridge made, which a server can check without trusting the chat.

A receipt is a compact JWS (RFC 7515) signed with EdDSA (RFC 8037, Ed25519), carried in `_meta` under `META_KEY` of
what the decision lets happen (`docs/receipts.md`). `canonical` is the one hashing rule, `keys` the signing key ring
and its JWKS, `tokens` making and checking receipts. Pure: the audit row and delivery are the caller's
(`bridge.requests.receipting`).

Nothing is re-exported here: the config reads `keys` without loading the JOSE library.

May use: `bridge.errors` and libraries, like the rest of `bridge.safety`.
"""
