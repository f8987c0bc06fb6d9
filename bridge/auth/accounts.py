"""The running bridge's OAuth accounts: the auth each session's HTTP client gets, the sign-in redirect's route on the
bridge's HTTP server, and a person's `accounts` and `logout`.

Whose account a session uses is its `person` (set by the pool for `per_user` servers, whose sessions are keyed by
conversation, server and person), else the server's shared or service account. Nothing here ever shows a token:
`connected` lists server names, `logout` says what was done.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import httpx2
from anyio.abc import TaskGroup

from bridge.auth.chat import CALLBACK_PATH, ChatConsent
from bridge.auth.fleet_signins import SigninsOnStore
from bridge.auth.oauth import NoConsent, OAuthClients
from bridge.auth.prompt import ConnectPrompts
from bridge.auth.revoke import revoke
from bridge.auth.session_auth import Asking, SessionAuth
from bridge.auth.signins import Authorizations, endpoint
from bridge.auth.tokens import VaultStorage
from bridge.cards.broker import Broker
from bridge.cards.chat import Outbound
from bridge.config.auth import PERSONAL
from bridge.config.file import Config
from bridge.door.model import Actor
from bridge.errors import CommandError, ConfigError, TokenStoreError
from bridge.servers.mcp_session import Session

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

logger = logging.getLogger(__name__)


class Routes(Protocol):
    """The bridge's HTTP server as this needs it (`bridge.web.server.HttpServer`)."""

    def route(self, path: str, endpoint: Callable[[Request], Awaitable[Response]],
              methods: tuple[str, ...] = ("GET",)) -> None: ...

    def url(self, path: str) -> str: ...


class PersonSessions(Protocol):
    """Closes one person's sessions with a server (`bridge.servers.sessions.SessionPool`), after a logout."""

    async def close_person(self, server: str, person: Actor) -> None: ...


class Accounts:
    def __init__(self, config: Config, broker: Broker, outbound: Outbound, *,
                 shared: SigninsOnStore | None = None) -> None:
        self._config = config
        # On a store several workers share, sign-ins are recorded there too: their redirect may reach any worker.
        self._shared = shared
        self.authorizations = Authorizations(shared=shared)
        self._prompts = ConnectPrompts(broker, outbound, self.authorizations)
        self.consent = ChatConsent(self._prompts)
        self.clients = OAuthClients(config, self.consent)

    def run_in(self, tasks: TaskGroup) -> None:
        """Connect prompts are offered from now on; their cards live in `tasks` (the running host's) until the
        sign-in they started has ended, which is after the call that asked got its code back."""
        self._prompts.run_in(tasks)
        if self._shared is not None:
            self._shared.run_in(tasks)

    def set_config_path(self, path: str) -> None:
        """The config file an admin signs shared accounts in with (named in the message that asks them to)."""
        self.consent.admin = NoConsent(path)

    def serve_redirects(self, http: Routes) -> None:
        """Receive sign-in redirects on the bridge's HTTP server; Connect prompts are offered from now on."""
        http.route(CALLBACK_PATH, endpoint(self.authorizations))
        self.consent.redirect = lambda: http.url(CALLBACK_PATH)

    def auth_for(self, session: Session) -> httpx2.Auth | None:
        """The pool's `auth`: the account's shared provider, seen through this session (who and where to ask)."""
        person = session.person
        inner = self.clients.for_server(session.server, person.key if person else None)
        if inner is None:
            return None

        def where() -> Asking | None:
            conversation = session.last_conversation or session.conversation
            return Asking(person, conversation) if person is not None and conversation is not None else None

        return SessionAuth(inner, where)

    async def connected(self, person: Actor) -> list[str]:
        """The servers this person has connected their own account to (names only), and the company sign-in."""
        names = []
        company = self._config.identity_provider
        if company is not None and any(s.auth.identity == "enterprise" for s in self._config.servers.values()):
            try:
                if await self.clients.company().signed_in(person.key):
                    names.append(f"{company.label()} (company sign-in)")
            except (ConfigError, TokenStoreError) as exc:
                logger.warning("could not read the company sign-in: %s", exc)
        for name, server in self._config.servers.items():
            if server.url and server.auth.identity in PERSONAL:
                try:
                    if server.url in await self.clients.vault(server).servers(person.key):
                        names.append(name)
                except (ConfigError, TokenStoreError) as exc:
                    logger.warning("could not read the stored accounts for %s: %s", name, exc)
        return names

    async def logout(self, name: str, person: Actor, sessions: PersonSessions) -> str:
        """Forget `person`'s tokens for a server (revoking them where the server supports it) and close their
        sessions with it, so the next call asks them to connect again. `--all`, or the company sign-in's name:
        every server's access that comes from it ends too."""
        company = self._config.identity_provider
        if name == "--all" or (company is not None and name not in self._config.servers
                               and name in (company.label(), "company")):
            return await self._logout_all(person, sessions, everything=name == "--all")
        server = self._config.servers.get(name)
        if server is None:
            raise CommandError(f"There is no server named {name!r}. Try `accounts`.")
        if not server.url or server.auth.identity not in PERSONAL:
            raise CommandError(f"{name} does not use each person's own account, so there is nothing of yours to "
                               "forget.")
        had, revoked = await self._forget(name, person, sessions)
        if not had:
            return f"You were not connected to {name}; nothing was kept."
        if server.auth.identity == "enterprise":
            assert company is not None
            return (f"Disconnected {name}. You are still signed in with {company.label()}, so your next call to it "
                    "connects again by itself; `logout company` or `logout --all` ends that.")
        return f"Disconnected {name}: your sign-in was forgotten" + \
            (" and revoked at the server." if revoked else " (the server offers no revocation).")

    async def _logout_all(self, person: Actor, sessions: PersonSessions, *, everything: bool) -> str:
        ended: list[str] = []
        company = self._config.identity_provider
        if company is not None and await self.clients.company().forget(person.key):
            ended.append(f"{company.label()} (company sign-in)")
        for name, server in self._config.servers.items():
            wanted = server.auth.identity == "enterprise" or (everything and server.auth.identity == "per_user")
            if server.url and wanted and (await self._forget(name, person, sessions))[0]:
                ended.append(name)
        if not ended:
            return "You were not signed in anywhere; nothing was kept."
        return f"Signed out of {', '.join(ended)}: every sign-in of yours there was forgotten."

    async def _forget(self, name: str, person: Actor, sessions: PersonSessions) -> tuple[bool, bool]:
        """Forget (and revoke, where offered) one server's tokens of the person and close their sessions with it:
        (whether there were any, whether the server took the revocation)."""
        server = self._config.servers[name]
        assert server.url is not None
        storage = VaultStorage(self.clients.vault(server), server.url, person.key)
        try:
            token = await storage.get_tokens()
            client = await storage.get_client_info()
        except TokenStoreError:
            token, client = None, None
        revoked = await revoke(server.url, token, client) if token is not None and client is not None else False
        await storage.vault.forget(server.url, person.key)
        self.clients.forget(server, person.key)
        await sessions.close_person(name, person)
        return token is not None, revoked

    async def aclose(self) -> None:
        await self.clients.aclose()



async def every_account(config: Config) -> list[tuple[str, str]]:
    """(server, person) for every person who connected their own account to a `per_user` server: the vaults
    `accounts` reads in chat, read for everyone (the operator's `accounts`). Names and ids only, never a token."""
    clients = OAuthClients(config, NoConsent())
    try:
        out: list[tuple[str, str]] = []
        for name, server in config.servers.items():
            if server.url and server.auth.identity in PERSONAL:
                out.extend((name, person) for person in await clients.vault(server).people(server.url))
        return out
    finally:
        await clients.aclose()
