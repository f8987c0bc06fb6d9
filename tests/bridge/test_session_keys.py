"""Which session a use gets: per conversation or shared, and per person for `per_user` servers (pure)."""

from __future__ import annotations

import pytest

from bridge.config.auth import AuthConfig
from bridge.config.file import ServerConfig
from bridge.door.model import Actor, ConversationKey
from bridge.errors import AuthError, ServerStartError
from bridge.servers.session_keys import SHARED, auth_failure, personal, session_key

ROOM = ConversationKey("slack", "T1", "C1")
ADA = Actor("slack", "U1", "Ada")
PER_USER = AuthConfig(identity="per_user")


def test_only_url_servers_with_per_user_identity_are_personal() -> None:
    assert personal(ServerConfig("s", url="https://a/mcp", auth=PER_USER))
    assert not personal(ServerConfig("s", url="https://a/mcp"))
    assert not personal(ServerConfig("s", command="x", auth=PER_USER))


def test_keys_add_the_person_for_per_user_servers_whatever_the_scope() -> None:
    plain = ServerConfig("s", command="x")
    shared = ServerConfig("s", url="https://a/mcp", auth=PER_USER, scope="shared")
    mine = ServerConfig("s", url="https://a/mcp", auth=PER_USER)
    assert session_key(plain, ROOM, ADA) == (ROOM.id(), "s", "")
    assert session_key(shared, ROOM, ADA) == (SHARED, "s", "slack:U1")
    assert session_key(mine, ROOM, ADA) == (ROOM.id(), "s", "slack:U1")
    for nobody in (None, Actor("slack", "")):
        with pytest.raises(AuthError, match="comes from no known person, so it was not sent"):
            session_key(mine, ROOM, nobody)


def test_the_auth_error_behind_a_failed_start_is_found_through_groups_and_causes() -> None:
    refused = AuthError("Ada did not connect s")
    try:
        try:
            raise refused
        except AuthError as exc:
            raise RuntimeError("transport closed") from exc
    except RuntimeError as wrapped:
        group = BaseExceptionGroup("tasks", [ValueError("x"), wrapped])
    assert auth_failure(group) is refused
    assert auth_failure(ServerStartError("s", "s failed to start", "")) is None
