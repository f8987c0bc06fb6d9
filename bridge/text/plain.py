"""Plain-text rendering shared by every adapter: tool results, card titles, shortened server text.

Content blocks are described by `bridge.text.content` (re-exported here as `block_text`).

The core produces plain text; each adapter escapes it for its platform (mrkdwn, HTML, a terminal). Server text is
untrusted, so it is shortened here to a bound and never interpreted.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from bridge.door.model import Interaction, Kind
from bridge.errors import MessageTooLarge, SessionError
from bridge.safety.browser_url import check_host
from bridge.text.content import block_text
from bridge.text.excerpt import Excerpt, json_chunks

if TYPE_CHECKING:
    from mcp.types import CallToolResult

MAX_TEXT = 3500
"""Longest tool output shown in chat; the rest is cut with a note (chat messages are not a file viewer)."""


def shorten(text: str, limit: int = MAX_TEXT) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 40].rstrip() + f"… [{len(text) - limit + 40} more characters]"


def url_host(url: str) -> str:
    """The host a URL points at, as a person should check it: look-alike and internationalised names are flagged
    with the punycode form the browser really contacts (`bridge.safety.sanitize.check_host`)."""
    return check_host(url).text()


def link_warning(url: str) -> str:
    """For a link that is not what it seems (`bridge.safety.browser_url.check_host` flags it), a plain warning naming
    the host a browser would really open; else empty. Cards show it where Slack would leave out the Open button."""
    checked = check_host(url)
    if not checked.suspicious:
        return ""
    if not checked.ascii:
        return f"Careful: {checked.warning}. Do not open it unless you are sure."
    return f"Careful: in a browser this link opens {checked.ascii}. Do not open it unless you are sure."


def result_text(result: CallToolResult, limit: int = MAX_TEXT) -> str:
    """A tool result as chat text: text blocks, structured content as JSON, other blocks described; at most `limit`
    characters, worded as `shorten` words it. Built from a bounded prefix (`result_excerpt`): a huge result is not
    copied to show its start."""
    return result_excerpt(result, limit).shortened()


def result_excerpt(result: CallToolResult, limit: int) -> Excerpt:
    """The first `limit` characters of a tool result as chat text, and the length of all of it, without building it
    whole: each block's text is taken as it is and only what fits is copied.

    Structured content that only repeats the text (`_same`) is left out. It is compared only when the text fits in
    `limit`; past that, nothing of it would be shown, and comparing would mean parsing or writing all of it, so it is
    neither shown nor counted."""
    excerpt = Excerpt(limit)
    parts = [block_text(block) for block in result.content]
    for part in parts:
        if part:
            excerpt.add("\n" if excerpt.length else "")
            excerpt.add(part)
    structured = result.structured_content
    if structured is not None and not excerpt.full and not _same(structured, "\n".join(parts)):
        excerpt.add("\nstructured content: " if excerpt.length else "structured content: ")
        excerpt.extend(json_chunks(structured))
    if excerpt.length == 0:
        excerpt.add("(no content)")
    return excerpt


def _same(structured: dict[str, Any], text: str) -> bool:
    """True when the structured content only repeats the text (SDK servers wrap a plain return value as
    {"result": value} next to its text form); showing it twice helps nobody."""
    value: Any = structured.get("result", structured) if set(structured) == {"result"} else structured
    # A container's repr is never built: it could be a second copy of a huge result.
    if value == text or (not isinstance(value, dict | list) and str(value) == text):
        return True
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False


def card_title(interaction: Interaction) -> str:
    """One line saying who asks whom for what: every card starts with it."""
    requester = interaction.requester
    who = requester.label() if requester else "an approver"
    if interaction.approvers and (requester is None or not interaction.may_decide(requester)):
        # The requester is not one of those asked (his click would be refused): the card asks the approvers.
        who = f"{interaction.required} approvers" if interaction.required > 1 else "an approver"
    server = interaction.server.text()
    what = {
        Kind.FORM: "to fill in a form",
        Kind.URL: "to open a link",
        Kind.SAMPLING: "to let it use the model",
        Kind.SAMPLING_REVIEW: "to review the model's answer",
        Kind.ROOTS: "which folders it may see",
        Kind.TOOL: f"to approve running {interaction.tool}",
    }[interaction.kind]
    return f"{server} asks {who} {what}"


def secret_warning(interaction: Interaction) -> str:
    names = [f.title for f in interaction.form.secret_fields]
    if not names:
        return ""
    return (f"Careful: {', '.join(names)} looks like a password, token, key or card number. MCP servers must not ask "
            "for those in a form; don't enter a real secret here.")


def session_error_text(exc: SessionError, again: bool = True) -> str:
    """A server that failed to start or died: what happened, its last stderr lines, and (in chat, where there is a
    next use; not for a one-shot `call`) what happens next."""
    text = str(exc)
    if exc.stderr_tail:
        text += "\nIts last output:\n" + shorten(exc.stderr_tail, 1500)
    if isinstance(exc, MessageTooLarge) and not exc.restarts:
        again = False  # its session goes on: only the refused answer is lost
    return text + ("\nIt will be started again on next use." if again else "")


__all__ = ["MAX_TEXT", "block_text", "card_title", "link_warning", "result_text", "secret_warning",
           "session_error_text", "shorten", "url_host"]
