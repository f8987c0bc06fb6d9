"""The Slack adapter: bolt's `AsyncApp` wired to the host, and the host's `ChatPort` on Slack's Web API.

I/O only. What a card looks like is `render.py`/`modal.py`, what a payload means is `translate.py`; who may decide,
what is valid and when a request expires are the core's. Every interactive listener acks at once (Slack gives
3 seconds) and does its work after, except modal submissions, whose ack *is* the answer (errors, next page, or
close): those claim the decision synchronously with `broker.decide_nowait` before acking.

A failed Web API call is translated once (`client.api_errors`) and logged; it never ends the adapter. Work that
must outlive a listener or the broker's cleanup deadline (a card update rescheduled after a rate limit, refreshing
App Home tabs) runs in a task group that `serve()` owns.
"""

from __future__ import annotations

import functools
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

import anyio
from aiohttp import web
from anyio.abc import TaskGroup
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext, AsyncRespond

from adapters.slack import ids, modal, render, translate
from adapters.slack.client import api_errors, web_client
from adapters.slack.elements import matching_options
from adapters.slack.escape import mrkdwn
from adapters.slack.settings import SlackSettings
from bridge.config import Config
from bridge.errors import AdapterError, PlatformAPIError, RateLimited
from bridge.model import (
    Action,
    Actor,
    CardRef,
    ConversationKey,
    DecisionIn,
    Interaction,
    JSONValue,
    MessageIn,
    MessageRef,
    Outcome,
    StatusView,
    Verdict,
)
from bridge.ports import Inbound

logger = logging.getLogger(__name__)

JSON = dict[str, Any]
_DECISIONS: dict[str, Action] = {ids.ACCEPT: "accept", ids.DECLINE: "decline", ids.CANCEL: "cancel"}
NOT_ALLOWED = "You are not allowed to use this bridge here."
SEEN_MESSAGES = 1000
"""How many message ids are remembered to drop a redelivered or duplicate event for the same message."""
BOT_THREAD = "bot_thread"
"""Store setting on a thread's conversation: the bot takes part (replies need no mention, even after a restart)."""
FINAL_RATE_LIMIT_WAIT = 2.0
"""Longest Retry-After a final card update waits out in the call; a longer one is rescheduled (broker gives 10 s)."""
FINAL_UPDATE_TIMEOUT = 7.0
"""How long the final card update may take before it is rescheduled, within the broker's 10 s cleanup."""
RESCHEDULE_ATTEMPTS = 3
LOST_PAGES = ("The bridge restarted, so the answers from the earlier pages were lost. Please check this page and go "
              "on again.")


class SlackAdapter:
    """A `ChatPort` for Slack plus the bolt app that turns Slack's events into host calls. Run with `serve()`."""

    platform = translate.PLATFORM

    def __init__(self, host: Inbound, settings: SlackSettings, config: Config) -> None:
        self._host = host
        self.settings = settings
        self._scope: translate.Scope = config.conversation_scope
        self.client = web_client(settings.bot_token, settings.api_url)
        self._final_client = web_client(settings.bot_token, settings.api_url,
                                        max_rate_limit_wait=FINAL_RATE_LIMIT_WAIT)
        """For final card and modal updates, which have a deadline: a long rate limit is rescheduled, not slept."""
        self.app = AsyncApp(client=self.client, signing_secret=settings.signing_secret,
                            request_verification_enabled=settings.mode == "http")
        self._names: dict[str, str] = {}
        self._views: dict[str, set[str]] = {}
        """Interaction id → ids of modals open on it, replaced by a 'closed' view when the request ends."""
        self._drafts: dict[str, dict[str, JSONValue]] = {}
        """Modal view id → answers from the pages already submitted (a paged form keeps one view id)."""
        self._threads: set[tuple[str, str]] = set()
        """(channel, thread ts) the bot takes part in: replies there are addressed to it without a mention. A cache
        of the adapter's own persistent state, which survives a restart."""
        self._state = host.adapter_state("slack")
        self._seen: OrderedDict[str, None] = OrderedDict()
        """Ids of the latest messages handled (`translate.message_identity`), oldest first."""
        self._tasks: TaskGroup | None = None
        self.ready = anyio.Event()
        """Set once the adapter receives events (socket connected or HTTP server listening)."""
        self.http_url = ""
        self._register()

    # -- wiring --------------------------------------------------------------------------------------------------

    def _register(self) -> None:
        app = self.app
        app.event("app_mention")(self._on_mention)
        app.event("message")(self._on_message)
        app.event("app_home_opened")(self._on_home_opened)
        app.command(self.settings.slash_command)(self._on_command)
        app.action(re.compile(rf"^({re.escape(ids.ACCEPT)}|{re.escape(ids.DECLINE)}|{re.escape(ids.CANCEL)})$"))(
            self._on_decision)
        app.action(re.compile(rf"^{re.escape(ids.CHOICE_PREFIX)}\d+$"))(self._on_choice)
        app.action(ids.OPEN_FORM)(self._on_open_form)
        app.action(ids.OPEN_URL)(self._on_link)
        app.action(ids.STOP)(self._on_stop)
        app.view_submission(ids.FORM_CALLBACK)(self._on_submit)
        app.view_closed(ids.FORM_CALLBACK)(self._on_closed)
        app.view_closed(ids.CLOSED_CALLBACK)(self._on_link)
        app.options(ids.FIELD_ACTION)(self._on_options)
        app.error(self._on_error)

    async def serve(self) -> None:
        """Receive Slack's events until cancelled: over Socket Mode (default) or on the HTTP path."""
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            try:
                if self.settings.mode == "http":
                    await self._serve_http()
                else:
                    await self._serve_socket()
            finally:
                self._tasks = None
                tasks.cancel_scope.cancel()

    def _spawn(self, what: str, work: Callable[[], Awaitable[None]]) -> bool:
        """Run `work` in the background, owned by `serve()`; False when not serving. Failures are logged."""
        if self._tasks is None:
            return False

        async def run() -> None:
            try:
                await work()
            except Exception:
                logger.exception("Slack background work failed: %s", what)

        self._tasks.start_soon(run)
        return True

    async def _serve_socket(self) -> None:
        app_client = web_client(self.settings.app_token, self.settings.api_url)
        handler = AsyncSocketModeHandler(self.app, app_token=self.settings.app_token, web_client=app_client)
        await handler.connect_async()  # type: ignore[no-untyped-call]  # bolt leaves it unannotated
        self.ready.set()
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await handler.close_async()  # type: ignore[no-untyped-call]

    async def _serve_http(self) -> None:
        http = self.settings.http
        runner = web.AppRunner(self.app.web_app(path=http.path, port=http.port), access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, http.host, http.port).start()
            host, port = runner.addresses[0][:2]
            self.http_url = f"http://{host}:{port}{http.path}"
            logger.info("Slack events, interactivity and %s served at %s", self.settings.slash_command, self.http_url)
            self.ready.set()
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await runner.cleanup()

    async def _on_error(self, error: Exception, body: JSON) -> None:
        # Bolt's top-level handler for a listener that raised: log it with its traceback, keep serving.
        logger.error("Slack listener failed on a %s payload", body.get("type", "?"), exc_info=error)

    # -- ChatPort ------------------------------------------------------------------------------------------------

    async def post_card(self, interaction: Interaction) -> CardRef:
        conversation = interaction.conversation
        ts = await self._post(conversation, render.fallback(interaction), render.card(interaction))
        self._refresh_homes(interaction)
        return CardRef(interaction.id, {"channel": conversation.channel, "ts": ts})

    async def finish_card(self, ref: CardRef, interaction: Interaction, outcome: Outcome) -> None:
        """Replace open modals and bring the card to its final state, concurrently and within the broker's cleanup
        deadline. A rate-limited or slow card update is rescheduled in the background (see `_spawn`)."""
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
                        await self._final_client.chat_update(**update)
                    return
                except RateLimited as exc:
                    delay = exc.retry_after
                except AdapterError as exc:
                    failure.append(exc)
                    return
            why = "rate-limited" if delay is not None else f"no answer in {FINAL_UPDATE_TIMEOUT:.0f}s"
            delay = FINAL_RATE_LIMIT_WAIT if delay is None else delay
            if self._spawn(f"final update of card {interaction.id}",
                           functools.partial(self._update_later, interaction.id, update, delay)):
                logger.warning("card %s not finished yet (%s); trying again in %.0fs", interaction.id, why, delay)
            else:
                failure.append(PlatformAPIError(translate.PLATFORM, "chat.update", why))

        async with anyio.create_task_group() as tg:
            tg.start_soon(update_card)
            for view_id in self._views.pop(interaction.id, set()):
                tg.start_soon(self._close_view, view_id, interaction, what)
        self._refresh_homes(interaction)
        if failure:
            raise failure[0]

    async def _update_later(self, interaction_id: str, update: JSON, delay: float) -> None:
        """A final card update that was rate-limited or slow, tried again after `delay` (Retry-After)."""
        for _ in range(RESCHEDULE_ATTEMPTS):
            await anyio.sleep(delay)
            try:
                async with api_errors("chat.update"):
                    await self.client.chat_update(**update)
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
        ts = await self._post(conversation, render.plain_message(text), None)
        return MessageRef(conversation, {"channel": conversation.channel, "ts": ts})

    async def notify(self, conversation: ConversationKey, actor: Actor, text: str) -> None:
        async with api_errors("chat.postEphemeral"):
            await self.client.chat_postEphemeral(channel=conversation.channel, user=actor.user_id,
                                                 text=render.plain_message(text),
                                                 thread_ts=conversation.thread or None)

    async def post_status(self, conversation: ConversationKey, status: StatusView) -> MessageRef:
        ts = await self._post(conversation, render.status_text(status), render.status_blocks(status))
        return MessageRef(conversation, {"channel": conversation.channel, "ts": ts})

    async def update_status(self, ref: MessageRef, status: StatusView) -> None:
        async with api_errors("chat.update"):
            await self.client.chat_update(channel=ref.data["channel"], ts=ref.data["ts"],
                                          text=render.status_text(status), blocks=render.status_blocks(status))

    async def _post(self, conversation: ConversationKey, text: str, blocks: list[JSON] | None) -> str:
        thread = conversation.thread or None
        async with api_errors("chat.postMessage"):
            response = await self.client.chat_postMessage(channel=conversation.channel, thread_ts=thread, text=text,
                                                          blocks=blocks)
        if thread:
            self._remember_thread(conversation.workspace, conversation.channel, thread)
        return str(response["ts"])

    # -- threads the bot takes part in ---------------------------------------------------------------------------

    def _remember_thread(self, team: str, channel: str, thread: str) -> None:
        if (channel, thread) not in self._threads:
            self._threads.add((channel, thread))
            self._state.set(self._thread_key(team, channel, thread), "1")

    def _in_bot_thread(self, team: str, channel: str, thread: str) -> bool:
        """Whether the bot takes part in this thread: cached, else from the store (an earlier run's threads)."""
        if not thread:
            return False
        if (channel, thread) in self._threads:
            return True
        if self._state.get(self._thread_key(team, channel, thread)) == "1":
            self._threads.add((channel, thread))
            return True
        return False

    @staticmethod
    def _thread_key(team: str, channel: str, thread: str) -> str:
        return f"{BOT_THREAD}/{team}/{channel}/{thread}"

    def _first_time(self, event: Mapping[str, Any]) -> bool:
        """False for a message already handled (Slack redelivers events, and may send two for one message)."""
        key = translate.message_identity(event)
        if key in self._seen:
            self._seen.move_to_end(key)
            return False
        self._seen[key] = None
        if len(self._seen) > SEEN_MESSAGES:
            self._seen.popitem(last=False)
        return True

    # -- people --------------------------------------------------------------------------------------------------

    async def _actor(self, user_id: str, hint: str = "") -> Actor:
        """The person behind a user id, with their display name for the core's texts (cached; best effort)."""
        name = self._names.get(user_id)
        if name is None:
            try:
                async with api_errors("users.info"):
                    user = (await self.client.users_info(user=user_id))["user"]
                profile = user.get("profile") or {}
                name = profile.get("display_name") or profile.get("real_name") or user.get("real_name") or hint
            except AdapterError as exc:
                logger.debug("no name for %s: %s", user_id, exc)
                name = hint
            self._names[user_id] = name = str(name or "")
        return translate.actor(user_id, name)

    def _cached_actor(self, user: Mapping[str, Any]) -> Actor:
        """For modal submissions, which must be answered within 3 seconds: no lookup, the payload's name."""
        user_id = str(user.get("id", ""))
        return translate.actor(user_id, self._names.get(user_id) or str(user.get("name") or ""))

    async def _refuse_stranger(self, body: JSON) -> bool:
        """True (after telling them privately) when the clicking person is not on `allowed_users`."""
        user_id = str(body.get("user", {}).get("id", ""))
        if self.settings.user_allowed(user_id):
            return False
        channel = str((body.get("container") or {}).get("channel_id") or (body.get("channel") or {}).get("id", ""))
        if channel:
            await self._ephemeral(channel, user_id, NOT_ALLOWED)
        return True

    async def _ephemeral(self, channel: str, user_id: str, text: str, thread: str | None = None) -> None:
        try:
            async with api_errors("chat.postEphemeral"):
                await self.client.chat_postEphemeral(channel=channel, user=user_id, text=render.plain_message(text),
                                                     thread_ts=thread)
        except AdapterError as exc:
            logger.warning("could not tell %s privately: %s", user_id, exc)

    # -- messages in ---------------------------------------------------------------------------------------------

    async def _on_mention(self, event: JSON, body: JSON, context: AsyncBoltContext) -> None:
        await self._message(event, body, context, addressed=True)

    async def _on_message(self, event: JSON, body: JSON, context: AsyncBoltContext) -> None:
        bot = str(context.bot_user_id or "")
        if not translate.is_person_message(event, bot):
            return
        channel = str(event.get("channel", ""))
        if event.get("channel_type") == "im":
            await self._message(event, body, context, addressed=True)
        elif bot and f"<@{bot}" in str(event.get("text", "")):
            return  # the app_mention event for the same message handles it
        elif self._in_bot_thread(str(body.get("team_id") or context.team_id or ""), channel,
                                 str(event.get("thread_ts", ""))):
            await self._message(event, body, context, addressed=True)

    async def _message(self, event: JSON, body: JSON, context: AsyncBoltContext, *, addressed: bool) -> None:
        bot = str(context.bot_user_id or "")
        if not translate.is_person_message(event, bot) or not self._first_time(event):
            return
        channel, user_id = str(event["channel"]), str(event["user"])
        if not self.settings.channel_allowed(channel):
            logger.info("ignoring a message in %s (not in allowed_channels)", channel)
            return
        if not self.settings.user_allowed(user_id):
            await self._ephemeral(channel, user_id, NOT_ALLOWED, event.get("thread_ts"))
            return
        team = str(body.get("team_id") or context.team_id or "")
        message = translate.message_in(event, team, bot, self._scope, await self._actor(user_id),
                                       addressed=addressed)
        if message.conversation.thread:
            self._remember_thread(team, channel, message.conversation.thread)
        await self._host.handle_message(message)

    async def _on_command(self, ack: AsyncAck, respond: AsyncRespond, command: dict[str, str],
                          context: AsyncBoltContext) -> None:
        channel, user_id = command["channel_id"], command["user_id"]
        if not self.settings.channel_allowed(channel) or not self.settings.user_allowed(user_id):
            await ack(NOT_ALLOWED)
            return
        await ack()
        who = await self._actor(user_id, command.get("user_name", ""))
        text = command.get("text", "")
        team = command.get("team_id") or str(context.team_id or "")
        is_dm = channel.startswith("D")
        # A slash command leaves no message behind; an anchor shows the channel what was asked and, with
        # conversation_scope thread, is the root of the thread the answers go to.
        anchor = ConversationKey(translate.PLATFORM, team, channel)
        typed = mrkdwn(f"{self.settings.slash_command} {text}".strip()).replace("`", "'")
        try:
            ts = await self._post(anchor, f"{render.mention(who)} ran `{typed}`", None)
        except AdapterError as exc:
            logger.warning("could not post in %s for %s: %s", channel, self.settings.slash_command, exc)
            await self._tell_command_failed(respond, exc, str(context.bot_user_id or ""))
            return
        key = translate.conversation(self._scope, team, channel, ts, None, user_id, is_dm)
        if key.thread:
            self._remember_thread(team, channel, key.thread)
        await self._host.handle_message(MessageIn(key, who, text, addressed=True, explicit_command=True))

    async def _tell_command_failed(self, respond: AsyncRespond, exc: AdapterError, bot: str) -> None:
        """Answer a slash command the bot could not act on, privately through its response_url (which works
        where the bot may not post)."""
        command = self.settings.slash_command
        if isinstance(exc, PlatformAPIError) and exc.error in ("not_in_channel", "channel_not_found") and bot:
            text = (f"I am not in this channel, so I cannot answer here. Invite me first (`/invite <@{bot}>`), "
                    f"then run `{command}` again.")
        else:
            text = f"I could not post here ({mrkdwn(str(exc))}). Try `{command}` again in a moment."
        try:
            await respond(text=text, response_type="ephemeral")
        except Exception:
            logger.exception("could not answer %s through its response_url", command)

    def _refresh_homes(self, interaction: Interaction) -> None:
        """Republish the App Home of the Slack people an interaction names (in the background, best effort)."""
        prefix = f"{translate.PLATFORM}:"
        for key in sorted(interaction.approvers):
            if key.startswith(prefix):
                user_id = key.removeprefix(prefix)
                self._spawn(f"App Home of {user_id}", functools.partial(self._publish_home, user_id))

    async def _on_home_opened(self, event: JSON) -> None:
        if event.get("tab", "home") != "home":
            return
        await self._publish_home(str(event["user"]))

    async def _publish_home(self, user_id: str) -> None:
        items: list[tuple[Interaction, str | None]] = []
        for interaction, card in self._host.waiting_for(translate.actor(user_id)):
            items.append((interaction, await self._permalink(card)))
        try:
            async with api_errors("views.publish"):
                await self.client.views_publish(user_id=user_id, view=render.home(items))
        except AdapterError as exc:
            logger.warning("could not publish the App Home for %s: %s", user_id, exc)

    async def _permalink(self, card: CardRef | None) -> str | None:
        if card is None or "channel" not in card.data:
            return None
        try:
            async with api_errors("chat.getPermalink"):
                response = await self.client.chat_getPermalink(channel=card.data["channel"],
                                                               message_ts=card.data["ts"])
        except AdapterError as exc:
            logger.info("no permalink for card %s: %s", card.interaction_id, exc)
            return None
        return str(response["permalink"])

    # -- clicks --------------------------------------------------------------------------------------------------

    def _open(self, interaction_id: str) -> Interaction | None:
        return next((i for i in self._host.open_interactions() if i.id == interaction_id), None)

    async def _explain(self, interaction_id: str, who: Actor) -> None:
        """Tell a person why their click did nothing (refused, already decided, unknown), with the core's words."""
        await self._host.check(interaction_id, who)

    async def _on_decision(self, ack: AsyncAck, body: JSON, action: JSON) -> None:
        await ack()
        if await self._refuse_stranger(body):
            return
        who = await self._actor(body["user"]["id"], body["user"].get("name", ""))
        await self._host.decide(DecisionIn(str(action["value"]), who, _DECISIONS[action["action_id"]]))

    async def _on_choice(self, ack: AsyncAck, body: JSON, action: JSON) -> None:
        await ack()
        if await self._refuse_stranger(body):
            return
        who = await self._actor(body["user"]["id"], body["user"].get("name", ""))
        interaction_id = str(action["value"])
        interaction = self._open(interaction_id)
        content = translate.inline_content(interaction.form, action["action_id"]) if interaction else None
        if interaction is None or content is None:
            await self._explain(interaction_id, who)
            return
        await self._host.decide(DecisionIn(interaction_id, who, "accept", content))

    async def _on_open_form(self, ack: AsyncAck, body: JSON, action: JSON) -> None:
        await ack()
        if await self._refuse_stranger(body):
            return
        who = self._cached_actor(body["user"])
        interaction_id = str(action["value"])
        interaction = self._open(interaction_id)
        if interaction is None or not interaction.may_decide(who):
            await self._explain(interaction_id, await self._actor(who.user_id, who.display_name))
            return
        container = body.get("container") or {}
        meta = ids.ModalMeta(interaction_id, str(container.get("channel_id", "")),
                             str(container.get("message_ts", "")))
        try:
            # The trigger id is valid for 3 seconds from the click: open first, look people up later.
            async with api_errors("views.open"):
                response = await self.client.views_open(trigger_id=body["trigger_id"],
                                                        view=modal.form_view(interaction, meta))
        except AdapterError as exc:
            logger.warning("could not open the form for %s: %s", interaction_id, exc)
            await self._ephemeral(meta.channel, who.user_id, f"The form could not be opened ({exc}); try again.")
            return
        view_id = str(response["view"]["id"])
        self._views.setdefault(interaction_id, set()).add(view_id)
        if self._open(interaction_id) is None:
            # It ended while the modal was opening, maybe after finish_card looked for open modals.
            self._forget_view(interaction_id, view_id)
            await self._close_view(view_id, interaction, "This request has ended.")

    async def _on_link(self, ack: AsyncAck) -> None:
        # A link button opens in the browser; Slack still reports the click, which only needs an ack.
        await ack()

    async def _on_stop(self, ack: AsyncAck, body: JSON, action: JSON) -> None:
        await ack()
        if await self._refuse_stranger(body):
            return
        who = await self._actor(body["user"]["id"], body["user"].get("name", ""))
        await self._host.stop_call(str(action["value"]), who)

    # -- modals --------------------------------------------------------------------------------------------------

    async def _on_submit(self, ack: AsyncAck, body: JSON, view: JSON) -> None:
        meta = ids.ModalMeta.load(str(view.get("private_metadata", "")))
        view_id = str(view["id"])
        if meta is None:
            await ack()
            return
        who = self._cached_actor(body["user"])
        interaction = self._open(meta.interaction_id)
        if interaction is None:
            self._forget_view(meta.interaction_id, view_id)
            ended = self._known(meta.interaction_id)
            if ended is None:
                await ack()
            else:
                await ack(response_action="update", view=modal.closed_view(ended, "This request has ended."))
            return
        pages = modal.pages(interaction)
        if meta.page > 0 and view_id not in self._drafts:
            # The earlier pages' answers were kept in memory only (a restart lost them): start again at page 1.
            await ack(response_action="update", view=modal.form_view(interaction, replace(meta, page=0), LOST_PAGES))
            return
        page = pages[min(meta.page, len(pages) - 1)]
        form = interaction.form
        answers, errors = translate.page_answers(form, page, view.get("state", {}).get("values", {}))
        if errors:
            await ack(response_action="errors", errors=translate.block_errors(form, page, errors))
            return
        draft = self._drafts.setdefault(view_id, {})
        for index in page:
            draft.pop(form.fields[index].name, None)
        draft.update(answers)
        if meta.page < len(pages) - 1:
            next_page = modal.form_view(interaction, replace(meta, page=meta.page + 1))
            await ack(response_action="update", view=next_page)
            return
        result = self._host.claim(DecisionIn(interaction.id, who, "accept", dict(draft)))
        if result.verdict is Verdict.CLAIMED:
            self._forget_view(interaction.id, view_id)
            await ack()
        elif result.verdict is Verdict.INVALID:
            await ack(response_action="errors", errors=translate.block_errors(form, page, result.errors))
        elif result.verdict is Verdict.REFUSED and page:
            await ack(response_action="errors", errors={ids.field_block(page[0]): result.message})
        else:
            self._forget_view(interaction.id, view_id)
            await ack(response_action="update", view=modal.closed_view(interaction, mrkdwn(result.message)))

    async def _on_closed(self, ack: AsyncAck, body: JSON, view: JSON) -> None:
        await ack()
        meta = ids.ModalMeta.load(str(view.get("private_metadata", "")))
        if meta is None:
            return
        self._forget_view(meta.interaction_id, str(view["id"]))
        if self._open(meta.interaction_id) is None:
            return  # already over: closing its modal changes nothing
        who = await self._actor(str(body["user"]["id"]), str(body["user"].get("name", "")))
        await self._host.decide(DecisionIn(meta.interaction_id, who, "cancel"))

    async def _on_options(self, ack: AsyncAck, payload: JSON, body: JSON) -> None:
        """Options for a long choice list (external select), filtered by what the person typed."""
        meta = ids.ModalMeta.load(str((body.get("view") or {}).get("private_metadata", "")))
        interaction = self._open(meta.interaction_id) if meta else None
        index = ids.field_index(str(payload.get("block_id", "")))
        if interaction is None or index is None or index >= len(interaction.form.fields):
            await ack(options=[])
            return
        await ack(options=matching_options(interaction.form.fields[index], str(payload.get("value", ""))))

    def _forget_view(self, interaction_id: str, view_id: str) -> None:
        self._drafts.pop(view_id, None)
        views = self._views.get(interaction_id)
        if views is not None:
            views.discard(view_id)
            if not views:
                del self._views[interaction_id]

    def _known(self, interaction_id: str) -> Interaction | None:
        return self._host.known_interaction(interaction_id)

    async def _close_view(self, view_id: str, interaction: Interaction, what: str) -> None:
        self._drafts.pop(view_id, None)
        try:
            async with api_errors("views.update"):
                await self._final_client.views_update(view_id=view_id, view=modal.closed_view(interaction, what))
        except AdapterError as exc:
            # Usually the person closed the modal already; nothing is left to replace.
            logger.info("could not replace modal %s: %s", view_id, exc)
