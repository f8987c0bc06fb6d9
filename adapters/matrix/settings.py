"""The `chat.matrix` config block as typed settings.

The block was already validated against `bridge/config/schema.json` when the config was loaded; this only gives it
types and defaults, and answers the two policy questions the block configures: who may talk to the bot and which
rooms it may join.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

E2EE = Literal["off", "optional", "required"]


@dataclass(frozen=True, slots=True)
class MatrixSettings:
    homeserver: str
    user_id: str
    password: str | None = None
    access_token: str | None = None
    device_id: str | None = None
    device_name: str = "mcp-chat-bridge"
    store_path: Path = Path("./matrix-store")
    e2ee: E2EE = "optional"
    allowed_users: tuple[str, ...] = ()
    """Matrix ids or glob patterns (`@*:example.org`). Empty: people on the bot's own homeserver."""
    allowed_rooms: tuple[str, ...] = ()
    """Room ids the bot may join. Empty: any room an allowed person invites it to."""
    max_rate_limited: int = 5
    """How many M_LIMIT_EXCEEDED answers nio waits out (each for the server's retry_after_ms) before giving up."""
    sync_timeout_ms: int = 30_000

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> MatrixSettings:
        return cls(
            homeserver=str(raw["homeserver"]).rstrip("/"),
            user_id=str(raw["user_id"]),
            password=raw.get("password") or None,
            access_token=raw.get("access_token") or None,
            device_id=raw.get("device_id") or None,
            device_name=str(raw.get("device_name", "mcp-chat-bridge")),
            store_path=Path(str(raw.get("store_path", "./matrix-store"))),
            e2ee=raw.get("e2ee", "optional"),
            allowed_users=tuple(str(u) for u in raw.get("allowed_users", ())),
            allowed_rooms=tuple(str(r) for r in raw.get("allowed_rooms", ())),
        )

    @property
    def server_name(self) -> str:
        """The bot's homeserver name (the part of its id after the first colon)."""
        return self.user_id.split(":", 1)[1] if ":" in self.user_id else self.user_id

    def user_allowed(self, user_id: str) -> bool:
        if not self.allowed_users:
            # Open by default would let anyone on any federated server run tools; the bot's own server is the
            # smallest sensible default for a bot that was just set up.
            return user_id.endswith(":" + self.server_name)
        return any(fnmatch.fnmatchcase(user_id, pattern) for pattern in self.allowed_users)

    def room_allowed(self, room_id: str) -> bool:
        return not self.allowed_rooms or room_id in self.allowed_rooms

    @property
    def encryption(self) -> bool:
        return self.e2ee != "off"
