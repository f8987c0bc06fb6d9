"""Button clicks on cards: accept/decline/cancel, inline answers, opening the form, links and Stop.

Every click is acked at once (Slack gives 3 seconds) and handled after. Who may click at all is the
allow-list's (`gate.py`); who may decide on a given request is the core's (`Inbound.decide`/`check`), which also
tells a refused or late person why nothing happened.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncAck

from adapters.slack import ids, translate
from adapters.slack.modals import Modals, still_open
from adapters.slack.people import People
from adapters.slack.port import SlackPort
from bridge.errors import AdapterError
from bridge.model import Action, DecisionIn
from bridge.ports import Inbound

logger = logging.getLogger(__name__)

JSON = dict[str, Any]
DECISIONS: dict[str, Action] = {ids.ACCEPT: "accept", ids.DECLINE: "decline", ids.CANCEL: "cancel"}


class Clicks:
    def __init__(self, inbound: Inbound, people: People, modals: Modals, port: SlackPort) -> None:
        self._inbound = inbound
        self._people = people
        self._modals = modals
        self._port = port

    async def on_decision(self, ack: AsyncAck, body: JSON, action: JSON) -> None:
        await ack()
        who = await self._people.of(body["user"])
        await self._inbound.decide(DecisionIn(str(action["value"]), who, DECISIONS[action["action_id"]]))

    async def on_choice(self, ack: AsyncAck, body: JSON, action: JSON) -> None:
        await ack()
        who = await self._people.of(body["user"])
        interaction_id = str(action["value"])
        # Not open here: another worker may hold it (several workers on one store); the core decides either way.
        interaction = still_open(self._inbound, interaction_id) or await self._inbound.known_interaction(interaction_id)
        content = translate.inline_content(interaction.form, action["action_id"]) if interaction else None
        if interaction is None or content is None:
            await self._inbound.check(interaction_id, who)  # tells them why the click did nothing
            return
        await self._inbound.decide(DecisionIn(interaction_id, who, "accept", content))

    async def on_open_form(self, ack: AsyncAck, body: JSON, action: JSON) -> None:
        await ack()
        who = self._people.cached(body["user"])
        interaction_id = str(action["value"])
        interaction = still_open(self._inbound, interaction_id)
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

    async def on_link(self, ack: AsyncAck) -> None:
        # A link button opens in the browser; Slack still reports the click, which only needs an ack.
        await ack()

    async def on_stop(self, ack: AsyncAck, body: JSON, action: JSON) -> None:
        await ack()
        who = await self._people.of(body["user"])
        await self._inbound.stop_call(str(action["value"]), who)
