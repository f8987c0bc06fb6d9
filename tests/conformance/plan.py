"""What a generic client does with a conformance scenario, shared by the bridge's driver and the bare-SDK reference.

Both clients follow one plan, so their results compare: list the tools, call every tool with example arguments
built from its input schema, accept every form with its defaults (what a person does who presses Enter through a
form), and authorize with whatever the scenario's context provides, read the way an admin reads a provider's
set-up page and writes a config. Nothing here knows what a scenario checks.
"""

from __future__ import annotations

import json
import os
from typing import Any

CIMD_URL = "https://conformance-test.local/client-metadata.json"
"""The client's metadata document address (a Client ID Metadata Document): a real deployment publishes it under its
own public URL; the conformance authorization servers accept this one without fetching it."""


def context() -> dict[str, Any]:
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}"
    data = json.loads(raw)
    return data if isinstance(data, dict) else {}


def auth_settings(ctx: dict[str, Any]) -> dict[str, Any]:
    """The `auth:` block an admin would write from the credentials the scenario hands out.

    The context is a tagged union (its `name` says which set-up page it is): client credentials mean a service
    account, a workload's JWT (`assertion`) a service account without a secret, a pre-registered client id means the
    authorization-code flow with that client. Without credentials the
    client registers itself (a Client ID Metadata Document first, dynamic registration as the fallback).
    """
    kind = str(ctx.get("name", ""))
    auth: dict[str, Any] = {"identity": "shared", "client_metadata_url": CIMD_URL}
    if "client-credentials" in kind:
        auth = {"identity": "service", "client_id": ctx["client_id"]}
        if "private_key_pem" in ctx:
            auth["private_key"] = ctx["private_key_pem"]
            auth["signing_algorithm"] = ctx.get("signing_algorithm") or "RS256"
        else:
            auth["client_secret"] = ctx["client_secret"]
    elif "valid_jwt" in ctx:
        # Workload identity: the platform hands the workload a JWT (a Kubernetes projected token); the client has
        # an id and no secret. The other JWTs of the context are for clients that test failures on purpose.
        auth = {"identity": "service", "client_id": ctx["client_id"], "assertion": ctx["valid_jwt"]}
    elif "client_id" in ctx and "client_secret" in ctx:
        auth = {"identity": "shared", "client_id": ctx["client_id"], "client_secret": ctx["client_secret"]}
    return auth


ECHO_SCHEMA = "json-schema-2020-12-preservation"
LIST_ONLY = "json-schema-ref-no-deref"


def calls(tools: list[dict[str, Any]], ctx: dict[str, Any] | None = None,
          scenario: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls to make after listing `tools` (each as the server listed it: name, inputSchema).

    Generic: every tool once, with example arguments. A scenario that says which calls it wants is followed, as a
    person would follow the scenario's instructions: its context's `toolCalls` (http-custom-headers hands out
    exact values, non-ASCII ones included), or what its description asks for: json-schema-2020-12-preservation
    wants the first tool's input schema passed back verbatim to `json_schema_echo`; json-schema-ref-no-deref only
    wants the tools listed (its server answers no call).
    """
    ctx = context() if ctx is None else ctx
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "") if scenario is None else scenario
    given = ctx.get("toolCalls")
    if isinstance(given, list):
        return [(str(c["name"]), dict(c.get("arguments") or {})) for c in given if isinstance(c, dict)]
    if scenario == LIST_ONLY:
        return []
    if scenario == ECHO_SCHEMA:
        focal = next((t for t in tools if t.get("name") != "json_schema_echo"), None)
        if focal is not None:
            return [("json_schema_echo", {"schema": focal.get("inputSchema")})]
    return [(str(t["name"]), example_arguments(t.get("inputSchema"))) for t in tools]


SECRET_KEYS = ("client_secret", "private_key", "assertion", "idp_client_secret", "idp_id_token")
"""Values of an `auth:` block that are secrets: the bridge's driver passes them through the environment (`${VAR}`),
as the README tells an admin to."""


def example_arguments(schema: Any) -> dict[str, Any]:
    """Arguments for a tool: each required property gets its default, else a plain example of its type."""
    if not isinstance(schema, dict):
        return {}
    properties = schema.get("properties") or {}
    required = schema.get("required") or []
    out: dict[str, Any] = {}
    for name in required:
        prop = properties.get(name, {}) if isinstance(properties, dict) else {}
        out[name] = example_value(prop)
    return out


def example_value(prop: Any) -> Any:
    if not isinstance(prop, dict):
        return "example"
    if "default" in prop:
        return prop["default"]
    if "const" in prop:
        return prop["const"]
    if prop.get("enum"):
        return prop["enum"][0]
    for key in ("oneOf", "anyOf"):
        if prop.get(key):
            return example_value(prop[key][0])
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind in ("number", "integer"):
        low: Any = prop.get("minimum", prop.get("exclusiveMinimum", 0))
        return int(low) + 1 if kind == "integer" else float(low) + 1
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return example_arguments(prop)
    if kind == "null":
        return None
    return "example"


def form_answers(requested_schema: dict[str, Any]) -> dict[str, Any]:
    """What pressing Enter through a form gives: every default, and an example for required fields without one."""
    properties = requested_schema.get("properties") or {}
    required = set(requested_schema.get("required") or [])
    return {name: example_value(prop) for name, prop in properties.items()
            if isinstance(prop, dict) and ("default" in prop or name in required)}
