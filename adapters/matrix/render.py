"""Messages, edits, reactions and approval cards as Matrix event content. Pure: values in, JSON-able dicts out.

The only mention a card carries is ours: an explicit `m.mentions` with the person it waits for, and a pill for them
in the HTML (never in the plain body). Cards are `m.text` because the default push rules silence `m.notice`, also
for mentions; everything else the bot says is `m.notice`, so one card pings once.

Sizes: the homeserver refuses events over 65 536 bytes of JSON, counted on the whole event (envelope and signatures
included; in an encrypted room the content is encrypted and base64-encoded, 4/3 of its size). Each message's text is
kept within `TEXT_BUDGET` (body plus HTML), so that even an edit, which carries it twice, stays under
`CONTENT_LIMIT`; `message` cuts anything larger, and the outbox refuses to send content over the limit.

Form cards (polls, reactions, one reply with a line per question) are rendered in `formtext`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from adapters.matrix.markup import GAP, Mention, Text, bold, code, concat, fit, fit_items, join_lines, plain
from bridge.door.forms import FieldKind
from bridge.door.model import Interaction, Kind, Outcome, Status, StatusView
from bridge.safety.browser_url import check_host
from bridge.text.plain import card_title, link_warning, secret_warning
from bridge.text.presentation import describe_outcome, describe_progress
from bridge.text.questions import Question

POLL_START = "org.matrix.msc3381.poll.start"
POLL_RESPONSE = "org.matrix.msc3381.poll.response"
POLL_END = "org.matrix.msc3381.poll.end"
POLL_RESPONSE_STABLE = "m.poll.response"
TEXT = "org.matrix.msc1767.text"
MARK = "io.github.mcp_chat_bridge"
"""Our own key in event content: which interaction and which part of its card an event is (for tests, logs, and
for people reading the raw event); never trusted when it comes back from someone else."""

CONTENT_LIMIT = 45_000
"""Largest event content we send (as nio serialises it): with the envelope (about 1.5 KB), and in an encrypted room
after encryption and base64 (x4/3), the event stays under the homeserver's 65 536 bytes."""
TEXT_BUDGET = 20_000
"""Body plus HTML of one message (bytes in the event JSON): twice this, for an edit, is under `CONTENT_LIMIT`."""
MESSAGE_BUDGET = 5_000
"""The server's message on a card."""
DETAILS_BUDGET = 6_000
"""All details of an approval card together (tool arguments, a sampling request, roots)."""
URL_BUDGET = 3_000

ACCEPT, DECLINE, CANCEL = "✅", "❌", "🚫"
ICONS = {Status.ACCEPTED: ACCEPT, Status.DECLINED: DECLINE, Status.CANCELLED: CANCEL, Status.EXPIRED: "⌛",
         Status.FAILED: "⚠", Status.OPEN: "…"}


# -- relations -----------------------------------------------------------------------------------------------------


def thread_relation(root: str, latest: str | None = None) -> dict[str, Any]:
    """An `m.thread` relation with the reply fallback for clients without threads (spec 1.4)."""
    return {"rel_type": "m.thread", "event_id": root, "is_falling_back": True,
            "m.in_reply_to": {"event_id": latest or root}}


def message(text: Text, *, msgtype: str = "m.notice", thread: str | None = None, latest: str | None = None,
            mentions: Sequence[str] = (), mark: Mapping[str, str] | None = None) -> dict[str, Any]:
    """An `m.room.message`. A text over `TEXT_BUDGET` is cut (as plain text: HTML is never cut inside a tag)."""
    if text.cost > TEXT_BUDGET:
        text = fit(text.body, TEXT_BUDGET)
    content: dict[str, Any] = {
        "msgtype": msgtype,
        "body": text.body,
        "format": "org.matrix.custom.html",
        "formatted_body": text.html,
        # Always present, so that clients following intentional mentions (spec 1.7) never guess from the body.
        "m.mentions": {"user_ids": list(mentions)} if mentions else {},
    }
    if thread:
        content["m.relates_to"] = thread_relation(thread, latest)
    if mark:
        content[MARK] = dict(mark)
    return content


def edit(original: str, new_content: Mapping[str, Any]) -> dict[str, Any]:
    """An `m.replace` of one of our own messages. Mentions are not repeated: an edit must not ping again."""
    new = {k: v for k, v in new_content.items() if k not in ("m.relates_to", MARK)}
    new["m.mentions"] = {}
    return {
        "msgtype": new.get("msgtype", "m.notice"),
        "body": "* " + str(new.get("body", "")),
        "format": "org.matrix.custom.html",
        "formatted_body": "* " + str(new.get("formatted_body", "")),
        "m.new_content": new,
        "m.mentions": {},
        "m.relates_to": {"rel_type": "m.replace", "event_id": original},
    }


def reaction(event_id: str, key: str) -> dict[str, Any]:
    return {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}


# -- cards ---------------------------------------------------------------------------------------------------------


def minutes_left(expires_at: float, now: float) -> str:
    seconds = max(0.0, expires_at - now)
    if seconds < 90:
        return f"{math.ceil(seconds)} seconds"
    return f"{round(seconds / 60)} minutes"


def title(interaction: Interaction) -> Text:
    return fit(card_title(interaction), 1_000, bold)


def header(interaction: Interaction) -> list[Text]:
    """What every card starts with: who asks whom for what, the server's message, details, the link, warnings."""
    i = interaction
    parts = [title(i)]
    if i.message:
        parts.append(fit(i.message, MESSAGE_BUDGET))
    if i.kind is Kind.URL:
        parts.append(Text("Link: ", "Link: ") + fit(i.url, URL_BUDGET, code))
        parts.append(Text("It goes to: ", "It goes to: ") + fit(check_host(i.url).text(), 1_000, bold))
        warning = link_warning(i.url)
        if warning:
            parts.append(fit("⚠ " + warning, 1_000, bold))
    details = []
    for detail in i.details:
        if i.kind is Kind.URL and detail.label == "Host":
            continue  # shown above, next to the link, checked
        more = f" (shortened from {detail.full_length} characters)" if detail.full_length else ""
        share = max(300, DETAILS_BUDGET // max(1, len(i.details)))
        details.append(fit(detail.label + ":", 300, bold) + Text(" ", " ") + fit(detail.text + more, share))
    parts.extend(fit_items(details, DETAILS_BUDGET, lambda n: plain(f"… and {n} more details"), len(details)))
    warning = secret_warning(i)
    if warning:
        parts.append(fit("⚠ " + warning, 1_500, bold))
    parts.extend(fit(line, 2_000) for line in describe_progress(i))
    if i.origin is not None:
        parts.append(plain("Asked in another conversation: your answer here is the answer there."))
    return parts


def waiting(interaction: Interaction, people: Sequence[Mention], now: float) -> Text:
    left = minutes_left(interaction.expires_at, now)
    if not people:
        return plain(f"Anyone here may answer (expires in {left}).")
    names = []
    for n, person in enumerate(people[:20]):
        sep = "" if n == 0 else (" or " if n == len(people) - 1 else ", ")
        names.append(plain(sep) + person.as_text())
    if len(people) > 20:
        names.append(plain(f" or one of {len(people) - 20} more"))
    return plain("Waiting for ") + concat(names) + plain(f" (expires in {left}).")


def card(interaction: Interaction, people: Sequence[Mention], *, now: float) -> Text:
    """An approval or link card: answered on the card itself with reactions (or replies in its thread)."""
    return join_lines([*header(interaction), GAP, how_to_answer(interaction), waiting(interaction, people, now)])


def how_to_answer(interaction: Interaction) -> Text:
    i = interaction
    if i.kind is Kind.URL:
        return plain(f"Open the link yourself if you trust it. React {ACCEPT} when you are done or {DECLINE} to "
                     f"decline ({CANCEL} cancels), or reply done / decline / cancel.")
    edit_hint = ", or reply edit to change it first" if not i.form.empty and i.required < 2 else ""
    allow = "".join(f" Reply allow {g.scope} to {g.label[0].lower()}{g.label[1:]}." for g in i.grants)
    return plain(f"React {ACCEPT} to {i.accept_label.lower()}, {DECLINE} to {i.decline_label.lower()} or "
                 f"{CANCEL} to cancel{edit_hint}. Replies accept / decline / cancel work too.{allow}")


def question(q: Question, reason: str = "") -> Text:
    """One field of an approval being edited, asked in the thread (and, when re-asked, why the last answer did not
    fit)."""
    parts: list[Text] = []
    if reason:
        parts.append(fit("⚠ " + reason, 2_000))
    head = f"{q.number}/{q.total} " if q.total else ""
    parts.append(fit(head + q.text, 2_000, bold))
    if q.field is not None and q.field.kind in (FieldKind.CHOICE, FieldKind.MULTI):
        options = [fit(f"{n}. {o.title}", 400) for n, o in enumerate(q.options, 1)]
        parts.extend(fit_items(options, 8_000, lambda n: plain(f"… and {n} more: type the option's value or title"),
                               len(options)))
    parts.append(fit(f"Reply with {q.hint}." if q.field is not None else q.hint, 1_500))
    return join_lines(parts)


def summary(lines: Sequence[str], q: Question, *, reason: str = "") -> Text:
    parts: list[Text] = []
    if reason:
        parts.append(fit("⚠ " + reason, 2_000))
    parts.append(bold("Summary"))
    items = [fit("• " + line, 1_000) for line in lines]
    parts.extend(fit_items(items, 10_000, lambda n: plain(f"… and {n} more"), len(items)))
    parts.append(fit(f"{q.text} React {ACCEPT} / {DECLINE} / {CANCEL}, or {q.hint}.", 1_000))
    return join_lines(parts)


def outcome_line(outcome: Outcome) -> Text:
    text = describe_outcome(outcome)
    return fit(f"{ICONS[outcome.status]} {text[:1].upper()}{text[1:]}.", 1_500)


def finished(interaction: Interaction, outcome: Outcome, lines: Sequence[str]) -> Text:
    """A card after the fact: no instructions left, the outcome and who decided, what was sent."""
    parts = [title(interaction), outcome_line(outcome)]
    if interaction.kind is Kind.URL:
        parts.append(Text("Link: ", "Link: ") + fit(interaction.url, URL_BUDGET, code))
    if outcome.status is Status.ACCEPTED and lines:
        share = max(200, 12_000 // len(lines))
        items = [fit("• " + line, share) for line in lines]
        parts.extend(fit_items(items, 14_000, lambda n: plain(f"… and {n} more"), len(items)))
    elif outcome.reason and outcome.status is not Status.CANCELLED:
        parts.append(fit(outcome.reason, 2_000))
    return join_lines(parts)


def content_lines(interaction: Interaction, content: Mapping[str, Any] | None) -> list[str]:
    if not content:
        return []
    return [f"{f.title}: {f.display(content[f.name])}" for f in interaction.form.fields if f.name in content]


def status_line(view: StatusView) -> Text:
    icon = "✅" if view.done else "⏳"
    progress = ""
    if view.progress is not None:
        progress = f" {view.progress:g}/{view.total:g}" if view.total else f" {view.progress:g}"
    text = f": {view.text}" if view.text else ""
    return fit(f"{icon} {view.server.text()}.{view.tool}{progress}{text}", 4_000)


def mentioned(person: Mention, text: str) -> Text:
    """A short notice for one person (Matrix has no ephemeral messages: the whole room sees it)."""
    return person.as_text() + plain(": ") + fit(text, 4_000)

