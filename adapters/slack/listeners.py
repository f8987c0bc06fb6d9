"""Bolt's routing table for the adapter: the allow-list middleware first, then which listener gets which event,
action, view, options request or command. The listeners themselves live with their concept (`intake`, `clicks`,
`modals`, `home`)."""

from __future__ import annotations

import logging
import re
from typing import Any

from slack_bolt.async_app import AsyncApp

from adapters.slack import ids
from adapters.slack.clicks import Clicks
from adapters.slack.gate import AllowList
from adapters.slack.home import HomeTab
from adapters.slack.intake import Intake
from adapters.slack.modals import Modals

logger = logging.getLogger(__name__)

DECISION_ACTIONS = re.compile(rf"^({re.escape(ids.ACCEPT)}|{re.escape(ids.DECLINE)}|{re.escape(ids.CANCEL)})$")
CHOICE_ACTIONS = re.compile(rf"^{re.escape(ids.CHOICE_PREFIX)}\d+$")
GRANT_ACTIONS = re.compile(rf"^{re.escape(ids.GRANT_PREFIX)}[a-z]+$")


def register(app: AsyncApp, slash_command: str, allow: AllowList, intake: Intake, clicks: Clicks, modals: Modals,
             home: HomeTab) -> None:
    app.use(allow.middleware)
    app.event("app_mention")(intake.on_message)
    app.event("message")(intake.on_message)
    app.event("app_home_opened")(home.on_opened)
    app.command(slash_command)(intake.on_command)
    app.action(DECISION_ACTIONS)(clicks.on_decision)
    app.action(CHOICE_ACTIONS)(clicks.on_choice)
    app.action(GRANT_ACTIONS)(clicks.on_grant)
    app.action(ids.OPEN_FORM)(clicks.on_open_form)
    app.action(ids.WEB_FORM)(clicks.on_web_form)
    app.action(ids.OPEN_APP)(clicks.on_open_app)
    app.action(ids.OPEN_URL)(clicks.on_link)
    app.action(ids.STOP)(clicks.on_stop)
    app.view_submission(ids.FORM_CALLBACK)(modals.on_submit)
    app.view_closed(ids.FORM_CALLBACK)(modals.on_closed)
    app.view_closed(ids.CLOSED_CALLBACK)(clicks.on_link)
    app.options(ids.FIELD_ACTION)(modals.on_options)
    app.error(on_error)


async def on_error(error: Exception, body: dict[str, Any]) -> None:
    # Bolt's top-level handler for a listener that raised: log it with its traceback, keep serving.
    logger.error("Slack listener failed on a %s payload", body.get("type", "?"), exc_info=error)
