"""The host: the composition root of the bridge and the one door adapters come in by (`bridge.door.ports.Inbound`).

It builds the parts and wires each to what it needs (small protocols or the part itself, never the host): the
outbound chat ports, the broker, the session pool with the handler table (elicitation, sampling, roots, tool
approval: one object each for both MCP eras), the tool-call owner, resume after a restart, the agent and the command
handlers, and the OAuth accounts sessions sign in with. Inbound calls are answered by those parts; long work runs in
tasks of the host's task group.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from typing import Any, Protocol, overload

import anyio
from anyio.abc import TaskGroup
from mcp.types import CallToolResult

from bridge.auth.accounts import Accounts
from bridge.auth.fleet_signins import SigninsOnStore
from bridge.calls.continuing import Continuations
from bridge.calls.fleet import Fleet
from bridge.calls.kept_results import KeptResults
from bridge.calls.resume import Resumer
from bridge.calls.toolcalls import ToolCalls
from bridge.cards.broker import Broker
from bridge.cards.chat import Outbound
from bridge.cards.held import handoff_stream
from bridge.cards.recipients import Routing, base_id
from bridge.commands import parsing as commands
from bridge.commands.agent import Agent
from bridge.commands.completion import next_words
from bridge.commands.handlers import CommandHandlers
from bridge.config.file import Config
from bridge.config.policy import server_allowed
from bridge.door.forms import schema as form_schema
from bridge.door.model import Actor, ConversationKey, DecisionIn, DecisionResult, Interaction, MessageIn, Verdict
from bridge.door.ports import AdapterState, CardView, ChatPort, Leadership
from bridge.errors import ConfigError
from bridge.llm import LLMError, LLMProvider, make_provider
from bridge.requests.budgets import Budgets
from bridge.requests.context_lookup import Audience
from bridge.requests.elicitation import Elicitation
from bridge.requests.grants import Grants
from bridge.requests.limiting import Bounds
from bridge.requests.receipting import Receipting
from bridge.requests.roots import RootsKeeper
from bridge.requests.sampling import Sampler
from bridge.requests.server_notices import ServerNotices
from bridge.requests.server_requests import HandlerTable
from bridge.requests.task_requests import ServedTasks
from bridge.requests.tool_approval import ToolApproval
from bridge.servers.prestart import Prestarts
from bridge.servers.sessions import AuthFactory, SessionPool
from bridge.storage import AsyncStore
from bridge.storage.api import AdapterValues
from bridge.storage.watch import DecisionWatch
from bridge.web.apps import meta as app_meta
from bridge.web.apps.views import AppView, AppViews

logger = logging.getLogger(__name__)

SHUTDOWN_GRACE = 20.0
"""Seconds a stopping host lets the calls that continue after their cards' answers finish (`Host.drain`) before it
cancels them; one still running then stays stored and goes on after the restart, as after a crash. Below the 30 s a
Kubernetes pod is given between SIGTERM and SIGKILL (deploy/k8s), leaving time to end the open cards."""


class Host:
    """The bridge's core. Use as `async with Host(config, store) as host:` after attaching chat ports. The store is
    the caller's to close, unless `owns_store` (then the host closes it when it stops)."""

    def __init__(self, config: Config, store: AsyncStore, llm: LLMProvider | None = None, *,
                 owns_store: bool = False, auth: AuthFactory | None = None, prestarts: Prestarts | None = None,
                 restart_hint: bool = True, shutdown_grace: float = SHUTDOWN_GRACE) -> None:
        """`auth`: how url servers' sessions sign in (default: the accounts of the config, asked in chat; a one-shot
        `call` signs in at its terminal). `prestarts`: stdio servers `run` started ahead of need. `restart_hint`:
        whether a failed server is said to start again on next use (not for a one-shot `call`). `shutdown_grace`:
        seconds stopping waits for continuing calls (`SHUTDOWN_GRACE`)."""
        if llm is None:
            try:
                llm = make_provider(config.llm.provider, model=config.llm.model, api_key=config.llm.api_key,
                                    base_url=config.llm.base_url, timeout=config.llm.timeout)
            except (LLMError, ValueError) as exc:
                raise ConfigError([f"llm: {exc}"]) from None
        self.config, self.store, self.llm = config, store, llm
        self._owns_store = owns_store
        self._shutdown_grace = shutdown_grace
        self._cut_short = False
        self._drain_until: float | None = None
        form_schema.set_cache_size(config.limits.form_cache_size)
        self.outbound = Outbound(config.redactor)
        # On a store other workers share, decisions they claim reach this one's waiting cards through the watch.
        watch = DecisionWatch(store) if store.shared else None
        self.broker = Broker(store, self.outbound.port_for, Routing(config.groups, self.outbound), watch)
        self.grants = Grants(store, self.outbound.say)
        self.budgets = Budgets(config.budgets, store)
        self.accounts = Accounts(config, self.broker, self.outbound,
                                 shared=SigninsOnStore(store, watch) if watch is not None else None)
        # The pool and the handler table need each other (a session is answered by the handlers, which find a
        # request's session in the pool): the pool gets a factory that reaches the table once sessions open.
        self.pool = SessionPool(config, lambda session: self.handlers.callbacks(session),
                                auth=auth or self.accounts.auth_for, prestarts=prestarts)
        # Who sees a server's requests, and (as the handlers' context source) whose call a legacy request is for.
        audience = Audience(config, self.pool)
        # Cards the handlers ask for go through the `limits:` bounds on their way to the broker.
        self.bounds = Bounds(config.limits, audience, self.outbound.say)
        # Tasks a server asks the bridge to run (its requests sent as tasks): their cards mark the task's status.
        self.served_tasks = ServedTasks(store, config.limits, audience, self.broker)
        asker = self.served_tasks.asker(self.bounds.asker(self.broker))
        receipts = Receipting(config, store)  # signed receipts of what people approve (issued once a key is set)
        self.handlers = HandlerTable(
            elicitation=(elicitation := Elicitation(audience, asker, config, self.outbound.say, receipts)),
            sampling=Sampler(audience, asker, config, self.outbound.say, llm, self.grants, self.budgets, receipts),
            roots=(roots := RootsKeeper(audience, asker, config, store, receipts)),
            tool_approval=(approval := ToolApproval(audience, asker, config, self.pool, self.grants, receipts)),
            notices=ServerNotices(self.broker, store, self.outbound), bounds=self.bounds, tasks=self.served_tasks)
        self.apps = AppViews(config, self.outbound)  # MCP Apps offered in chat (served by `bridge.web.apps.routes`)
        self.calls = ToolCalls(self.pool, self.broker, store, audience, self.outbound, approval, elicitation,
                               KeptResults(config.limits), receipts=receipts, apps=self.apps,
                               restart_hint=restart_hint, limits=config.limits,
                               servers=config.servers)
        self.resumer = Resumer(config, store, self.broker, self.calls, self.outbound.say, self.bounds.restored,
                               receipts=receipts, grants=self.grants)
        self._continuations = Continuations(self.calls, self.resumer, self.bounds)
        self.fleet = Fleet(store, self.broker, self.resumer, watch, lease=config.worker_lease,
                           retention=config.retention)
        self.agent = Agent(llm, config, store, self.pool, self.calls, self.outbound.say, self.budgets)
        self.commands = CommandHandlers(config, store, self.broker, self.pool, self.calls, self.agent, roots,
                                        audience, self.outbound.say, self.grants, self.budgets, self.accounts)
        self._links: LinkIssuer | None = None
        self._app_links: AppLinkIssuer | None = None
        self._tg: TaskGroup | None = None
        self._exit: AsyncExitStack | None = None

    # -- wiring and lifetime -------------------------------------------------------------------------------------

    def offer_web_forms(self, links: LinkIssuer) -> None:
        """Let cards offer their forms on the web (the HTTP server is built next to the host, not by it)."""
        self._links = links

    def offer_apps(self, links: AppLinkIssuer) -> None:
        """Let tool results offer their apps (the HTTP server's app pages are built next to the host, not by it)."""
        self._app_links = links

    def attach(self, port: ChatPort) -> None:
        self.outbound.attach(port)

    @property
    def resumed(self) -> anyio.Event:
        return self.resumer.resumed

    async def __aenter__(self) -> Host:
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(self.pool)
            # Ended parked cards go from the broker to the calls layer, which continues their calls in its own
            # tasks; the broker closes it when the host drains (`drain`), or it closes after both have stopped.
            handoff, handed = handoff_stream()
            stack.enter_context(handoff)
            stack.enter_context(handed)
            self._tg = await stack.enter_async_context(anyio.create_task_group())
            await self._tg.start(self.broker.run, handoff)
            await self._tg.start(self._continuations.run, handed)
            await self._tg.start(self.fleet.run)
            await self._tg.start(self.served_tasks.run)
            self._exit = stack.pop_all()
        self.accounts.run_in(self._tg)
        self._tg.start_soon(self.resumer.resume_all, self._tg)
        self._tg.start_soon(self.calls.resume_tasks, self._tg)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def stopping(self, *, cut_short: bool = False) -> None:
        """Mark the start of shutdown, before any task is cancelled: work cancelled from now on is ended as 'shut
        down' (durable 2026 requests stay open for the restart) rather than as withdrawn by someone. `cut_short`
        (Ctrl-C): calls continuing after their cards are not waited for (`drain`); they go on after the restart."""
        self.broker.close()
        self._cut_short = self._cut_short or cut_short

    async def drain(self) -> None:
        """Let the calls that continue after their cards' answers finish (their results are reported), for up to
        the shutdown grace, while the adapters still serve: the broker hands on the decisions it is recording, then
        nothing more (a decision from now on is continued after the restart). A call still running after the grace
        is cancelled by `aclose`, and stays stored to go on after the restart."""
        if self._tg is None or self._exit is None:
            return
        self.stopping()
        if self._drain_until is None:  # one grace in all, however many stop paths call this
            self._drain_until = anyio.current_time() + self._shutdown_grace
        left = self._drain_until - anyio.current_time()
        if left <= 0:
            return  # the grace is over (and said so)
        with anyio.move_on_after(left) as waited:
            await self.broker.stop_handing_on()
            await self._continuations.finished.wait()
        if waited.cancelled_caught:
            logger.warning("calls still continuing after %.0f s of stopping are left for the restart",
                           self._shutdown_grace)

    async def aclose(self) -> None:
        """Stop: calls continuing after their cards finish first (`drain`, unless cut short), then open cards end
        as 'shut down' (durable 2026 ones stay open for the restart), sessions close."""
        if self._exit is None:
            return
        self.stopping()
        assert self._tg is not None
        try:
            if not self._cut_short:
                await self.drain()
        finally:
            # Drained, or cancelled while draining (the caller stops at once): either way the rest stops now.
            self._tg.cancel_scope.cancel()
            exit_stack, self._exit = self._exit, None
            try:
                await exit_stack.__aexit__(None, None, None)
                await self.fleet.stopped()
            finally:
                with anyio.CancelScope(shield=True):
                    await self.accounts.aclose()
                    await self.llm.aclose()
                    if self._owns_store:
                        await self.store.aclose()

    # -- Inbound -------------------------------------------------------------------------------------------------

    async def handle_message(self, message: MessageIn, *, wait: bool = False) -> None:
        """Start the work a message asks for in a host task and return at once, or do it all with `wait`."""
        if wait:
            await self.run_message(message)
            return
        assert self._tg is not None, "the host is not running"
        self._tg.start_soon(self.run_message, message)

    async def run_message(self, message: MessageIn) -> None:
        """Do the work a message asks for (a command, or an agent turn) and return when it is finished."""
        text = message.text.strip()
        first = text.split(None, 1)[0].lower() if text else ""
        try:
            if message.explicit_command or first in commands.NAMES:
                await self.commands.run(message, commands.parse(text))
            elif message.addressed:
                await self.agent.turn(message)
        except Exception:
            # The top of a task this host owns: one person's failing command must not stop everyone's bridge.
            logger.exception("handling a message in %s failed", message.conversation.id())
            await self.outbound.say(message.conversation, "Something went wrong on the bridge's side; it was logged.")

    @overload
    async def decide(self, decision: DecisionIn) -> DecisionResult: ...

    @overload
    async def decide(self, decision: DecisionIn, *, ack_within: float) -> DecisionResult | None: ...

    async def decide(self, decision: DecisionIn, *, ack_within: float | None = None) -> DecisionResult | None:
        if ack_within is None:
            return await self.broker.decide(decision)
        if self.broker.waiting(decision.interaction_id):
            # Claimed in memory at once; made durable right after (a loss is told to the person then).
            return self.broker.decide_nowait(decision)
        # Held by another worker (or ended): its verdict comes through the store, in a task of ours so that it
        # goes on (and a late or refused person is told) after the platform had to be answered.
        if self._tg is None or self.broker.closing:
            return DecisionResult(Verdict.LATE, message="The bridge is stopping; answer again in a moment.")
        results: list[DecisionResult] = []
        done = anyio.Event()

        async def work() -> None:
            try:
                results.append(await self.broker.decide(decision))
            finally:
                done.set()

        self._tg.start_soon(work)
        with anyio.move_on_after(ack_within):
            await done.wait()
        return results[0] if results else None

    async def check(self, interaction_id: str, actor: Actor, *, web_link: bool = False) -> DecisionResult:
        result = await self.broker.check(interaction_id, actor)
        if not web_link or result.verdict is not Verdict.CLAIMED or self._links is None:
            return result
        interaction = await self.open_anywhere(interaction_id)
        link = self._links.link_for(interaction, actor) if interaction is not None else None
        return replace(result, web_link=link or "")

    async def cards(self, *, interaction_id: str | None = None, waiting_for: Actor | None = None,
                    left_open_on: str | None = None, wait: float = 0.0) -> list[CardView]:
        if waiting_for is not None:
            return [CardView(i, True, card) for i, card in self.broker.waiting_for(waiting_for)]
        if left_open_on is not None:
            return [CardView(s.interaction, True, s.card) for s in await self.store.open_interactions()
                    if s.card is not None and s.pending_call is not None
                    and s.interaction.conversation.platform == left_open_on]
        if interaction_id is None:
            return []
        if wait > 0:
            with anyio.move_on_after(wait):
                await self.broker.wait_open(interaction_id)
            # After a restart: open once resumed by this run; one it did not resume meanwhile is another run's.
            live = self.broker.interaction(interaction_id)
            return [CardView(live, self.broker.waiting(interaction_id), self.broker.card_of(interaction_id))] \
                if live is not None else await self._stored_view(interaction_id, open_elsewhere=False)
        live = self.broker.interaction(interaction_id)
        if live is not None:
            return [CardView(live, self.broker.waiting(interaction_id), self.broker.card_of(interaction_id))]
        return await self._stored_view(interaction_id, open_elsewhere=self.store.shared)

    async def _stored_view(self, interaction_id: str, *, open_elsewhere: bool) -> list[CardView]:
        stored = await self.store.interaction(base_id(interaction_id))
        if stored is None:
            return []
        # Open in the store: on a shared store another worker holds it, and decisions reach it there; alone, it
        # is being restored, and takes no answer until it is.
        return [CardView(stored.interaction, stored.outcome is None and open_elsewhere, stored.card)]

    def open_interaction(self, interaction_id: str) -> Interaction | None:
        """The interaction if it is open and waited on in this process."""
        return self.broker.interaction(interaction_id)

    async def open_anywhere(self, interaction_id: str) -> Interaction | None:
        """The interaction if it is open: waited on here, or (several workers on one store) held by another worker,
        whose decisions reach it through the store (`bridge.cards.forwarding`)."""
        live = self.broker.interaction(interaction_id)
        if live is not None or not self.store.shared:
            return live
        stored = await self.store.interaction(base_id(interaction_id))
        return stored.interaction if stored is not None and stored.outcome is None else None

    async def next_words(self, conversation: ConversationKey, actor: Actor, before: list[str]) -> list[str]:
        servers = [n for n, c in self.config.servers.items()
                   if not c.disabled and server_allowed(self.config, conversation, n)]

        async def tools(server: str) -> list[str]:
            try:
                return [t.name for t in await self.pool.list_tools(conversation, server, person=actor)
                        if app_meta.for_model(t)]
            except Exception:  # a server that cannot be reached just offers no completions
                logger.debug("no tool names of %s to complete", server, exc_info=True)
                return []

        return await next_words(before, servers, tools)

    async def stop_call(self, call_id: str, actor: Actor) -> bool:
        return await self.calls.stop(call_id, actor)

    def adapter_state(self, namespace: str) -> AdapterState:
        return _AdapterState(self.store, namespace)

    @asynccontextmanager
    async def leadership(self, name: str) -> AsyncIterator[Leadership]:
        async with self.store.leadership(name) as lease:
            yield lease

    def web_forms_enabled(self) -> bool:
        return self._links is not None

    def app_link(self, view_id: str, actor: Actor) -> str | None:
        return None if self._app_links is None else self._app_links.link_for(view_id, actor)

    async def app_tool_call(self, view: AppView, actor: Actor, name: str,
                            arguments: dict[str, Any]) -> CallToolResult | None:
        """A tool call an app makes (`bridge.web.apps.routes.AppDoor`): the person's call in the view's conversation,
        under the same approval rules, grants and quorum as a call typed there."""
        return await self.calls.run(view.conversation, actor, view.server, name, arguments, from_app=True)


class AppLinkIssuer(Protocol):
    """Hands out links to apps (bridge.web.apps.routes.AppPages)."""

    def link_for(self, view_id: str, actor: Actor) -> str | None: ...


class LinkIssuer(Protocol):
    """Hands out one-time web-form links (bridge.web.forms.WebForms)."""

    def link_for(self, interaction: Interaction, actor: Actor) -> str | None: ...


class _AdapterState:
    """One adapter's namespace of the store's adapter table (`bridge.door.ports.AdapterState`)."""

    def __init__(self, store: AdapterValues, namespace: str) -> None:
        self._store = store
        self._namespace = namespace

    async def get(self, key: str) -> str | None:
        return await self._store.adapter_value(self._namespace, key)

    async def set(self, key: str, value: str) -> None:
        await self._store.set_adapter_value(self._namespace, key, value)
