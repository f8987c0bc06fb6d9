"""The host: the composition root of the bridge and the one door adapters come in by (`bridge.ports.Inbound`).

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
from typing import Protocol

import anyio
from anyio.abc import TaskGroup

from bridge.auth.accounts import Accounts
from bridge.auth.fleet_signins import SigninsOnStore
from bridge.calls.fleet import Fleet
from bridge.calls.results import KeptResults
from bridge.calls.resume import Resumer
from bridge.calls.toolcalls import ToolCalls
from bridge.cards.broker import Broker
from bridge.cards.outbound import Outbound
from bridge.cards.routing import Routing, base_id
from bridge.commands import parsing as commands
from bridge.commands.agent import Agent
from bridge.commands.completion import next_words
from bridge.commands.handlers import CommandHandlers
from bridge.config.file import Config
from bridge.config.policy import server_allowed
from bridge.errors import ConfigError
from bridge.forms import schema as form_schema
from bridge.llm import LLMError, LLMProvider, make_provider
from bridge.model import Actor, CardRef, ConversationKey, DecisionIn, DecisionResult, Interaction, MessageIn
from bridge.ports import AdapterState, ChatPort, Leadership, RestorableCard
from bridge.requests.audience import Audience
from bridge.requests.bounds import Bounds
from bridge.requests.budgets import Budgets
from bridge.requests.elicitation import Elicitation
from bridge.requests.grants import Grants
from bridge.requests.receipting import Receipting
from bridge.requests.roots import RootsKeeper
from bridge.requests.sampling import Sampler
from bridge.requests.server_notices import ServerNotices
from bridge.requests.server_requests import HandlerTable
from bridge.requests.tool_approval import ToolApproval
from bridge.servers.sessions import SessionPool
from bridge.storage import AsyncStore
from bridge.storage.watch import DecisionWatch

logger = logging.getLogger(__name__)


class Host:
    """The bridge's core. Use as `async with Host(config, store) as host:` after attaching chat ports. The store is
    the caller's to close, unless `owns_store` (then the host closes it when it stops)."""

    def __init__(self, config: Config, store: AsyncStore, llm: LLMProvider | None = None, *,
                 owns_store: bool = False) -> None:
        if llm is None:
            try:
                llm = make_provider(config.llm.provider, model=config.llm.model, api_key=config.llm.api_key,
                                    base_url=config.llm.base_url, timeout=config.llm.timeout)
            except (LLMError, ValueError) as exc:
                raise ConfigError([f"llm: {exc}"]) from None
        self.config, self.store, self.llm = config, store, llm
        self._owns_store = owns_store
        form_schema.set_cache_size(config.limits.form_cache_size)
        self.outbound = Outbound(config.redactor)
        # On a store other workers share, decisions they claim reach this one's waiting cards through the watch.
        watch = DecisionWatch(store) if store.shared else None
        self.broker = Broker(store, self.outbound.port_for, Routing(config.groups, self.outbound), watch)
        self.grants = Grants(store, self.outbound.say)
        self.budgets = Budgets(config.budgets, store)
        self.pool = SessionPool(config)
        self.accounts = Accounts(config, self.broker, self.outbound, self.pool,
                                 shared=SigninsOnStore(store, watch) if watch is not None else None)
        self.pool.auth = self.accounts.auth_for
        # Who sees a server's requests, and (as the handlers' context source) whose call a legacy request is for.
        audience = Audience(config, self.pool)
        # Cards the handlers ask for go through the `limits:` bounds on their way to the broker.
        self.bounds = Bounds(config.limits, audience, self.outbound.say)
        asker = self.bounds.asker(self.broker)
        receipts = Receipting(config, store)  # signed receipts of what people approve (issued once a key is set)
        self.handlers = HandlerTable(
            elicitation=(elicitation := Elicitation(audience, asker, config, self.outbound.say, receipts)),
            sampling=Sampler(audience, asker, config, self.outbound.say, llm, self.grants, self.budgets, receipts),
            roots=(roots := RootsKeeper(audience, asker, config, store, receipts)),
            tool_approval=(approval := ToolApproval(audience, asker, config, self.pool, self.grants, receipts)),
            notices=ServerNotices(self.broker, store, self.outbound), bounds=self.bounds)
        self.pool.callbacks = self.handlers.callbacks
        self.calls = ToolCalls(self.pool, self.broker, store, audience, self.outbound, approval, elicitation,
                               receipts, config.limits, config.servers)
        self.calls.results = KeptResults(config.limits)
        self.broker.on_parked = self.bounds.releasing(self.broker.on_parked)
        self.resumer = Resumer(config, store, self.broker, self.calls, self.outbound.say)
        self.resumer.reparked = self.bounds.restored
        self.fleet = Fleet(store, self.broker, self.resumer, watch, lease=config.worker_lease,
                           retention=config.retention)
        self.agent = Agent(llm, config, store, self.pool, self.calls, self.outbound.say, self.budgets)
        self.commands = CommandHandlers(config, store, self.broker, self.pool, self.calls, self.agent, roots,
                                        audience, self.outbound.say, self.grants, self.budgets, self.accounts)
        self._links: LinkIssuer | None = None
        self._tg: TaskGroup | None = None
        self._exit: AsyncExitStack | None = None

    # -- wiring and lifetime -------------------------------------------------------------------------------------

    def offer_web_forms(self, links: LinkIssuer) -> None:
        """Let cards offer their forms on the web (the HTTP server is built next to the host, not by it)."""
        self._links = links

    def attach(self, port: ChatPort) -> None:
        self.outbound.attach(port)

    @property
    def resumed(self) -> anyio.Event:
        return self.resumer.resumed

    async def __aenter__(self) -> Host:
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(self.pool)
            self._tg = await stack.enter_async_context(anyio.create_task_group())
            await self._tg.start(self.broker.run)
            await self._tg.start(self.fleet.run)
            self._exit = stack.pop_all()
        self.accounts.run_in(self._tg)
        self._tg.start_soon(self.resumer.resume_all, self._tg)
        self._tg.start_soon(self.calls.resume_tasks, self._tg)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def stopping(self) -> None:
        """Mark the start of shutdown, before any task is cancelled: work cancelled from now on is ended as 'shut
        down' (durable 2026 requests stay open for the restart) rather than as withdrawn by someone."""
        self.broker.close()

    async def aclose(self) -> None:
        """Stop: open cards end as 'shut down' (durable 2026 ones stay open for the restart), sessions close."""
        if self._exit is None:
            return
        self.stopping()
        assert self._tg is not None
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

    async def handle_message(self, message: MessageIn) -> None:
        """Start the work a message asks for in a host task and return at once."""
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

    async def decide(self, decision: DecisionIn) -> DecisionResult:
        return await self.broker.decide(decision)

    def claim(self, decision: DecisionIn) -> DecisionResult:
        return self.broker.decide_nowait(decision)

    async def check(self, interaction_id: str, actor: Actor) -> DecisionResult:
        return await self.broker.check(interaction_id, actor)

    def open_interaction(self, interaction_id: str) -> Interaction | None:
        return self.broker.interaction(interaction_id)

    async def known_interaction(self, interaction_id: str) -> Interaction | None:
        live = self.broker.interaction(interaction_id)
        if live is not None:
            return live
        stored = await self.store.interaction(interaction_id)
        return stored.interaction if stored else None

    async def open_anywhere(self, interaction_id: str) -> Interaction | None:
        """The interaction if it is open: waited on here, or (several workers on one store) held by another worker,
        whose decisions reach it through the store (`bridge.cards.elsewhere`)."""
        live = self.broker.interaction(interaction_id)
        if live is not None or not self.store.shared:
            return live
        stored = await self.store.interaction(base_id(interaction_id))
        return stored.interaction if stored is not None and stored.outcome is None else None

    def open_interactions(self, conversation: ConversationKey | None = None) -> list[Interaction]:
        return self.broker.open_interactions(conversation)

    async def next_words(self, conversation: ConversationKey, actor: Actor, before: list[str]) -> list[str]:
        servers = [n for n, c in self.config.servers.items()
                   if not c.disabled and server_allowed(self.config, conversation, n)]

        async def tools(server: str) -> list[str]:
            try:
                return [t.name for t in await self.pool.list_tools(conversation, server, person=actor)]
            except Exception:  # a server that cannot be reached just offers no completions
                logger.debug("no tool names of %s to complete", server, exc_info=True)
                return []

        return await next_words(before, servers, tools)

    def waiting_for(self, actor: Actor) -> list[tuple[Interaction, CardRef | None]]:
        return self.broker.waiting_for(actor)

    async def wait_open(self, interaction_id: str) -> Interaction:
        return await self.broker.wait_open(interaction_id)

    async def restorable_cards(self, platform: str) -> list[RestorableCard]:
        """Open cards of stored 2026 calls on one platform, left by the last run, for its adapter to re-attach to."""
        return [RestorableCard(s.interaction, s.card) for s in await self.store.open_interactions()
                if s.card is not None and s.pending_call is not None
                and s.interaction.conversation.platform == platform]

    async def stop_call(self, call_id: str, actor: Actor) -> bool:
        return await self.calls.stop(call_id, actor)

    def adapter_state(self, namespace: str) -> AdapterState:
        return _AdapterState(self.store, namespace)

    @asynccontextmanager
    async def leadership(self, name: str) -> AsyncIterator[Leadership]:
        async with self.store.leadership(name) as lease:
            yield lease

    def web_link(self, interaction_id: str, actor: Actor) -> str | None:
        interaction = self.broker.interaction(interaction_id)
        if self._links is None or interaction is None:
            return None
        return self._links.link_for(interaction, actor)

    async def web_link_anywhere(self, interaction_id: str, actor: Actor) -> str | None:
        interaction = await self.open_anywhere(interaction_id)
        if self._links is None or interaction is None:
            return None
        return self._links.link_for(interaction, actor)

    def web_forms_enabled(self) -> bool:
        return self._links is not None


class LinkIssuer(Protocol):
    """Hands out one-time web-form links (bridge.webform.WebForms)."""

    def link_for(self, interaction: Interaction, actor: Actor) -> str | None: ...


class _AdapterState:
    """One adapter's namespace of the store's adapter table (`bridge.ports.AdapterState`)."""

    def __init__(self, store: AsyncStore, namespace: str) -> None:
        self._store = store
        self._namespace = namespace

    async def get(self, key: str) -> str | None:
        return await self._store.adapter_value(self._namespace, key)

    async def set(self, key: str, value: str) -> None:
        await self._store.set_adapter_value(self._namespace, key, value)
