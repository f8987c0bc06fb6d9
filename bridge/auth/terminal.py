"""Signing in from a terminal: the authorization URL and its host on stderr, the redirect received on a one-shot
loopback listener (`bridge.auth.callback`). The bridge never opens the URL itself."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TextIO

import anyio
from anyio.abc import TaskGroup
from mcp.shared.auth import AuthorizationCodeResult

from bridge.auth.callback import LoopbackListener
from bridge.auth.signins import Authorizations
from bridge.config.file import ServerConfig
from bridge.errors import AuthError
from bridge.text.plain import url_host


class TerminalConsent:
    """A `Consent` for the person at this terminal. Use as `async with TerminalConsent(...) as consent:`."""

    def __init__(self, out: TextIO, sanitize: Callable[[str], str]) -> None:
        self._out = out
        self._clean = sanitize
        self.authorizations = Authorizations()
        self._listener: LoopbackListener | None = None
        self._stack = contextlib.AsyncExitStack()
        self._tg: TaskGroup | None = None
        self._serving = False

    def redirect_uri(self, server: ServerConfig, registered: Sequence[str]) -> str:
        """The listener's address, bound on first need: the first of `registered` (a configured redirect URI, or
        those a stored client was registered with) that is a free loopback port, else a free port."""
        if self._listener is None:
            for uri in registered:
                try:
                    self._listener = LoopbackListener(self.authorizations, uri)
                    break
                except AuthError:
                    continue
            else:
                self._listener = LoopbackListener(self.authorizations)
        return self._listener.redirect_uri

    async def __aenter__(self) -> TerminalConsent:
        self._tg = await self._stack.enter_async_context(anyio.create_task_group())
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._stack.aclose()
        if self._listener is not None:
            self._listener.close()

    async def ask(self, server: ServerConfig, identity: str, authorization_url: str) -> AuthorizationCodeResult:
        pending = self.authorizations.begin(authorization_url, server=server.name, person=identity,
                                            ttl=server.auth.timeout)
        await self._serve()
        minutes = max(1, round(server.auth.timeout / 60))
        self._say(f"{server.name} needs you to sign in (OAuth, at {url_host(authorization_url)}).",
                  "Open this link in a browser on this machine:",
                  f"    {authorization_url}",
                  f"Waiting up to {minutes} minute{'s' if minutes != 1 else ''} for the sign-in to finish…")
        return await self.authorizations.wait(pending)

    def settle(self, state: str, error: str | None) -> None:
        signed_in = self.authorizations.settle(state, error)
        if signed_in is not None and error is None:
            self._say(f"Signed in to {signed_in.server}.")  # only now: the code was exchanged, the tokens kept

    async def _serve(self) -> None:
        if self._serving:
            return
        assert self._tg is not None and self._listener is not None
        self._serving = True
        listener = self._listener

        async def serve(*, task_status: anyio.abc.TaskStatus[None]) -> None:
            async with listener.serving():
                task_status.started()
                await anyio.sleep_forever()

        await self._tg.start(serve)

    def _say(self, *lines: str) -> None:
        for line in lines:
            print(self._clean(line), file=self._out)
        self._out.flush()
