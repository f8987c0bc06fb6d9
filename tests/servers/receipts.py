"""A server that wants proof of a person's decision, checked the way a server author would: with PyJWT and the
bridge's published JWKS, never with the bridge's own code or the library that signed (joserfc).

`destroy` refuses to act unless its `tools/call` carries a receipt that verifies, is for this server, for exactly
this tool and these arguments, is not expired, and was not used before. The other tools ask for each kind of decision
(form, URL, sampling, roots) on either era and report the receipt that came back with the answer and the digest the
server computes of what it asked, for the test to check.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any

import jwt
from mcp.server.mcpserver import Context, ListRoots, MCPServer, Resolve, Sample
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import UrlElicitationRequiredError
from mcp.types import (
    CreateMessageResult,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    InputRequiredResult,
    ListRootsResult,
    SamplingMessage,
    TextContent,
    ToolAnnotations,
)

from bridge.cli.demo.server import ask

META_KEY = "io.github.mcp-chat-bridge/receipt"
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "title": "Name"}}, "required": ["name"]}


def digest(value: Any) -> str:
    """The canonical rule as docs/receipts.md states it, written out here rather than imported."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def request_digest(method: str, params: dict[str, Any]) -> str:
    return digest({"method": method, "params": {k: v for k, v in params.items() if k != "_meta"}})


def check(token: str, jwks: dict[str, Any], audience: str, leeway: float = 0) -> dict[str, Any]:
    """PyJWT's verification: signature (EdDSA, key chosen by `kid`), `exp`, `iat`, and `aud`."""
    header = jwt.get_unverified_header(token)
    keys = {k["kid"]: jwt.PyJWK(k) for k in jwks["keys"]}
    if header.get("kid") not in keys:
        raise jwt.InvalidTokenError("unknown key")
    claims: dict[str, Any] = jwt.decode(token, keys[header["kid"]], algorithms=["EdDSA"], audience=audience,
                                        leeway=leeway, options={"require": ["exp", "iat", "jti", "aud"]})
    return claims


def draft(prompt: str) -> Sample:
    return Sample([SamplingMessage(role="user", content=TextContent(type="text", text=prompt))], max_tokens=50)


def want_roots() -> ListRoots:
    return ListRoots()


def receipts_server(jwks: dict[str, Any], name: str = "vault") -> tuple[MCPServer, list[str]]:
    server = MCPServer(name)
    used: set[str] = set()
    acted: list[str] = []

    def verified(ctx: Context, tool: str) -> tuple[str, dict[str, Any]]:
        """The receipt this `tools/call` carries and its claims, if it is valid, for exactly this call, and unused;
        otherwise the tool refuses (ToolError)."""
        token = (ctx.request_context.meta or {}).get(META_KEY)
        if not isinstance(token, str):
            raise ToolError("refused: no receipt")
        try:
            claims = check(token, jwks, name)
        except jwt.InvalidTokenError as exc:
            raise ToolError(f"refused: {type(exc).__name__}") from None
        # The arguments as they came, defaults not filled in: exactly what the person approved.
        sent = (ctx.request_context.params or {}).get("arguments") or {}
        wanted = request_digest("tools/call", {"name": tool, "arguments": sent})
        if claims.get("kind") != "tool" or claims.get("tool") != tool or claims.get("req") != wanted:
            raise ToolError("refused: the receipt is for another call")
        if claims["jti"] in used:
            raise ToolError("refused: replayed receipt")
        used.add(claims["jti"])
        return token, claims

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, read_only_hint=False))
    def destroy(ctx: Context, target: str) -> str:
        """Delete `target`, only with a valid receipt of a person's approval of exactly this call."""
        _token, claims = verified(ctx, "destroy")
        acted.append(target)
        return f"destroyed {target} (approved by {', '.join(claims['by'])}; rule {json.dumps(claims['rule'])})"

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, read_only_hint=False))
    async def destroy_confirmed(ctx: Context, target: str) -> str | InputRequiredResult:
        """Delete `target` once someone types its name in a form, only with a valid receipt of this call's approval
        on the `tools/call` that acts (a 2026 call's last round)."""
        answer = await ask(ctx, "confirm", ElicitRequestFormParams(message=f"Type {target} to confirm",
                                                                   requested_schema=SCHEMA))
        if isinstance(answer, InputRequiredResult):
            return answer
        if answer.action != "accept" or (answer.content or {}).get("name") != target:
            return "not confirmed"
        token, claims = verified(ctx, "destroy_confirmed")
        acted.append(target)
        return json.dumps({"destroyed": target, "receipt": token, "by": claims["by"]})

    @server.tool()
    async def form(ctx: Context) -> str | InputRequiredResult:
        """Ask for a name."""
        params = ElicitRequestFormParams(message="Who?", requested_schema=SCHEMA)
        answer = await ask(ctx, "form", params)
        if isinstance(answer, InputRequiredResult):
            return answer
        return json.dumps({"receipt": (answer.meta or {}).get(META_KEY), "content": answer.content,
                           "req": request_digest("elicitation/create", _sent(params))})

    @server.tool()
    async def visit(ctx: Context) -> str | InputRequiredResult:
        """Ask for a link visit."""
        # 2026-07-28 has no elicitation ids on the wire: the server hashes what it sends.
        legacy = (ctx.protocol_version or "") < "2026-07-28"
        params = ElicitRequestURLParams(message="Sign in", url="https://example.com/sso",
                                        elicitation_id="v-1" if legacy else None)
        answer = await ask(ctx, "visit", params)
        if isinstance(answer, InputRequiredResult):
            return answer
        return json.dumps({"receipt": (answer.meta or {}).get(META_KEY),
                           "req": request_digest("elicitation/create", _sent(params))})

    @server.tool()
    async def sample(prompt: str, answer: Annotated[CreateMessageResult, Resolve(draft)]) -> str:
        """Ask the host's model."""
        content = answer.model_dump(mode="json", by_alias=True, exclude_none=True)["content"]
        return json.dumps({"receipt": (answer.meta or {}).get(META_KEY), "content": digest(content)})

    @server.tool()
    async def roots(r: Annotated[ListRootsResult, Resolve(want_roots)]) -> str:
        """List the roots the client shares."""
        shared = r.model_dump(mode="json", by_alias=True, exclude_none=True)["roots"]
        return json.dumps({"receipt": (r.meta or {}).get(META_KEY), "content": digest(shared),
                           "req": request_digest("roots/list", {})})

    linked: list[int] = []

    @server.tool()
    def needs_link() -> str:
        """Needs a link visited before its first run (the legacy -32042 error): no answer ever reaches the server."""
        linked.append(1)
        if len(linked) == 1:
            raise UrlElicitationRequiredError([ElicitRequestURLParams(
                message="Connect first", url="https://example.com/connect", elicitation_id="link-1")])
        return "linked"

    server.acted = acted  # type: ignore[attr-defined]
    return server, acted


def _sent(params: ElicitRequestFormParams | ElicitRequestURLParams) -> dict[str, Any]:
    """The params as they go on the wire."""
    sent: dict[str, Any] = params.model_dump(mode="json", by_alias=True, exclude_none=True)
    return sent
