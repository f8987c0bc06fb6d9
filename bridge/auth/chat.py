"""The running bridge's `Consent`: who is asked to sign in, and where the redirect comes back.

- `per_user` servers: the person whose call needs it (`ASKING`, set by their session), with a private Connect prompt
  (`bridge.auth.prompt`); the redirect comes back to the bridge's one HTTP server.
- `shared` servers: nobody in chat. An admin signs in once from a terminal (`mcp-chat-bridge tools -c FILE SERVER`);
  the conversation is told which command to run. Their stored registration keeps the redirect it was made with.
- `service` accounts never ask anyone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mcp.shared.auth import AuthorizationCodeResult

from bridge.auth.oauth import PLACEHOLDER_REDIRECT, NoConsent
from bridge.auth.prompt import ConnectPrompts
from bridge.auth.session_auth import ASKING
from bridge.config.file import ServerConfig
from bridge.errors import AuthError

CALLBACK_PATH = "/oauth/callback"


class ChatConsent:
    def __init__(self, prompts: ConnectPrompts, config_path: str = "FILE") -> None:
        self._prompts = prompts
        self.admin = NoConsent(config_path)
        self.redirect: Callable[[], str] | None = None
        """The public address of the callback route, once the bridge's HTTP server serves it."""

    def redirect_uri(self, server: ServerConfig, registered: Sequence[str]) -> str:
        if server.auth.identity != "per_user":
            return self.admin.redirect_uri(server, registered)
        return self.redirect() if self.redirect is not None else PLACEHOLDER_REDIRECT

    async def ask(self, server: ServerConfig, identity: str, authorization_url: str) -> AuthorizationCodeResult:
        if server.auth.identity != "per_user":
            return await self.admin.ask(server, identity, authorization_url)
        asking = ASKING.get()
        if asking is None or asking.person.key != identity:
            # Fail closed: a sign-in is only ever offered to the person whose account it becomes.
            raise AuthError(f"{server.name} needs its user to connect their own account, and they cannot be asked "
                            "from here; it was not called")
        if self.redirect is None:
            raise AuthError(f"{server.name} needs {asking.person.label()} to connect their own account, but this "
                            "bridge has no HTTP server for the sign-in to come back to (set http.listen and "
                            "http.public_url)")
        return await self._prompts.connect(server, asking, authorization_url)

    def settle(self, state: str, error: str | None) -> None:
        self._prompts.settle(state, error)
