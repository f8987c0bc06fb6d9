"""The private "Connect <server>" prompt: a person signs in with their own account, asked where only they see it.

The prompt is a link card (the full authorization URL and its host, checked with `bridge.safety.sanitize.check_host`)
that only that person may answer, shown privately: inside the conversation where the platform can show a card to one
person (Slack: an ephemeral message), else in a direct message with them (Matrix), else where it is (the console,
which has one person and prints it on stderr). The sign-in finishes when the authorization server redirects back to
the bridge's HTTP server with the prompt's `state` (`bridge.auth.signins`). Its code goes to the waiting flow, and the
card stays until the code was exchanged: connected once the tokens are stored, else failed saying why (`settle`, from
the OAuth provider). So a card outlives the `connect` that posted it, in the task group the prompts run in (`run_in`:
the host's). Declining the card, or the time running out, ends the sign-in: the waiting call is told, and the person
runs it again.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import anyio
from anyio.abc import TaskGroup, TaskStatus
from mcp.shared.auth import AuthorizationCodeResult

from bridge.auth.session_auth import Asking
from bridge.auth.signins import Authorization, Authorizations
from bridge.cards.broker import Broker
from bridge.cards.chat import Outbound
from bridge.config.file import ServerConfig
from bridge.config.team import duration_text
from bridge.door.model import ConversationKey, Detail, Interaction, Kind, ServerLabel, Status
from bridge.errors import AdapterError, AuthError
from bridge.requests.request_context import RequestContext, new_interaction
from bridge.safety.browser_url import check_host
from bridge.text.presentation import describe_status

logger = logging.getLogger(__name__)

CONNECTED = "connected"


class ConnectPrompts:
    def __init__(self, broker: Broker, outbound: Outbound, authorizations: Authorizations) -> None:
        self._broker = broker
        self._outbound = outbound
        self._authorizations = authorizations
        self._tasks: TaskGroup | None = None

    def run_in(self, tasks: TaskGroup) -> None:
        """The task group the cards live in until their sign-in ended (the running host's)."""
        self._tasks = tasks

    async def connect(self, server: ServerConfig, asking: Asking, authorization_url: str) -> AuthorizationCodeResult:
        """Ask `asking.person` to sign in to `server` and return what the redirect brought back (then `settle`
        says how its exchange went). Raises AuthError when they decline, the authorization server refuses, or the
        time (`auth.timeout`) runs out."""
        person = asking.person
        timeout = server.auth.timeout
        if self._tasks is None:
            raise AuthError(f"{server.name} needs {person.label()} to connect their own account, and the bridge is "
                            "not running to ask them")
        pending = await self._authorizations.start(authorization_url, server=server.name, person=person.key,
                                                   ttl=timeout)
        place, origin = await self._place(asking)
        card = self.card(server, asking, authorization_url, place, origin, timeout)
        if origin is not None:
            await self._outbound.say(origin, f"{person.label()}: {server.name} works with each person's own account; "
                                             "I sent you a private prompt to connect yours, in a direct message.")
        follow: anyio.CancelScope = await self._tasks.start(self._follow, card, pending)
        try:
            return await self._authorizations.wait(pending, too_late=f"{person.label()} did not connect {server.name} "
                                                                     f"within {duration_text(timeout)}; run the call "
                                                                     "again for a new prompt.")
        except AuthError:
            raise  # the card ends with the sign-in, saying why
        except BaseException:
            follow.cancel()  # the call was stopped: its card is withdrawn
            raise

    def settle(self, state: str, error: str | None) -> None:
        """How the exchange of a code `connect` returned went (its card ends accordingly)."""
        self._authorizations.settle(state, error)

    def card(self, server: ServerConfig, asking: Asking, url: str, place: ConversationKey,
             origin: ConversationKey | None, timeout: float) -> Interaction:
        host = check_host(url)
        warning = f" Careful: {host.warning}." if host.suspicious else ""
        message = (f"Connect {server.name}: it works with each person's own account. Sign in with yours and the "
                   f"request you made goes on, as you. Only you can see and answer this.{warning}")
        ctx = RequestContext(place, ServerLabel(server.name, server.title), asking.person,
                             frozenset({asking.person.key}))
        interaction = new_interaction(ctx, Kind.URL, message, timeout=timeout, url=url,
                                      details=(Detail("Host", host.text()),), accept_label="Done",
                                      decline_label="Not now", quick_accept=True)
        return replace(interaction, origin=origin, private=True)

    async def _place(self, asking: Asking) -> tuple[ConversationKey, ConversationKey | None]:
        """Where only the person sees the card, and (for a direct message) the conversation it is about."""
        port = self._outbound.port_for(asking.conversation)
        if port.private_cards:
            return asking.conversation, None
        try:
            direct = await port.direct(asking.person.user_id)
        except AdapterError as exc:
            raise AuthError(f"could not open a direct message with {asking.person.label()} to connect "
                            f"their account: {exc}") from None
        return (direct, asking.conversation) if direct is not None else (asking.conversation, None)

    async def _follow(self, card: Interaction, pending: Authorization, *,
                      task_status: TaskStatus[anyio.CancelScope] = anyio.TASK_STATUS_IGNORED) -> None:
        """The card from its posting to its end: by the person (declining, or a failure to post it, ends the
        sign-in; a 'Done' keeps waiting for the redirect, which is what proves it), or by the sign-in's end."""
        with anyio.CancelScope() as scope:
            task_status.started(scope)
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._end_with, card, pending)
                outcome = await self._broker.ask(card)
                tg.cancel_scope.cancel()
            if outcome.status in (Status.DECLINED, Status.CANCELLED, Status.FAILED):
                self._authorizations.refuse(pending, f"{card.requester.label() if card.requester else 'nobody'} "
                                                     f"did not connect {card.server.name}: the prompt was "
                                                     f"{describe_status(outcome)}")

    async def _end_with(self, card: Interaction, pending: Authorization) -> None:
        """End the card as the sign-in ended: connected only once its tokens are stored (unless it ended first)."""
        await pending.finished.wait()
        if pending.error is None:
            self._broker.complete(card.id, CONNECTED)
        else:
            self._broker.fail(card.id, pending.error)
