"""The one cleaner for untrusted text, used by every output (Slack, Matrix plain and HTML, the console, `call`).

Server text may carry terminal control sequences, bidi overrides and invisible characters that reorder or disguise
what a person reads (an address that reads as another, a screen cleared, an OSC 8 link). `clean` removes them:
C0 and C1 control characters except newline and tab, every format character (Unicode category Cf: U+202E, U+200B,
U+2060, U+FEFF, U+00AD, U+061C, ...), and the zero-width joiner (U+200D) except where it joins two emoji: family
and flag sequences need it, and anywhere else it only splits what a person reads. Where a person must check text
character by character (a URL), `visible` shows each such character as its code point instead of dropping it.

Where a link goes is `bridge.safety.browser_url`.

Every function here is linear in its input.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

import regex

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ZWJ = "\u200d"
_STRAY_ZWJ = regex.compile(
    # A joiner inside an emoji ZWJ sequence follows an emoji (perhaps with a skin tone or the emoji presentation
    # selector after it) and precedes one; any other is stray. The look-arounds are bounded, so this is linear.
    "(?<!\\p{Extended_Pictographic}[\U0001F3FB-\U0001F3FF\uFE0F]?)\u200d|\u200d(?!\\p{Extended_Pictographic})")


def clean(text: str) -> str:
    """Untrusted text without control characters (newline and tab kept) and invisible format characters."""
    text = _CONTROL.sub("", text.replace("\r\n", "\n"))
    if text.isascii():
        return text
    if _ZWJ in text:
        text = _STRAY_ZWJ.sub("", text)
    return "".join(c for c in text if c == _ZWJ or not _invisible(c))


def visible(text: str) -> str:
    """Text for checking by eye: every control, invisible or unusual space character shown as `[U+XXXX]`."""
    return "".join(f"[U+{ord(c):04X}]" if _hidden(c) else c for c in text)


def has_hidden(text: str) -> bool:
    """Whether text holds a space, control or invisible (format) character."""
    return any(_hidden(c) for c in text)


def _invisible(c: str) -> bool:
    return unicodedata.category(c) in ("Cf", "Zl", "Zp")


def _hidden(c: str) -> bool:
    return c.isspace() or unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Zs")


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def fit_bytes(text: str, limit: int, escape: Callable[[str], str] = lambda s: s,
              note: Callable[[int], str] = lambda n: f"… [{n} more characters]") -> str:
    """`escape(text)`, shortened so that it takes at most `limit` bytes in UTF-8 once escaped, with a note saying how
    much was cut. Sizes are measured after escaping because that is what platforms count (an `&` becomes `&amp;`).
    A binary search over the cut point keeps it O(n log n) however hostile the text."""
    whole = escape(text)
    if utf8_len(whole) <= limit:
        return whole
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        candidate = escape(text[:mid]) + escape(note(len(text) - mid))
        if utf8_len(candidate) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return escape(text[:lo]) + escape(note(len(text) - lo))
