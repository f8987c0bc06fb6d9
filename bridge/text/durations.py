"""How long something has left, as people read it: `2s`, `45s`, `9m59s`, `10m`, `1h30m`, `2d3h`.

The one wording of time left wherever expiry is shown (cards, `pending`, `show`), so a 2-second timeout reads
"expires in 2s", never "1m". Seconds are rounded up: a card with 1.2 s left has not got 1 s. A web page says it in
words instead (`in_words`: "about 5 minutes"), the way a sentence reads.
"""

from __future__ import annotations

import math


def time_left(seconds: float) -> str:
    total = max(0, math.ceil(seconds)) if math.isfinite(seconds) else 0
    if total < 60:
        return f"{total}s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes}m" if secs == 0 else f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h" if minutes == 0 else f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d" if hours == 0 else f"{days}d{hours}h"


def in_words(seconds: float) -> str:
    """How long a web page's link still works, roughly, in a sentence's words."""
    minutes = round(seconds / 60)
    if minutes < 1:
        return "less than a minute"
    if minutes < 120:
        return f"about {minutes} minute{'s' if minutes != 1 else ''}"
    return f"about {round(minutes / 60)} hours"
