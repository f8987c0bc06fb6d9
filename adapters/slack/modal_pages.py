"""Modals (pure): an interaction's form as one or more pages of native inputs, and the view that replaces a modal
whose request has ended.

A modal holds 100 blocks; a page holds `FIELDS_PER_PAGE` inputs after a few lines of context, so a longer form is
split into pages. Every page but the last submits with "Next"; the adapter keeps the answers of earlier pages and
swaps the next page in with `response_action: update`, so no field is lost and closing any page cancels. It keeps
them in memory: after a restart, a later page sends the person back to the first, with a `note` saying why.
"""

from __future__ import annotations

from typing import Any

from adapters.slack import ids, render
from adapters.slack.elements import input_block, text
from adapters.slack.escape import cap, mrkdwn, plain
from bridge.door.model import Interaction, Kind
from bridge.text.plain import secret_warning

JSON = dict[str, Any]

MAX_BLOCKS = 100
TITLE = 24
FIELDS_PER_PAGE = 90
"""Inputs on one page: 100 blocks minus the context lines (title, message, warning, page note), with room to spare."""
MESSAGE = 2000

_TITLES = {Kind.FORM: "Fill in the form", Kind.URL: "Open a link", Kind.SAMPLING: "Edit the request",
           Kind.SAMPLING_REVIEW: "Review the answer", Kind.ROOTS: "Choose folders", Kind.TOOL: "Edit the tool call"}


def pages(interaction: Interaction) -> list[range]:
    """The field indices on each page (at least one page, possibly empty)."""
    count = len(interaction.form.fields)
    return [range(start, min(start + FIELDS_PER_PAGE, count)) for start in range(0, count, FIELDS_PER_PAGE)] \
        or [range(0)]


def form_view(interaction: Interaction, meta: ids.ModalMeta, note: str = "") -> JSON:
    """Page `meta.page` of the interaction's form; `notify_on_close` so that closing it cancels. `note` (escaped
    mrkdwn) is shown above the inputs."""
    all_pages = pages(interaction)
    page = all_pages[meta.page]
    last = meta.page == len(all_pages) - 1
    heading = _TITLES[interaction.kind]
    if len(all_pages) > 1:
        heading = f"{heading[:TITLE - 8]} ({meta.page + 1}/{len(all_pages)})"
    blocks: list[JSON] = [render.section(f"*{render.title(interaction)}*")]
    if interaction.message.strip():
        blocks.append(render.section(cap(mrkdwn(interaction.message), MESSAGE)))
    warning = secret_warning(interaction)
    if warning:
        blocks.append(render.context(":warning: " + mrkdwn(warning)))
    if len(all_pages) > 1:
        blocks.append(render.context(f"Page {meta.page + 1} of {len(all_pages)}: "
                                     + ("submit to send every page." if last else "answers are kept as you go on.")))
    if note:
        blocks.append(render.context(f":warning: {note}"))
    fields = interaction.form.fields
    blocks += [input_block(fields[i], i) for i in page]
    return {
        "type": "modal",
        "callback_id": ids.FORM_CALLBACK,
        "private_metadata": meta.dump(),
        "notify_on_close": True,
        "title": text(heading, TITLE),
        "submit": text(interaction.accept_label if last else "Next", TITLE),
        "close": text("Cancel", TITLE),
        "blocks": blocks,
    }


def closed_view(interaction: Interaction, what: str) -> JSON:
    """Replaces an open modal once its request has ended (`what` is escaped mrkdwn: 'Expired', 'Accepted by …')."""
    return {
        "type": "modal",
        "callback_id": ids.CLOSED_CALLBACK,
        "private_metadata": ids.ModalMeta(interaction.id).dump(),
        "title": text(plain(_TITLES[interaction.kind], TITLE), TITLE),
        "close": text("Close", TITLE),
        "blocks": [render.section(f"*{render.title(interaction)}*"),
                   render.section(f"{what}\nThis request is no longer open; nothing you enter here is sent.")],
    }
