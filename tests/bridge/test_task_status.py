"""What a task's status card says and how often the bridge asks: pure."""

from __future__ import annotations

from bridge.calls.task_status import Seen, card_text, changed, poll_seconds


def test_the_card_line_for_each_status() -> None:
    assert card_text("working", "Gathering sources...", 1.2) == "task working: Gathering sources... · 2s"
    assert card_text("working", None, 0) == "task working · 0s"
    assert card_text("input_required", "Which one?", 65, "an answer from Ada") == \
        "task waiting for an answer from Ada: Which one? · 1m05s"
    assert card_text("input_required", "", 3) == "task waiting for an answer · 3s"
    assert card_text("completed", "ignored", 6) == "task completed · 6s"
    assert card_text("failed", "disk full", 7) == "task failed: disk full · 7s"
    assert card_text("cancelled", None, 8) == "task cancelled · 8s"


def test_server_text_is_one_line_and_bounded() -> None:
    line = card_text("working", "a\nb\tc " + "x" * 1000, 1)
    assert "\n" not in line and "a b c" in line and len(line) < 400


def test_only_a_change_of_status_or_message_is_a_change() -> None:
    assert changed(None, "working", None)
    assert not changed(Seen("working", ""), "working", None)
    assert changed(Seen("working", "a"), "working", "b")
    assert changed(Seen("working", "a"), "input_required", "a")


def test_polls_follow_the_server_never_below_the_floor() -> None:
    assert poll_seconds(5000, 1.0) == 5.0
    assert poll_seconds(100, 1.0) == 1.0  # a server asking for 100 ms gets the floor
    assert poll_seconds(None, 2.0) == 2.0
    assert poll_seconds(0, 0.5) == 0.5
