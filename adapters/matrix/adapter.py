"""The Matrix adapter: its parts put together, and each new event sent where it belongs.

- `client`: the one typed door to nio; `login`: staying the same device; `sync`: the sync loop and event intake;
- `outbox`: sending; `index`: where the open cards are; `ended`: cards that ended, for late answers;
- `layout`, `formstate`, `formtext`, `formflow`: form cards (where each field is asked, the answers so far, what the
  card says, and its life in the room); `asking`: approvals' questions in their thread;
- `answers`: votes, reactions, redactions and replies sent to their card; `restore`: cards that outlived a restart;
- `port`: the chat port the core calls (cards, messages, notices, status lines); `render`, `markup`: event content.
"""

from __future__ import annotations

import functools
import logging
from collections import OrderedDict
from typing import Any

import anyio

from adapters.matrix import render, weblinks
from adapters.matrix.answers import Answers
from adapters.matrix.approval_thread import Asker
from adapters.matrix.client import PLATFORM, MatrixClient, RoomEvent
from adapters.matrix.index import CardIndex
from adapters.matrix.login import log_in
from adapters.matrix.markup import Mention, plain
from adapters.matrix.outbox import Connection, Outbox
from adapters.matrix.port import MatrixPort
from adapters.matrix.restore import Restorer
from adapters.matrix.settings import MatrixSettings
from adapters.matrix.sync import Intake
from adapters.matrix.translate import TextIn, message_in, reaction_in, redaction_in, text_in, vote_in
from adapters.matrix.weblinks import WebLinks
from bridge.config.file import Config
from bridge.door.model import Actor, AppOffer, ConversationKey
from bridge.door.ports import Inbound, app_link
from bridge.errors import AdapterError, PlatformAPIError

logger = logging.getLogger(__name__)

PLAIN_ROOM = ("This room is encrypted, but this bridge runs with e2ee: off, so it cannot read it. Use an unencrypted "
              "room, or set chat.matrix.e2ee to optional.")
NOT_ENCRYPTED = ("I only work in encrypted rooms here (e2ee: required). Turn on encryption in the room settings, or "
                 "talk to me in an encrypted room.")


class MatrixAdapter(MatrixPort):
    """A `bridge.door.ports.Adapter` for Matrix. Make it with `adapters.matrix.create`."""

    def __init__(self, inbound: Inbound, settings: MatrixSettings, config: Config, *,
                 client_config: Any = None) -> None:
        self.inbound = inbound
        self.settings = settings
        self.scope = config.conversation_scope
        self.client = MatrixClient(settings, client_config)
        self.connection = Connection()
        outbox = Outbox(self.client, settings, self.connection)
        index = CardIndex()
        asker = Asker(outbox, index)
        super().__init__(inbound, outbox, index, asker)
        self.restorer = Restorer(inbound, self.client, settings, self.connection, index, asker, self.forms)
        self.answers = Answers(inbound, settings, index, asker, self.forms, self.ended, self.notify,
                               own_event=self._own_event,
                               web=WebLinks(inbound, outbox, self.direct, self.notify), adopt=self.restorer.adopt)
        self.intake = Intake(self.client, settings, self.connection, self._handle, inbound.adapter_state(PLATFORM))
        self._warned_plain: set[str] = set()
        self._directs: set[str] = set()
        self._app_offers: OrderedDict[tuple[str, str], tuple[ConversationKey, AppOffer]] = OrderedDict()
        """The room messages that offer an app, by (room, event): a 📱 reaction on one sends that person a link."""
        """Direct-message rooms the bot opened to reach approvers: answers there count even outside allowed_rooms."""

    @property
    def ready(self) -> anyio.Event:
        """Set once logged in and caught up: from then on new events are handled."""
        return self.connection.ready

    async def readiness(self) -> str | None:
        if not self.connection.ready.is_set():
            return "not caught up with the homeserver yet (first sync)"
        return self.connection.failing or None

    @property
    def device_id(self) -> str:
        return self.intake.device_id

    async def serve(self) -> None:
        """Log in, catch up, then sync and handle events until cancelled. Ends with `LoginLost` when the homeserver
        rejects the login and there is no password to log in again with."""
        try:
            credentials = await log_in(self.client, self.settings)
            self.intake.listen(credentials.device_id)
            await self.intake.keep_keys()
            restored = await self.restorer.restore()
            # One sync loop per bot account across the bridge's workers; the others still post and edit cards. A
            # new leader first adopts the open cards the others posted, so that answers to them find them.
            await self.intake.run(*(functools.partial(self.restorer.carry_on, card) for card in restored),
                                  lead=lambda: self.inbound.leadership(f"matrix-sync:{self.client.user_id}"),
                                  on_lead=self.restorer.adopt)
        finally:
            self.connection.gave_up()
            with anyio.CancelScope(shield=True):
                await self.client.close()

    # -- reaching people -----------------------------------------------------------------------------------------

    async def direct(self, user_id: str) -> ConversationKey | None:
        """A direct-message room with one person: the one opened before (kept in the adapter's state), else new."""
        state = self.inbound.adapter_state(PLATFORM)
        room_id = await state.get(f"direct:{user_id}")
        if room_id is None or not self.client.joined(room_id):
            room_id = await self.client.create_direct(user_id, encrypted=self.settings.e2ee == "required")
            await state.set(f"direct:{user_id}", room_id)
        self._directs.add(room_id)
        return ConversationKey(PLATFORM, self.settings.server_name, room_id)

    async def offer_app(self, conversation: ConversationKey, offer: AppOffer) -> None:
        """A result's app, on Matrix: its link acts as one person, and a room has no message only one person sees,
        so the requester's own link goes to them in a direct message; the room is told, and anyone else there reacts
        📱 to that message for a link of their own."""
        person = offer.requester if offer.requester is not None and offer.requester.platform == PLATFORM else None
        event_id = await self.outbox.post(conversation.channel, render.message(
            weblinks.app_offer_text(offer, Mention(person.user_id, person.label()) if person else None),
            thread=conversation.thread or None, mentions=[person.user_id] if person else ()))
        self._app_offers[(conversation.channel, event_id)] = (conversation, offer)
        while len(self._app_offers) > weblinks.MAX_APP_OFFERS:
            self._app_offers.popitem(last=False)
        if person is not None:
            await self._send_app_link(conversation, offer, person)

    async def _send_app_link(self, conversation: ConversationKey, offer: AppOffer, person: Actor) -> None:
        url = app_link(self.inbound, offer.view_id, person)
        if url is None:
            await self.notify(conversation, person, weblinks.APP_ENDED)
            return
        try:
            dm = await self.direct(person.user_id)
            if dm is None:
                raise PlatformAPIError(PLATFORM, "createRoom", f"no direct message room with {person.user_id}")
            await self.outbox.post(dm.channel, render.message(weblinks.app_link_message(offer, url), msgtype="m.text",
                                                               mentions=[person.user_id]))
        except AdapterError as exc:
            logger.warning("could not send %s their app link: %s", person.user_id, exc)
            await self.notify(conversation, person, weblinks.NO_APP_DM)

    async def members(self, conversation: ConversationKey) -> frozenset[str] | None:
        return self.client.members(conversation.channel)

    async def group_members(self, group: str) -> frozenset[str]:
        return frozenset()  # Matrix has no groups of people to look up: groups are config lists

    # -- new events ----------------------------------------------------------------------------------------------

    async def _handle(self, event: RoomEvent) -> None:
        room_id = event.room_id
        if event.kind == "invite":
            await self._on_invite(event)
            return
        if not self.settings.room_allowed(room_id) and room_id not in self._directs:
            return  # joined before allowed_rooms was set (or changed)
        if event.sender == self.client.user_id:
            return
        if event.kind == "encrypted":
            await self._on_undecryptable(event)
            return
        source = event.source
        vote = vote_in(room_id, source)
        if vote is not None:
            await self.answers.vote(vote, self._actor(room_id, vote.sender))
            return
        reaction = reaction_in(room_id, source)
        if reaction is not None and reaction.key == weblinks.APP and (room_id, reaction.target) in self._app_offers:
            conversation, offer = self._app_offers[(room_id, reaction.target)]
            await self._send_app_link(conversation, offer, self._actor(room_id, reaction.sender))
            return
        if reaction is not None:
            await self.answers.reaction(reaction, self._actor(room_id, reaction.sender), event.timestamp)
            return
        redaction = redaction_in(room_id, source)
        if redaction is not None:
            await self.answers.redaction(redaction)
            return
        text = text_in(room_id, source, self.client.user_id)
        if text is None:
            return
        if await self.answers.reply(text, self._actor(room_id, text.sender), event.timestamp):
            return
        await self._on_message(room_id, text)

    async def _own_event(self, room_id: str, event_id: str) -> RoomEvent | None:
        event = await self.client.event(room_id, event_id)
        return event if event is not None and event.sender == self.client.user_id else None

    def _actor(self, room_id: str, user_id: str) -> Actor:
        return Actor(PLATFORM, user_id, self.client.display_name(room_id, user_id) or user_id)

    async def _on_message(self, room_id: str, text: TextIn) -> None:
        """A message that is no answer to a card: for the core, if it is meant for the bot."""
        if not self.settings.user_allowed(text.sender):
            return
        message = message_in(text, self._actor(room_id, text.sender), workspace=self.settings.server_name,
                             scope=self.scope, bot_id=self.client.user_id,
                             bot_name=self.client.display_name(room_id, self.client.user_id) or "",
                             direct=self.client.member_count(room_id) <= 2,
                             bot_thread=self.cards.is_bot_thread(text.relation.thread))
        if message is None:
            return
        if self.settings.e2ee == "required" and not self.client.room_encrypted(room_id):
            if self.notices.allow(("e2ee-required", room_id)):
                await self.outbox.post(room_id, render.message(plain(NOT_ENCRYPTED)), plain_ok=True)
            return
        await self.inbound.handle_message(message)

    async def _on_invite(self, event: RoomEvent) -> None:
        room_id = event.room_id
        if event.state_key != self.client.user_id or event.membership != "invite":
            return
        if self.client.joined(room_id):
            return  # already joined (an invite replayed by a sync)
        if self.settings.user_allowed(event.sender) and self.settings.room_allowed(room_id):
            await self.client.join(room_id)
            logger.info("joined %s (invited by %s)", room_id, event.sender)
        else:
            logger.info("declined invite to %s from %s (not allowed)", room_id, event.sender)
            await self.client.leave(room_id)

    async def _on_undecryptable(self, event: RoomEvent) -> None:
        if not self.client.e2ee:
            if event.room_id not in self._warned_plain:
                self._warned_plain.add(event.room_id)  # once per room and run
                await self.outbox.post(event.room_id, render.message(plain(PLAIN_ROOM)), plain_ok=True)
            return
        logger.info("could not decrypt %s in %s; asking for the key", event.event_id, event.room_id)
        try:
            await self.client.request_room_key(event)
        except AdapterError as exc:
            logger.debug("room key request failed: %s", exc)
