"""A link's host read the way a browser reads it: the one place the bridge works out where a URL goes.

Browsers parse URLs by the WHATWG URL Standard; Python's `urlsplit` follows RFC 3986, and the two disagree where it
matters. In `https://evil.example\\@good.example/login` a browser takes the backslash for a path separator and opens
evil.example, while `urlsplit` reads `evil.example\\` as user info and names good.example. So every host the bridge
shows, checks or links comes from `check_host`, which parses with ada (the WHATWG parser of Node.js): the host shown
is the one a browser opens, after IDNA mapping, and the URL a button carries is ada's normalized `href`.

A person reads the URL as written, so `check_host` flags every way the written form can point elsewhere than it
reads: user info before the host, a backslash, spaces, control or invisible characters, a host written otherwise
than the browser resolves it (percent-encoded, IPv4 shorthand such as `0x7f.1`, full-width letters, a zero-width
space the IDNA mapping drops), and internationalised names, shown with the punycode form the browser really contacts
(a look-alike such as `аpple.com` with a Cyrillic а mixes scripts and says so).

Linear in the length of the URL.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from urllib.parse import urlsplit

import ada_url
import idna

from bridge.safety.sanitize import has_hidden, visible

WEB_SCHEMES = ("http:", "https:")


@dataclass(frozen=True, slots=True)
class HostCheck:
    """Where a link goes, as a person should check it."""

    host: str
    """The host a browser opens, as it reads (Unicode for an internationalised name); empty when there is none."""
    ascii: str
    """The same host in its IDNA (punycode) form, what the browser really contacts."""
    warning: str = ""
    """Why the link needs a careful look (it reads as another host, user info, hidden characters, an
    internationalised or mixed-script name, ...), or empty."""
    href: str = ""
    """The URL as a browser opens it (WHATWG-normalized): what a button may carry. Empty when it is not a URL."""

    @property
    def suspicious(self) -> bool:
        return bool(self.warning)

    @property
    def web(self) -> bool:
        """Whether a browser opens it as a web page (http or https)."""
        return self.href.startswith(("http://", "https://"))

    def text(self) -> str:
        """The one line cards show: 'example.org', or 'аpple.com (really xn--pple-43d.com: ...)'."""
        if not self.host:
            return self.warning or "(no host)"
        if self.ascii != self.host:
            return f"{self.host} (really {self.ascii}: {self.warning})"
        return f"{self.host} ({self.warning})" if self.warning else self.host


def check_host(url: str) -> HostCheck:
    """Where `url` goes in a browser, and every reason its written form may mislead the person reading it."""
    try:
        parsed = ada_url.URL(url)
    except (ValueError, UnicodeError):  # UnicodeError: a lone surrogate, which no URL can hold
        return HostCheck("", "", "not a valid web address")
    opened = parsed.hostname
    if not opened:
        return HostCheck("", "", "the link has no host", parsed.href)
    warnings = _written_warnings(url, opened, parsed)
    shown, name_warning = _read_name(opened)
    if name_warning:
        warnings.append(name_warning)
    return HostCheck(shown, opened, "; ".join(warnings), parsed.href)


def origin(url: str) -> str:
    """The origin a browser sends for pages under `url` (`https://bridge.example`, no default port), or empty."""
    try:
        return ada_url.URL(url).origin
    except (ValueError, UnicodeError):
        return ""


def _written_warnings(url: str, opened: str, parsed: ada_url.URL) -> list[str]:
    """How the URL as written may read as something other than what the browser opens."""
    out: list[str] = []
    written = _written_host(url)
    if written is None or not _same_host(written, opened):
        seems = f"not {visible(written)} as written" if written else "though the link reads as having none"
        out.append(f"a browser opens this host, {seems}")
    if parsed.username or parsed.password:
        out.append("the link carries a user name or password before the host")
    if "\\" in url:
        out.append("the link holds a backslash, which a browser reads as /")
    if has_hidden(url):
        out.append("the link contains spaces, control or invisible characters (shown as [U+…])")
    return out


def _written_host(url: str) -> str | None:
    """The host a reader takes from the URL as written: the RFC 3986 reading, where everything before the last `@`
    of the authority is user info and a backslash is an ordinary character."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return None


def _same_host(written: str, opened: str) -> bool:
    """Whether the written host reads as the opened one: the same apart from letter case, Unicode normalization, and
    IDNA (written in Unicode or in punycode). Anything else (a percent-escape, a full-width letter, IPv4 shorthand, a
    character the mapping drops) is a host written to read as something it is not."""
    bare = opened[1:-1] if opened.startswith("[") else opened  # urlsplit gives IPv6 without its brackets
    written = unicodedata.normalize("NFC", written).lower()
    if written in (bare, opened):
        return True
    try:
        return bool(idna.encode(written, uts46=False).decode("ascii") == opened)
    except idna.IDNAError:
        return False


def _read_name(opened: str) -> tuple[str, str]:
    """The host as it reads (punycode decoded) and, for an internationalised name, why to check it."""
    if not any(label.startswith("xn--") for label in opened.split(".")):
        return opened, ""
    try:
        unicode_form = idna.decode(opened)
    except idna.IDNAError:
        return opened, "not a valid internationalised name; do not trust it"
    if len(_scripts(unicode_form)) > 1:
        return visible(unicode_form), "mixes scripts, check it carefully"
    return visible(unicode_form), "an internationalised name, check it carefully"


def _scripts(host: str) -> set[str]:
    """Rough script of each letter (the first word of its Unicode name: LATIN, CYRILLIC, GREEK, ...)."""
    out: set[str] = set()
    for c in host:
        if c.isalpha():
            name = unicodedata.name(c, "")
            out.add(name.split(" ", 1)[0] if name else "UNKNOWN")
    return out
