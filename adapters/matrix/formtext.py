"""What a form card says, in each of its events: the card, its polls, its lists, re-asks, and how each ends. Pure.

The card (its first event) lists every typed question, numbered, with a hint of what fits, and says plainly how each
other field is answered: react to the card (👍 / 👎, 1️⃣-🔟), vote in a poll, react to a list. It is edited as the
typed answers come in (each line shows what was taken, or why not) and when the form ends. Polls and lists carry
their field's number, so `N: answer` in a reply works for clients that cannot vote or react.

Every part is cut to a budget in bytes (`markup.fit`), and long option lists are cut after as many options as fit
(`markup.fit_items`), so rendering is linear in the form and every event stays under the homeserver's limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adapters.matrix import render
from adapters.matrix.formstate import FormState
from adapters.matrix.layout import KEYCAPS, NO, YES, Layout, Route, Slot
from adapters.matrix.markup import GAP, Mention, Text, bold, fit, fit_items, join_lines, plain, short
from bridge.door.forms import Field, FieldKind
from bridge.door.model import Interaction, Outcome, Status
from bridge.text.presentation import describe_status

QUESTIONS_BUDGET = 8_000
"""All typed questions of a card together (each gets a share, at least `MIN_SHARE`)."""
OPTIONS_BUDGET = 3_000
"""The options listed under one typed choice (the rest can still be typed by value or title)."""
MIN_SHARE = 160
POLL_QUESTION_BUDGET = 1_500
ANSWER_BUDGET = 300
LEAVE_EMPTY = "Leave empty"
WEB = "🌐"
"""The reaction on a form card that asks for a private web-form link (`weblinks`)."""


def field_text(slot: Slot, share: int) -> Text:
    """`3. Title — description`, cut to `share` bytes."""
    f = slot.field
    text = f"{slot.number}. {f.title}"
    if f.description and f.description != f.title:
        text += f" — {f.description}"
    return fit(text, share)


def options_text(f: Field, budget: int = OPTIONS_BUDGET, *, keycaps: bool = False) -> Text:
    """`1. Monica · 2. Rachel · …` (or `1️⃣ Guitar · …`), as many as fit in `budget`."""
    share = max(40, min(ANSWER_BUDGET, budget // max(1, len(f.options))))
    items = (fit(f"{KEYCAPS[n] if keycaps else f'{n + 1}.'} {o.title}", share) for n, o in enumerate(f.options))
    shown = fit_items(items, budget, lambda n: plain(f"… and {n} more (type the value or title)"), len(f.options))
    return join_with(shown, " · ")


def join_with(parts: Sequence[Text], sep: str) -> Text:
    s = plain(sep)
    return Text(s.body.join(p.body for p in parts), s.html.join(p.html for p in parts))


def hint(f: Field) -> str:
    """What fits (`Field.hint`), saying "required" too."""
    return f.hint() + (", required" if f.required and not f.default_fits else "")


def upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


# -- the card ------------------------------------------------------------------------------------------------------


def card(interaction: Interaction, layout: Layout, state: FormState, people: Sequence[Mention], *, now: float,
         in_thread: bool, problems: Mapping[int, str], web: bool = False) -> Text:
    """The card's first message, at posting and as it is edited while typed answers come in. `problems`: what
    stops it from being sent now (`FormState.problems`); `web`: web forms are on (the card says how to get a link)."""
    parts = [*render.header(interaction), GAP]
    lines = layout.lines
    if lines:
        where = "reply in this thread" if in_thread else "reply to this message (in its thread)"
        parts.append(bold(f"✍ Type: {where}, one line per question, in this order") +
                     plain(" (- keeps the default or leaves it empty):"))
        share = max(MIN_SHARE, QUESTIONS_BUDGET // len(lines))
        questions = [question_line(layout, state, s, share) for s in lines]
        parts.extend(fit_items(questions, QUESTIONS_BUDGET + 2 * OPTIONS_BUDGET,
                               lambda n: plain(f"… and {n} more questions (answer them as N: answer)"), len(lines)))
    if layout.on_card:
        parts.extend([GAP, bold("👆 React to this message:")])
        parts.extend(reaction_line(layout, s) for s in layout.on_card)
    other_ways = []
    if layout.polls:
        where = " (in the room's timeline, below: Element shows polls there, not in threads)" if in_thread else \
            " below"
        other_ways.append(plain("🗳 Vote in the poll" + ("s" if len(layout.polls) > 1 else "") + " for " +
                               numbers(layout.polls) + where + "."))
    if layout.lists:
        other_ways.append(plain(f"👆 React to the list{'s' if len(layout.lists) > 1 else ''} for "
                               f"{numbers(layout.lists)} below."))
    if other_ways or layout.on_card:
        example = (layout.polls or layout.lists or layout.on_card)[0]
        other_ways.append(plain(f"Can't vote or react? Reply {example.number}: 2 to pick option 2 of question "
                               f"{example.number}."))
    if other_ways:
        parts.extend([GAP, *other_ways])
    if web:
        parts.extend([GAP, web_offer()])
    parts.extend([GAP, send_line(state, problems), render.waiting(interaction, people, now)])
    return join_lines(parts)


def web_offer() -> Text:
    """How to get a private web-form link; never the link itself, since the room is not private."""
    return bold(f"{WEB} Or fill it in on the web:") + plain(
        f" react {WEB} to this message (or reply !web), and a private link comes to you in a direct message.")


def numbers(slots: Sequence[Slot]) -> str:
    ns = [s.number for s in slots]
    if len(ns) > 2 and ns == list(range(ns[0], ns[-1] + 1)):
        return f"{ns[0]}-{ns[-1]}"
    return ", ".join(str(n) for n in ns)


def question_line(layout: Layout, state: FormState, slot: Slot, share: int) -> Text:
    f = slot.field
    head = field_text(slot, share)
    if slot.number in state.failed:
        tail = fit(f"⚠ {state.failed[slot.number]} ({hint(f)})", share)
    elif slot.number in state.answered:
        given = state.values.get(f.name)
        if given is not None and given.value is not None:
            shown = layout.display(f, given.value)
        else:
            shown = f"{layout.display(f, f.default)} (default)" if f.default_fits else "(left empty)"
        tail = fit("✓ " + shown, share)
    else:
        tail = fit(hint(f), share)
    line = head + plain(": ") + tail
    if f.kind in (FieldKind.CHOICE, FieldKind.MULTI) and slot.number not in state.answered:
        line = line + plain(" — ") + options_text(f, max(400, OPTIONS_BUDGET // max(1, len(layout.lines))))
    return line


def reaction_line(layout: Layout, slot: Slot) -> Text:
    f = slot.field
    head = field_text(slot, 1_000) + plain(": ")
    if slot.route is Route.THUMBS:
        empty = "no reaction leaves it empty" if not f.has_default else f"no reaction keeps {f.display(f.default)}"
        note = "" if f.required and not f.has_default else f" ({'optional: ' if not f.required else ''}{empty})"
        return head + plain(f"{YES} yes · {NO} no{note}")
    return head + options_text(f, 2_000, keycaps=True) + fit(" (" + pick_note(layout, f) + ")", 1_000)


def pick_note(layout: Layout, f: Field) -> str:
    most = f.max_items or len(f.options)
    least = f.min_items or 0
    count = f"pick {least} to {most}" if least else f"pick up to {most}"
    if f.has_default:
        count += f"; default: {short(layout.display(f, f.default))}, used when you pick none"
    elif not f.required:
        count += "; optional"
    return count + "; tap a reaction again to remove it"


def send_line(state: FormState, problems: Mapping[int, str]) -> Text:
    decide = f"{render.DECLINE} declines, {render.CANCEL} cancels (or reply !decline, !cancel)."
    if not problems:
        return bold(f"Ready: react {render.ACCEPT} to this message to send it") + plain(" (or reply send). " + decide)
    answered = bool(state.answered or state.values)
    if answered:
        waiting = ", ".join(str(n) for n in problems if n)
        still = f"Still needed before sending: {waiting}. " if waiting else ""
        return plain(f"{still}Once everything needed is answered, {render.ACCEPT} appears here: react with it to "
                     f"send (or reply send). " + decide)
    return plain(f"To send: react {render.ACCEPT} to this message (it appears once everything needed is answered), "
                 f"or reply send. " + decide)


# -- polls and lists -----------------------------------------------------------------------------------------------


def poll_answers(slot: Slot) -> list[tuple[str, str]]:
    """(answer id, label) pairs: ids are stable, so votes map back after a restart."""
    f = slot.field
    answers = [("yes", "Yes"), ("no", "No")] if f.kind is FieldKind.BOOLEAN else \
        [(str(n), o.title) for n, o in enumerate(f.options, 1)]
    if slot.leave_empty:
        answers.append(("none", LEAVE_EMPTY))
    return answers


def poll(layout: Layout, slot: Slot, mark: Mapping[str, str]) -> dict[str, Any]:
    """A poll for one field, `max_selections: 1` (Element answers one option per tap)."""
    f = slot.field
    note = plain(f" (default: {short(layout.display(f, f.default))})") if f.has_default else plain("")
    q = (field_text(slot, POLL_QUESTION_BUDGET) + note).body
    answers = [(answer_id, fit(label, ANSWER_BUDGET).body) for answer_id, label in poll_answers(slot)]
    fallback = q + "\n" + "\n".join(f"{n}. {label}" for n, (_, label) in enumerate(answers, 1))
    return {
        render.TEXT: fallback,
        "body": fallback,
        render.POLL_START: {
            "kind": "org.matrix.msc3381.poll.disclosed",
            "max_selections": 1,
            "question": {render.TEXT: q},
            "answers": [{"id": answer_id, render.TEXT: label} for answer_id, label in answers],
        },
        "m.mentions": {},  # server text in the body must not ping anyone through the legacy body push rules
        render.MARK: dict(mark),
    }


def poll_end(layout: Layout, start: str, slot: Slot, outcome: Outcome, value: Any) -> dict[str, Any]:
    if outcome.status is Status.ACCEPTED:
        text = "The poll has ended. Answer: " + fit(layout.display(slot.field, value), 2_000).body
    else:
        text = f"The poll has ended (form {describe_status(outcome)})."
    text = fit(text, 4_000).body
    return {"m.relates_to": {"rel_type": "m.reference", "event_id": start}, render.TEXT: text, "body": text,
            "org.matrix.msc3381.poll.end": {}, "m.mentions": {}}


def list_message(layout: Layout, slot: Slot) -> Text:
    f = slot.field
    return join_lines([
        bold(field_text(slot, 2_000).body),
        plain("React with your picks: ") + options_text(f, 6_000, keycaps=True),
        fit(upper_first(pick_note(layout, f)) + "; or reply to this message with the numbers (2, 3).", 1_000),
    ])


def list_ended(layout: Layout, slot: Slot, outcome: Outcome, value: Any) -> Text:
    shown = f": {layout.display(slot.field, value)}" if outcome.status is Status.ACCEPTED else ""
    return join_lines([bold(field_text(slot, 2_000).body),
                       fit(f"This form has ended ({describe_status(outcome)}){shown}.", 4_000)])


# -- re-asks and endings -------------------------------------------------------------------------------------------


def reask(layout: Layout, problems: Mapping[int, str], *, sending: bool = False) -> Text:
    """Only what did not fit (or stops the form from being sent), each with its number."""
    head = "⚠ Not sent yet: please fix these first" if sending else "⚠ Not taken: reply again with just these lines"
    items = []
    for number, reason in problems.items():
        slot = layout.number(number)
        label = field_text(slot, 600) if slot is not None else plain("The form")
        items.append(label + plain(": ") + fit(reason, 1_000))
    shown = fit_items(items, 12_000, lambda n: plain(f"… and {n} more"), len(items))
    return join_lines([bold(head), *shown])


def finished(interaction: Interaction, layout: Layout, outcome: Outcome, content: Mapping[str, Any] | None) -> Text:
    """The card after the fact: no instructions left, the outcome and who decided, what was sent."""
    parts = [render.title(interaction), render.outcome_line(outcome)]
    if outcome.status is Status.ACCEPTED and content:
        share = max(MIN_SHARE, 12_000 // max(1, len(layout.slots)))
        items = [fit(f"• {s.field.title}: {layout.display(s.field, content[s.field.name])}", share)
                 for s in layout.slots if s.field.name in content]
        parts.extend(fit_items(items, 14_000, lambda n: plain(f"… and {n} more"), len(items)))
    elif outcome.reason and outcome.status is not Status.CANCELLED:
        parts.append(fit(outcome.reason, 2_000))
    return join_lines(parts)


def ended_note(outcome: Outcome) -> Text:
    return plain(f"This form has ended ({describe_status(outcome)}); these answers are not needed any more.")


def late(how: str) -> str:
    """Told to someone who answers a card that has ended (a public notice: Matrix has no private ones)."""
    return f"This request has already ended ({how}); answers to it are no longer counted."
