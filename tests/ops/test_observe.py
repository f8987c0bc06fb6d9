"""The hooks and the metrics observer in the broker's own terms: what counts as a decision, zeros shown, and an
observer that fails never stopping a decision."""

from __future__ import annotations

import time

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bridge.door.model import DecisionIn, Interaction, Kind, Outcome, Status, Verdict
from bridge.observe import hooks as observe
from bridge.observe.metrics import Metrics
from tests.adapters.slack.interactions import interaction
from tests.harness.hosts import ALICE, ROOM, config_for, host_for, patient

pytestmark = pytest.mark.anyio


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "worker"))): s.value
            for family in text_string_to_metric_families(metrics.exposition().decode()) for s in family.samples}


class Broken(observe.Observer):
    def card_posted(self, interaction: Interaction) -> None:
        raise RuntimeError("a bug in an observer")

    def interaction_ended(self, interaction: Interaction, outcome: Outcome) -> None:
        raise RuntimeError("a bug in an observer")


def test_only_a_persons_decision_is_timed_and_every_end_is_counted() -> None:
    metrics = Metrics("w")
    decided, expired, failed = (interaction(id=n) for n in ("a", "b", "c"))
    for card in (decided, expired):
        metrics.card_posted(card)
    metrics.interaction_ended(decided, Outcome(Status.DECLINED, by=ALICE))
    metrics.interaction_ended(expired, Outcome(Status.EXPIRED, reason="nobody answered in time"))
    metrics.interaction_ended(failed, Outcome(Status.FAILED, reason="the card could not be posted"))  # never posted
    got = samples(metrics)
    for outcome in ("declined", "expired", "failed"):
        assert got[("mcp_bridge_interaction_outcomes_total", (("kind", "form"), ("outcome", outcome)))] == 1
    assert got[("mcp_bridge_decision_latency_seconds_count", (("kind", "form"),))] == 1


def test_live_gauges_show_zeros_for_every_platform_kind_server_and_state() -> None:
    metrics = Metrics("w")
    open_now = [interaction(Kind.TOOL, id="t1")]
    metrics.watch(lambda: open_now, lambda: [("github", "ready"), ("github", "ready")], platforms=["slack", "matrix"],
                  servers=["github", "demo"], states=["starting", "ready"])
    got = samples(metrics)
    assert got[("mcp_bridge_open_interactions", (("kind", "tool"), ("platform", "slack")))] == 1
    assert got[("mcp_bridge_open_interactions", (("kind", "form"), ("platform", "matrix")))] == 0
    assert len([k for k in got if k[0] == "mcp_bridge_open_interactions"]) == len(Kind) * 2
    assert got[("mcp_bridge_sessions", (("server", "github"), ("state", "ready")))] == 2
    assert got[("mcp_bridge_sessions", (("server", "demo"), ("state", "starting")))] == 0


async def test_an_observer_that_fails_is_logged_and_the_decision_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    host, chat = await host_for(config_for({}))
    metrics = Metrics("w")
    with observe.observing(Broken(), metrics):
        async with host, anyio.create_task_group() as tg:
            card = interaction(conversation=ROOM, requester=ALICE, approvers=frozenset({ALICE.key}),
                               expires_at=time.time() + 60)
            tg.start_soon(host.broker.ask, card)
            with anyio.fail_after(patient(10)):
                await chat.wait_open_card()
                assert (await host.decide(DecisionIn(card.id, ALICE, "accept"))).verdict is Verdict.CLAIMED
                assert (await chat.wait_finished(card.id)).status is Status.ACCEPTED
    assert samples(metrics)[("mcp_bridge_interaction_outcomes_total", (("kind", "form"), ("outcome", "accepted")))] \
        == 1
    assert [r.getMessage() for r in caplog.records if r.name == observe.logger.name] == [
        "observer Broken failed on card_posted", "observer Broken failed on interaction_ended"]

