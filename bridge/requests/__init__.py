"""Server requests: the handler table (`server_requests`) and its handlers, one per kind of request a server
makes of a person (`elicitation`, `sampling`, `roots`, `tool_approval`), the request context they share
(`request_context`, `context_lookup`), the tasks a server asks the bridge to run (`task_requests`), and what bounds
or outlasts them (`limiting`, `grants`, `budgets`, `receipting`, `server_notices`).

May use: `bridge.cards`, `bridge.servers`, `bridge.llm`, `bridge.storage`, `bridge.config` and below. Never the
calls that drive the requests (`bridge.calls`), commands or the host.
"""
