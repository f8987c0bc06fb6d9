"""Which session a use of a server gets: per conversation (or one shared), a slot of the server's pool, and per
person for `per_user` servers.

`scope: auto` (the default) follows the protocol the server speaks. A 2025-11-25 server gets a session per
conversation: its requests do not say which call they belong to, and it may keep state per session. A 2026-07-28
server is stateless (every request carries its context, roots are asked within the request), so calls from every
conversation share a small pool of sessions (`pool_size`); `SessionPool` picks the slot. `scope: conversation` keeps
a session per conversation on either era, `scope: shared` one session for all.

A `per_user` server is used with each person's own account, so its sessions are also keyed by the person: one
person's token is never used for another's call, whatever the conversation scope (a channel-wide conversation, a
shared session), and it is never pooled. A use with no known person fails closed before anything is sent.
"""

from __future__ import annotations

from bridge.config.auth import PERSONAL
from bridge.config.file import ServerConfig
from bridge.door.model import Actor, ConversationKey
from bridge.errors import AuthError

SHARED = "*"
POOL = "pool:"
"""The prefix of a pooled session's place: `pool:0`, `pool:1`, ..."""

SessionKey = tuple[str, str, str]
"""(conversation id or SHARED, server name, person's actor key or '')."""


def personal(server: ServerConfig) -> bool:
    """Whether the server is used with each person's own account."""
    return bool(server.url) and server.auth.identity in PERSONAL


def session_key(server: ServerConfig, conversation: ConversationKey, person: Actor | None) -> SessionKey:
    """Raises AuthError for a `per_user` server and no known person."""
    who = ""
    if personal(server):
        if person is None or not person.user_id:
            raise AuthError(f"{server.name} works with each person's own account, and this request comes from no "
                            "known person, so it was not sent.")
        who = person.key
    return (SHARED if server.scope == "shared" else conversation.id(), server.name, who)


def follows_era(server: ServerConfig) -> bool:
    """Whether where its sessions go waits on the protocol it speaks: `scope: auto`, and not a `per_user` server."""
    return server.scope == "auto" and not personal(server)


def pinned_era(server: ServerConfig) -> bool | None:
    """Whether it speaks 2026-07-28, when its config says so before connecting; None for `protocol: auto`."""
    return {"2026-07-28": True, "legacy": False}.get(server.protocol)


def pool_key(server: str, slot: int) -> SessionKey:
    return (f"{POOL}{slot}", server, "")


def pooled(key: SessionKey) -> bool:
    return key[0].startswith(POOL)


def auth_failure(exc: BaseException) -> AuthError | None:
    """The AuthError behind a failed start (through task groups and the exceptions that wrapped it), if any: a
    sign-in that did not happen is told as such, not as a server that failed to start."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, AuthError):
            return current
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return None
