"""Chat command handlers: what each command word does, on top of the bridge's parts (never the host).

Parsing is in `bridge.commands`; failures a person caused (`CommandError`), servers that cannot be used
(`ServerUnavailable`), server start failures and protocol errors are all turned into messages in `run`: this is the
layer that words them for chat.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

import anyio
from mcp import Client, MCPError
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import GetPromptResult

from bridge.auth.accounts import Accounts
from bridge.calls.toolcalls import ToolCalls
from bridge.cards.broker import Broker
from bridge.cards.chat import Say
from bridge.commands import listings
from bridge.commands import parsing as commands
from bridge.commands.agent import Agent
from bridge.config.file import Config
from bridge.config.policy import approver_rule, server_allowed
from bridge.door.forms import approval_form
from bridge.door.model import ConversationKey, Interaction, Kind, MessageIn, Status, Verdict
from bridge.errors import AuthError, CommandError, ServerUnavailable, SessionError
from bridge.llm import LLMMessage
from bridge.requests.budgets import Budgets
from bridge.requests.context_lookup import Audience
from bridge.requests.grants import Grants
from bridge.requests.request_context import new_interaction
from bridge.requests.roots import RootsKeeper, check_uri
from bridge.servers import catalog
from bridge.servers.sessions import SessionPool
from bridge.storage.api import CardStore, ConversationData, HistoryStore
from bridge.text.content import block_text
from bridge.text.details import interaction_text
from bridge.text.grammar import count
from bridge.text.plain import session_error_text, shorten
from bridge.web.apps import meta as app_meta

logger = logging.getLogger(__name__)
T = TypeVar("T")


class CommandStore(CardStore, ConversationData, HistoryStore, Protocol):
    """What the command words need of the store: the cards (`cancel`, `pending`), roots and the agent's history."""


@dataclass(frozen=True, slots=True)
class CommandHandlers:
    """The command words, each a `_cmd_<name>` method."""

    config: Config
    store: CommandStore
    broker: Broker
    pool: SessionPool
    calls: ToolCalls
    agent: Agent
    roots: RootsKeeper
    audience: Audience
    say: Say
    grants: Grants
    budgets: Budgets
    accounts: Accounts

    async def run(self, message: MessageIn, command: commands.Command) -> None:
        conversation = message.conversation
        if command.error:
            await self.say(conversation, command.error)
            return
        try:
            handler = getattr(self, f"_cmd_{command.name}")
            await handler(message, command)
        except (CommandError, ServerUnavailable, AuthError) as exc:
            await self.say(conversation, str(exc))
        except SessionError as exc:
            await self.say(conversation, session_error_text(exc))
        except MCPError as exc:
            await self.say(
                conversation, f"The server answered with an error ({exc.code}): {shorten(exc.error.message, 500)}")

    async def _cmd_help(self, message: MessageIn, command: commands.Command) -> None:
        await self.say(message.conversation, commands.HELP)

    async def _cmd_servers(self, message: MessageIn, command: commands.Command) -> None:
        if not self.config.servers:
            await self.say(message.conversation, "No servers are configured.")
            return
        lines = []
        for name, cfg in self.config.servers.items():
            if not server_allowed(self.config, message.conversation, name):
                continue
            session = self.pool.find(message.conversation, name)
            title = f" ({cfg.title})" if cfg.title else ""
            if cfg.disabled:
                state = "disabled"
            elif session is None:
                state = "not started (starts on first use)"
            else:
                info = session.client.server_info if session.client else None
                reported = f", reports {info.name} {info.version}".rstrip() if info else ""
                state = f"{session.state.value}, protocol {session.protocol_version}{reported}"
            lines.append(f"• {name}{title}: {state}; scope {cfg.scope}, protocol setting {cfg.protocol}")
        await self.say(message.conversation, "Servers:\n" + "\n".join(lines))

    async def _cmd_tools(self, message: MessageIn, command: commands.Command) -> None:
        if len(command.args) == 2 and command.args[1] not in self.config.servers:
            await self._tool_detail(message, *command.args)
            return
        names = self._server_names(command, message.conversation)
        out: list[str] = []
        for name in names:
            try:
                tools = await self.pool.list_tools(message.conversation, name, person=message.actor)
            except SessionError as exc:
                out.append(session_error_text(exc))
                continue
            except AuthError as exc:
                out.append(str(exc))
                continue
            tools = [t for t in tools if app_meta.for_model(t)]  # an app's own tools are its business (MCP Apps)
            out.append(f"{name}: {count(len(tools), 'tool')}")
            for tool in tools:
                hints = tool.annotations
                flag = " [destructive]" if hints and hints.destructive_hint and not hints.read_only_hint else ""
                flag += catalog.task_flag(tool)
                out.extend(line.replace("tools SERVER TOOL", f"tools {name} {tool.name}")
                           for line in catalog.tool_line(tool, flag))
        await self.say(message.conversation, "\n".join(out) or "No servers.")

    async def _tool_detail(self, message: MessageIn, server: str, name: str) -> None:
        if server not in self._server_names(commands.Command("tools"), message.conversation):
            raise CommandError(f"There is no server named {server!r} here. Try `servers`.")
        tools = {t.name: t for t in await self.pool.list_tools(message.conversation, server, person=message.actor)
                 if app_meta.for_model(t)}
        tool = tools.get(name)
        if tool is None:
            raise CommandError(f"{server} has no tool named {name!r}. Try `tools {server}`.")
        await self.say(message.conversation, catalog.tool_detail(server, tool))

    async def _cmd_call(self, message: MessageIn, command: commands.Command) -> None:
        server, tool = command.args
        # Parked while people answer its cards (a 2026 call): the result is reported here when it comes.
        result = await self.calls.run(message.conversation, message.actor, server, tool, command.arguments, park=True)
        if result is not None:
            await self.calls.report(message.conversation, server, tool, result, requester=message.actor,
                                    arguments=command.arguments)

    async def _waiting_here(self, conversation: ConversationKey) -> list[Interaction]:
        """Requests open in this conversation: those waited on in this process, and the stored open ones nobody waits
        on in memory (a 2026 call's parked cards, another worker's)."""
        live = self.broker.open_interactions(conversation)
        known = {i.id for i in live}
        now = time.time()
        stored = [row.interaction for row in await self.store.open_interactions()
                  if row.interaction.conversation == conversation and row.interaction.id not in known
                  and row.interaction.expires_at > now]
        return [*live, *stored]

    async def _cmd_pending(self, message: MessageIn, command: commands.Command) -> None:
        open_ = await self._waiting_here(message.conversation)
        if not open_:
            await self.say(message.conversation, "Nothing is waiting for anyone here.")
            return
        now = time.time()
        lines = [listings.pending_line(i, now) for i in open_]
        await self.say(message.conversation, "Waiting:\n" + "\n".join(lines))

    async def _cmd_cancel(self, message: MessageIn, command: commands.Command) -> None:
        conversation = message.conversation
        target = command.args[0] if command.args else None
        # Only this conversation's requests; without an id, the newest one this person may decide.
        open_ = self.broker.open_interactions(conversation)
        mine = [i for i in open_ if i.may_decide(message.actor)]
        if target is None and mine:
            target = mine[-1].id
        stored = await self.store.interaction(target) if target is not None else None
        if target is not None and stored is not None and stored.interaction.conversation == conversation:
            result = await self.broker.cancel(target, message.actor)
            if result.verdict is Verdict.CLAIMED:
                await self.say(conversation, f"Cancelled {target}.")
            return
        call = self.calls.find(conversation, target)
        if call is None:
            await self.say(conversation, "There is nothing to cancel here." if target is None
                           else f"Nothing called {target!r} is waiting or running here.")
            return
        await self.calls.stop(call.id, message.actor)

    async def _cmd_stop(self, message: MessageIn, command: commands.Command) -> None:
        """A running call or task (the newest here without an id): `cancel` without its cards."""
        target = command.args[0] if command.args else None
        call = self.calls.find(message.conversation, target)
        if call is None:
            await self.say(message.conversation, "Nothing is running here." if target is None
                           else f"Nothing called {target!r} is running here.")
            return
        await self.calls.stop(call.id, message.actor)

    async def _cmd_reset(self, message: MessageIn, command: commands.Command) -> None:
        await self.store.clear_history(message.conversation)
        await self.say(message.conversation, "Forgot this conversation's history.")

    async def _cmd_show(self, message: MessageIn, command: commands.Command) -> None:
        waiting = await self._waiting_here(message.conversation)
        # Without an id: the newest request waiting here (the card being answered, on a console).
        target = command.args[0] if command.args else (waiting[-1].id if waiting else None)
        interaction = next((i for i in waiting if i.id == target), None)
        if interaction is not None:
            await self.say(message.conversation, interaction_text(interaction))
            return
        kept = self.calls.results.get(message.conversation, target) if target else None
        if kept is None:
            raise CommandError("Usage: show <id> (the id of a waiting request here, see `pending`, or of a long "
                               "result).")
        await self.say(message.conversation, kept)

    async def _cmd_roots(self, message: MessageIn, command: commands.Command) -> None:
        conversation = message.conversation
        if command.args and command.args[0] == "add":
            uri = check_uri(command.args[1])
            await self.store.add_root(conversation, uri, " ".join(command.args[2:]))
            await self._roots_changed(conversation)
            await self.say(conversation, f"Added {uri}.")
            return
        if command.args and command.args[0] == "remove":
            removed = await self.store.remove_root(conversation, command.args[1])
            if removed:
                await self._roots_changed(conversation)
            await self.say(conversation, f"Removed {command.args[1]}." if removed
                           else f"{command.args[1]} is not one of this conversation's roots.")
            return
        roots = await self.roots.offered(conversation)
        lines = [f"• {uri}" + (f" ({name})" if name else "") for uri, name in roots]
        out = ["Roots here:", *lines] if lines else [
            "No roots added here. Add one with `roots add file:///path [name]`."]
        # What a server's roots card offers also includes its configured folders: show those too.
        for server in self._server_names(commands.Command("roots"), conversation):
            extra = [(uri, name) for uri, name in self.config.servers[server].roots.defaults
                     if uri not in {u for u, _ in roots}]
            if extra:
                out.append(f"Also offered to {server} (its configured folders):")
                out.extend(f"• {uri}" + (f" ({name})" if name else "") for uri, name in extra)
        await self.say(conversation, "\n".join(out))

    async def _roots_changed(self, conversation: ConversationKey) -> None:
        """Legacy sessions get notifications/roots/list_changed; 2026 servers ask again on their next request."""
        for session in self.pool.sessions():
            if session.conversation != conversation or session.modern or session.client is None:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                try:
                    await session.client.send_roots_list_changed()
                except (MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                    logger.info("could not tell %s that roots changed: %s", session.server.name, exc)

    async def _cmd_prompts(self, message: MessageIn, command: commands.Command) -> None:
        await self._listing(message, command, "prompts", lambda c: c.server_capabilities.prompts is not None,
                            catalog.all_prompts, catalog.prompt_line)

    async def _cmd_resources(self, message: MessageIn, command: commands.Command) -> None:
        await self._listing(message, command, "resources", lambda c: c.server_capabilities.resources is not None,
                            catalog.all_resources, catalog.resource_line)

    async def _listing(self, message: MessageIn, command: commands.Command, what: str,
                       offered: Callable[[Client], bool], fetch: Callable[[Client], Awaitable[list[T]]],
                       line: Callable[[T], str]) -> None:
        """`prompts` and `resources`: every page from each server asked for, or a note that it has none."""
        out: list[str] = []
        for name in self._server_names(command, message.conversation):
            async with self.pool.borrow(message.conversation, name, message.actor) as client:
                items = await fetch(client) if offered(client) else None
            if items is None:
                out.append(f"{name}: no {what}")
                continue
            out.append(f"{name}: {count(len(items), what.removesuffix('s'))}")
            out.extend(line(item) for item in items)
        await self.say(message.conversation, shorten("\n".join(out) or "No servers."))

    async def _cmd_prompt(self, message: MessageIn, command: commands.Command) -> None:
        server, name = command.args
        # Borrowed for the whole exchange: the argument cards may take minutes, and the session must stay open.
        async with self.pool.borrow(message.conversation, server, message.actor) as client:
            result = await self._get_prompt(client, message, server, name, command)
        if result is None:
            return
        await self.say(message.conversation, catalog.prompt_text(result))
        if self.agent.available:
            opening = [LLMMessage("assistant" if m.role == "assistant" else "user", block_text(m.content))
                       for m in result.messages]
            await self.agent.turn(MessageIn(message.conversation, message.actor, ""), opening)

    async def _get_prompt(self, client: Client, message: MessageIn, server: str, name: str,
                          command: commands.Command) -> GetPromptResult | None:
        prompts = {p.name: p for p in await catalog.all_prompts(client)}
        prompt = prompts.get(name)
        if prompt is None:
            raise CommandError(f"{server} has no prompt named {name!r}. Try `prompts {server}`.")
        arguments = {k: str(v) for k, v in command.arguments.items()}
        missing = [a for a in prompt.arguments or [] if a.required and a.name not in arguments]
        session = self.pool.find(message.conversation, server, message.actor)
        for n, argument in enumerate(missing, 1):
            # One argument at a time: a server's completions for later arguments depend on the earlier answers.
            field = await catalog.argument_field(client, prompt, argument.name, argument.description, arguments)
            ctx = self.audience.context(server, session, message.conversation, message.actor)
            interaction = new_interaction(
                ctx, Kind.FORM, f"The prompt {name} needs {argument.name} ({n} of {len(missing)}).",
                form=approval_form([field]), timeout=self.config.servers[server].elicitation_timeout,
                accept_label="Submit", decline_label="Skip the prompt")
            outcome = await self.broker.ask(interaction)
            if outcome.status is not Status.ACCEPTED:
                await self.say(message.conversation, f"The prompt {name} was not run.")
                return None
            arguments.update({k: str(v) for k, v in (outcome.content or {}).items()})
        return await client.get_prompt(name, arguments)

    async def _cmd_read(self, message: MessageIn, command: commands.Command) -> None:
        server, uri = command.args
        async with self.pool.borrow(message.conversation, server, message.actor) as client:
            result = await client.read_resource(uri)
        await self.say(message.conversation, catalog.contents_text(list(result.contents)))

    def _server_names(self, command: commands.Command, conversation: ConversationKey) -> list[str]:
        """The servers a command names, or every one this channel may use."""
        return list(command.args) or [n for n, c in self.config.servers.items()
                                      if not c.disabled and server_allowed(self.config, conversation, n)]

    # -- grants and budgets --------------------------------------------------------------------------------------

    async def _cmd_grants(self, message: MessageIn, command: commands.Command) -> None:
        now = self.grants.clock()
        here = await self.grants.here(message.conversation)
        await self.say(message.conversation, "Grants here:\n" + "\n".join(f"• {g.describe(now)}" for g in here)
                       if here else "No grants hold here. An approver can give one with Allow … on an approval.")

    async def _cmd_revoke(self, message: MessageIn, command: commands.Command) -> None:
        grant = next((g for g in await self.grants.here(message.conversation) if g.id == command.args[0]), None)
        if grant is None:
            raise CommandError(f"No grant {command.args[0]!r} holds here; see `grants`.")
        cfg = self.config.servers.get(grant.server)
        kind = Kind.TOOL if grant.kind == "tool" else Kind.SAMPLING
        allowed = {grant.given_by.key, *(approver_rule(cfg, kind, grant.tool).people if cfg else ())}
        if message.actor.key not in allowed:
            raise CommandError(f"Only {grant.given_by.label()} (who gave it) or {grant.server}'s approvers can "
                               f"revoke {grant.id}.")
        await self.grants.revoke(grant, message.actor)
        await self.say(message.conversation, f"Revoked {grant.id}: {grant.what()} asks again.")

    async def _cmd_usage(self, message: MessageIn, command: commands.Command) -> None:
        await self.say(message.conversation, await self.budgets.report(message.conversation, message.actor))

    # -- a person's own accounts (per_user servers) --------------------------------------------------------------

    async def _cmd_accounts(self, message: MessageIn, command: commands.Command) -> None:
        names = await self.accounts.connected(message.actor)
        await self.say(message.conversation, f"Your connected accounts: {', '.join(names)}." if names else
                       "You have not connected any server that works with each person's own account.")

    async def _cmd_logout(self, message: MessageIn, command: commands.Command) -> None:
        await self.say(message.conversation, await self.accounts.logout(command.args[0], message.actor, self.pool))
