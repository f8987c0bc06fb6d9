"""The one canonical form receipts hash: what a server recomputes to check that a receipt is for its request.

JSON with object keys sorted, no whitespace, non-ASCII characters as themselves, UTF-8 encoded: Python's
`json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()`. For the JSON MCP requests
carry (objects, arrays, strings, integers, booleans, null) this is the RFC 8785 (JCS) form, except that JCS sorts keys
by UTF-16 code units (the same order unless keys hold characters beyond U+FFFF). A digest is `sha256:` and the
SHA-256 of that, in lowercase hex.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

PREFIX = "sha256:"


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""The `json.dumps` options above, built once (a request is hashed on every card)."""


def canonical(value: Any) -> bytes:
    return _CANONICAL.encode(value).encode("utf-8")


def digest(value: Any) -> str:
    return PREFIX + hashlib.sha256(canonical(value)).hexdigest()


def request_digest(method: str, params: Mapping[str, Any] | None) -> str:
    """The digest of a request the server sent (or the bridge sends): its method and its params as they travel,
    without `_meta` (where receipts and other annotations go)."""
    body = {k: v for k, v in (params or {}).items() if k != "_meta"}
    return digest({"method": method, "params": body})


def tool_digest(name: str, arguments: Mapping[str, Any] | None) -> str:
    """The digest of a `tools/call`: the tool's name and its arguments (`{}` when none), nothing else (a 2026 retry's
    `requestState` and `inputResponses` change between rounds; what runs does not)."""
    return request_digest("tools/call", {"name": name, "arguments": dict(arguments or {})})
