"""Tool calls: the one owner of every call (`toolcalls`), the 2026-07-28 input-required rounds and parked calls
(`rounds`), calls that run as tasks (`tasks`, with their requests in `task_wire` and their card's wording in
`task_status`), taking over work nobody holds (`resume`), a parked card's end read in the calls layer's own tasks
(`continuing`), results kept for `show` (`kept_results`), a worker beside others on a shared store (`fleet`), and the
store roles the package asks for (`store_roles`).

The rounds' parts: calls parked between rounds (`parked_calls`), answers reused when a call is run again
(`answer_reuse`), and a server dying during a call (`session_death`).

May use: `bridge.requests`, `bridge.cards`, `bridge.servers`, `bridge.storage`, `bridge.config` and below. Never
commands or the host.
"""
