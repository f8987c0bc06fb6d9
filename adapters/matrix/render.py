"""Interactions and messages rendered as Matrix event content. Pure: values in, JSON-able dicts out.

Server text is untrusted. It goes into `formatted_body` only through `html.escape`, and into plain bodies only
through `defang`, which breaks `@room` and `matrix.to` links so that clients still matching legacy push rules or
pillifying permalinks cannot be steered by a server. The only mention a card carries is ours: an explicit
`m.mentions` with the person it waits for, and a pill for them in the HTML (never in the plain body).

Polls use the unstable MSC3381 types (`org.matrix.msc3381.poll.*`): they are what Element Web, Element X and the
legacy apps send and read; no room version supports the stable `m.poll.*` types yet.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bridge.dialog import Question, option_lines
from bridge.forms import Field, FieldKind
from bridge.model import Interaction, Kind, Outcome, Status, StatusView
from bridge.presentation import describe_outcome, describe_progress
from bridge.text import card_title, secret_warning, shorten, url_host

POLL_START = "org.matrix.msc3381.poll.start"
POLL_RESPONSE = "org.matrix.msc3381.poll.response"
POLL_END = "org.matrix.msc3381.poll.end"
POLL_RESPONSE_STABLE = "m.poll.response"
TEXT = "org.matrix.msc1767.text"
MARK = "io.github.mcp_chat_bridge"
"""Our own key in event content: which interaction and which part of its card an event is (for tests, logs, and
for people reading the raw event); never trusted when it comes back from someone else."""

MAX_POLL_OPTIONS = 20
"""MSC3381 truncates answers to 20; larger choices are asked as numbered questions instead."""
MAX_BODY = 12_000
"""Well inside the 64 KiB event limit, also after HTML escaping and encryption overhead."""

ACCEPT, DECLINE, CANCEL = "✅", "❌", "🚫"
KEYCAPS = ("1️⃣", "2️⃣", "3️⃣", "4️⃣", "5️⃣", "6️⃣", "7️⃣", "8️⃣", "9️⃣", "🔟")
"""Reactions that pick poll options 1-10 for clients that cannot show polls."""

_DEFANG = re.compile(r"(@)(room)|(matrix)(\.to)", re.IGNORECASE)


def defang(text: str) -> str:
    """Untrusted text made inert for plain bodies and HTML alike: no room pings, no permalink pills. Any case
    (`@Room`, `Matrix.TO`): push rules and clients match these case-insensitively."""
    return _DEFANG.sub(lambda m: "\u2060".join(g for g in m.groups() if g is not None), text)


def esc(text: str) -> str:
    """Untrusted text as HTML: escaped, defanged, line breaks kept."""
    return html.escape(defang(text)).replace("\n", "<br>")


@dataclass(frozen=True, slots=True)
class Mention:
    user_id: str
    name: str

    def html(self) -> str:
        # The one link we write: to a person we chose, with their escaped name.
        return f'<a href="https://matrix.to/#/{html.escape(self.user_id)}">{esc(self.name)}</a>'

    def text(self) -> str:
        return defang(self.name)


@dataclass(frozen=True, slots=True)
class Text:
    """A message as plain body and HTML body, kept together so they never disagree."""

    body: str
    html: str

    def __add__(self, other: Text) -> Text:
        return Text(self.body + other.body, self.html + other.html)


def plain(text: str) -> Text:
    return Text(defang(text), esc(text))


def bold(text: str) -> Text:
    return Text(defang(text), f"<b>{esc(text)}</b>")


def code(text: str) -> Text:
    """A URL or other literal: defanged in the plain body (push rules read it), kept intact in the HTML `<code>`
    (escaped only; clients neither pillify nor ping there), so that a copied link works."""
    return Text(defang(text), f"<code>{html.escape(text)}</code>")


def line_break() -> Text:
    return Text("\n", "<br>")


def join_lines(parts: Iterable[Text]) -> Text:
    out = Text("", "")
    for i, part in enumerate(parts):
        out = out + (line_break() if i else Text("", "")) + part
    return out


# -- relations -----------------------------------------------------------------------------------------------------


def thread_relation(root: str, latest: str | None = None) -> dict[str, Any]:
    """An `m.thread` relation with the reply fallback for clients without threads (spec 1.4)."""
    return {"rel_type": "m.thread", "event_id": root, "is_falling_back": True,
            "m.in_reply_to": {"event_id": latest or root}}


def message(text: Text, *, msgtype: str = "m.notice", thread: str | None = None, latest: str | None = None,
            mentions: Sequence[str] = (), mark: Mapping[str, str] | None = None) -> dict[str, Any]:
    """An `m.room.message`. Cards are `m.text` because the default push rules silence `m.notice`, also for
    mentions; everything that needs no attention is `m.notice`, the convention for bots."""
    content: dict[str, Any] = {
        "msgtype": msgtype,
        "body": shorten(text.body, MAX_BODY),
        "format": "org.matrix.custom.html",
        "formatted_body": text.html if len(text.html) <= MAX_BODY * 2 else esc(shorten(text.body, MAX_BODY)),
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


def card(interaction: Interaction, waits_for: Sequence[Mention], *, now: float, polls: int = 0,
         questions: int = 0) -> Text:
    """The card's first message: who asks whom for what, the server's message, and how to answer."""
    i = interaction
    parts = [bold(card_title(i)), plain(i.message) if i.message else Text("", "")]
    if i.kind is Kind.URL:
        parts.append(Text("Link: ", "Link: ") + code(i.url))
        parts.append(Text("It goes to: ", "It goes to: ") + bold(url_host(i.url)))
    for detail in i.details:
        if i.kind is Kind.URL and detail.label == "Host":
            continue  # shown above, next to the link
        more = f" (shortened from {detail.full_length} characters)" if detail.full_length else ""
        parts.append(bold(detail.label + ":") + Text(" ", " ") + plain(detail.text + more))
    warning = secret_warning(i)
    if warning:
        parts.append(bold("⚠ " + warning))
    parts.extend(plain(line) for line in describe_progress(i))
    if i.origin is not None:
        parts.append(plain("Asked in another conversation: your answer here is the answer there."))
    parts.append(Text("", ""))
    parts.append(how_to_answer(i, polls=polls, questions=questions))
    if waits_for:
        who = [m for m in waits_for]
        parts.append(Text("Waiting for ", "Waiting for ")
                     + join_people(who) + plain(f" (expires in {minutes_left(i.expires_at, now)})."))
    else:
        parts.append(plain(f"Anyone here may answer (expires in {minutes_left(i.expires_at, now)})."))
    return join_lines(p for p in parts if p.body or p.html)


def join_people(people: Sequence[Mention]) -> Text:
    out = Text("", "")
    for n, person in enumerate(people):
        sep = "" if n == 0 else (" or " if n == len(people) - 1 else ", ")
        out = out + Text(sep + person.text(), sep + person.html())
    return out


def how_to_answer(interaction: Interaction, *, polls: int, questions: int) -> Text:
    i = interaction
    if i.kind is Kind.URL:
        return plain(f"Open the link yourself if you trust it. React {ACCEPT} when you are done or {DECLINE} to "
                     f"decline ({CANCEL} cancels), or reply done / decline / cancel.")
    if i.kind is not Kind.FORM or i.quick_accept:
        edit_hint = ", or reply edit to change it first" if not i.form.empty and i.required < 2 else ""
        allow = "".join(f" Reply allow {g.scope} to {g.label[0].lower()}{g.label[1:]}." for g in i.grants)
        return plain(f"React {ACCEPT} to {i.accept_label.lower()}, {DECLINE} to {i.decline_label.lower()} or "
                     f"{CANCEL} to cancel{edit_hint}. Replies accept / decline / cancel work too.{allow}")
    steps = []
    if polls:
        steps.append(f"vote in the {polls} poll{'s' if polls != 1 else ''}")
    if questions:
        steps.append(f"answer {questions} question{'s' if questions != 1 else ''} one at a time by replying in "
                     "the thread (skip keeps a default or leaves an optional field empty)")
    first = " and ".join(steps) or "check the summary"
    return plain(f"To answer: {first}; then react {ACCEPT} on the summary to send it. "
                 f"Reply !decline or !cancel at any time.")


def question(q: Question, reason: str = "") -> Text:
    """One field, asked in the thread with its type hint (and, when re-asked, why the last answer did not fit)."""
    parts: list[Text] = []
    if reason:
        parts.append(plain("⚠ " + reason))
    head = f"{q.number}/{q.total} " if q.total else ""
    parts.append(bold(head + q.text))
    if q.field is not None and q.field.kind in (FieldKind.CHOICE, FieldKind.MULTI):
        parts.extend(plain(line) for line in option_lines(q.options))
    parts.append(Text("", "") + plain(f"Reply with {q.hint}.") if q.field is not None else plain(q.hint))
    return join_lines(parts)


def summary(lines: Sequence[str], q: Question, *, reason: str = "", poll_note: bool = False) -> Text:
    parts: list[Text] = []
    if reason:
        parts.append(plain("⚠ " + reason))
    parts.append(bold("Summary"))
    parts.extend(plain("• " + line) for line in lines)
    if poll_note:
        parts.append(plain("Poll votes count as they stand when you accept."))
    parts.append(plain(f"{q.text} React {ACCEPT} / {DECLINE} / {CANCEL}, or {q.hint}."))
    return join_lines(parts)


def finished(interaction: Interaction, outcome: Outcome, lines: Sequence[str]) -> Text:
    """The card after the fact: no instructions left, the outcome and who decided."""
    icon = {Status.ACCEPTED: ACCEPT, Status.DECLINED: DECLINE, Status.CANCELLED: CANCEL, Status.EXPIRED: "⌛",
            Status.FAILED: "⚠", Status.OPEN: "…"}[outcome.status]
    parts = [bold(card_title(interaction)), plain(f"{icon} {describe_outcome(outcome).capitalize()}.")]
    if interaction.kind is Kind.URL:
        parts.append(Text("Link: ", "Link: ") + code(interaction.url))
    if outcome.status is Status.ACCEPTED and lines:
        parts.extend(plain("• " + line) for line in lines)
    elif outcome.reason and outcome.status is not Status.CANCELLED:
        parts.append(plain(outcome.reason))
    return join_lines(parts)


def content_lines(interaction: Interaction, content: Mapping[str, Any] | None) -> list[str]:
    if not content:
        return []
    return [f"{f.title}: {shorten(f.display(content[f.name]), 200)}" for f in interaction.form.fields
            if f.name in content]


def status_line(view: StatusView) -> Text:
    icon = "✅" if view.done else "⏳"
    progress = ""
    if view.progress is not None:
        progress = f" {view.progress:g}/{view.total:g}" if view.total else f" {view.progress:g}"
    text = f": {view.text}" if view.text else ""
    return plain(f"{icon} {view.server.text()}.{view.tool}{progress}{text}")


def mentioned(person: Mention, text: str) -> Text:
    """A short notice for one person (Matrix has no ephemeral messages)."""
    return Text(person.text() + ": ", person.html() + ": ") + plain(text)


# -- polls ---------------------------------------------------------------------------------------------------------


def poll_options(f: Field) -> list[tuple[str, str]]:
    """(answer id, label) pairs for a choice field; ids are short and stable so votes map back after a restart."""
    if f.kind is FieldKind.BOOLEAN:
        return [("yes", "Yes"), ("no", "No")]
    return [(str(n), shorten(o.title, 200)) for n, o in enumerate(f.options, 1)]


def pollable(f: Field) -> bool:
    if f.kind is FieldKind.BOOLEAN:
        return True
    return f.kind in (FieldKind.CHOICE, FieldKind.MULTI) and 0 < len(f.options) <= MAX_POLL_OPTIONS


def poll_value(f: Field, answer_ids: Sequence[str]) -> Any:
    """A vote's answer ids as the field's JSON value; None for an empty or spoilt vote (MSC3381: unknown ids spoil
    the whole vote)."""
    ids = [a for a in answer_ids if isinstance(a, str)]
    if not ids:
        return None
    if f.kind is FieldKind.BOOLEAN:
        return {"yes": True, "no": False}.get(ids[0])
    values: list[str] = []
    for answer in ids:
        if not answer.isdigit() or not 1 <= int(answer) <= len(f.options):
            return None
        value = f.options[int(answer) - 1].value
        if value not in values:
            values.append(value)
    if f.kind is FieldKind.CHOICE:
        return values[0]
    limit = f.max_items or len(f.options)
    return values[:limit]


def poll_question(f: Field) -> str:
    text = f.title + (f" ({f.description})" if f.description and f.description != f.title else "")
    if f.kind is FieldKind.MULTI:
        most = f.max_items or len(f.options)
        text += f" [choose up to {most}" + (f", at least {f.min_items}]" if f.min_items else "]")
    if f.has_default:
        text += f" [default: {f.display(f.default)}]"
    elif not f.required:
        text += " [optional]"
    return shorten(text, 500)


def poll_start(f: Field, *, thread: str | None, latest: str | None, mark: Mapping[str, str]) -> dict[str, Any]:
    options = poll_options(f)
    q = defang(poll_question(f))
    fallback = q + "\n" + "\n".join(f"{n}. {defang(label)}" for n, (_, label) in enumerate(options, 1))
    most = 1 if f.kind is not FieldKind.MULTI else max(1, min(f.max_items or len(options), len(options)))
    content: dict[str, Any] = {
        TEXT: fallback,
        "body": fallback,
        POLL_START: {
            "kind": "org.matrix.msc3381.poll.disclosed",
            "max_selections": most,
            "question": {TEXT: q},
            "answers": [{"id": answer_id, TEXT: defang(label)} for answer_id, label in options],
        },
        "m.mentions": {},  # server text in the body must not ping anyone through the legacy body push rules
        MARK: dict(mark),
    }
    if thread:
        content["m.relates_to"] = thread_relation(thread, latest)
    return content


def poll_end(start: str, f: Field, value: Any) -> dict[str, Any]:
    text = f"The poll has ended. Answer: {defang(f.display(value))}" if value is not None else "The poll has ended."
    return {"m.relates_to": {"rel_type": "m.reference", "event_id": start}, TEXT: text, "body": text,
            "org.matrix.msc3381.poll.end": {}, "m.mentions": {}}


def poll_help(polls: int) -> Text:
    """The companion notice for clients that cannot show polls."""
    return plain(f"Can't see the poll{'s' if polls != 1 else ''}? Reply to a poll with the number of your answer "
                 "(several, comma-separated, where it allows more), or react to it with 1️⃣-🔟.")


def decided_kind(interaction: Interaction) -> str:
    return "form" if interaction.kind is Kind.FORM and not interaction.quick_accept else "approval"
