"""`mcp-chat-bridge receipts keys | verify`, and the JWKS on the bridge's HTTP server (`/.well-known/jwks.json`).

`keys` prints the public keys of `MCP_BRIDGE_RECEIPT_KEY` as a JWKS, for servers that cannot reach the bridge's HTTP
server. `verify TOKEN` checks a receipt's signature and expiry (with that JWKS, or `--jwks FILE`), prints its claims,
and with `--request FILE` checks that it was issued for that request.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bridge.errors import ConfigError

if TYPE_CHECKING:
    from bridge.safety.receipts.keys import ReceiptSettings
    from bridge.web.server import HttpServer

JWKS_PATH = "/.well-known/jwks.json"
EXIT_OK, EXIT_INVALID = 0, 1


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("receipts", parents=[common], help="signed receipts of decisions: print the keys, check one")
    actions = p.add_subparsers(dest="receipts_command", required=True)
    actions.add_parser("keys", parents=[common], help="print the public keys of MCP_BRIDGE_RECEIPT_KEY as a JWKS")
    verify = actions.add_parser("verify", parents=[common],
                                help="check a receipt's signature and expiry, and print what it says")
    verify.add_argument("token", help="the receipt (a compact JWS); - reads it from stdin")
    verify.add_argument("--request", metavar="FILE",
                        help="a JSON file with the request it should be for: {\"method\": ..., \"params\": ...} (a "
                             "whole JSON-RPC request will do), or the params of a tools/call")
    verify.add_argument("--jwks", metavar="FILE",
                        help=f"the bridge's JWKS (its {JWKS_PATH}); default: the keys of MCP_BRIDGE_RECEIPT_KEY")
    verify.add_argument("--server", help="also check that it was issued for this server (its configured name)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from bridge.safety.receipts.keys import ReceiptKeys

    if args.receipts_command == "keys":
        print(json.dumps(ReceiptKeys.from_env().jwks(), indent=2))
        return EXIT_OK
    return verify(args.token, args.request, args.jwks, args.server)


def verify(token: str, request_file: str | None, jwks_file: str | None, server: str | None) -> int:
    from bridge.safety.receipts.keys import KEY_ENV, ReceiptKeys
    from bridge.safety.receipts.tokens import ReceiptInvalid
    from bridge.safety.receipts.tokens import verify as check

    text = sys.stdin.read().strip() if token == "-" else token.strip()
    jwks = _json(jwks_file, "--jwks") if jwks_file else ReceiptKeys.from_env().jwks()
    if not jwks.get("keys"):
        raise ConfigError([f"no keys to check with: pass --jwks FILE, or set {KEY_ENV}"])
    try:
        claims = check(text, jwks, audience=server,
                       request=request_digest(_json(request_file, "--request")) if request_file else None)
    except ReceiptInvalid as exc:
        print(f"receipt NOT valid: {exc}", file=sys.stderr)
        return EXIT_INVALID
    print(json.dumps(claims, indent=2, ensure_ascii=False))
    print("receipt valid" + (" for that request" if request_file else " (its request not checked: --request FILE)"),
          file=sys.stderr)
    return EXIT_OK


def request_digest(request: dict[str, Any]) -> str:
    """The digest of a request given as `{method, params}` (or a JSON-RPC request), or as a tools/call's params."""
    from bridge.safety.receipts.canonical import request_digest as digest
    from bridge.safety.receipts.canonical import tool_digest

    method, params = request.get("method"), request.get("params")
    if method is None and "name" in request:
        method, params = "tools/call", request
    if not isinstance(method, str) or not isinstance(params or {}, dict):
        raise ConfigError(["--request: expected {\"method\": ..., \"params\": {...}}, or a tools/call's params "
                           "{\"name\": ..., \"arguments\": {...}}"])
    if method == "tools/call":
        return tool_digest(str((params or {}).get("name", "")), (params or {}).get("arguments") or {})
    return digest(method, params or {})


def _json(path: str, option: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except OSError as exc:
        raise ConfigError([f"{option}: cannot read {path}: {exc.strerror or exc}"]) from None
    except ValueError as exc:
        raise ConfigError([f"{option}: {path} is not JSON: {exc}"]) from None
    if not isinstance(data, dict):
        raise ConfigError([f"{option}: {path} must hold a JSON object"])
    return data


def serve_keys(http: HttpServer, settings: ReceiptSettings) -> None:
    """Publish the receipt keys at `JWKS_PATH` (when a key is set): what servers verify receipts with."""
    if not settings.enabled:
        return
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    body = settings.keys.jwks()  # the ring is fixed for the process's life

    async def jwks(request: Request) -> Response:
        return JSONResponse(body, headers={"Cache-Control": "public, max-age=300", "X-Content-Type-Options": "nosniff"},
                            media_type="application/jwk-set+json")

    http.route(JWKS_PATH, jwks)
