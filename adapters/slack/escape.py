"""Making untrusted server text safe for Slack, and short enough for Block Kit.

Servers write card messages, field titles, tool names and results; none of it may ping people, address a channel or
hide a link behind friendly text. In Slack's mrkdwn every such control sequence is wrapped in `<…>` (`<!channel>`,
`<@U123>`, `<http://evil|click>`), so escaping `&`, `<` and `>` as Slack documents neutralises all of them; the
words `@channel`/`@here`/`@everyone` also get a word joiner, in case a message is ever posted with `link_names`.
`plain_text` objects are never parsed for those, so they only need capping.

Control characters and invisible format characters (bidi overrides such as U+202E, zero-width spaces, soft hyphens)
are removed from both by the core's one cleaner (`bridge.safety.sanitize.clean`), so server text cannot reorder or
disguise what a person reads (an address that reads as another). A URL shown for checking (`visible_url`) marks
each such character instead, as `[U+202E]` (`bridge.safety.sanitize.visible`).

Capping happens after escaping (escaping makes text longer: Slack counts the escaped text against its limits) and
never cuts an entity in half.
"""

from __future__ import annotations

import re

from bridge.safety.sanitize import clean, has_hidden, visible

_BROADCAST = re.compile(r"@(channel|here|everyone)\b", re.IGNORECASE)
_PARTIAL_ENTITY = re.compile(r"&[a-z]{0,4}$")
WORD_JOINER = "\u2060"


def mrkdwn(text: str) -> str:
    """Escape untrusted text for a mrkdwn text object (use with `verbatim: true` so URLs are not auto-linked)."""
    text = clean(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _BROADCAST.sub(lambda m: "@" + WORD_JOINER + m.group(1), text)


def cap(text: str, limit: int) -> str:
    """Shorten already-escaped text to `limit` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    note = f"… [{len(text) - limit} more characters not shown]"
    # The note itself is counted, so the remaining text shrinks by its length (and a few digits of slack).
    keep = max(0, limit - len(note) - 4)
    head = _PARTIAL_ENTITY.sub("", text[:keep]).rstrip()
    result = head + f"… [{len(text) - len(head)} more characters not shown]"
    return result[:limit]


def safe_mrkdwn(text: str, limit: int) -> str:
    return cap(mrkdwn(text), limit)


def plain(text: str, limit: int) -> str:
    """Text for a `plain_text` object (labels, button and option text, modal titles): capped, with an ellipsis."""
    text = clean(text)
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)].rstrip() + "…"


def one_line(text: str, limit: int) -> str:
    """Plain text on one line (option text and button labels render newlines badly)."""
    return plain(" ".join(text.split()), limit)


def visible_url(url: str) -> str:
    """A URL as escaped mrkdwn for a person to check: every invisible, control or space character is shown as its
    code point (`[U+202E]`), so the text cannot read as another address."""
    return mrkdwn(visible(url))


__all__ = ["cap", "has_hidden", "mrkdwn", "one_line", "plain", "safe_mrkdwn", "visible_url"]
