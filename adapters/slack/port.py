"""The host's `ChatPort` on Slack's Web API: cards, plain messages, private notices and status lines.

What a card looks like is `render.py`'s. Finishing a card also closes the modals open on it (`Modals.close_all`)
and republishes the App Home of the people it named (`HomeTab.refresh`); both are given to the port as plain
callables so it knows nothing else of them.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import anyio

from adapters.slack import render, translate
from adapters.slack.background import Background
from adapters.slack.client import SlackClients, api_errors
from adapters.slack.threads import BotThreads
from bridge.errors import AdapterError, PlatformAPIError, RateLimited
from bridge.model import Actor, CardRef, ConversationKey, Interaction, MessageRef, Outcome, StatusView

logger = logging.getLogger(__name__)

JSON = dict[str, Any]
FINAL_UPDATE_TIMEOUT = 7.0
"""How long the final card update may take before it is rescheduled, within the broker's 10 s cleanup."""
RESCHEDULE_ATTEMPTS = 3

CloseModals = Callable[[Interaction, str], Coroutine[Any, Any, None]]
"""Replace every modal open on an interaction with a 'closed' view saying what happened."""
CardChanged = Callable[[Interaction], None]
"""Told (without awaiting) when a card was posted or finished."""


class SlackPort:
    platform = translate.PLATFORM

    def __init__(self, clients: SlackClients, threads: BotThreads, background: Background,
                 close_modals: CloseModals, card_changed: CardChanged) -> None:
        self._clients = clients
        self._threads = threads
        self._background = background
        self._close_modals = close_modals
        self._card_changed = card_changed

    async def post_card(self, interaction: Interaction) -> CardRef:
        conversation = interaction.conversation
        ts = await self.post(conversation, render.fallback(interaction), render.card(interaction))
        self._card_changed(interaction)
        return CardRef(interaction.id, {"channel": conversation.channel, "ts": ts})

    async def finish_card(self, ref: CardRef, interaction: Interaction, outcome: Outcome) -> None:
        """Replace open modals and bring the card to its final state, concurrently and within the broker's cleanup
        deadline. A rate-limited or slow card update is rescheduled in the background."""
        what = render.outcome_text(outcome)
        update: JSON = {"channel": ref.data["channel"], "ts": ref.data["ts"],
                        "text": f"{render.fallback(interaction)}: {what}",
                        "blocks": render.finished_card(interaction, outcome)}
        failure: list[AdapterError] = []

        async def update_card() -> None:
            delay: float | None = None
            with anyio.move_on_after(FINAL_UPDATE_TIMEOUT):
                try:
                    async with api_errors("chat.update"):
                        await self._clients.final.chat_update(**update)
                    return
                except RateLimited as exc:
                    delay = exc.retry_after
                except AdapterError as exc:
                    failure.append(exc)
                    return
            why = "rate-limited" if delay is not None else f"no answer in {FINAL_UPDATE_TIMEOUT:.0f}s"
            delay = self._clients.final_wait if delay is None else delay
            if self._background.spawn(f"final update of card {interaction.id}",
                                      functools.partial(self._update_later, interaction.id, update, delay)):
                logger.warning("card %s not finished yet (%s); trying again in %.0fs", interaction.id, why, delay)
            else:
                failure.append(PlatformAPIError(translate.PLATFORM, "chat.update", why))

        async with anyio.create_task_group() as tg:
            tg.start_soon(update_card)
            tg.start_soon(self._close_modals, interaction, what)
        self._card_changed(interaction)
        if failure:
            raise failure[0]

    async def _update_later(self, interaction_id: str, update: JSON, delay: float) -> None:
        """A final card update that was rate-limited or slow, tried again after `delay` (Retry-After)."""
        for _ in range(RESCHEDULE_ATTEMPTS):
            await anyio.sleep(delay)
            try:
                async with api_errors("chat.update"):
                    await self._clients.bot.chat_update(**update)
            except RateLimited as exc:
                delay = exc.retry_after
                continue
            except AdapterError as exc:
                logger.warning("could not finish card %s: %s", interaction_id, exc)
                return
            logger.info("card %s finished after a delay", interaction_id)
            return
        logger.warning("gave up finishing card %s: still rate-limited", interaction_id)

    async def send(self, conversation: ConversationKey, text: str) -> MessageRef:
        ts = await self.post(conversation, render.plain_message(text), None)
        return MessageRef(conversation, {"channel": conversation.channel, "ts": ts})

    async def notify(self, conversation: ConversationKey, actor: Actor, text: str) -> None:
        async with api_errors("chat.postEphemeral"):
            await self._clients.bot.chat_postEphemeral(channel=conversation.channel, user=actor.user_id,
                                                       text=render.plain_message(text),
                                                       thread_ts=conversation.thread or None)

    async def post_status(self, conversation: ConversationKey, status: StatusView) -> MessageRef:
        ts = await self.post(conversation, render.status_text(status), render.status_blocks(status))
        return MessageRef(conversation, {"channel": conversation.channel, "ts": ts})

    async def update_status(self, ref: MessageRef, status: StatusView) -> None:
        async with api_errors("chat.update"):
            await self._clients.bot.chat_update(channel=ref.data["channel"], ts=ref.data["ts"],
                                                text=render.status_text(status), blocks=render.status_blocks(status))

    # -- for the listeners -----------------------------------------------------------------------------------------

    async def post(self, conversation: ConversationKey, text: str, blocks: list[JSON] | None) -> str:
        """Post a message (already marked up) and return its ts; a thread posted in becomes one of the bot's."""
        thread = conversation.thread or None
        async with api_errors("chat.postMessage"):
            response = await self._clients.bot.chat_postMessage(channel=conversation.channel, thread_ts=thread,
                                                                text=text, blocks=blocks)
        if thread:
            await self._threads.remember(conversation.workspace, conversation.channel, thread)
        return str(response["ts"])

    async def tell(self, channel: str, user_id: str, text: str, thread: str | None = None) -> None:
        """Tell one person something privately (best effort: a failure is logged)."""
        try:
            async with api_errors("chat.postEphemeral"):
                await self._clients.bot.chat_postEphemeral(channel=channel, user=user_id,
                                                           text=render.plain_message(text), thread_ts=thread)
        except AdapterError as exc:
            logger.warning("could not tell %s privately: %s", user_id, exc)
