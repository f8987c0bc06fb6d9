"""Cards: an interaction posted in chat and waited on until a person decides it.

The broker and its parts: a card held here (`waiter`) and its deadlines (`deadlines`), whether a decision counts
(`decision_rules`), who a card reaches (`routing`), bringing a card to its new state (`card_updates`), decisions on
cards another worker holds (`elsewhere`), answers kept out of the record (`secret_answers`), and the way out to chat
(`outbound`, `redacting_port`).

The broker's lifecycles, each its own part: `open_cards`, `asking`, `deciding`, `ending`, `parked`, `takeover`,
`broker_tasks`.

May use: `bridge.config`, `bridge.storage`, `bridge.observe`, `bridge.text`, `bridge.safety`, `bridge.door.ports`,
`bridge.door.model`, `bridge.errors`. Never the server requests, calls or sessions above it.
"""
