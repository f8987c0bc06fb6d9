"""Button clicks on cards: accept/decline/cancel, inline answers, opening the form, links and Stop.

A listener only acks (Slack gives 3 seconds, and a late ack shows the person an error) and keeps the click's
`response_url`; the rest (looking the person up, deciding, opening a modal) runs after the ack in the adapter's
background (`background.py`). Who may click at all is the allow-list's (`gate.py`); who may decide on a given
request is the core's (`Inbound.decide`/`check`), which also tells a refused or late person why nothing happened.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from slack_bolt.async_app import AsyncAck

from adapters.slack import ids, translate
from adapters.slack.background import Background
from adapters.slack.modals import Modals
from adapters.slack.people import People
from adapters.slack.port import SlackPort
from adapters.slack.responses import channel_of
from bridge.door.model import Action, DecisionIn, Verdict
from bridge.door.ports import Inbound, app_link, look_up
from bridge.errors import AdapterError

logger = logging.getLogger(__name__)

JSON = dict[str, Any]
NO_WEB_LINK = "This request cannot be filled in on the web now; answer it here."
DECISIONS: dict[str, Action] = {ids.ACCEPT: "accept", ids.DECLINE: "decline", ids.CANCEL: "cancel"}


class Clicks:
    def __init__(self, inbound: Inbound, people: People, modals: Modals, port: SlackPort,
                 background: Background) -> None:
        self._inbound = inbound
        self._people = people
        self._modals = modals
        self._port = port
        self._background = background

    async def _acked(self, ack: AsyncAck, body: JSON) -> None:
        await ack()
        self._port.response_urls.remember(channel_of(body), str(body["user"]["id"]), body.get("response_url"))

    async def on_decision(self, ack: AsyncAck, body: JSON, action: JSON) -> None:
        await self._acked(ack, body)
        decision = DECISIONS[action["action_id"]]
        interaction_id = str(action["value"])
        self._background.spawn(f"{decision} on {interaction_id}",
                               functools.partial(self._decide, body["user"], interaction_id, decision))

    async def _decide(self, user: JSON, interaction_id: str, decision: Action) -> None:
        await self._inbound.decide(DecisionIn(interaction_id, await self._people.of(user), decision))

    async def on_grant(self, ack: AsyncAck, body: JSON, action: JSON) -> None:
        """Accept, and allow the same again in the scope the button names (the core checks it is offered)."""
        await ack()
        who = await self._people.of(body["user"])
        await self._inbound.decide(DecisionIn(str(action["value"]), who, "accept",
                                              grant=ids.grant_scope(str(action["action_id"]))))

    async def on_choice(self, ack: AsyncAck, body: JSON, action: JSON) -> None:
        await self._acked(ack, body)
        interaction_id = str(action["value"])
        self._background.spawn(f"answer to {interaction_id}", functools.partial(
            self._choose, body["user"], interaction_id, str(action["action_id"])))

    async def _choose(self, user: JSON, interaction_id: str, action_id: str) -> None:
        who = await self._people.of(user)
        found = await look_up(self._inbound, interaction_id)
        interaction = found.interaction if found is not None else None
        content = translate.inline_content(interaction.form, action_id) if interaction else None
        if interaction is None or content is None:
            await self._inbound.check(interaction_id, who)  # tells them why the click did nothing
            return
        await self._inbound.decide(DecisionIn(interaction_id, who, "accept", content))

    async def on_open_form(self, ack: AsyncAck, body: JSON, action: JSON) -> None:
        await self._acked(ack, body)
        self._background.spawn(f"form of {action['value']}", functools.partial(self._open_form, body,
                                                                               str(action["value"])))

    async def _open_form(self, body: JSON, interaction_id: str) -> None:
        who = self._people.cached(body["user"])
        interaction = await self._modals.find(interaction_id)
        if interaction is None or not interaction.may_decide(who):
            await self._inbound.check(interaction_id, await self._people.actor(who.user_id, who.display_name))
            return
        container = body.get("container") or {}
        meta = ids.ModalMeta(interaction_id, str(container.get("channel_id", "")),
                             str(container.get("message_ts", "")))
        try:
            # Open first (the trigger id lasts 3 seconds from the click), look people up later.
            await self._modals.open(body["trigger_id"], interaction, meta)
        except AdapterError as exc:
            logger.warning("could not open the form for %s: %s", interaction_id, exc)
            await self._port.tell(meta.channel, who.user_id, f"The form could not be opened ({exc}); try again.")

    async def on_web_form(self, ack: AsyncAck, body: JSON, action: JSON) -> None:
        await self._acked(ack, body)
        self._background.spawn(f"web link for {action['value']}", functools.partial(
            self._web_link, body, str(action["value"])))

    async def _web_link(self, body: JSON, interaction_id: str) -> None:
        """The clicker's own one-time link, made now (the card is public, so no link is in it) and sent to them
        alone; someone who may not answer is told why by the core, as for any click."""
        who = await self._people.of(body["user"])
        channel = channel_of(body)
        interaction = await self._modals.find(interaction_id)
        result = await self._inbound.check(interaction_id, who, web_link=True)  # refused or ended: the core says so
        if interaction is None or not result.web_link:
            if result.verdict is Verdict.CLAIMED:  # theirs to answer, but no link (it is about to expire)
                await self._port.tell(channel, who.user_id, NO_WEB_LINK)
            return
        try:
            await self._port.send_web_link(channel, who.user_id, result.web_link,
                                           interaction.conversation.thread or None)
        except AdapterError as exc:
            logger.warning("could not send %s their web link for %s: %s", who.user_id, interaction_id, exc)

    async def on_open_app(self, ack: AsyncAck, body: JSON, action: JSON) -> None:
        await self._acked(ack, body)
        self._background.spawn(f"app link for {action['value']}", functools.partial(
            self._app_link, body, str(action["value"])))

    async def _app_link(self, body: JSON, view_id: str) -> None:
        """The clicker's own link to the app, made now (the message is public, so no link is in it) and sent to them
        alone."""
        who = await self._people.of(body["user"])
        channel = channel_of(body)
        thread = (body.get("message") or {}).get("thread_ts") or None
        try:
            await self._port.send_app_link(channel, who.user_id, app_link(self._inbound, view_id, who), thread)
        except AdapterError as exc:
            logger.warning("could not send %s their app link for %s: %s", who.user_id, view_id, exc)

    async def on_link(self, ack: AsyncAck) -> None:
        # A link button opens in the browser; Slack still reports the click, which only needs an ack.
        await ack()

    async def on_stop(self, ack: AsyncAck, body: JSON, action: JSON) -> None:
        await self._acked(ack, body)
        self._background.spawn(f"stop {action['value']}", functools.partial(self._stop, body["user"],
                                                                            str(action["value"])))

    async def _stop(self, user: JSON, call_id: str) -> None:
        await self._inbound.stop_call(call_id, await self._people.of(user))
