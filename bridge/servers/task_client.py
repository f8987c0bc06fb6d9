"""The client side of MCP tasks a server asks the bridge to run (2025-11-25): the capability, and the four requests.

A server may send `elicitation/create` or `sampling/createMessage` with a `task` in its params when the client
advertises `tasks.requests.elicitation.create` / `tasks.requests.sampling.createMessage`. The client then answers at
once with `CreateTaskResult`, runs the request in the background, and answers `tasks/get`, `tasks/result` and
`tasks/cancel` for it. What a task is and how it runs is the `TaskHost`'s (`bridge.requests.task_requests`); this module
only puts it on the wire.

Why this goes around the SDK: `mcp` 2.3.0's `ClientSession` has every task type but no hook for them. Its capability
ad (`_build_capabilities`) never sets `tasks`, its request router (`_on_request`) parses server requests against a
table with `tasks/*` deliberately absent (they get -32601) and validates a callback's answer against the request's own
result type (a `CreateTaskResult` would be refused as invalid), and `Client` builds a plain `ClientSession` in
`_build_session`. So `TaskServingClient` builds a `TaskServingSession`, which adds `tasks` to the ad on 2025-11-25
connections and answers those requests before handing everything else to the SDK unchanged. The request itself still
goes through the SDK's callback table (`dispatch_input_request`), so the same handler objects answer it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, Protocol

from mcp import Client, MCPError
from mcp.client.client import _evicting_message_handler  # pyright: ignore[reportPrivateUsage]
from mcp.client.session import ClientRequestContext, ClientResponse, ClientSession
from mcp.shared.dispatcher import DispatchContext
from mcp.shared.transport_context import TransportContext
from mcp.types import (
    INVALID_PARAMS,
    ClientCapabilities,
    ClientTasksCapability,
    ClientTasksRequestsCapability,
    CreateMessageRequest,
    CreateTaskResult,
    ElicitRequest,
    ErrorData,
    TaskMetadata,
    TasksCancelCapability,
    TasksCreateElicitationCapability,
    TasksCreateMessageCapability,
    TasksElicitationCapability,
    TasksSamplingCapability,
)
from mcp_types import methods as _methods
from pydantic import ValidationError

TASK_ERA = "2025-11-25"
"""Tasks as a capability exist only on this revision (2026-07-28 moves them to an extension)."""
TASKABLE = ("elicitation/create", "sampling/createMessage")
TASK_METHODS = ("tasks/get", "tasks/result", "tasks/cancel")

Answer = dict[str, Any] | ErrorData
"""A request's result as it goes on the wire, or its error."""


class TaskHost(Protocol):
    """Runs the tasks one server asks a session for, and answers for them (`bridge.requests.task_requests`)."""

    async def create(self, context: ClientRequestContext, method: str, task: TaskMetadata,
                     run: Callable[[], Awaitable[Answer]]) -> CreateTaskResult | ErrorData:
        """Start `run` (the request answered as if it had not been a task) and say what task it is, at once."""
        ...

    async def get(self, task_id: str) -> Answer: ...
    async def result(self, task_id: str) -> Answer: ...
    async def cancel(self, task_id: str) -> Answer: ...


def wire(model: Any) -> dict[str, Any]:
    return dict(model.model_dump(by_alias=True, mode="json", exclude_none=True))


class TaskServingSession(ClientSession):
    """A `ClientSession` that runs task-augmented elicitation and sampling requests (see the module's doc)."""

    def __init__(self, *args: Any, tasks: TaskHost | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tasks = tasks

    def _serves_tasks(self, version: str) -> bool:
        return self._tasks is not None and version <= TASK_ERA

    def _build_capabilities(self, version: str) -> ClientCapabilities:
        ad = super()._build_capabilities(version)
        if not self._serves_tasks(version) or (ad.elicitation is None and ad.sampling is None):
            return ad
        requests = ClientTasksRequestsCapability(
            elicitation=TasksElicitationCapability(create=TasksCreateElicitationCapability())
            if ad.elicitation is not None else None,
            sampling=TasksSamplingCapability(create_message=TasksCreateMessageCapability())
            if ad.sampling is not None else None)
        return ad.model_copy(update={"tasks": ClientTasksCapability(cancel=TasksCancelCapability(),
                                                                    requests=requests)})

    async def _on_request(self, dctx: DispatchContext[TransportContext], method: str,
                          params: Mapping[str, Any] | None) -> dict[str, Any]:
        version = self._negotiated_version or TASK_ERA
        tasks = self._tasks
        if tasks is None or not self._serves_tasks(version):
            return await super()._on_request(dctx, method, params)
        if method in TASK_METHODS:
            task_id = (params or {}).get("taskId")
            if not isinstance(task_id, str):
                raise MCPError(code=INVALID_PARAMS, message="taskId is required")
            handle = {"tasks/get": tasks.get, "tasks/result": tasks.result, "tasks/cancel": tasks.cancel}[method]
            return _sent(await handle(task_id))
        if method not in TASKABLE or not isinstance((params or {}).get("task"), Mapping):
            return await super()._on_request(dctx, method, params)
        if not self._advertised(method):
            return await super()._on_request(dctx, method, params)  # the SDK refuses what was not offered
        try:
            request = _methods.parse_server_request(method, version, params)
        except ValidationError as exc:
            raise MCPError(code=INVALID_PARAMS, message=f"Invalid {method} request: {exc.error_count()} errors") \
                from None
        assert isinstance(request, ElicitRequest | CreateMessageRequest) and request.params.task is not None
        assert dctx.request_id is not None
        context = ClientRequestContext(session=self, request_id=dctx.request_id, meta=request.params.meta)

        async def run() -> Answer:
            response = ClientResponse.validate_python(await self.dispatch_input_request(context, request))
            if isinstance(response, ErrorData):
                return response
            answer = wire(response)
            _methods.validate_client_result(method, version, answer)
            return answer

        created = await tasks.create(context, method, request.params.task, run)
        return _sent(created if isinstance(created, ErrorData) else wire(created))

    def _advertised(self, method: str) -> bool:
        ad = self._build_capabilities(TASK_ERA)
        requests = ad.tasks.requests if ad.tasks is not None else None
        if requests is None:
            return False
        if method == "elicitation/create":
            return requests.elicitation is not None
        return requests.sampling is not None


def _sent(answer: Answer) -> dict[str, Any]:
    if isinstance(answer, ErrorData):
        raise MCPError.from_error_data(answer)
    return answer


@dataclass
class TaskServingClient(Client):
    """`mcp.Client` whose session serves tasks (see the module's doc); with no `tasks` it is the SDK's client."""

    tasks: TaskHost | None = None

    async def _build_session(self, exit_stack: AsyncExitStack) -> ClientSession:
        # The SDK's own `_build_session`, building the subclass: the SDK takes no session class to use.
        dispatcher = await self._connect(exit_stack, self.mode, self.raise_exceptions)
        message_handler = self.message_handler
        if self._response_cache is not None:
            message_handler = _evicting_message_handler(self._response_cache, self.message_handler)
        return TaskServingSession(
            dispatcher=dispatcher,
            read_timeout_seconds=self.read_timeout_seconds,
            sampling_callback=self.sampling_callback,
            sampling_capabilities=self.sampling_capabilities,
            list_roots_callback=self.list_roots_callback,
            logging_callback=self.logging_callback,
            log_level=self.log_level,
            message_handler=message_handler,
            client_info=self.client_info,
            elicitation_callback=self.elicitation_callback,
            extensions=self._folded_extensions.ad,
            result_claims=self._folded_extensions.claims,
            notification_bindings=self._folded_extensions.bindings,
            tasks=self.tasks,
        )
