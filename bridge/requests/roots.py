"""Roots: the folders a server may see, per conversation, shared only after someone approves which.

Each conversation keeps its own list (stored, so it survives restarts) on top of the server's configured defaults.
When a server asks, a card lists what it would receive: share all, pick some, or deny; "always for this server here"
is remembered per conversation and server.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from mcp.client import ClientRequestContext
from mcp.types import ErrorData, ListRootsResult, Root

from bridge.config.file import Config
from bridge.door.forms import Field, FieldKind, Option, approval_form
from bridge.door.model import ConversationKey, Detail, Kind, Status
from bridge.errors import CommandError
from bridge.requests.receipting import Receipting, result_json, with_receipt
from bridge.requests.request_context import Asker, ContextSource, RequestContext, RequestHandler, new_interaction
from bridge.safety.receipts.canonical import request_digest
from bridge.storage.api import ConversationData


def check_uri(uri: str) -> str:
    """Roots must be file:// URIs (both spec revisions say so)."""
    parts = urlsplit(uri)
    if parts.scheme != "file" or not parts.path.startswith("/"):
        raise CommandError(f"{uri!r} is not a file:// URI with an absolute path, e.g. file:///srv/project")
    return uri


def remember_key(server: str) -> str:
    return f"roots.always.{server}"


class RootsKeeper(RequestHandler[None, ListRootsResult]):
    """The conversation's roots, and the handler of `roots/list` (registered only when the policy is not "deny")."""

    def __init__(self, contexts: ContextSource, asker: Asker, config: Config, store: ConversationData,
                 receipts: Receipting | None = None) -> None:
        super().__init__(contexts, asker)
        self._config = config
        self._store = store
        self._receipts = receipts

    async def __call__(self, context: ClientRequestContext, params: None = None) -> ListRootsResult | ErrorData:
        return await super().__call__(context, params)

    async def offered(self, conversation: ConversationKey, server: str | None = None) -> list[tuple[str, str]]:
        """This conversation's roots plus the server's configured defaults, without duplicates."""
        roots = list(await self._store.roots(conversation))
        if server is not None:
            cfg = self._config.servers.get(server)
            seen = {uri for uri, _ in roots}
            for uri, name in cfg.roots.defaults if cfg else ():
                if uri not in seen:
                    roots.append((uri, name))
        return roots

    async def answer(self, ctx: RequestContext, params: None = None) -> ListRootsResult | ErrorData:
        """Answer a server's roots/list. A refusal is an empty list: the server sees no folders, and the call it
        was making can still go on."""
        policy = self._config.servers[ctx.server.name].roots
        roots = await self.offered(ctx.conversation, ctx.server.name)
        if not roots:
            return ListRootsResult(roots=[])
        remembered = await self._store.setting(ctx.conversation, remember_key(ctx.server.name)) == "all"
        if policy.approval == "auto" or remembered:
            return _result(roots, [uri for uri, _ in roots])
        # The title is the name; option lists show the value (the path) beside a title that differs, once.
        options = tuple(Option(uri, name or uri) for uri, name in roots)
        fields = [
            Field("roots", FieldKind.MULTI, "Folders to share", options=options, default=[o.value for o in options],
                  has_default=True),
            Field("remember", FieldKind.BOOLEAN, "Always share all of them with this server here", default=False,
                  has_default=True),
        ]
        interaction = new_interaction(
            ctx, Kind.ROOTS, f"{ctx.server.text()} asks which folders it may see.", form=approval_form(fields),
            timeout=policy.timeout, details=tuple(Detail(name or "Folder", uri) for uri, name in roots),
            accept_label="Share", decline_label="Deny", quick_accept=True, request=request_digest("roots/list", {}))
        outcome = await self.ask(ctx, interaction)
        if outcome.status is not Status.ACCEPTED:
            return ListRootsResult(roots=[])
        content = outcome.content or {}
        chosen = content.get("roots")
        picked = [str(u) for u in chosen] if isinstance(chosen, list) else []
        if content.get("remember") is True:
            await self._store.set_setting(ctx.conversation, remember_key(ctx.server.name), "all")
        result = _result(roots, picked)
        if self._receipts is None:
            return result
        meta = await self._receipts.for_decision(interaction, outcome, content=result_json(result, "roots"))
        return with_receipt(result, meta)


def _result(roots: list[tuple[str, str]], picked: list[str]) -> ListRootsResult:
    return ListRootsResult(roots=[Root(uri=uri, name=name or None) for uri, name in roots if uri in picked])  # type: ignore[arg-type]
