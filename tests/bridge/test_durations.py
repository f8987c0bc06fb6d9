"""Time left, as every card, `pending` and `show` word it."""

from __future__ import annotations

import math

import pytest

from bridge.text.durations import time_left


@pytest.mark.parametrize(("seconds", "text"), [
    (2, "2s"), (1.2, "2s"), (0.0, "0s"), (-5, "0s"), (59.5, "1m"), (60, "1m"), (61, "1m01s"), (599.2, "10m"),
    (600, "10m"), (3599, "59m59s"), (3600, "1h"), (5400, "1h30m"), (86400, "1d"), (93600, "1d2h"),
    (math.inf, "0s"), (math.nan, "0s"),
])
def test_time_left_reads_as_people_say_it(seconds: float, text: str) -> None:
    assert time_left(seconds) == text
