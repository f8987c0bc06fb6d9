"""Cards as Block Kit messages (pure): every `Interaction` kind, its final state, status lines and the App Home.

Every card starts with who asks whom for what (the core's `card_title`, with the person it waits for mentioned),
then the server's message and details, escaped, then buttons. Inline answers are used only where one click says
it all (a single yes/no or a single choice of up to five); anything else opens a modal (`modal.py`). Final states
keep the text and replace the buttons with the outcome and who decided.

Limits honoured here: 50 blocks a message, 3000 characters a text, 75 characters a button label, 25 elements an
actions block. `tests/adapters/slack/limits.py` checks them for every card the tests render.
"""

from __future__ import annotations

import itertools
import re
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from adapters.slack import ids
from adapters.slack.escape import cap, has_hidden, mrkdwn, one_line, safe_mrkdwn, visible_url
from bridge.forms import FieldKind
from bridge.model import Actor, Interaction, Kind, Outcome, Status, StatusView
from bridge.presentation import Person, describe_outcome, describe_progress
from bridge.text import card_title, secret_warning

JSON = dict[str, Any]

TEXT = 3000
BUTTON = 75
FALLBACK = 300
"""Length of the notification text (`text=`): a phone shows a line or two of it."""
MAX_DETAILS = 30
"""Details shown on a card; the rest are summarised so a card stays under 50 blocks."""
HOME_ITEMS = 40
INLINE_CHOICES = 5
"""A single choice with up to this many options is answered by buttons in the message."""
BUTTON_URL = 3000
"""Slack's limit for a button's `url`."""
_status_updates = itertools.count(1)

_STATUS_ICON = {Status.ACCEPTED: ":white_check_mark:", Status.DECLINED: ":x:", Status.CANCELLED: ":heavy_minus_sign:",
                Status.EXPIRED: ":hourglass:", Status.FAILED: ":warning:", Status.OPEN: ":hourglass_flowing_sand:"}


def mention(actor: Actor | None) -> str:
    """A Slack person as mrkdwn: a real mention for Slack users (our ids, trusted), else their escaped name."""
    if actor is None:
        return "an approver"
    if actor.platform == "slack":
        return f"<@{actor.user_id}>"
    return mrkdwn(actor.label())


_SLACK_ID = re.compile(r"^[A-Z0-9]+$")


def _mention_key(key: str, label: str) -> str:
    """A person named by actor key: a mention for a well-formed Slack id (ours, or a config's), else their name."""
    platform, _, user = key.partition(":")
    return f"<@{user}>" if platform == "slack" and _SLACK_ID.match(user) else mrkdwn(label)


def with_people(make: Callable[[Person], str]) -> str:
    """Render core text that names people (through its `person` hook), escaped, each name a mention where it can be.

    Like `_with_person`, random markers stand in for the names while the rest (untrusted) is escaped."""
    marks: dict[str, str] = {}

    def person(key: str, label: str) -> str:
        marker = "\ue000" + secrets.token_hex(8)
        marks[marker] = _mention_key(key, label)
        return marker

    text = mrkdwn(make(person))
    for marker, mention_text in marks.items():
        text = text.replace(mrkdwn(marker), mention_text)
    return text


def _with_person(make: Callable[[str], str], actor: Actor | None) -> str:
    """Render core text that names `actor`, escaped, with the name replaced by a mention.

    The core writes names as plain labels; a random marker stands in for the name so that the rest of the text
    (server names, tool names: untrusted) is escaped while the mention we add is not.
    """
    marker = "\ue000" + secrets.token_hex(8)
    escaped = mrkdwn(make(marker))
    return escaped.replace(mrkdwn(marker), mention(actor))


def title(interaction: Interaction) -> str:
    requester = interaction.requester
    if requester is None:
        return mrkdwn(card_title(interaction))
    return _with_person(
        lambda marker: card_title(replace(interaction, requester=replace(requester, display_name=marker))), requester)


def outcome_text(outcome: Outcome) -> str:
    text = with_people(lambda person: describe_outcome(outcome, person))
    text = text[:1].upper() + text[1:]
    return f"{_STATUS_ICON[outcome.status]} {text}"


def fallback(interaction: Interaction) -> str:
    """The notification text of a card (shown in notifications and where blocks cannot be)."""
    return safe_mrkdwn(card_title(interaction), FALLBACK)


def section(text: str) -> JSON:
    """A mrkdwn section; `text` must already be escaped. `verbatim` stops Slack from linkifying server text."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": cap(text, TEXT) or " ", "verbatim": True}}


def context(text: str) -> JSON:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": cap(text, TEXT) or " ", "verbatim": True}]}


def button(label: str, action_id: str, value: str, style: str | None = None, url: str | None = None) -> JSON:
    b: JSON = {"type": "button", "action_id": action_id, "value": value,
               "text": {"type": "plain_text", "text": one_line(label, BUTTON) or "OK", "emoji": True}}
    if style:
        b["style"] = style
    if url:
        b["url"] = url
    return b


def _body(interaction: Interaction) -> list[JSON]:
    """Title, message, link and details: what a card shows whether it is open or finished."""
    blocks = [section(f"*{title(interaction)}*")]
    if interaction.message.strip():
        blocks.append(section(mrkdwn(interaction.message)))
    if interaction.kind is Kind.URL and interaction.url:
        blocks.append(section(f"*Link:* {visible_url(interaction.url)}"))
    details = interaction.details[:MAX_DETAILS]
    for detail in details:
        note = f"\n_(shortened from {detail.full_length} characters)_" if detail.full_length else ""
        label = mrkdwn(detail.label)
        blocks.append(section(f"*{label}:* {cap(mrkdwn(detail.text), TEXT - len(label) - 80)}{note}"))
    if len(interaction.details) > MAX_DETAILS:
        blocks.append(context(f"{len(interaction.details) - MAX_DETAILS} more details are not shown."))
    origin = interaction.origin
    if origin is not None and _SLACK_ID.match(origin.channel) and origin.platform == "slack":
        blocks.append(context(f":speech_balloon: Asked in <#{origin.channel}>; your decision here is the decision "
                              "there."))
    elif origin is not None:
        blocks.append(context(f":speech_balloon: Asked on {mrkdwn(origin.platform)}; your decision here is the "
                              "decision there."))
    return blocks


def card(interaction: Interaction, now: float | None = None) -> list[JSON]:
    """An open card: body, what is asked, who it waits for and until when, and the buttons."""
    blocks = _body(interaction)
    problem = link_problem(interaction.url) if interaction.kind is Kind.URL and interaction.url else None
    if problem:
        blocks.append(context(f":warning: No *Open link* button: {problem}. Do not visit it unless you are sure."))
    warning = secret_warning(interaction)
    if warning:
        blocks.append(context(":warning: " + mrkdwn(warning)))
    inline = inline_field(interaction)
    if inline is not None:
        f = interaction.form.fields[0]
        blocks.append(section(f"*{mrkdwn(f.title)}*" + (f"\n{mrkdwn(f.description)}" if f.description else "")))
    if describe_progress(interaction):
        blocks.append(context(with_people(lambda person: "\n".join(describe_progress(interaction, person)))))
    blocks.append(context(_waiting_line(interaction, time.time() if now is None else now)))
    blocks.append({"type": "actions", "block_id": f"{interaction.id}.act", "elements": _buttons(interaction)})
    return blocks


def finished_card(interaction: Interaction, outcome: Outcome) -> list[JSON]:
    """A card at its end: no buttons, the outcome and who decided (new block ids, as Slack asks for updates)."""
    return [*_body(interaction), context(outcome_text(outcome))]


def finished_summary(interaction: Interaction, outcome: Outcome) -> list[JSON]:
    """The end of a card that cannot be edited (an ephemeral one): its title and outcome, without the link again."""
    return [section(f"*{title(interaction)}*"), context(outcome_text(outcome))]


def _waiting_line(interaction: Interaction, now: float) -> str:
    requester = interaction.requester
    who = mention(requester) if requester else "an approver"
    if interaction.required > 1 or (requester is not None and interaction.approvers
                                    and requester.key not in interaction.approvers):
        who = "the approvers"
    deadline = int(interaction.expires_at)
    fallback_time = time.strftime("%H:%M UTC", time.gmtime(deadline))
    minutes = max(0, round((interaction.expires_at - now) / 60))
    # <!date^…> renders the time in each reader's own time zone; the text after | is for old clients.
    return (f"Waiting for {who} · expires <!date^{deadline}^{{time}}|{fallback_time}> (in about {minutes} min) "
            f"· request `{interaction.id}`")


def link_problem(url: str) -> str | None:
    """Why a server's URL gets no Open button, or None: only http(s) with a host, nothing hidden, within 3000
    characters. Slack refuses a card whose button URL it does not accept (`invalid_blocks`)."""
    if len(url) > BUTTON_URL:
        return "the link is longer than Slack allows in a button"
    if has_hidden(url):
        return "the link contains spaces, control or invisible characters (shown as [U+…])"
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return "the link is not a valid web address"
    if parts.scheme.lower() not in ("http", "https"):
        return "only http and https links get a button"
    if not host:
        return "the link has no host"
    return None


def inline_field(interaction: Interaction) -> int | None:
    """Whether a form is answered by buttons in the message: one boolean, or one choice of up to five options."""
    if interaction.kind is not Kind.FORM or len(interaction.form.fields) != 1:
        return None
    f = interaction.form.fields[0]
    if f.kind is FieldKind.BOOLEAN or (f.kind is FieldKind.CHOICE and len(f.options) <= INLINE_CHOICES):
        return 0
    return None


def _buttons(interaction: Interaction) -> list[JSON]:
    iid = interaction.id
    out: list[JSON] = []
    form = interaction.form
    if interaction.kind is Kind.FORM:
        if inline_field(interaction) is not None:
            f = form.fields[0]
            if f.kind is FieldKind.BOOLEAN:
                out += [button("Yes", ids.choice_action(0), iid, "primary"), button("No", ids.choice_action(1), iid)]
            else:
                out += [button(o.title, ids.choice_action(i), iid) for i, o in enumerate(f.options)]
        elif form.empty:
            out.append(button(interaction.accept_label, ids.ACCEPT, iid, "primary"))
        else:
            out.append(button("Fill in…", ids.OPEN_FORM, iid, "primary"))
        out.append(button(interaction.decline_label, ids.DECLINE, iid))
        out.append(button("Cancel", ids.CANCEL, iid))
        return out
    if interaction.kind is Kind.URL:
        # Only a well-formed web link gets a button (Slack rejects the whole card otherwise); any other stays in
        # the text, with the reason shown (`card`).
        if interaction.url and link_problem(interaction.url) is None:
            label = f"Connect {interaction.server.name}" if interaction.private else "Open link"
            out.append(button(label, ids.OPEN_URL, iid, url=interaction.url))
        out.append(button(interaction.accept_label, ids.ACCEPT, iid, "primary"))
        out.append(button(interaction.decline_label, ids.DECLINE, iid, "danger"))
        return out
    # Approvals: sampling, sampling review, roots, tool calls. A quorum approves what everyone sees: no editing.
    if form.empty or interaction.quick_accept:
        out.append(button(interaction.accept_label, ids.ACCEPT, iid, "primary"))
        out.extend(button(g.label, ids.grant_action(g.scope), iid) for g in interaction.grants)
        if not form.empty and interaction.required < 2:
            out.append(button("Edit…", ids.OPEN_FORM, iid))
    else:
        out.append(button(f"{interaction.accept_label}…", ids.OPEN_FORM, iid, "primary"))
    out.append(button(interaction.decline_label, ids.DECLINE, iid, "danger"))
    return out


# -- status lines --------------------------------------------------------------------------------------------------


def status_text(status: StatusView) -> str:
    icon = ":white_check_mark:" if status.done else ":hourglass_flowing_sand:"
    tool = mrkdwn(status.tool).replace("`", "'")
    where = f"*{mrkdwn(status.server.text())}* `{tool}`"
    progress = ""
    if status.progress is not None:
        if status.total:
            percent = max(0, min(100, round(100 * status.progress / status.total)))
            progress = f" · {percent}% ({status.progress:g}/{status.total:g})"
        else:
            progress = f" · {status.progress:g}"
    text = f": {mrkdwn(status.text)}" if status.text else ""
    return f"{icon} {where}{text}{progress}"


def status_blocks(status: StatusView) -> list[JSON]:
    blocks = [section(status_text(status))]
    if status.stoppable and not status.done:
        # A fresh block id on every edit: Slack may keep a block's old state when an update reuses its id.
        blocks.append({"type": "actions", "block_id": f"{status.call_id}.stop.{next(_status_updates)}",
                       "elements": [button("Stop", ids.STOP, status.call_id, "danger")]})
    return blocks


# -- App Home ------------------------------------------------------------------------------------------------------


def home(items: Sequence[tuple[Interaction, str | None]], now: float | None = None) -> JSON:
    """The App Home tab: what waits for the viewer, newest deadline first, each with a link to its card."""
    now = time.time() if now is None else now
    blocks: list[JSON] = [{"type": "header", "text": {"type": "plain_text", "text": "Waiting for you"}}]
    if not items:
        blocks.append(section("Nothing is waiting for you right now."))
    ordered = sorted(items, key=lambda item: item[0].expires_at)
    for interaction, permalink in ordered[:HOME_ITEMS]:
        link = f"\n<{permalink}|Open the card>" if permalink else ""
        message = safe_mrkdwn(" ".join(interaction.message.split()), 300)
        blocks.append(section(f"*{title(interaction)}*\n{message}{link}"))
        blocks.append(context(_waiting_line(interaction, now)))
    if len(ordered) > HOME_ITEMS:
        blocks.append(context(f"{len(ordered) - HOME_ITEMS} more are waiting; answer some to see them."))
    return {"type": "home", "blocks": blocks}


def plain_message(text: str) -> str:
    """A core message (command output, notices) as mrkdwn: escaped and within chat.postMessage's 40 000."""
    return safe_mrkdwn(text, 39_000)
