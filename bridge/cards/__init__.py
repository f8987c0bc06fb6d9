"""Cards: an interaction posted in chat and waited on until a person decides it.

The broker and its parts: a card held here (`held`) and its deadlines (`deadlines`), whether a decision counts
(`decision_rules`), who a card reaches (`recipients`), bringing a card to its new state (`card_updates`), decisions on
cards another worker holds (`forwarding`), answers kept out of the record (`secret_answers`), the way out to chat
(`chat`, `redacting_port`), and the store roles the package asks for (`store_roles`).

The broker's lifecycles, each its own part: `open_cards`, `asking`, `deciding`, `ending`, `parked`, `takeover`,
`broker_tasks`.

May use: `bridge.config`, `bridge.storage`, `bridge.observe`, `bridge.text`, `bridge.safety`, `bridge.door.ports`,
`bridge.door.model`, `bridge.errors`. Never the server requests, calls or sessions above it.
"""
