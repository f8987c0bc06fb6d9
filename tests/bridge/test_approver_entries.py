"""Approver entries that can never match anyone are config errors naming their path."""

from __future__ import annotations

import pytest

from bridge.config.file import from_mapping
from bridge.errors import ConfigError


def test_approver_entries_that_can_never_match_are_config_errors_naming_their_path() -> None:
    with pytest.raises(ConfigError) as caught:
        from_mapping({"servers": {"gh": {"url": "https://x", "approvers": [
            "slack:U024BE7LH", "matrix:@ada:example.org", "console:you", "Slack:U1", "U1", "*", "slack:*",
            "slack:ada", "matrix:ada", "irc:bob"]}}})
    assert caught.value.problems == [
        "servers.gh.approvers[3]: 'Slack:U1' can never match: write the platform in lower case (slack:U1)",
        "servers.gh.approvers[4]: 'U1' can never match: it needs its platform, as in slack:U024BE7LH, "
        "matrix:@ada:example.org or console:you",
        "servers.gh.approvers[5]: '*' can never match: approvers are people, one by one, without wildcards "
        "(slack:U024BE7LH, matrix:@ada:example.org or console:you)",
        "servers.gh.approvers[6]: 'slack:*' can never match: approvers are people, one by one, without wildcards "
        "(slack:U024BE7LH, matrix:@ada:example.org or console:you)",
        "servers.gh.approvers[7]: 'slack:ada' can never match: Slack user ids look like U024BE7LH (not a name or "
        "@mention)",
        "servers.gh.approvers[8]: 'matrix:ada' can never match: Matrix user ids look like @ada:example.org",
        "servers.gh.approvers[9]: 'irc:bob' can never match: the platform must be one of console, slack, matrix"]


def test_rules_groups_and_tool_rules_are_checked_too() -> None:
    with pytest.raises(ConfigError) as caught:
        from_mapping({
            "groups": {"ops": ["slack:U1", "Slack:U2"], "dev": {"people": ["U3"], "slack_usergroup": "S1"}},
            "servers": {"gh": {"url": "https://x", "approvers": {"people": ["slack:*"], "required": 1},
                               "tools": {"approve": {"delete_*": {"approvers": ["matrix:ada"]}}}}}})
    assert [p.split(":", 1)[0] for p in caught.value.problems if "can never match" in p] == [
        "groups.ops[1]", "groups.dev.people[0]", "servers.gh.approvers.people[0]",
        "servers.gh.tools.approve.delete_*.approvers[0]"]
