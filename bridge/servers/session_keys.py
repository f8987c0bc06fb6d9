"""Which session a use of a server gets: per conversation (or one shared), and per person for `per_user` servers.

A `per_user` server is used with each person's own account, so its sessions are also keyed by the person: one
person's token is never used for another's call, whatever the conversation scope (a channel-wide conversation, a
shared session). A use with no known person fails closed before anything is sent.
"""

from __future__ import annotations

from bridge.config.file import ServerConfig
from bridge.errors import AuthError
from bridge.model import Actor, ConversationKey

SHARED = "*"

SessionKey = tuple[str, str, str]
"""(conversation id or SHARED, server name, person's actor key or '')."""


def personal(server: ServerConfig) -> bool:
    """Whether the server is used with each person's own account."""
    return bool(server.url) and server.auth.identity == "per_user"


def session_key(server: ServerConfig, conversation: ConversationKey, person: Actor | None) -> SessionKey:
    """Raises AuthError for a `per_user` server and no known person."""
    who = ""
    if personal(server):
        if person is None or not person.user_id:
            raise AuthError(f"{server.name} works with each person's own account, and this request comes from no "
                            "known person, so it was not sent.")
        who = person.key
    return (SHARED if server.scope == "shared" else conversation.id(), server.name, who)


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
