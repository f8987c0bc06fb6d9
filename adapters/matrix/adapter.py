"""The Matrix adapter: nio's client wired to the host. All I/O of the adapter lives here.

Events arrive from the sync loop through nio callbacks, which only collect them; after each sync they are queued
(history from before the bot joined a room left out), followed by the sync token, and one task handles them in order
and then saves the token. So a slow send never stalls syncing, two events of one card are never handled at once, and
a stop never skips events that were queued but not yet handled. Cards are posted from the
host's tasks (`post_card`), and their state (`cards.Card`) is found again from any event id that belongs to them.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import nio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from nio.api import RelationshipType

from adapters.matrix import render
from adapters.matrix._errors import NIO_FAILURES, LoginLost, UnknownToken, call
from adapters.matrix.cards import Card, Poll, poll_fields
from adapters.matrix.login import forget_credentials, load_sync_token, log_in, save_sync_token
from adapters.matrix.notices import Throttle
from adapters.matrix.settings import MatrixSettings
from adapters.matrix.translate import (
    PLATFORM,
    ReactionIn,
    TextIn,
    VoteIn,
    command_text,
    message_in,
    reaction_in,
    text_in,
    vote_in,
)
from bridge.config import Config
from bridge.dialog import Step, StepKind
from bridge.errors import AdapterError, BridgeError, PlatformAPIError, RateLimited
from bridge.model import (
    Action,
    Actor,
    CardRef,
    ConversationKey,
    DecisionIn,
    Interaction,
    MessageRef,
    Outcome,
    Status,
    StatusView,
    Verdict,
)
from bridge.ports import CLEANUP_TIMEOUT, Inbound

logger = logging.getLogger(__name__)

RESTORE_WAIT = 60.0
"""How long a card restored after a restart waits for the core to pick its request up again."""
MAX_BOT_THREADS = 10_000
"""Threads the bot answered in that it remembers (the least recently used are forgotten)."""
MAX_UNDECRYPTED = 500
"""Encrypted events kept until their room key arrives (the oldest are dropped)."""


@dataclass(frozen=True, slots=True)
class _Synced:
    """Queued after the events of one sync: once they are handled, the sync token can be saved."""

    token: str


class MatrixAdapter:
    """A `bridge.ports.Adapter` for Matrix. Make it with `adapters.matrix.create`."""

    platform = PLATFORM

    def __init__(self, host: Inbound, settings: MatrixSettings, config: Config, *,
                 client_config: Any = None) -> None:
        self.host = host
        self.settings = settings
        self.scope = config.conversation_scope
        settings.store_path.mkdir(parents=True, exist_ok=True)
        self.client: Any = nio.AsyncClient(
            settings.homeserver, settings.user_id, device_id=settings.device_id or "",
            store_path=str(settings.store_path),
            config=client_config or nio.AsyncClientConfig(
                encryption_enabled=settings.encryption,
                store_sync_tokens=False,  # kept by login.save_sync_token, also without E2EE
                max_limit_exceeded=settings.max_rate_limited,  # nio sleeps retry_after_ms between tries
                max_timeouts=3,
            ))
        self.cards: dict[str, Card] = {}
        self._by_event: dict[str, str] = {}
        self._by_thread: dict[str, list[str]] = {}
        self._bot_threads: OrderedDict[str, None] = OrderedDict()
        self._live = False
        self._throttle = Throttle(interval=30.0)
        self._batch: list[tuple[Any, Any]] = []
        """What the sync in progress brought (nio's callbacks collect it; `_flush` hands it to the handler)."""
        self._joined_at: dict[str, int] = {}
        """Per room, the server time of the bot's own join: older timeline events are history, not new."""
        self._undecrypted: OrderedDict[str, tuple[Any, Any]] = OrderedDict()
        self._warned_plain: set[str] = set()
        self._inbox: MemoryObjectSendStream[tuple[Any, Any] | _Synced] | None = None
        self.ready = anyio.Event()
        """Set once logged in and caught up: from then on new events are handled."""
        self._settled = anyio.Event()
        """Set when ready, or when `serve` ended without getting there: what waits for `ready` stops waiting."""
        self.device_id = ""

    # -- running -------------------------------------------------------------------------------------------------

    async def serve(self) -> None:
        """Log in, catch up, then sync and handle events until cancelled. Ends with `LoginLost` when the homeserver
        rejects the login and there is no password to log in again with."""
        try:
            credentials = await log_in(self.client, self.settings)
            self.device_id = credentials.device_id
            self.client.add_event_callback(self._queue, (nio.RoomMessageText, nio.ReactionEvent, nio.UnknownEvent,
                                                         nio.MegolmEvent, nio.InviteMemberEvent, nio.RoomMemberEvent))
            self.client.add_to_device_callback(self._on_room_key, (nio.RoomKeyEvent, nio.ForwardedRoomKeyEvent))
            await self._keep_keys()
            restored = self._restore_cards()
            send, receive = anyio.create_memory_object_stream[tuple[Any, Any] | _Synced](math.inf)
            lost: LoginLost | None = None
            async with anyio.create_task_group() as tg, send, receive:
                self._inbox = send
                tg.start_soon(self._handle_events, receive)
                for card in restored:
                    tg.start_soon(self._carry_on, card)
                try:
                    await self._sync_loop(load_sync_token(self.settings.store_path, credentials.device_id))
                except LoginLost as exc:
                    lost = exc  # raised below, not wrapped in the task group's ExceptionGroup
                    tg.cancel_scope.cancel()
            if lost is not None:
                raise lost
        finally:
            self._inbox = None
            self._settled.set()
            with anyio.CancelScope(shield=True):
                await self.client.close()

    async def _sync_loop(self, resume_from: str | None) -> None:
        """Sync until cancelled. The first sync fetches room state only (nio keeps no rooms across restarts, and
        it needs them to send), so room history is never replayed as new; then, after a restart, syncing goes on
        from the stored token, and whatever happened while the bridge was down is handled."""
        delay = 1.0
        first = True
        while True:
            try:
                await call("sync", self.client.sync(timeout=0 if first else self.settings.sync_timeout_ms,
                                                    sync_filter=_STATE_ONLY if first else None,
                                                    full_state=True if first else None))
            except RateLimited as exc:
                await anyio.sleep(max(exc.retry_after, 1.0))
                continue
            except UnknownToken as exc:
                await self._log_in_again(exc)
                continue
            except PlatformAPIError as exc:
                logger.warning("matrix sync failed, retrying in %.0fs: %s", delay, exc)
                await anyio.sleep(delay)
                delay = min(delay * 2, 60.0)
                continue
            delay = 1.0
            if first:
                first = False
                if resume_from:
                    self.client.next_batch = resume_from
            self._flush()
            if not self._live:
                self._live = True
                self.ready.set()
                self._settled.set()
            await self._keep_keys()

    def _flush(self) -> None:
        """Hand the events of the sync that just ended to the handler, then its token, which the handler saves once
        the events before it are handled (a stop in between replays them after the restart instead of losing them).

        The sync after the bot joins a room replays that room's recent history; the bot's own join event (in the same
        timeline) marks where history ends, so nothing said before it is taken as new."""
        batch, self._batch = self._batch, []
        me = self.client.user_id
        for room, event in batch:
            if (isinstance(event, nio.RoomMemberEvent) and event.state_key == me and event.membership == "join"
                    and event.prev_membership != "join"):
                self._joined_at[room.room_id] = _timestamp(event)
        if self._inbox is None:
            return
        for room, event in batch:
            if isinstance(event, nio.RoomMemberEvent):
                continue
            joined = self._joined_at.get(room.room_id, 0)
            if not isinstance(event, nio.InviteMemberEvent) and _timestamp(event) < joined:
                continue  # from before the bot joined
            self._inbox.send_nowait((room, event))
        if self.client.next_batch:
            self._inbox.send_nowait(_Synced(self.client.next_batch))

    async def _log_in_again(self, exc: UnknownToken) -> None:
        """The homeserver rejected the token (the device was logged out, or the token revoked). The kept login is
        useless now: forget it, and log in again with the password, or end `serve` when there is none."""
        store = self.settings.store_path
        forget_credentials(store)
        if self.settings.access_token or not self.settings.password:
            raise LoginLost(f"matrix: the homeserver rejected the bot's access token ({exc.error}). Configure a new "
                            "access_token, or a password to log in with, and start again.") from exc
        logger.warning("matrix: the access token was rejected (%s); logging in again with the password", exc.error)
        # A logged-out device has lost its keys on the server: start a new device, with a key store of its own.
        c = self.client
        c.access_token, c.device_id, c.store, c.olm = "", "", None, None
        delay = 1.0
        while True:
            try:
                credentials = await log_in(c, self.settings)
                break
            except RateLimited as again:
                await anyio.sleep(max(again.retry_after, 1.0))
            except PlatformAPIError as again:
                if "M_FORBIDDEN" in again.error:  # the password is wrong (changed) as well
                    raise LoginLost(f"matrix: logging in again failed: {again.error}") from again
                logger.warning("matrix login failed, retrying in %.0fs: %s", delay, again)
                await anyio.sleep(delay)
                delay = min(delay * 2, 60.0)
        self.device_id = credentials.device_id
        await self._keep_keys()

    async def _keep_keys(self) -> None:
        """What nio's sync_forever does between syncs for E2EE: upload, query and claim keys, send to-device."""
        c = self.client
        if c.olm is None:
            return
        try:
            if c.outgoing_to_device_messages:
                await call("send_to_device", c.send_to_device_messages())
            if c.should_upload_keys:
                await call("keys_upload", c.keys_upload())
            if c.should_query_keys:
                await call("keys_query", c.keys_query())
            if c.should_claim_keys:
                await call("keys_claim", c.keys_claim(c.get_users_for_key_claiming()))
        except AdapterError as exc:
            logger.warning("matrix key maintenance failed: %s", exc)

    async def _queue(self, room: Any, event: Any) -> None:
        if isinstance(event, nio.InviteMemberEvent) or self._live:
            self._batch.append((room, event))
            if isinstance(event, nio.MegolmEvent) and self.client.olm is not None:
                # Kept until its room key arrives (`_on_room_key`); the oldest go first.
                self._undecrypted[event.event_id] = (room, event)
                while len(self._undecrypted) > MAX_UNDECRYPTED:
                    self._undecrypted.popitem(last=False)

    async def _on_room_key(self, key: Any) -> None:
        """A room key arrived late (or was forwarded after our request): decrypt the events that waited for it and
        handle them with this sync's events. nio has imported the key already when it calls this."""
        for event_id, (room, event) in list(self._undecrypted.items()):
            if event.session_id != key.session_id or room.room_id != key.room_id:
                continue
            try:
                decrypted = self.client.decrypt_event(event)
            except NIO_FAILURES as exc:
                logger.debug("still cannot decrypt %s: %s", event_id, exc)
                continue
            del self._undecrypted[event_id]
            self._batch.append((room, decrypted))

    async def _handle_events(self, items: MemoryObjectReceiveStream[tuple[Any, Any] | _Synced]) -> None:
        async for item in items:
            if isinstance(item, _Synced):
                save_sync_token(self.settings.store_path, self.device_id, item.token)
                continue
            room, event = item
            try:
                await self._handle(room, event)
            except AdapterError as exc:
                logger.warning("matrix: could not handle %s: %s", getattr(event, "event_id", "?"), exc)
            except Exception:  # top-level handler: one bad event must not stop the bot
                logger.exception("matrix: failed to handle %s", getattr(event, "event_id", "?"))

    # -- inbound -------------------------------------------------------------------------------------------------

    async def _handle(self, room: Any, event: Any) -> None:
        room_id: str = room.room_id
        if isinstance(event, nio.InviteMemberEvent):
            await self._on_invite(room_id, event)
            return
        if not self.settings.room_allowed(room_id):
            return  # joined before allowed_rooms was set (or changed)
        sender = str(getattr(event, "sender", ""))
        if sender == self.client.user_id:
            return
        if isinstance(event, nio.MegolmEvent):
            await self._on_undecryptable(room, event)
            return
        source: Mapping[str, Any] = event.source
        vote = vote_in(room_id, source)
        if vote is not None:
            await self._on_vote(room, vote)
            return
        reaction = reaction_in(room_id, source)
        if reaction is not None:
            await self._on_reaction(room, reaction, int(source.get("origin_server_ts") or 0))
            return
        text = text_in(room_id, source, self.client.user_id)
        if text is not None:
            await self._on_text(room, text, int(source.get("origin_server_ts") or 0))

    async def _on_invite(self, room_id: str, event: Any) -> None:
        if event.state_key != self.client.user_id or event.membership != "invite":
            return
        if room_id in self.client.rooms:
            return  # already joined (an invite replayed by a sync)
        if self.settings.user_allowed(str(event.sender)) and self.settings.room_allowed(room_id):
            await call("join", self.client.join(room_id))
            logger.info("joined %s (invited by %s)", room_id, event.sender)
        else:
            logger.info("declined invite to %s from %s (not allowed)", room_id, event.sender)
            await call("leave", self.client.room_leave(room_id))

    async def _on_undecryptable(self, room: Any, event: Any) -> None:
        if self.client.olm is None:
            if room.room_id not in self._warned_plain:
                self._warned_plain.add(room.room_id)  # once per room and run
                await self._post(room.room_id, render.message(render.plain(
                    "This room is encrypted, but this bridge runs with e2ee: off, so it cannot read it. Use an "
                    "unencrypted room, or set chat.matrix.e2ee to optional.")), plain_ok=True)
            return
        logger.info("could not decrypt %s in %s; asking for the key", event.event_id, room.room_id)
        try:
            await call("request_room_key", self.client.request_room_key(event))
        except (AdapterError, nio.LocalProtocolError) as exc:
            logger.debug("room key request failed: %s", exc)

    def _actor(self, room: Any, user_id: str) -> Actor:
        name = room.user_name(user_id) if hasattr(room, "user_name") else None
        return Actor(PLATFORM, user_id, str(name or user_id))

    def _card_of(self, room: Any, event_id: str | None) -> Card | None:
        """The open card an event refers to, if it is in the room the event came from: an event id from another
        room must not answer a card (a request anyone may answer would otherwise be open to any room)."""
        if not event_id:
            return None
        interaction_id = self._by_event.get(event_id)
        card = self.cards.get(interaction_id) if interaction_id else None
        if card is None or card.done or card.interaction.conversation.channel != room.room_id:
            return None
        return card

    def _card_in_thread(self, room: Any, thread: str | None) -> Card | None:
        for interaction_id in self._by_thread.get(thread or "", ()):
            card = self.cards.get(interaction_id)
            if card is not None and not card.done and card.interaction.conversation.channel == room.room_id:
                return card  # the oldest open card of the thread answers first
        return None

    def _may_decide(self, card: Card, actor: Actor) -> bool:
        """Only people allowed to use the bridge count, also on cards that anyone may answer (no approvers)."""
        return self.settings.user_allowed(actor.user_id) and card.interaction.may_decide(actor)

    async def _refuse(self, room: Any, card: Card, actor: Actor) -> None:
        """Someone who may not decide tried: tell them (at most every so often), the card stays open."""
        if not self._throttle.allow(("refuse", card.interaction.id, actor.user_id)):
            return
        i = card.interaction
        who = i.requester.label() if i.requester else "the approvers" if i.approvers else \
            "people allowed to use this bridge"
        await self.notify(i.conversation, actor, f"Only {who} can answer this request; your answer was not counted.")

    async def _on_vote(self, room: Any, vote: VoteIn) -> None:
        card = self._card_of(room, vote.poll_id)
        if card is None:
            return
        poll = card.polls[vote.poll_id]
        actor = self._actor(room, vote.sender)
        if not self._may_decide(card, actor):
            await self._refuse(room, card, actor)
            return
        if card.vote(poll, vote.sender, vote.timestamp, render.poll_value(poll.field, vote.answers)):
            await self._refresh_summary(card)

    async def _on_reaction(self, room: Any, reaction: ReactionIn, timestamp: int) -> None:
        card = self._card_of(room, reaction.target)
        if card is None:
            return
        actor = self._actor(room, reaction.sender)
        key = reaction.key
        poll = card.poll_for(reaction.target)
        if key not in (render.ACCEPT, render.DECLINE, render.CANCEL) and (poll is None or key not in render.KEYCAPS):
            return  # someone's emoji, not an answer
        if not self._may_decide(card, actor):
            await self._refuse(room, card, actor)
            return
        if poll is not None and key in render.KEYCAPS:
            if card.keycap(poll, reaction.sender, timestamp, key):
                await self._refresh_summary(card)
            return
        if key != render.ACCEPT:
            # Declining or cancelling needs no answers: it counts on any part of the card, at any time.
            await self._decide(card, actor, "decline" if key == render.DECLINE else "cancel", None)
            return
        if not card.confirming:
            q = card.dialog.question()
            await self.notify(card.interaction.conversation, actor,
                              f"Answer the questions in the thread first (now: {q.text}).")
            return
        await self._run(card, card.dialog.answer(key), actor)

    async def _on_text(self, room: Any, text: TextIn, timestamp: int) -> None:
        card = self._card_of(room, text.relation.reply_to) or self._card_in_thread(room, text.relation.thread)
        is_command = command_text(text.body) is not None
        if card is not None and not is_command:
            actor = self._actor(room, text.sender)
            if not self._may_decide(card, actor):
                await self._refuse(room, card, actor)
                return
            poll = card.poll_for(text.relation.reply_to or "")
            if poll is not None and text.body.strip().lower() not in ("!decline", "!cancel"):
                reason = card.poll_reply(poll, text.sender, timestamp, text.body)
                if reason:
                    await self.notify(card.interaction.conversation, actor, f"{reason.capitalize()}.")
                else:
                    await self._refresh_summary(card)
                return
            await self._run(card, card.reply(text.body), actor)
            return
        if not self.settings.user_allowed(text.sender):
            return
        actor = self._actor(room, text.sender)
        message = message_in(text, actor, workspace=self.settings.server_name, scope=self.scope,
                             bot_id=self.client.user_id, bot_name=str(room.user_name(self.client.user_id) or ""),
                             direct=room.member_count <= 2,
                             bot_thread=self._is_bot_thread(text.relation.thread))
        if message is None:
            return
        if self.settings.e2ee == "required" and not room.encrypted:
            if self._throttle.allow(("e2ee-required", room.room_id)):
                await self._post(room.room_id, render.message(render.plain(
                    "I only work in encrypted rooms here (e2ee: required). Turn on encryption in the room "
                    "settings, or talk to me in an encrypted room.")), plain_ok=True)
            return
        await self.host.handle_message(message)

    # -- the text dialog -----------------------------------------------------------------------------------------

    async def _run(self, card: Card, step: Step, actor: Actor) -> None:
        """Carry out one step of a card's dialog: ask, re-ask, or send the decision to the core."""
        if step.kind is StepKind.DONE:
            assert step.action is not None
            await self._decide(card, actor, step.action, step.content)
            return
        await self._ask(card, step.message if step.kind is StepKind.REASK else "")

    async def _ask(self, card: Card, reason: str = "") -> None:
        q = card.dialog.question()
        if q.field is None:
            if card.root_is_summary and card.question is None:
                # Nothing was edited: the card itself (with its reactions) is the summary.
                if reason:
                    await self._thread_post(card, render.message(render.plain("⚠ " + reason + " " + q.hint),
                                                                 msgtype="m.text"))
                return
            await self._post_summary(card, reason)
            return
        event_id = await self._thread_post(card, render.message(
            render.question(q, reason), msgtype="m.text", mark={"interaction": card.interaction.id,
                                                                 "part": "question", "field": q.field.name}))
        card.question = event_id
        self._own(card, event_id)

    async def _post_summary(self, card: Card, reason: str = "") -> None:
        content = self._summary_content(card, reason)
        event_id = await self._thread_post(card, content)
        card.summary = event_id
        self._own(card, event_id)
        await self._pre_react(card.room_id, event_id)

    def _summary_content(self, card: Card, reason: str = "") -> dict[str, Any]:
        return render.message(render.summary(card.dialog.summary_lines(), card.dialog.question(), reason=reason,
                                             poll_note=bool(card.polls)),
                              msgtype="m.text", mark={"interaction": card.interaction.id, "part": "summary"})

    async def _refresh_summary(self, card: Card) -> None:
        """A vote changed an answer after the summary was shown: edit it, so what is accepted is what is shown."""
        if card.summary is None or card.done:
            return
        await self._post(card.room_id, render.edit(card.summary, self._summary_content(card)))

    async def _pre_react(self, room_id: str, event_id: str) -> None:
        # Our own reactions make the choices clickable pills in Element; they are ignored when they come back.
        for key in (render.ACCEPT, render.DECLINE, render.CANCEL):
            await self._post(room_id, render.reaction(event_id, key), event_type="m.reaction")

    async def _decide(self, card: Card, actor: Actor, action: Action, content: Mapping[str, Any] | None) -> None:
        result = await self.host.decide(DecisionIn(card.interaction.id, actor, action, content))
        if result.verdict is Verdict.CLAIMED:
            card.done = True
        elif result.verdict is Verdict.INVALID:
            polls = card.poll_errors(result.errors)
            if polls:
                reason = "; ".join(f"{title}: {why}" for title, why in polls.items())
                await self._ask(card, f"Please fix the poll answers first ({reason}).")
            else:
                step = card.dialog.rejected(result.errors)
                await self._ask(card, step.message)
        # REFUSED, LATE and UNKNOWN: the core has told the person already.

    async def _thread_post(self, card: Card, content: dict[str, Any]) -> str:
        """Post into the card's thread, as a reply to the last thing we said there (for clients without threads)."""
        content = {**content, "m.relates_to": render.thread_relation(card.thread, card.latest)}
        event_id = await self._post(card.room_id, content)
        card.latest = event_id
        return event_id

    # -- outbound primitives -------------------------------------------------------------------------------------

    async def _post(self, room_id: str, content: Mapping[str, Any], *, event_type: str = "m.room.message",
                    plain_ok: bool = False) -> str:
        if not self.ready.is_set():
            # The host may post before the first sync (it retires an earlier run's cards at start-up), but nio can
            # send only once it is logged in and knows the rooms.
            await self._settled.wait()
            if not self.ready.is_set():
                raise PlatformAPIError(PLATFORM, "room_send", "not connected to the homeserver")
        room = self.client.rooms.get(room_id)
        if self.settings.e2ee == "required" and not plain_ok and room is not None and not room.encrypted:
            raise PlatformAPIError(PLATFORM, "room_send", "the room is not encrypted and e2ee is required")
        # ignore_unverified_devices: nio has no cross-signing, so "verified" would mean hand-verifying every
        # device of every member; the room key is shared with the members' devices as Element does by default.
        response = await call("room_send", self.client.room_send(room_id, event_type, dict(content),
                                                                  ignore_unverified_devices=True))
        return str(response.event_id)

    # -- ChatPort ------------------------------------------------------------------------------------------------

    def _waits_for(self, interaction: Interaction) -> list[render.Mention]:
        if interaction.requester is not None and interaction.requester.platform == PLATFORM:
            return [render.Mention(interaction.requester.user_id, interaction.requester.label())]
        prefix = PLATFORM + ":"
        return [render.Mention(a[len(prefix):], a[len(prefix):]) for a in sorted(interaction.approvers)
                if a.startswith(prefix)]

    async def post_card(self, interaction: Interaction) -> CardRef:
        conversation = interaction.conversation
        room_id = conversation.channel
        thread = conversation.thread or None
        people = self._waits_for(interaction)
        polls = poll_fields(interaction)
        text = render.card(interaction, people, now=time.time(), polls=len(polls),
                           questions=len(interaction.form.fields) - len(polls))
        root = await self._post(room_id, render.message(
            text, msgtype="m.text", thread=thread, mentions=[p.user_id for p in people],
            mark={"interaction": interaction.id, "part": "card"}))
        card = Card.new(interaction, room_id, root, thread or root)
        self._register(card)
        try:
            for f in polls:
                event_id = await self._post(room_id, render.poll_start(
                    f, thread=card.thread, latest=card.latest,
                    mark={"interaction": interaction.id, "part": "poll", "field": f.name}),
                    event_type=render.POLL_START)
                card.polls[event_id] = Poll(event_id, f)
                card.latest = event_id
                self._own(card, event_id)
            if polls:
                await self._thread_post(card, render.message(render.poll_help(len(polls))))
            await self._start(card)
        except BaseException as exc:
            # Half posted: the core will not finish a card it never got a ref for, so end it here (forgotten,
            # polls ended, root edited), or it would stay open and first in its thread, taking later replies.
            reason = f"the card could not be posted: {exc}" if isinstance(exc, AdapterError) else \
                "the card could not be posted"
            with anyio.move_on_after(CLEANUP_TIMEOUT, shield=True):
                try:
                    await self.finish_card(CardRef(interaction.id, card.ref_data()), interaction,
                                           Outcome(Status.FAILED, reason=reason))
                except AdapterError as cleanup:
                    logger.warning("could not end the half-posted card %s: %s", interaction.id, cleanup)
            raise
        return CardRef(interaction.id, card.ref_data())

    def _register(self, card: Card) -> None:
        self.cards[card.interaction.id] = card
        self._by_thread.setdefault(card.thread, []).append(card.interaction.id)
        self._remember_thread(card.thread)
        for event_id in card.events():
            self._own(card, event_id)

    def _own(self, card: Card, event_id: str) -> None:
        card.owned.add(event_id)
        self._by_event[event_id] = card.interaction.id

    def _forget(self, card: Card) -> None:
        card.done = True
        for event_id in card.owned | card.events():
            self._by_event.pop(event_id, None)
        ids = self._by_thread.get(card.thread)
        if ids is not None:
            if card.interaction.id in ids:
                ids.remove(card.interaction.id)
            if not ids:
                del self._by_thread[card.thread]

    def _remember_thread(self, thread: str) -> None:
        self._bot_threads[thread] = None
        self._bot_threads.move_to_end(thread)
        while len(self._bot_threads) > MAX_BOT_THREADS:
            self._bot_threads.popitem(last=False)

    def _is_bot_thread(self, thread: str | None) -> bool:
        if not thread or thread not in self._bot_threads:
            return False
        self._bot_threads.move_to_end(thread)
        return True

    async def _start(self, card: Card, *, react: bool = True) -> None:
        if card.root_is_summary and react:
            await self._pre_react(card.room_id, card.root)
        step = card.dialog.start()
        if step.question is not None and step.question.field is None and card.root_is_summary:
            return
        await self._ask(card)

    async def finish_card(self, ref: CardRef, interaction: Interaction, outcome: Outcome) -> None:
        card = self.cards.pop(interaction.id, None)
        if card is not None:
            self._forget(card)
        room_id = ref.data.get("room", interaction.conversation.channel)
        root = ref.data.get("root")
        failures: list[AdapterError] = []
        content = dict(outcome.content) if outcome.content else None
        if root:
            finished = render.message(render.finished(interaction, outcome,
                                                      render.content_lines(interaction, content)), msgtype="m.text")
            try:
                await self._post(room_id, render.edit(root, finished), plain_ok=True)
            except AdapterError as exc:
                failures.append(exc)
        for poll_id, name in _poll_map(ref).items():
            try:
                f = interaction.form.field(name)
            except KeyError:
                continue
            value = content.get(name) if content and outcome.status is Status.ACCEPTED else None
            try:
                await self._post(room_id, render.poll_end(poll_id, f, value), event_type=render.POLL_END,
                                 plain_ok=True)
            except AdapterError as exc:
                failures.append(exc)
        if failures:
            raise failures[0]

    async def send(self, conversation: ConversationKey, text: str) -> MessageRef:
        thread = conversation.thread or None
        if thread:
            self._remember_thread(thread)
        event_id = await self._post(conversation.channel, render.message(render.plain(text), thread=thread))
        return MessageRef(conversation, {"room": conversation.channel, "event": event_id})

    async def notify(self, conversation: ConversationKey, actor: Actor, text: str) -> None:
        # Matrix has no ephemeral messages: a short notice naming the person, at most once a while per text.
        if not self._throttle.allow(("notify", conversation.channel, actor.user_id, text)):
            return
        person = render.Mention(actor.user_id, actor.label())
        await self._post(conversation.channel, render.message(
            render.mentioned(person, text), thread=conversation.thread or None, mentions=[actor.user_id]))

    async def post_status(self, conversation: ConversationKey, status: StatusView) -> MessageRef:
        event_id = await self._post(conversation.channel, render.message(
            render.status_line(status), thread=conversation.thread or None))
        return MessageRef(conversation, {"room": conversation.channel, "event": event_id})

    async def update_status(self, ref: MessageRef, status: StatusView) -> None:
        content = render.message(render.status_line(status))
        await self._post(ref.data["room"], render.edit(ref.data["event"], content))

    # -- after a restart -----------------------------------------------------------------------------------------

    def _restore_cards(self) -> list[Card]:
        """Rebuild the cards of durable (2026-era) requests that outlived the last run, so that votes, replies and
        reactions find them again. Poll votes are recounted from the server (in `_carry_on`, once synced); text
        answers given before the restart were not kept, so the questions are asked again."""
        for stored in self.host.restorable_cards(PLATFORM):
            i = stored.interaction
            data = stored.card.data
            if "root" not in data or "room" not in data:
                continue
            card = Card.new(i, data["room"], data["root"], data.get("thread") or data["root"])
            for poll_id, name in _poll_map(stored.card).items():
                try:
                    card.polls[poll_id] = Poll(poll_id, i.form.field(name))
                except KeyError:
                    continue
            self._register(card)
        return list(self.cards.values())

    async def _recount(self, card: Card, poll: Poll) -> None:
        try:
            async for event in self.client.room_get_event_relations(card.room_id, poll.event_id,
                                                                    RelationshipType.reference):
                try:
                    self._count(card, poll, event)
                except NIO_FAILURES as exc:  # one undecryptable vote must not lose the others
                    logger.info("skipped a vote on poll %s: %s", poll.event_id, exc)
        except _RECOUNT_FAILURES as exc:
            # A failed recount is not fatal: later votes still count; earlier ones must be cast again.
            logger.warning("could not recount the votes of poll %s: %s", poll.event_id, exc)

    def _count(self, card: Card, poll: Poll, event: Any) -> None:
        if isinstance(event, nio.MegolmEvent):
            if self.client.olm is None:
                return
            event.room_id = event.room_id or card.room_id  # not set on events fetched outside a sync
            event = self.client.decrypt_event(event)
        vote = vote_in(card.room_id, getattr(event, "source", {}) or {})
        if vote is None:
            return
        if self._may_decide(card, Actor(PLATFORM, vote.sender)):
            card.vote(poll, vote.sender, vote.timestamp, render.poll_value(poll.field, vote.answers))

    async def _carry_on(self, card: Card) -> None:
        # The core picks a stored request up only after its server session is back; until then a decision would be
        # refused as "being restored". Nothing signals that moment to a chat port, so look every so often.
        await self.ready.wait()  # nio knows the rooms (needed to send) only after the first sync
        for poll in card.polls.values():
            await self._recount(card, poll)
        with anyio.move_on_after(RESTORE_WAIT):
            await self.host.wait_open(card.interaction.id)
        if self.host.open_interaction(card.interaction.id) is None or card.done:
            return
        try:
            await self._thread_post(card, render.message(render.plain(
                "The bridge restarted. This request is still open; answers typed before the restart were not "
                "kept, so here are the questions again (poll votes still count)."),
                mark={"interaction": card.interaction.id, "part": "restored"}))
            await self._start(card, react=False)
        except BridgeError as exc:
            logger.warning("could not re-post card %s after the restart: %s", card.interaction.id, exc)


_STATE_ONLY = {"room": {"timeline": {"limit": 0}}}


def _timestamp(event: Any) -> int:
    source = getattr(event, "source", None)
    ts = source.get("origin_server_ts") if isinstance(source, Mapping) else None
    return ts if isinstance(ts, int) else 0
_RECOUNT_FAILURES: tuple[type[BaseException], ...] = (AttributeError, AdapterError, *NIO_FAILURES)
"""nio's relations iterator raises its transport errors (and AttributeError on an error page) mid-iteration."""


def _poll_map(ref: CardRef) -> dict[str, str]:
    try:
        data = json.loads(ref.data.get("polls", "{}"))
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
