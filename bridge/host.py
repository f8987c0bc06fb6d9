"""The host: where chat messages, MCP sessions and the broker meet.

Adapters call `handle_message` and `decide` (the `Inbound` protocol); the host runs commands and tool calls in tasks
it owns, answers server requests by posting cards through the broker, and reports results and failures back to the
conversation through the chat port of its platform.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup
from mcp import MCPError
from mcp.client import ClientRequestContext
from mcp.shared.exceptions import UrlElicitationRequiredError
from mcp.types import (
    INVALID_PARAMS,
    URL_ELICITATION_REQUIRED,
    CallToolResult,
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitCompleteNotification,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestParams,
    ElicitRequestURLParams,
    ElicitResult,
    ErrorData,
    InputRequest,
    InputResponse,
    ListRootsRequest,
    ListRootsResult,
    LoggingMessageNotificationParams,
    SamplingCapability,
    SamplingToolsCapability,
    TextContent,
    ToolListChangedNotification,
)

from bridge import catalog, commands, elicitation
from bridge.agent import Agent
from bridge.broker import Broker
from bridge.calls import Caller, InputRefused
from bridge.config import Config
from bridge.context import RequestContext, new_id
from bridge.errors import AdapterError, BridgeError, ConfigError, SessionError, UnsupportedSchema
from bridge.forms import Form
from bridge.handlers import CommandHandlers
from bridge.llm import LLMError, LLMProvider, make_provider
from bridge.model import (
    Actor,
    CardRef,
    ConversationKey,
    DecisionIn,
    DecisionResult,
    Detail,
    Interaction,
    Kind,
    MessageIn,
    MessageRef,
    Outcome,
    ServerLabel,
    Status,
    StatusView,
)
from bridge.policy import mask_arguments, needs_approval
from bridge.ports import AdapterState, ChatPort, RestorableCard
from bridge.presentation import describe_outcome
from bridge.ratelimit import RateLimiter
from bridge.roots import RootsKeeper
from bridge.sampling import Sampler, SamplingAnswer
from bridge.sessions import Callbacks, Session, SessionPool
from bridge.store import PendingCall, Store
from bridge.text import result_text, session_error_text, shorten

logger = logging.getLogger(__name__)

STATUS_EDIT_INTERVAL = 1.0
"""Seconds between edits of a progress status line (platforms rate-limit edits)."""
LOG_MESSAGES_PER_MINUTE = 10
"""Server log lines shown per server and conversation per minute; more are dropped (a chatty server must not
flood a channel)."""
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@dataclass(eq=False)
class RunningCall:
    id: str
    conversation: ConversationKey
    requester: Actor | None
    server: str
    tool: str
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    status: MessageRef | None = None
    last_edit: float = 0.0
    stopped_by: Actor | None = None


class Host:
    """The bridge's core. Use as `async with Host(config, store) as host:` after attaching chat ports."""

    def __init__(self, config: Config, store: Store, llm: LLMProvider | None = None) -> None:
        self.config = config
        self.store = store
        if llm is None:
            try:
                llm = make_provider(config.llm.provider, model=config.llm.model, api_key=config.llm.api_key,
                                    base_url=config.llm.base_url, timeout=config.llm.timeout)
            except (LLMError, ValueError) as exc:
                raise ConfigError([f"llm: {exc}"]) from None
        self.llm = llm
        self._ports: dict[str, ChatPort] = {}
        self.broker = Broker(store, self.port_for)
        self.pool = SessionPool(config, self._callbacks)
        self._caller = Caller(self.pool, self.broker, store, self._answer, self._context)
        self._tg: TaskGroup | None = None
        self._exit: AsyncExitStack | None = None
        self._calls: dict[str, RunningCall] = {}
        self.sampler = Sampler(self, llm)
        self.agent = Agent(self)
        self.handlers = CommandHandlers(self)
        self.roots = RootsKeeper(self)
        self._log_limit = RateLimiter(LOG_MESSAGES_PER_MINUTE)
        self.resumed = anyio.Event()
        """Set once every stored 2026 call has been picked up again after a start."""

    # -- wiring --------------------------------------------------------------------------------------------------

    def attach(self, port: ChatPort) -> None:
        self._ports[port.platform] = port

    def port_for(self, conversation: ConversationKey) -> ChatPort:
        try:
            return self._ports[conversation.platform]
        except KeyError:
            raise AdapterError(f"no chat adapter for platform {conversation.platform!r}") from None

    async def __aenter__(self) -> Host:
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(self.pool)
            self._tg = await stack.enter_async_context(anyio.create_task_group())
            self._exit = stack.pop_all()
        self._tg.start_soon(self._resume_pending)
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
        finally:
            with anyio.CancelScope(shield=True):
                await self.llm.aclose()

    def spawn(self, fn: Any, *args: Any) -> None:
        assert self._tg is not None, "the host is not running"
        self._tg.start_soon(fn, *args)

    # -- Inbound -------------------------------------------------------------------------------------------------

    async def handle_message(self, message: MessageIn) -> None:
        """Start the work a message asks for in a host task and return at once."""
        self.spawn(self.run_message, message)

    async def run_message(self, message: MessageIn) -> None:
        """Do the work a message asks for (a command, or an agent turn) and return when it is finished."""
        text = message.text.strip()
        first = text.split(None, 1)[0].lower() if text else ""
        try:
            if message.explicit_command or first in commands.NAMES:
                await self.handlers.run(message, commands.parse(text))
            elif message.addressed:
                await self._agent_turn(message)
        except Exception:
            # The top of a task this host owns: one person's failing command must not stop everyone's bridge.
            logger.exception("handling a message in %s failed", message.conversation.id())
            await self.say(message.conversation, "Something went wrong on the bridge's side; it was logged.")

    async def decide(self, decision: DecisionIn) -> DecisionResult:
        return await self.broker.decide(decision)

    def claim(self, decision: DecisionIn) -> DecisionResult:
        return self.broker.decide_nowait(decision)

    async def check(self, interaction_id: str, actor: Actor) -> DecisionResult:
        return await self.broker.check(interaction_id, actor)

    def open_interaction(self, interaction_id: str) -> Interaction | None:
        return self.broker.interaction(interaction_id)

    def known_interaction(self, interaction_id: str) -> Interaction | None:
        live = self.broker.interaction(interaction_id)
        if live is not None:
            return live
        stored = self.store.interaction(interaction_id)
        return stored.interaction if stored else None

    def open_interactions(self, conversation: ConversationKey | None = None) -> list[Interaction]:
        return self.broker.open_interactions(conversation)

    def waiting_for(self, actor: Actor) -> list[tuple[Interaction, CardRef | None]]:
        return self.broker.waiting_for(actor)

    async def wait_open(self, interaction_id: str) -> Interaction:
        return await self.broker.wait_open(interaction_id)

    def restorable_cards(self, platform: str) -> list[RestorableCard]:
        return [RestorableCard(s.interaction, s.card) for s in self.store.open_interactions()
                if s.card is not None and s.pending_call is not None
                and s.interaction.conversation.platform == platform]

    def adapter_state(self, namespace: str) -> AdapterState:
        return _AdapterState(self.store, namespace)

    # -- messages out --------------------------------------------------------------------------------------------

    async def say(self, conversation: ConversationKey, text: str) -> None:
        try:
            await self.port_for(conversation).send(conversation, text)
        except BridgeError as exc:
            logger.warning("could not send a message to %s: %s", conversation.id(), exc)

    # -- tools, and the commands that need the host's state (the rest are in bridge.handlers) ------------------

    async def list_tools(self, conversation: ConversationKey, server: str, *, fresh: bool = False) -> list[Any]:
        """Every tool of a server (all pages), fetched once per session (again when `fresh`)."""
        session = await self.pool.get(conversation, server)
        assert session.client is not None
        if session.tools is None or fresh:
            session.tools = {t.name: t for t in await catalog.all_tools(session.client)}
        return list(session.tools.values())

    async def _approve_tool(self, call: RunningCall, arguments: Mapping[str, Any]) -> CallToolResult | None:
        """Ask before a risky tool runs. None means go ahead; a denial is a tool error the caller can read."""
        cfg = self.config.servers.get(call.server)
        if cfg is None or cfg.disabled:
            return None  # the pool reports it
        tools = {t.name: t for t in await self.list_tools(call.conversation, call.server)}
        if call.tool not in tools:
            # A tool added since the list was fetched must not slip past the rules because we know nothing of it.
            tools = {t.name: t for t in await self.list_tools(call.conversation, call.server, fresh=True)}
        tool = tools.get(call.tool)
        if not needs_approval(cfg.tool_rules, call.tool, tool.annotations if tool else None):
            return None
        session = self.pool.find(call.conversation, call.server)
        who = call.requester.label() if call.requester else "the agent"
        interaction = Interaction(
            id=new_id(), kind=Kind.TOOL, server=self.label(call.server, session), conversation=call.conversation,
            requester=call.requester, approvers=self.approvers(call.server, call.requester),
            message=f"{who} wants to run {call.server}.{call.tool}.", form=Form(),
            expires_at=time.time() + cfg.tool_timeout,
            details=(Detail("Tool", f"{call.server}.{call.tool}" + (f": {shorten(tool.description or '', 300)}"
                                                                    if tool and tool.description else "")),
                     Detail("Arguments", mask_arguments(arguments)), Detail("Asked by", who)),
            accept_label="Run", decline_label="Deny", quick_accept=True, tool=call.tool)
        outcome = await self.broker.ask(interaction)
        if outcome.status is Status.ACCEPTED:
            return None
        text = f"The call to {call.tool} was not run: {describe_outcome(outcome)}."
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

    def find_call(self, conversation: ConversationKey, call_id: str | None) -> RunningCall | None:
        calls = [c for c in self._calls.values() if c.conversation == conversation]
        if call_id is not None:
            calls = [c for c in calls if c.id == call_id]
        return calls[-1] if calls else None

    async def stop_call(self, call_id: str, actor: Actor) -> bool:
        """Stop a running call (a Stop button or `cancel`): the server gets the cancellation."""
        call = self._calls.get(call_id)
        if call is None:
            return False
        allowed = self.approvers(call.server) | ({call.requester.key} if call.requester else set())
        if call.requester is not None and actor.key not in allowed:
            await self.port_for(call.conversation).notify(
                call.conversation, actor, f"Only {call.requester.label()} can stop this call.")
            return False
        call.stopped_by = actor
        call.scope.cancel()
        return True

    async def _agent_turn(self, message: MessageIn) -> None:
        await self.agent.turn(message)

    # -- tool calls ----------------------------------------------------------------------------------------------

    async def run_call(self, conversation: ConversationKey, requester: Actor | None, server: str, tool: str,
                       arguments: Mapping[str, Any]) -> CallToolResult | None:
        """Run a tool call and return its result; failures are reported in the conversation and return None."""
        call = RunningCall(new_id(), conversation, requester, server, tool)
        self._calls[call.id] = call

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            await self._show_progress(call, progress, total, message)

        try:
            with call.scope:
                denied = await self._approve_tool(call, arguments)
                if denied is not None:
                    return denied
                return await self._caller.call(conversation, requester, server, tool, arguments, progress)
            await self._finish_status(call, f"stopped by {call.stopped_by.label() if call.stopped_by else 'request'}")
            await self.say(conversation, f"Stopped {server}.{tool}.")
            return None
        except MCPError as exc:
            if exc.code == URL_ELICITATION_REQUIRED:
                await self._url_required(conversation, requester, server, tool, exc)
                return None
            await self.say(conversation, f"{server}.{tool} failed with error {exc.code}: "
                                         f"{shorten(exc.error.message, 1000)}")
            return None
        except InputRefused as exc:
            await self.say(conversation, f"{server}.{tool} was not continued: {shorten(exc.error.message, 500)}")
            return None
        except SessionError as exc:
            await self.say(conversation, session_error_text(exc))
            return None
        finally:
            self._calls.pop(call.id, None)
            if call.status is not None and not call.scope.cancel_called:
                await self._finish_status(call, "done")

    async def report_result(self, conversation: ConversationKey, server: str, tool: str,
                             result: CallToolResult) -> None:
        head = f"{server}.{tool} reported an error:" if result.is_error else f"{server}.{tool}:"
        await self.say(conversation, f"{head}\n{result_text(result)}")

    async def _url_required(self, conversation: ConversationKey, requester: Actor | None, server: str, tool: str,
                            exc: MCPError) -> None:
        """A legacy -32042 error: show each URL it names; the person retries the call after visiting them."""
        try:
            elicitations = UrlElicitationRequiredError.from_error(exc.error).elicitations
        except (ValueError, TypeError, KeyError):
            await self.say(conversation, f"{server}.{tool} needs a link visited first, but sent no usable link.")
            return
        session = self.pool.find(conversation, server)
        label = self.label(server, session)
        ctx = RequestContext(conversation, label, requester, self.approvers(server, requester), tool)
        await self.say(conversation, f"{server}.{tool} needs {len(elicitations)} link(s) visited before it can run. "
                                     "Run the call again when you are done.")
        async with anyio.create_task_group() as tg:
            for params in elicitations:
                tg.start_soon(self._elicit, ctx, params)

    async def _show_progress(self, call: RunningCall, value: float, total: float | None, text: str | None) -> None:
        now = time.monotonic()
        final = total is not None and value >= total
        if call.status is not None and now - call.last_edit < STATUS_EDIT_INTERVAL and not final:
            return
        call.last_edit = now
        view = self._status_view(call, text or "", value, total)
        port = self.port_for(call.conversation)
        try:
            if call.status is None:
                call.status = await port.post_status(call.conversation, view)
            else:
                await port.update_status(call.status, view)
        except BridgeError as exc:
            logger.warning("could not show progress: %s", exc)

    def _status_view(self, call: RunningCall, text: str, value: float | None = None, total: float | None = None,
                     done: bool = False) -> StatusView:
        session = self.pool.find(call.conversation, call.server)
        return StatusView(call.id, self.label(call.server, session), call.tool, shorten(text, 300), value, total,
                          done, stoppable=not done)

    async def _finish_status(self, call: RunningCall, text: str) -> None:
        if call.status is None:
            return
        with anyio.move_on_after(5, shield=True):
            try:
                await self.port_for(call.conversation).update_status(call.status,
                                                                     self._status_view(call, text, done=True))
            except BridgeError as exc:
                logger.warning("could not finish a status line: %s", exc)

    async def _resume_pending(self) -> None:
        """After a start, pick up every stored 2026 call and finish it when its cards are answered."""
        pending = self.store.pending_calls()
        durable = {call.id for call in pending}
        for stored in self.store.open_interactions():
            # A card of an earlier run that belongs to no stored call (a legacy call that died with the process):
            # no server waits for it any more.
            if stored.pending_call not in durable:
                await self.broker.retire(stored, "the bridge restarted; run the command again")
        for call in pending:
            self.spawn(self._resume_one, call)
        self.resumed.set()

    async def _resume_one(self, pending: PendingCall) -> None:
        try:
            result = await self._caller.resume(pending)
        except (MCPError, InputRefused) as exc:
            await self._abandon(pending, exc.error.message)
            return
        except BridgeError as exc:
            await self._abandon(pending, session_error_text(exc) if isinstance(exc, SessionError) else str(exc))
            return
        except Exception as exc:
            # The top of a host task: a call that cannot be resumed must not keep the bridge from starting.
            logger.exception("resuming %s.%s failed", pending.server, pending.tool)
            await self._abandon(pending, f"an internal error ({type(exc).__name__})")
            return
        await self.report_result(pending.conversation, pending.server, pending.tool, result)

    async def _abandon(self, pending: PendingCall, why: str) -> None:
        """Give up on a stored call: its open cards end, its row goes, and the conversation is told why."""
        for stored in self.store.interactions_for_call(pending.id):
            if stored.status is Status.OPEN and self.broker.interaction(stored.interaction.id) is None:
                await self.broker.retire(stored, "the call could not be finished after the restart")
        self.store.delete_pending_call(pending.id)
        await self.say(pending.conversation, f"{pending.server}.{pending.tool} could not be finished after the "
                                             f"restart: {shorten(why, 500)}")

    # -- server requests -----------------------------------------------------------------------------------------

    def label(self, server: str, session: Session | None) -> ServerLabel:
        cfg = self.config.servers.get(server)
        reported = ""
        if session is not None and session.client is not None and session.client.server_info is not None:
            info = session.client.server_info
            reported = shorten(info.title or info.name or "", 60)
        return ServerLabel(server, (cfg.title if cfg and cfg.title else reported))

    def approvers(self, server: str, *requesters: Actor | None) -> frozenset[str]:
        cfg = self.config.servers.get(server)
        configured = frozenset(cfg.approvers) if cfg else frozenset()
        return configured | {r.key for r in requesters if r is not None}

    def _context(self, session: Session, conversation: ConversationKey, requester: Actor | None,
                 tool: str) -> RequestContext:
        approvers = self.approvers(session.server.name, requester)
        return RequestContext(conversation, self.label(session.server.name, session), requester, approvers, tool)

    def _legacy_context(self, session: Session) -> RequestContext | None:
        """For a legacy server request: the conversation and people of the call(s) open on that session."""
        info = session.context_for_request()
        conversation = info.conversation if info else session.conversation
        if conversation is None:
            return None
        return self._context(session, conversation, info.requester if info else None, info.tool if info else "")

    def _callbacks(self, session: Session) -> Callbacks:
        async def on_elicit(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
            ctx = self._legacy_context(session)
            if ctx is None:
                return ErrorData(code=INVALID_PARAMS, message="No conversation is waiting on this server to ask in")
            return await self._elicit(ctx, params, session)

        async def on_message(message: Any) -> None:
            if isinstance(message, ToolListChangedNotification):
                session.tools = None  # fetched again on next need, so approval rules see the new annotations
            elif isinstance(message, ElicitCompleteNotification):
                # Ids are the server's and only mean something on this session.
                interaction_id = session.url_elicitations.pop(message.params.elicitation_id, None)
                if interaction_id is not None:  # unknown or already completed: the spec says to ignore it
                    await self._url_completed(interaction_id)

        async def on_sample(context: ClientRequestContext, params: CreateMessageRequestParams) -> SamplingAnswer:
            ctx = self._legacy_context(session)
            if ctx is None:
                return ErrorData(code=-1, message="No conversation is waiting on this server to ask in")
            return await self.sampler.handle(ctx, params)

        async def on_roots(context: ClientRequestContext) -> ListRootsResult | ErrorData:
            ctx = self._legacy_context(session)
            if ctx is None:
                return ListRootsResult(roots=[])
            return await self.roots.handle(ctx)

        async def on_log(params: LoggingMessageNotificationParams) -> None:
            # Servers that ignore logging/setLevel still get filtered here.
            if log_level is None or LOG_LEVELS.index(params.level) < LOG_LEVELS.index(log_level):
                return
            info = session.context_for_request()
            conversation = info.conversation if info else session.conversation
            if conversation is None or not self._log_limit.allow((conversation, session.server.name)):
                return
            data = params.data if isinstance(params.data, str) else repr(params.data)
            source = f"{params.logger}: " if params.logger else ""
            await self.say(conversation, f"[{session.server.name} {params.level}] {source}{shorten(data, 500)}")

        cfg = session.server
        log_level = None if cfg.log_level == "off" else cfg.log_level
        tools = SamplingCapability(tools=SamplingToolsCapability()) if self.sampler.supports_tools else None
        return Callbacks(
            elicitation=on_elicit,
            # Passing a callback declares the capability: a server that may not sample or see roots is not told
            # it could.
            sampling=on_sample if cfg.sampling.approval != "deny" else None,
            sampling_capabilities=tools if cfg.sampling.approval != "deny" else None,
            list_roots=on_roots if cfg.roots.approval != "deny" else None,
            logging=on_log if log_level else None,
            log_level=log_level,
            message_handler=on_message,
        )

    async def _answer(self, ctx: RequestContext, request: InputRequest) -> InputResponse | ErrorData:
        """Answer one 2026 input request (the same handlers as the legacy callbacks)."""
        cfg = self.config.servers[ctx.server.name]
        if isinstance(request, ElicitRequest):
            return await self._elicit(ctx, request.params)
        if isinstance(request, CreateMessageRequest) and cfg.sampling.approval != "deny":
            return await self.sampler.handle(ctx, request.params)
        if isinstance(request, ListRootsRequest) and cfg.roots.approval != "deny":
            return await self.roots.handle(ctx)
        return ErrorData(code=-32601, message=f"{request.method} is not available to this server")

    async def _elicit(self, ctx: RequestContext, params: ElicitRequestParams,
                      session: Session | None = None) -> ElicitResult | ErrorData:
        cfg = self.config.servers[ctx.server.name]
        if not cfg.elicitation_enabled:
            return ElicitResult(action="cancel")
        if isinstance(params, ElicitRequestURLParams):
            interaction = elicitation.url_interaction(ctx, params, cfg.elicitation_timeout)
            if params.elicitation_id and session is not None:
                session.url_elicitations[params.elicitation_id] = interaction.id
        else:
            assert isinstance(params, ElicitRequestFormParams)
            try:
                interaction = elicitation.form_interaction(ctx, params, cfg.elicitation_timeout)
            except UnsupportedSchema as exc:
                await self.say(ctx.conversation, f"{ctx.server.text()} asked for a form this bridge cannot show, so "
                                                 f"it was refused: {shorten(str(exc), 400)}")
                return ErrorData(code=INVALID_PARAMS, message=f"Unsupported requestedSchema: {exc}")
        outcome = await self.broker.ask(interaction, pending_call=ctx.pending_call, input_key=ctx.input_key)
        return elicitation.to_result(outcome)

    async def _url_completed(self, interaction_id: str) -> None:
        """A legacy server says the link flow is done: an open card is accepted by that, a decided one updated."""
        reason = "the server reports the link flow complete"
        if self.broker.complete(interaction_id, reason):
            return
        stored = self.store.interaction(interaction_id)
        if stored is None or stored.card is None:
            return
        previous = stored.outcome or Outcome(Status.ACCEPTED)
        done = Outcome(previous.status, previous.content, previous.by, reason=reason)
        try:
            await self.port_for(stored.interaction.conversation).finish_card(stored.card, stored.interaction, done)
        except BridgeError as exc:
            logger.warning("could not update card %s: %s", interaction_id, exc)


@dataclass(frozen=True, slots=True)
class _AdapterState:
    store: Store
    namespace: str

    def get(self, key: str) -> str | None:
        return self.store.adapter_value(self.namespace, key)

    def set(self, key: str, value: str) -> None:
        self.store.set_adapter_value(self.namespace, key, value)


__all__ = ["Host", "RunningCall"]
