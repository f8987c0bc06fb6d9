"""Configuration: the YAML file read and checked against its JSON Schema (`file`, `schema.json`), the values of
OAuth (`auth`) and of team decisions (`team`), approver entries that can never match (`approvers`), problems worded
for people (`problems`), and the pure policy decisions made from those values (`policy`).

May use: `bridge.errors`, `bridge.door.model`, `bridge.safety`, `bridge.text`, `bridge.observe` (telemetry settings),
`bridge.web` (connection limits). Nothing that runs: no store, no session, no card.
"""
