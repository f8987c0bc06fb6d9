"""The one cleaner for untrusted text, used by every output (Slack, Matrix plain and HTML, the console, `call`).

Server text may carry terminal control sequences, bidi overrides and invisible characters that reorder or disguise
what a person reads (an address that reads as another, a screen cleared, an OSC 8 link). `clean` removes them:
C0 and C1 control characters except newline and tab, and every format character (Unicode category Cf: U+202E,
U+200B, U+2060, U+FEFF, U+00AD, U+061C, ...) except the zero-width joiner, which emoji sequences need and which
reorders nothing. Where a person must check text character by character (a URL), `visible` shows each such
character as its code point instead of dropping it.

`check_host` is how a link's host is shown: converted with IDNA, so a look-alike such as `аpple.com` (Cyrillic а)
is flagged with its punycode form, whether the server wrote it in Unicode or as `xn--`.

Every function here is linear in its input.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import idna

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ZWJ = "\u200d"


def clean(text: str) -> str:
    """Untrusted text without control characters (newline and tab kept) and invisible format characters."""
    text = _CONTROL.sub("", text.replace("\r\n", "\n"))
    if text.isascii():
        return text
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


@dataclass(frozen=True, slots=True)
class HostCheck:
    """A link's host as a person should check it."""

    host: str
    """As it reads (Unicode), cleaned; empty when the URL has none."""
    ascii: str
    """The IDNA (punycode) form, what the browser really contacts; equal to `host` for plain ASCII names."""
    warning: str = ""
    """Why the host needs a careful look (non-ASCII or mixed scripts, not a valid name), or empty."""

    @property
    def suspicious(self) -> bool:
        return bool(self.warning)

    def text(self) -> str:
        """The one line cards show: 'example.org', or 'аpple.com (really xn--pple-43d.com: ...)'."""
        if not self.host:
            return self.warning or "(no host)"
        if self.ascii != self.host:
            return f"{self.host} (really {self.ascii}: {self.warning})"
        return f"{self.host} ({self.warning})" if self.warning else self.host


def check_host(url: str) -> HostCheck:
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return HostCheck("", "", "not a valid URL")
    if not host:
        return HostCheck("", "", "the link has no host")
    host = visible(host)
    if host.isascii() and not any(label.startswith("xn--") for label in host.split(".")):
        return HostCheck(host, host)
    try:
        ascii_form = idna.encode(host, uts46=True).decode("ascii")
        unicode_form = idna.decode(ascii_form)
    except idna.IDNAError:
        return HostCheck(host, host, "not a valid internationalised name; do not trust it")
    scripts = _scripts(unicode_form)
    why = "mixes scripts, check it carefully" if len(scripts) > 1 else \
        "an internationalised name, check it carefully"
    return HostCheck(unicode_form, ascii_form, why)


def _scripts(host: str) -> set[str]:
    """Rough script of each letter (the first word of its Unicode name: LATIN, CYRILLIC, GREEK, ...)."""
    out: set[str] = set()
    for c in host:
        if c.isalpha():
            name = unicodedata.name(c, "")
            out.add(name.split(" ", 1)[0] if name else "UNKNOWN")
    return out


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
