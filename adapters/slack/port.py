"""The host's `ChatPort` on Slack's Web API: cards, plain messages, private notices and status lines.

What a card looks like is `render.py`'s. A posted card's reference keeps its permalink (`permalinks.py`, built
without a Web API call) for the App Home. Finishing a card also closes the modals open on it (`Modals.close_all`)
and republishes the App Home of the people it named (`HomeTab.refresh`); both are given to the port as plain
callables so it knows nothing else of them.

Private notices go by `chat.postEphemeral`; where that fails (someone previewing a channel without joining it, a
channel the bot cannot post in) they go through the `response_url` of the person's latest click there
(`responses.py`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import anyio

from adapters.slack import permalinks, render, translate
from adapters.slack.background import Background
from adapters.slack.client import SlackClients, api_errors
from adapters.slack.responses import ResponseUrls
from adapters.slack.threads import BotThreads
from bridge.door.model import Actor, AppOffer, CardRef, ConversationKey, Interaction, MessageRef, Outcome, StatusView
from bridge.errors import AdapterError, PlatformAPIError, RateLimited

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
                 close_modals: CloseModals, card_changed: CardChanged,
                 response_urls: ResponseUrls | None = None, web_forms: Callable[[], bool] = lambda: False) -> None:
        self._clients = clients
        self._web_forms = web_forms
        """Whether cards offer "Fill in on the web" (asked at each render: web forms are set up after adapters)."""
        self.response_urls = response_urls or ResponseUrls()
        self._threads = threads
        self._background = background
        self._close_modals = close_modals
        self._card_changed = card_changed

    async def post_card(self, interaction: Interaction) -> CardRef:
        conversation = interaction.conversation
        if interaction.private and interaction.requester is not None:
            return await self._post_ephemeral(interaction, interaction.requester.user_id)
        ts = await self.post(conversation, render.fallback(interaction),
                             render.card(interaction, web=self._web_forms()))
        data = {"channel": conversation.channel, "ts": ts}
        try:
            link = permalinks.permalink(await self._clients.workspace_url(), conversation.channel, ts,
                                        conversation.thread or None)
        except AdapterError as exc:
            logger.info("card %s posted without a permalink: %s", interaction.id, exc)
            link = None
        if link:
            data[permalinks.PERMALINK] = link
        # Last, with no await after it: the Home refresh it starts runs once the caller has the card's reference.
        self._card_changed(interaction)
        return CardRef(interaction.id, data)

    async def _post_ephemeral(self, interaction: Interaction, user: str) -> CardRef:
        """A card only its person sees (a Connect prompt), in the conversation where they are."""
        conversation = interaction.conversation
        async with api_errors("chat.postEphemeral"):
            response = await self._clients.bot.chat_postEphemeral(
                channel=conversation.channel, user=user, text=render.fallback(interaction),
                blocks=render.card(interaction), thread_ts=conversation.thread or None)
        return CardRef(interaction.id, {"channel": conversation.channel, "ts": str(response.get("message_ts", "")),
                                        "ephemeral": user, "thread": conversation.thread})

    async def finish_card(self, ref: CardRef, interaction: Interaction, outcome: Outcome) -> None:
        """Replace open modals and bring the card to its final state, concurrently and within the broker's cleanup
        deadline. A rate-limited or slow card update is rescheduled in the background."""
        what = render.outcome_text(outcome)
        if ref.data.get("ephemeral"):
            # An ephemeral message cannot be edited: its person is told the end in another one.
            async with api_errors("chat.postEphemeral"):
                await self._clients.final.chat_postEphemeral(
                    channel=ref.data["channel"], user=ref.data["ephemeral"], thread_ts=ref.data.get("thread") or None,
                    text=f"{render.fallback(interaction)}: {what}",
                    blocks=render.finished_summary(interaction, outcome))
            return
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

    async def update_card(self, ref: CardRef, interaction: Interaction) -> None:
        """An open card shown again with its progress (approvals so far, who still may)."""
        if ref.data.get("ephemeral"):
            return  # one person decides a private card: there is no progress to show
        async with api_errors("chat.update"):
            await self._clients.bot.chat_update(channel=ref.data["channel"], ts=ref.data["ts"],
                                                text=render.fallback(interaction),
                                                blocks=render.card(interaction, web=self._web_forms()))
        self._card_changed(interaction)

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
        await self._private(conversation.channel, actor.user_id, render.plain_message(text),
                            conversation.thread or None)

    async def post_status(self, conversation: ConversationKey, status: StatusView) -> MessageRef:
        ts = await self.post(conversation, render.status_text(status), render.status_blocks(status))
        return MessageRef(conversation, {"channel": conversation.channel, "ts": ts})

    async def offer_app(self, conversation: ConversationKey, offer: AppOffer) -> None:
        await self.post(conversation, render.app_offer_text(offer), render.app_offer_blocks(offer))

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
            await self._private(channel, user_id, render.plain_message(text), thread)
        except AdapterError as exc:
            logger.warning("could not tell %s privately: %s", user_id, exc)

    async def send_app_link(self, channel: str, user_id: str, url: str | None, thread: str | None = None) -> None:
        """Hand a person their link to an app, privately only (it acts as them); None: tell them it has ended."""
        await self._private(channel, user_id, render.app_link_text(url) if url else render.plain_message(
            render.NO_APP), thread)

    async def send_web_link(self, channel: str, user_id: str, url: str, thread: str | None = None) -> None:
        """Hand a person their one-time web-form link, privately only (ephemeral, or their click's response_url):
        whoever holds it answers as them. Raises the platform's error when neither reaches them."""
        await self._private(channel, user_id, render.web_link_text(url), thread)

    async def _private(self, channel: str, user_id: str, text: str, thread: str | None) -> None:
        """An ephemeral message (already marked up); through the person's latest response_url in this channel
        when Slack refuses it (raises the ephemeral's error when there is none or it fails too)."""
        try:
            async with api_errors("chat.postEphemeral"):
                await self._clients.bot.chat_postEphemeral(channel=channel, user=user_id, text=text, thread_ts=thread)
            return
        except AdapterError as exc:
            url = self.response_urls.latest(channel, user_id)
            if url is None:
                raise
            logger.info("ephemeral message to %s failed (%s); using their click's response_url", user_id, exc)
            failure = exc
        try:
            async with api_errors("response_url"):
                response = await self._clients.webhook(url).send(text=text, response_type="ephemeral",
                                                                 replace_original=False)
        except AdapterError as exc:
            raise failure from exc
        if response.status_code != 200:
            raise PlatformAPIError(translate.PLATFORM, "response_url",
                                   f"HTTP {response.status_code}: {response.body[:200]}") from failure
