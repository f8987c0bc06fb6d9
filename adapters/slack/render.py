"""Cards as Block Kit messages (pure): every `Interaction` kind, its final state, status lines and the App Home.

Every card starts with who asks whom for what (the core's `card_title`, with the person it waits for mentioned),
then the server's message and details, escaped, then buttons. Inline answers are used only where one click says
it all (a single yes/no or a single choice of up to five); anything else opens a modal (`modal.py`). Final states
keep the text and replace the buttons with the outcome and who decided.

Limits honoured here, counted on the escaped text Slack receives: 50 blocks a message, 3000 characters a text, about
12 000 characters of text in all a message's blocks (`CARD_TEXT`: Slack refuses more with `msg_blocks_too_long`),
75 characters a button label, 25 elements an actions block. `tests/adapters/slack/limits.py` checks them for every
card the tests render.

A link gets an Open button only when Slack would take it and nothing about it is disguised: http(s), and nothing
`bridge.safety.browser_url.check_host` flags (user info, a backslash, hidden characters, a host that reads as another
than the browser opens, a look-alike such as `аpple.com` with a Cyrillic а, shown with its punycode form instead). The
button carries the URL as the browser would open it (WHATWG-normalized).
"""

from __future__ import annotations

import itertools
import re
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from adapters.slack import ids
from adapters.slack.escape import cap, mrkdwn, one_line, safe_mrkdwn, visible_url
from bridge.door.forms import FieldKind
from bridge.door.model import Actor, AppOffer, Interaction, Kind, Outcome, Status, StatusView
from bridge.safety.browser_url import check_host
from bridge.text.durations import time_left
from bridge.text.plain import card_title, secret_warning
from bridge.text.presentation import Person, describe_outcome, describe_progress

JSON = dict[str, Any]

TEXT = 3000
BUTTON = 75
FALLBACK = 300
"""Length of the notification text (`text=`): a phone shows a line or two of it."""
MAX_DETAILS = 30
"""Details shown on a card; the rest are summarised so a card stays under 50 blocks."""
CARD_TEXT = 11_000
"""Characters of text a card's blocks hold in all, under Slack's undocumented ~12 000 for a message's blocks."""
CARD_TAIL = 2_500
"""Of `CARD_TEXT`, what is kept for what follows the body (warnings, the field, the waiting line, the buttons, the
outcome)."""
INLINE_FIELD = 600
"""The question above inline answer buttons: its title and description."""
HOME_TITLE = 300
MIN_DETAIL = 200
"""A detail gets at least this much room, or it is counted among those not shown."""
HOME_ITEMS = 40
INLINE_CHOICES = 5
"""A single choice with up to this many options is answered by buttons in the message."""
WEB_LABEL = "Fill in on the web"
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


_PERSON = f"person{secrets.token_hex(12)}marker"
"""Stands in for a person's name while core text is escaped: random per process, so no server can write it, and
plain ASCII letters and digits, so escaping leaves it (and the ASCII fast path of the cleaner) alone."""


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

    The core writes names as plain labels; a marker stands in for the name so that the rest of the text (server
    names, tool names: untrusted) is escaped while the mention we add is not.
    """
    return mrkdwn(make(_PERSON)).replace(_PERSON, mention(actor))


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
    """Title, message, link and details: what a card shows whether it is open or finished, within
    `CARD_TEXT - CARD_TAIL` characters in all."""
    blocks = [section(f"*{title(interaction)}*")]
    if interaction.message.strip():
        blocks.append(section(mrkdwn(interaction.message)))
    if interaction.kind is Kind.URL and interaction.url:
        blocks.append(section(f"*Link:* {visible_url(interaction.url)}"))
    room = CARD_TEXT - CARD_TAIL - sum(len(b["text"]["text"]) for b in blocks)
    shown = 0
    for detail in interaction.details[:MAX_DETAILS]:
        note = f"\n_(shortened from {detail.full_length} characters)_" if detail.full_length else ""
        label = mrkdwn(detail.label)
        head = f"*{cap(label, 200)}:* "
        fits = min(TEXT, room) - len(head) - 80
        if fits < MIN_DETAIL:
            break
        text = f"{head}{cap(mrkdwn(detail.text), fits)}{note}"
        blocks.append(section(text))
        room -= len(text)
        shown += 1
    if len(interaction.details) > shown:
        blocks.append(context(f"{len(interaction.details) - shown} more details are not shown "
                              f"(`show {interaction.id}` lists everything)."))
    origin = interaction.origin
    if origin is not None and _SLACK_ID.match(origin.channel) and origin.platform == "slack":
        blocks.append(context(f":speech_balloon: Asked in <#{origin.channel}>; your decision here is the decision "
                              "there."))
    elif origin is not None:
        blocks.append(context(f":speech_balloon: Asked on {mrkdwn(origin.platform)}; your decision here is the "
                              "decision there."))
    return blocks


def card(interaction: Interaction, now: float | None = None, *, web: bool = False) -> list[JSON]:
    """An open card: body, what is asked, who it waits for and until when, and the buttons. `web`: web forms are
    on, so a form card offers "Fill in on the web" (each clicker gets their own link, privately)."""
    blocks = _body(interaction)
    problem = link_problem(interaction.url) if interaction.kind is Kind.URL and interaction.url else None
    if problem:
        blocks.append(context(f":warning: No *Open link* button: {mrkdwn(problem)}. "
                              "Do not visit it unless you are sure."))
    warning = secret_warning(interaction)
    if warning:
        blocks.append(context(":warning: " + mrkdwn(warning)))
    inline = inline_field(interaction)
    if inline is not None:
        f = interaction.form.fields[0]
        question = f"*{mrkdwn(f.title)}*" + (f"\n{mrkdwn(f.description)}" if f.description else "")
        blocks.append(section(cap(question, INLINE_FIELD)))
    if describe_progress(interaction):
        blocks.append(context(with_people(lambda person: "\n".join(describe_progress(interaction, person)))))
    blocks.append(context(_waiting_line(interaction, time.time() if now is None else now)))
    blocks.append({"type": "actions", "block_id": f"{interaction.id}.act", "elements": _buttons(interaction, web)})
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
    left = time_left(interaction.expires_at - now)
    # <!date^…> renders the time in each reader's own time zone; the text after | is for old clients.
    return (f"Waiting for {who} · expires <!date^{deadline}^{{time}}|{fallback_time}> (in {left}) "
            f"· request `{interaction.id}`")


def link_problem(url: str) -> str | None:
    """Why a server's URL gets no Open button, or None: only an http(s) link that reads as where a browser takes it
    (`bridge.safety.browser_url.check_host`: no user info, backslash or hidden characters, a host written as the browser
    resolves it and not a possible look-alike; the warning names the host the browser would really open), within
    3000 characters once normalized (Slack refuses a card whose button URL it does not accept: `invalid_blocks`)."""
    checked = check_host(url)
    if not checked.href:
        return "the link is not a valid web address"
    if not checked.web:
        return "only http and https links get a button"
    if len(checked.href) > BUTTON_URL:
        return "the link is longer than Slack allows in a button"
    if checked.suspicious:
        return f"the host {checked.text()}"
    return None


def button_url(url: str) -> str | None:
    """What an Open button links to: the URL as the browser would open it (normalized), or None for no button."""
    return check_host(url).href if link_problem(url) is None else None


def inline_field(interaction: Interaction) -> int | None:
    """Whether a form is answered by buttons in the message: one boolean, or one choice of up to five options."""
    if interaction.kind is not Kind.FORM or len(interaction.form.fields) != 1:
        return None
    f = interaction.form.fields[0]
    if f.kind is FieldKind.BOOLEAN or (f.kind is FieldKind.CHOICE and len(f.options) <= INLINE_CHOICES):
        return 0
    return None


def _buttons(interaction: Interaction, web: bool = False) -> list[JSON]:
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
        if web and not form.empty and not interaction.quick_accept:
            # No URL on the button: the card is public, so the link is made for whoever clicks, and sent to them.
            out.append(button(WEB_LABEL, ids.WEB_FORM, iid))
        out.append(button(interaction.decline_label, ids.DECLINE, iid))
        out.append(button("Cancel", ids.CANCEL, iid))
        return out
    if interaction.kind is Kind.URL:
        # Only a well-formed web link gets a button (Slack rejects the whole card otherwise); any other stays in
        # the text, with the reason shown (`card`).
        href = button_url(interaction.url) if interaction.url else None
        if href:
            label = f"Connect {interaction.server.name}" if interaction.private else "Open link"
            out.append(button(label, ids.OPEN_URL, iid, url=href))
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


def web_link_text(url: str) -> str:
    """The private message that hands a person their web-form link (mrkdwn)."""
    # A link Slack would misread (`|`, `<`, `>` in a configured public address) is shown as text, not as a link.
    link = f"<{url}|Open the form>" if not any(c in url for c in "<>| ") else visible_url(url)
    return (f":globe_with_meridians: {link} to fill it in on the web. This link is for you only: it answers as "
            "you, works once, and expires with the request or sooner. Do not share it.")


def app_offer_text(offer: AppOffer) -> str:
    tool = mrkdwn(offer.tool).replace("`", "'")
    return f":iphone: *{mrkdwn(offer.server.text())}* `{tool}` has an app. Press Open to get your own link to it."


def app_offer_blocks(offer: AppOffer) -> list[JSON]:
    """The message under a result whose tool has an app: one Open button; each clicker gets a link of their own."""
    return [section(app_offer_text(offer)),
            {"type": "actions", "block_id": f"{offer.view_id}.app",
             "elements": [button("Open", ids.OPEN_APP, offer.view_id, "primary")]}]


def app_link_text(url: str) -> str:
    """The private message that hands a person their link to an app (mrkdwn)."""
    link = f"<{url}|Open the app>" if not any(c in url for c in "<>| ") else visible_url(url)
    return (f":iphone: {link} in your browser. This link is for you only: the app acts as you, the link works in one "
            "browser, and it expires. Do not share it.")


NO_APP = "This app has ended. Run the tool again to open it anew."


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
        blocks.append(section(f"*{cap(title(interaction), HOME_TITLE)}*\n{message}{link}"))
        blocks.append(context(_waiting_line(interaction, now)))
    if len(ordered) > HOME_ITEMS:
        blocks.append(context(f"{len(ordered) - HOME_ITEMS} more are waiting; answer some to see them."))
    return {"type": "home", "blocks": blocks}


def plain_message(text: str) -> str:
    """A core message (command output, notices) as mrkdwn: escaped and within chat.postMessage's 40 000."""
    return safe_mrkdwn(text, 39_000)
