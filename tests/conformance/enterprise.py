"""The config an admin writes for the enterprise-managed authorization scenarios (`auth/enterprise-managed-
authorization`, 0.2.0; `auth/cross-app-access-complete-flow`, 0.1.16), from what their context hands out.

The scenario plays the company: its identity provider (issuer, the bridge's client id there, and a person's ID token
already obtained) and an MCP server whose authorization server takes ID-JAGs from a pre-registered confidential
client. So the config is the documented one (docs/authorization.md, "Company sign-in") with the ID token given
(`identity_provider.id_token`, as one person at a terminal gives it) instead of a sign-in; the authorization
server's issuer is not in the context, so the bridge reads it from the server's protected resource metadata.

`apply(config, env, ctx)` adds it to the config `bridge_client.write_config` builds (its secrets as `${VAR}` in
`env`); it leaves any other scenario's config alone.
"""

from __future__ import annotations

from typing import Any


def is_enterprise(ctx: dict[str, Any]) -> bool:
    return "idp_id_token" in ctx and "idp_issuer" in ctx


def apply(config: dict[str, Any], env: dict[str, str], ctx: dict[str, Any]) -> None:
    if not is_enterprise(ctx):
        return
    env["CONFORMANCE_ID_TOKEN"] = str(ctx["idp_id_token"])
    env["CONFORMANCE_CLIENT_SECRET"] = str(ctx["client_secret"])
    config["identity_provider"] = {"issuer": ctx["idp_issuer"], "client_id": ctx["idp_client_id"],
                                   "id_token": "${CONFORMANCE_ID_TOKEN}"}
    for server in config["servers"].values():
        server["auth"] = {"identity": "enterprise", "client_id": ctx["client_id"],
                          "client_secret": "${CONFORMANCE_CLIENT_SECRET}"}

