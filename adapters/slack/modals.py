"""Modals: opening a form on a click, its pages and their drafts, the submission (whose ack *is* the answer) and
closing the modals of a request that ended.

A submission must be answered within 3 seconds and its answer is the ack itself (errors, the next page, or close),
so nothing comes before that ack but reading the page, the decision (`Inbound.decide` within `ACK_BUDGET`), and the
person from the cache (`People.cached`); a submission for a request that has ended is answered from this module's
own memory of ended requests. What a modal looks like is `modal_pages.py`'s; what a submitted page means is
`translate.py`'s.

Several workers on one store: Slack spreads events over workers, and the core finds a request (`Inbound.cards`) and
decides on it whichever worker gets the event. A verdict that takes longer than the ack may wait closes the modal
(a late or refused person is then told privately). The answers of a paged form's earlier pages travel in the view's
metadata when they fit and hold nothing secret-looking; otherwise they stay on the worker that took them.

A person can submit or close a modal before `views.open` has even returned its id to us. Such a view is remembered
as settled, so the late `views.open` answer never replaces it with "This request has ended".
"""

from __future__ import annotations

import functools
import logging
from collections import OrderedDict
from dataclasses import replace
from typing import Any, TypeVar

import anyio
from slack_bolt.async_app import AsyncAck

from adapters.slack import ids, modal_pages, translate
from adapters.slack.background import Background
from adapters.slack.client import SlackClients, api_errors
from adapters.slack.elements import matching_options
from adapters.slack.escape import mrkdwn
from adapters.slack.people import People
from bridge.door.model import DecisionIn, Interaction, JSONValue, Verdict
from bridge.door.ports import Inbound, look_up
from bridge.errors import AdapterError

logger = logging.getLogger(__name__)
V = TypeVar("V")

JSON = dict[str, Any]
LOST_PAGES = ("The answers from the earlier pages were lost (the bridge restarted, or another of its workers took this "
              "page). Please check this page and go on again.")
ENDED = "This request has ended."
MAX_METADATA = 3000
"""Characters Slack keeps in a view's `private_metadata`."""
ACK_BUDGET = 2.0
"""Seconds a submission waits for its verdict before the modal is closed anyway (Slack wants the ack within 3)."""
REMEMBERED = 2000
"""How many ended requests and settled views are remembered, for late submissions and late `views.open` answers."""


def _carrying(interaction: Interaction, meta: ids.ModalMeta, draft: dict[str, JSONValue]) -> ids.ModalMeta:
    """`meta` with the earlier pages' answers, when they fit in the view's metadata and hold nothing secret-looking
    (those stay in this worker's memory only)."""
    secret = {f.name for f in interaction.form.secret_fields}
    carried = replace(meta, draft=dict(draft))
    if secret & {k for k, v in draft.items() if v not in (None, "")} or len(carried.dump()) > MAX_METADATA:
        return replace(meta, draft=None)
    return carried


class _Recent(OrderedDict[str, V]):
    """The latest `REMEMBERED` entries, oldest dropped first."""

    def keep(self, key: str, value: V) -> None:
        self[key] = value
        self.move_to_end(key)
        if len(self) > REMEMBERED:
            self.popitem(last=False)


class Modals:
    def __init__(self, inbound: Inbound, clients: SlackClients, people: People, background: Background) -> None:
        self._inbound = inbound
        self._clients = clients
        self._people = people
        self._background = background
        self._views: dict[str, set[str]] = {}
        """Interaction id → ids of modals open on it, replaced by a 'closed' view when the request ends."""
        self._drafts: dict[str, dict[str, JSONValue]] = {}
        """Modal view id → answers from the pages already submitted (a paged form keeps one view id)."""
        self._ended = _Recent[tuple[Interaction, str]]()
        """Interaction id → (interaction, what happened, as escaped mrkdwn) of requests that ended lately."""
        self._settled = _Recent[None]()
        """View ids the person already submitted for good or closed: nothing of ours may replace them."""

    async def find(self, interaction_id: str) -> Interaction | None:
        """The request while it waits for an answer."""
        card = await look_up(self._inbound, interaction_id)
        return card.interaction if card is not None and card.open else None

    async def open(self, trigger_id: str, interaction: Interaction, meta: ids.ModalMeta) -> None:
        """Open the form of `interaction` (raises `AdapterError`). The trigger id is valid for 3 seconds from the
        click: call this before anything slower."""
        async with api_errors("views.open"):
            response = await self._clients.bot.views_open(trigger_id=trigger_id,
                                                          view=modal_pages.form_view(interaction, meta))
        view_id = str(response["view"]["id"])
        if view_id in self._settled:
            return  # submitted or closed before views.open answered: the person is done with it
        self._views.setdefault(interaction.id, set()).add(view_id)
        if await self.find(interaction.id) is None:
            # It ended while the modal was opening, maybe after `close_all` looked for open modals.
            self._forget(interaction.id, view_id)
            ended = self._ended.get(interaction.id)
            await self._close(view_id, interaction, ended[1] if ended else ENDED)

    async def close_all(self, interaction: Interaction, what: str) -> None:
        """Replace every modal open on an ended interaction with a view saying `what` happened."""
        self._ended.keep(interaction.id, (interaction, what))
        async with anyio.create_task_group() as tg:
            for view_id in self._views.pop(interaction.id, set()):
                tg.start_soon(self._close, view_id, interaction, what)

    # -- listeners -----------------------------------------------------------------------------------------------

    async def on_submit(self, ack: AsyncAck, body: JSON, view: JSON) -> None:
        meta = ids.ModalMeta.load(str(view.get("private_metadata", "")))
        view_id = str(view["id"])
        if meta is None:
            await ack()
            return
        who = self._people.cached(body["user"])
        found = await look_up(self._inbound, meta.interaction_id)
        interaction = found.interaction if found is not None and found.open else None
        if interaction is None:
            self._forget(meta.interaction_id, view_id)
            self._settled.keep(view_id, None)
            ended, what = self._ended.get(meta.interaction_id) or (None, ENDED)
            if ended is None:  # not in memory: ended before a restart, or never known here
                ended = found.interaction if found is not None else None
            if ended is None:
                await ack()
            else:
                await ack(response_action="update", view=modal_pages.closed_view(ended, what))
            return
        pages = modal_pages.pages(interaction)
        # The earlier pages' answers: carried by the view when they fit (any worker may take this page), else kept
        # by the worker that took them.
        earlier = meta.draft if meta.draft is not None else self._drafts.get(view_id)
        if meta.page > 0 and earlier is None:
            # Kept in memory only, and lost (a restart, or another worker took the earlier page): start again.
            await ack(response_action="update", view=modal_pages.form_view(
                interaction, replace(meta, page=0, draft=None), LOST_PAGES))
            return
        page = pages[min(meta.page, len(pages) - 1)]
        form = interaction.form
        answers, errors = translate.page_answers(form, page, view.get("state", {}).get("values", {}))
        if errors:
            await ack(response_action="errors", errors=translate.block_errors(form, page, errors))
            return
        draft = self._drafts[view_id] = dict(earlier or {})
        for index in page:
            draft.pop(form.fields[index].name, None)
        draft.update(answers)
        if meta.page < len(pages) - 1:
            following = replace(meta, page=meta.page + 1)
            next_page = modal_pages.form_view(interaction, _carrying(interaction, following, draft))
            await ack(response_action="update", view=next_page)
            return
        decision = DecisionIn(interaction.id, who, "accept", dict(draft))
        result = await self._inbound.decide(decision, ack_within=ACK_BUDGET)
        if result is None or result.verdict in (Verdict.CLAIMED, Verdict.COUNTED):
            self._forget(interaction.id, view_id)
            self._settled.keep(view_id, None)
            await ack()
        elif result.verdict is Verdict.INVALID:
            await ack(response_action="errors", errors=translate.block_errors(form, page, result.errors))
        elif result.verdict is Verdict.REFUSED and page:
            await ack(response_action="errors", errors={ids.field_block(page[0]): result.message})
        else:
            self._forget(interaction.id, view_id)
            self._settled.keep(view_id, None)
            await ack(response_action="update", view=modal_pages.closed_view(interaction, mrkdwn(result.message)))

    async def on_closed(self, ack: AsyncAck, body: JSON, view: JSON) -> None:
        await ack()
        meta = ids.ModalMeta.load(str(view.get("private_metadata", "")))
        if meta is None:
            return
        view_id = str(view["id"])
        self._forget(meta.interaction_id, view_id)
        self._settled.keep(view_id, None)
        self._background.spawn(f"modal closed on {meta.interaction_id}",
                               functools.partial(self._cancel, body["user"], meta.interaction_id))

    async def _cancel(self, user: JSON, interaction_id: str) -> None:
        if await self.find(interaction_id) is None:
            return  # already over: closing its modal changes nothing
        await self._inbound.decide(DecisionIn(interaction_id, await self._people.of(user), "cancel"))

    async def on_options(self, ack: AsyncAck, payload: JSON, body: JSON) -> None:
        """Options for a long choice list (external select), filtered by what the person typed."""
        meta = ids.ModalMeta.load(str((body.get("view") or {}).get("private_metadata", "")))
        interaction = await self.find(meta.interaction_id) if meta else None
        index = ids.field_index(str(payload.get("block_id", "")))
        if interaction is None or index is None or index >= len(interaction.form.fields):
            await ack(options=[])
            return
        await ack(options=matching_options(interaction.form.fields[index], str(payload.get("value", ""))))

    # -- bookkeeping ---------------------------------------------------------------------------------------------

    def _forget(self, interaction_id: str, view_id: str) -> None:
        self._drafts.pop(view_id, None)
        views = self._views.get(interaction_id)
        if views is not None:
            views.discard(view_id)
            if not views:
                del self._views[interaction_id]

    async def _close(self, view_id: str, interaction: Interaction, what: str) -> None:
        self._drafts.pop(view_id, None)
        try:
            async with api_errors("views.update"):
                await self._clients.final.views_update(view_id=view_id, view=modal_pages.closed_view(interaction, what))
        except AdapterError as exc:
            # Usually the person closed the modal already; nothing is left to replace.
            logger.info("could not replace modal %s: %s", view_id, exc)
